#!/usr/bin/env python3
"""The checks of `make gpu-check` (issue 15; docs/gpu.md), run by scripts/gpu_check.sh.

One run, bounded by --deadline, records to bench/results/gpu.md (--device cuda) or
bench/results/gpu_rehearsal_cpu.md (--device cpu, a rehearsal of the logic):

  a. the `*_CUDA` tests of saturate_tests (pass / fail / skip counts)
  b. search exactness on the device for resnet50 and gpt: search, then fresh `probe`s at max (ok)
     and max+1 (oom)
  c. saturate's peak against PyTorch's torch.cuda.max_memory_allocated at the same batch, on two
     models defined here in plain torch and scripted to .pt files (a ResNet-ish convnet and a
     GPT-style block stack)
  d. the `--plan-for` prediction made on the CPU against the maximum measured in b
  e. NVML utilization sampled by `saturate monitor` against `nvidia-smi` at the same moments
  f. training samples/s: saturate train / probe against PyTorch eager and torch.compile
  g. MFU: saturate's own figures (search/train JSON, read tolerantly) and one computed here from
     torch.utils.flop_counter and a measured GEMM peak; the fast paths b's searches tried
     (`--fast-paths try` when the binary has it)

Every step has its own timeout; a failed or timed-out step is a row of the table and the run
goes on. The table is rewritten after every step (and copied to $OUT), so a run cut short keeps
what it measured. Needs Python 3 and, in the worker processes only, torch (+ torchvision for f).

  python3 bench/gpu_check.py --saturate BIN --tests BIN [--device cuda|cpu] [--quick]
                             [--dry-run] [--deadline S] [--ld-library-path P] [--only a,b,...]
  python3 bench/gpu_check.py worker '{"kind": ...}'      (internal: one measurement in torch)
"""
import argparse
import datetime
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GiB = 1 << 30
MiB = 1 << 20

# ----------------------------------------------------------------------------------------------
# configuration: the full GPU check and the CPU rehearsal (--quick)
# ----------------------------------------------------------------------------------------------

FULL = {
    # b / d: zoo models, each with a budget that keeps its search under about a minute on an H200
    "search": [
        {"label": "resnet50", "flags": ["--model", "resnet50"], "budget": "16GiB", "budget_bytes": 16 * GiB},
        {"label": "gpt", "flags": ["--model", "gpt"], "budget": "4GiB", "budget_bytes": 4 * GiB},
    ],
    # c: models defined below in plain torch, scripted to .pt
    "scripted": [
        {"label": "convnet (ResNet-ish, scripted)", "name": "convnet", "kind": "image", "input": [3, 64, 64],
         "classes": 100, "width": 64, "batch": 256},
        {"label": "gpt-blocks (scripted)", "name": "gptblocks", "kind": "tokens", "seq": 256, "vocab": 8192,
         "width": 512, "layers": 4, "heads": 8, "batch": 32},
    ],
    # e / f: resnet50 fp32 Adam, synthetic data, the same batch everywhere
    "train": {"model": "resnet50", "input": [3, 224, 224], "classes": 1000, "batch": 256, "train_steps": 40,
              "probe_steps": 10, "py_warmup": 5, "py_steps": 15, "compile_warmup": 3, "workers": 8,
              "compile_backend": "inductor", "sample_hz": 5},
    "gemm_n": 8192,
    "timeouts": {"tests": 150, "search": 150, "probe": 90, "plan": 240, "peak_py": 150, "probe_c": 90,
                 "train": 150, "py_eager": 150, "py_compile": 240, "gemm": 90, "env": 60, "export": 90},
}

QUICK = {
    "search": [
        {"label": "resnet18 3x32x32", "flags": ["--model", "resnet18", "--input", "3x32x32", "--classes", "10"],
         "budget": "320MiB", "budget_bytes": 320 * MiB},
        {"label": "gpt 2x128", "flags": ["--model", "gpt", "--layers", "2", "--width", "128", "--seq-len", "64",
                                         "--vocab", "2048"], "budget": "256MiB", "budget_bytes": 256 * MiB},
    ],
    "scripted": [
        {"label": "convnet (ResNet-ish, scripted)", "name": "convnet", "kind": "image", "input": [3, 32, 32],
         "classes": 10, "width": 16, "batch": 16},
        {"label": "gpt-blocks (scripted)", "name": "gptblocks", "kind": "tokens", "seq": 32, "vocab": 512,
         "width": 64, "layers": 2, "heads": 4, "batch": 8},
    ],
    "train": {"model": "resnet18", "input": [3, 32, 32], "classes": 10, "batch": 16, "train_steps": 6,
              "probe_steps": 3, "py_warmup": 1, "py_steps": 3, "compile_warmup": 1, "workers": 1,
              "compile_backend": "aot_eager", "sample_hz": 5},
    "gemm_n": 1024,
    "timeouts": {"tests": 120, "search": 300, "probe": 60, "plan": 120, "peak_py": 120, "probe_c": 60,
                 "train": 120, "py_eager": 120, "py_compile": 240, "gemm": 60, "env": 60, "export": 60},
}

# ----------------------------------------------------------------------------------------------
# workers: one measurement each, in its own process (torch imported only there)
# ----------------------------------------------------------------------------------------------


def _torch_models():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class ResBlock(nn.Module):
        def __init__(self, c_in: int, c_out: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c_out)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c_out)
            if stride != 1 or c_in != c_out:
                self.down = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
            else:
                self.down = nn.Sequential()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + self.down(x))

    class ConvNet(nn.Module):
        """ResNet-ish: a stem, four residual stages (x1, x2, x4, x8 the width), pool, classifier."""

        def __init__(self, classes: int, width: int):
            super().__init__()
            w = width
            self.stem = nn.Sequential(nn.Conv2d(3, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU())
            self.stages = nn.Sequential(ResBlock(w, w, 1), ResBlock(w, 2 * w, 2), ResBlock(2 * w, 4 * w, 2),
                                        ResBlock(4 * w, 8 * w, 2))
            self.fc = nn.Linear(8 * w, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.stages(self.stem(x))
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.fc(x)

    class Block(nn.Module):
        def __init__(self, width: int, heads: int):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(width)
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)
            self.ln2 = nn.LayerNorm(width)
            self.fc1 = nn.Linear(width, 4 * width)
            self.fc2 = nn.Linear(4 * width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b = x.size(0)
            t = x.size(1)
            c = x.size(2)
            qkv = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GptBlocks(nn.Module):
        """GPT-style: token + position embedding, pre-norm blocks (causal SDPA, GELU MLP), head."""

        def __init__(self, vocab: int, seq: int, width: int, layers: int, heads: int):
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            self.pos = nn.Parameter(torch.zeros(1, seq, width))
            self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
            self.ln = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.embed(ids) + self.pos[:, : ids.size(1)]
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    return {"convnet": ConvNet, "gptblocks": GptBlocks}


def _build_scripted_eager(spec):
    import torch
    torch.manual_seed(0)
    M = _torch_models()
    if spec["name"] == "convnet":
        return M["convnet"](spec["classes"], spec["width"])
    return M["gptblocks"](spec["vocab"], spec["seq"], spec["width"], spec["layers"], spec["heads"])


def _batch(torch, spec, batch, device):
    g = torch.Generator(device="cpu").manual_seed(batch)
    if spec["kind"] == "tokens":
        x = torch.randint(spec["vocab"], (batch, spec["seq"]), generator=g)
        y = torch.randint(spec["vocab"], (batch, spec["seq"]), generator=g)
    else:
        x = torch.randn(batch, *spec["input"], generator=g)
        y = torch.randint(spec["classes"], (batch,), generator=g)
    return x.to(device), y.to(device)


def _loss(F, logits, y):
    if logits.dim() == 3:
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
    return F.cross_entropy(logits, y)


def _sync(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def w_env(cfg):
    import platform
    import torch
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
           "cuda_available": torch.cuda.is_available(), "cpu_count": os.cpu_count(),
           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
           "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
           "matmul_precision": torch.get_float32_matmul_precision()}
    for mod in ("torchvision", "triton"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            out[mod] = f"unavailable ({type(e).__name__})"
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        out.update(gpu=p.name, capability=f"{p.major}.{p.minor}", gpu_memory_bytes=p.total_memory,
                   sm_count=p.multi_processor_count)
    return out


def w_export(cfg):
    import torch
    out = {}
    for spec in cfg["models"]:
        m = _build_scripted_eager(spec)
        path = spec["path"]
        torch.jit.script(m).save(path)
        out[spec["name"]] = {"path": path, "parameters": sum(p.numel() for p in m.parameters())}
    return out


def w_peak(cfg):
    """The probe's step (saturate probe --warmup-steps 1 --timed-steps 1): a fresh Adam, the batch
    made on the device after the peak is reset, zero_grad(set_to_none), cross-entropy, backward,
    step; one warm-up + one timed step; peak = max_memory_allocated over all of it (parameters
    included, as saturate's trial peak includes them)."""
    import torch
    import torch.nn.functional as F
    spec, device, batch = cfg["spec"], cfg["device"], cfg["batch"]
    torch.set_float32_matmul_precision("highest")  # saturate's fp32 (apply_precision_settings)
    cuda = device.startswith("cuda")
    results = []
    for variant in cfg["variants"]:
        if variant["model"] == "scripted":
            model = torch.jit.load(spec["path"], map_location="cpu")
        else:
            model = _build_scripted_eager(spec)
            model.load_state_dict(torch.jit.load(spec["path"], map_location="cpu").state_dict())
        model.to(device).train()
        foreach = variant.get("foreach")
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=foreach)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        times = []
        x, y = _batch(torch, spec, batch, device)
        ctx = torch.jit.optimized_execution(False) if variant["model"] == "scripted" else _null()
        with ctx:
            for _ in range(2):
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                _loss(F, model(x), y).backward()
                opt.step()
                _sync(torch, device)
                times.append((time.perf_counter() - t0) * 1e3)
        r = {"variant": variant["label"], "step_ms": times[-1]}
        if cuda:
            r.update(peak_allocated_bytes=torch.cuda.max_memory_allocated(),
                     peak_reserved_bytes=torch.cuda.max_memory_reserved(), baseline_bytes=base)
        results.append(r)
        del model, opt, x, y
        if cuda:
            torch.cuda.empty_cache()
    return {"results": results}


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _zoo_model(torch, cfg):
    import torchvision
    return getattr(torchvision.models, cfg["model"])(num_classes=cfg["classes"])


def w_train(cfg):
    """Training samples/s of the eager or torch.compile'd model at a fixed batch, synthetic data
    on the device (no loader), fp32, Adam (default foreach unless given); FLOPs of one
    forward+backward counted by torch.utils.flop_counter on the eager model."""
    import torch
    import torch.nn.functional as F
    device = cfg["device"]
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)
    model = _zoo_model(torch, cfg).to(device).train()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=cfg.get("foreach"))
    b = cfg["batch"]
    x = torch.randn(b, *cfg["input"], device=device)
    y = torch.randint(cfg["classes"], (b,), device=device)
    out = {"parameters": params, "mode": cfg["mode"], "batch": b}
    if cfg.get("count_flops"):
        from torch.utils.flop_counter import FlopCounterMode
        fc = FlopCounterMode(display=False)
        with fc:
            F.cross_entropy(model(x), y).backward()
        opt.zero_grad(set_to_none=True)
        out["flops_per_step"] = fc.get_total_flops()
        out["flops_per_sample"] = fc.get_total_flops() / b
    run = model
    if cfg["mode"] == "compile":
        run = torch.compile(model, backend=cfg.get("backend", "inductor"))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(run(x), y).backward()
        opt.step()

    t0 = time.perf_counter()
    for _ in range(cfg["warmup"]):
        step()
    _sync(torch, device)
    out["warmup_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(cfg["steps"]):
        step()
    _sync(torch, device)
    dt = time.perf_counter() - t0
    out.update(seconds=dt, steps=cfg["steps"], step_ms=dt / cfg["steps"] * 1e3, samples_per_s=b * cfg["steps"] / dt)
    if device.startswith("cuda"):
        out["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
    return out


def w_gemm(cfg):
    """Measured matmul peak: n x n x n products, best of 10 after 3 warm-ups, per dtype."""
    import torch
    device, n = cfg["device"], cfg["n"]
    out = {"n": n}
    kinds = [("fp32", torch.float32, False), ("tf32", torch.float32, True), ("bf16", torch.bfloat16, False)]
    if not device.startswith("cuda"):
        kinds = [("fp32", torch.float32, False), ("bf16", torch.bfloat16, False)]
    for name, dtype, tf32 in kinds:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        best = float("inf")
        for i in range(13):
            _sync(torch, device)
            t0 = time.perf_counter()
            a @ b
            _sync(torch, device)
            if i >= 3:
                best = min(best, time.perf_counter() - t0)
        out[name + "_flops_per_s"] = 2 * n ** 3 / best
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


WORKERS = {"env": w_env, "export": w_export, "peak": w_peak, "train": w_train, "gemm": w_gemm}


def worker_main(arg):
    cfg = json.loads(arg)
    t0 = time.perf_counter()
    out = WORKERS[cfg["kind"]](cfg)
    out["worker_seconds"] = time.perf_counter() - t0
    print("RESULT " + json.dumps(out), flush=True)


# ----------------------------------------------------------------------------------------------
# the orchestrator (stdlib only)
# ----------------------------------------------------------------------------------------------


def fmt_bytes(b):
    if b is None:
        return "n/a"
    return f"{b / GiB:.2f} GiB" if b >= GiB else f"{b / MiB:.1f} MiB"


def fmt_num(v, digits=1, none="n/a"):
    if v is None:
        return none
    if isinstance(v, (int,)) and not isinstance(v, bool):
        return str(v)
    try:
        return f"{float(v):.{digits}f}"
    except (TypeError, ValueError):
        return str(v)


PIPE, ESC_PIPE = "|", "\\|"


def pct(v, digits=1, signed=False, none="n/a"):
    if v is None:
        return none
    return f"{v * 100:{'+' if signed else ''}.{digits}f} %"


def fmt_rate(v):
    return "n/a" if v is None else fmt_flops(v) + "/s"


def fmt_flops(v):
    if v is None:
        return "n/a"
    v = float(v)
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if abs(v) >= scale:
            return f"{v / scale:.2f} {unit}FLOP"
    return f"{v:.0f} FLOP"


def dig(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


class Runner:
    def __init__(self, args):
        self.args = args
        self.dry = args.dry_run
        self.start = time.time()
        self.deadline_at = self.start + args.deadline
        self.log = []  # every command: name, cmd, rc, seconds, tails
        self.lock = threading.Lock()
        env = dict(os.environ)
        if args.ld_library_path:
            env["LD_LIBRARY_PATH"] = args.ld_library_path + (":" + env["LD_LIBRARY_PATH"]
                                                             if env.get("LD_LIBRARY_PATH") else "")
        self.sat_env = env

    def remaining(self):
        return self.deadline_at - time.time()

    def progress(self, text):
        print(f"gpu-check: {text}", file=sys.stderr, flush=True)

    def run(self, name, cmd, timeout, saturate=True, env_extra=None):
        """Runs cmd with min(timeout, time left); returns {rc, seconds, stdout, stderr, timed_out}
        or {skipped: why}. In a dry run prints the command and returns {dry: True}."""
        shown = " ".join(shlex.quote(str(c)) for c in cmd)
        if self.dry:
            print(f"[{name}] (timeout {timeout} s) $ {shown}")
            return {"dry": True, "rc": 0}
        left = self.remaining() - 5
        t = min(timeout, left)
        if t < 10:
            r = {"skipped": f"no time left ({left:.0f} s before the deadline)", "cmd": shown}
            with self.lock:
                self.log.append({"name": name, **r})
            return r
        self.progress(f"> {name} (timeout {t:.0f} s, {self.remaining():.0f} s left)")
        env = dict(self.sat_env if saturate else os.environ)
        if env_extra:
            env.update(env_extra)
        t0 = time.time()
        try:
            p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                 cwd=ROOT, start_new_session=True, text=True, errors="replace")
        except OSError as e:
            r = {"rc": 127, "seconds": 0.0, "stdout": "", "stderr": str(e), "timed_out": False, "cmd": shown}
            with self.lock:
                self.log.append({"name": name, **r})
            return r
        timed_out = False
        try:
            out, err = p.communicate(timeout=t)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the group this run started, and only it
            except ProcessLookupError:
                pass
            out, err = p.communicate()
        r = {"rc": p.returncode, "seconds": time.time() - t0, "stdout": out, "stderr": err, "timed_out": timed_out,
             "timeout": t, "cmd": shown}
        with self.lock:
            self.log.append({"name": name, "cmd": shown, "rc": r["rc"], "seconds": round(r["seconds"], 2),
                             "timed_out": timed_out, "stdout_tail": out[-3000:], "stderr_tail": err[-6000:]})
        return r

    def worker(self, name, cfg, timeout):
        cmd = [sys.executable, os.path.join(ROOT, "bench", "gpu_check.py"), "worker", json.dumps(cfg)]
        r = self.run(name, cmd, timeout, saturate=False)
        if r.get("dry") or r.get("skipped") or r.get("timed_out"):
            return r, None
        for line in reversed(r["stdout"].splitlines()):
            if line.startswith("RESULT "):
                return r, json.loads(line[7:])
        return r, None


def status_of(r, ok=True):
    """The table's word for a command's outcome."""
    if r is None:
        return "not run"
    if r.get("dry"):
        return "dry run"
    if r.get("skipped"):
        return "skipped: " + r["skipped"]
    if r.get("timed_out"):
        return f"TIMEOUT ({r.get('timeout', 0):.0f} s)"
    if r.get("rc") != 0:
        last = (r.get("stderr") or "").strip().splitlines()[-1:] or [""]
        return f"ERROR rc {r.get('rc')}: {last[0][:160]}"
    return "ok" if ok else "FAIL"


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class Check:
    def __init__(self, args):
        self.args = args
        self.cfg = QUICK if args.quick else FULL
        self.T = self.cfg["timeouts"]
        self.dev = args.device
        self.cuda = args.device.startswith("cuda")
        self.R = Runner(args)
        self.dry = args.dry_run
        self.work = os.path.join(ROOT, "bench", "out", "gpu")
        os.makedirs(self.work, exist_ok=True)
        self.sat = args.saturate
        self.tests = args.tests
        self.results = {}  # section -> data (also the raw JSON)
        self.summary = []  # rows: (id, check, status, result, seconds)
        self.only = set(args.only.split(",")) if args.only else None
        self.md_path = args.results or os.path.join(
            ROOT, "bench", "results", "gpu.md" if self.cuda else "gpu_rehearsal_cpu.md")
        self.have_smi = shutil.which("nvidia-smi") is not None

    # --- helpers ---------------------------------------------------------------------------
    def want(self, key):
        return self.only is None or key in self.only

    def sat_ok(self):
        return self.dry or (self.sat and os.path.exists(self.sat))

    def jpath(self, name):
        return os.path.join(self.work, name)

    def add(self, key, check, status, result, seconds=None):
        row = (key, check, status, result, seconds)
        same = [i for i, r in enumerate(self.summary) if r[:2] == (key, check)]
        if same:
            self.summary[same[0]] = row  # an update (f: after torch.compile)
        else:
            self.summary.append(row)
        self.R.progress(f"[{key}] {check}: {status}; {result}")
        self.write()

    # --- a. tests ---------------------------------------------------------------------------
    def check_tests(self):
        if not (self.dry or (self.tests and os.path.exists(self.tests))):
            self.add("a", "`*_CUDA` tests", "skipped", "no saturate_tests binary")
            return
        out = self.jpath("cuda_tests.json")
        if os.path.exists(out):
            os.remove(out)
        r = self.R.run("a tests", [self.tests, "--gtest_filter=*CUDA*", f"--gtest_output=json:{out}"],
                       self.T["tests"])
        if r.get("dry"):
            return
        j = load_json(out)
        tests = []
        if j:
            for suite in j.get("testsuites", []):
                for t in suite.get("testsuite", []):
                    failed = bool(t.get("failures"))
                    skipped = t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN"
                    tests.append({"name": f"{suite.get('name')}.{t.get('name')}",
                                  "result": "FAIL" if failed else ("skipped" if skipped else "pass"),
                                  "time": t.get("time"),
                                  "failure": (t.get("failures") or [{}])[0].get("failure", "")[:400]})
        n = {k: sum(1 for t in tests if t["result"] == k) for k in ("pass", "FAIL", "skipped")}
        self.results["tests"] = {"tests": tests, "counts": n, "rc": r.get("rc")}
        st = status_of(r)
        if j is not None and not r.get("timed_out"):
            st = "FAIL" if n["FAIL"] else ("pass" if n["pass"] else "all skipped")
        self.add("a", "`*_CUDA` tests", st, f"{n['pass']} passed, {n['FAIL']} failed, {n['skipped']} skipped",
                 r.get("seconds"))

    # --- b. search exactness ------------------------------------------------------------------
    def search_cmd(self, m, extra=()):
        # the fast paths are tried after the search, at its recommended batch: max_batch and the
        # probes of max/max+1 are the plain step's (on CUDA `auto` is the same as `try`)
        fast = ["--fast-paths", "try"] if self.fast_paths_supported() else []
        return [self.sat, "search", *m["flags"], "--device", self.dev, "--memory-budget", m["budget"], *fast, *extra]

    def check_search(self, m):
        key = m["label"]
        res = self.results.setdefault("search", {}).setdefault(key, {"budget": m["budget"]})
        if not self.sat_ok():
            self.add("b", f"search exactness {key}", "skipped", "no saturate binary")
            return
        sj = self.jpath(f"search_{m['flags'][1]}.json")
        r = self.R.run(f"b search {key}", self.search_cmd(m, ["--json", sj]), self.T["search"])
        j = None if r.get("dry") else load_json(sj) if r.get("rc") == 0 else None
        res["search_status"] = status_of(r)
        res["json_file"] = os.path.basename(sj)
        if j:
            res.update({k: j.get(k) for k in ("max_batch", "max_batch_exact", "recommended_batch",
                                               "throughput_batch", "trial_steps", "search_seconds", "capped")})
            res["trials"] = len(j.get("trials", []))
            res["compute"] = j.get("compute")
            res["fast_paths"] = j.get("fast_paths")
            res["parameters"] = dig(j, "model", "parameters")
            res["process_seconds"] = r.get("seconds")
        mx = res.get("max_batch") if j else ("<max_batch>" if r.get("dry") else None)
        if mx is None:
            self.add("b", f"search exactness {key}", status_of(r) if r.get("rc") != 0 or r.get("timed_out")
                     else "ERROR: no JSON", f"budget {m['budget']}", r.get("seconds"))
            return
        probes = {}
        for label, b in (("max", mx), ("max+1", mx + 1 if isinstance(mx, int) else "<max_batch+1>")):
            pj = self.jpath(f"probe_{m['flags'][1]}_{label}.json")
            pr = self.R.run(f"b probe {key} {label}", [self.sat, "probe", *m["flags"], "--device", self.dev,
                                                       "--memory-budget", m["budget"], "--batch", b,
                                                       "--warmup-steps", "1", "--timed-steps", "1", "--json", pj],
                            self.T["probe"])
            pjs = load_json(pj) if pr.get("rc") == 0 else None
            probes[label] = {"batch": b, "status": pjs.get("status") if pjs else status_of(pr),
                             "peak_allocated_bytes": dig(pjs, "peak_allocated_bytes"),
                             "peak_reserved_bytes": dig(pjs, "peak_reserved_bytes"), "seconds": pr.get("seconds")}
        res["probes"] = probes
        if r.get("dry"):
            return
        exact = probes["max"]["status"] == "ok" and probes["max+1"]["status"] == "oom"
        res["verified"] = exact
        self.add("b", f"search exactness {key}", "pass" if exact else "FAIL",
                 f"max {mx} ({'exact' if res.get('max_batch_exact') else 'not exact'}), fresh probes: {mx} "
                 f"{probes['max']['status']}, {mx + 1} {probes['max+1']['status']}; {res['trials']} trials, "
                 f"{res.get('trial_steps')} steps, search {fmt_num(res.get('search_seconds'))} s"
                 f"{'; fast paths chosen: ' + str(dig(res, 'fast_paths', 'chosen')) if dig(res, 'fast_paths', 'chosen') else ''}",
                 r.get("seconds"))

    # --- c. peak vs torch ----------------------------------------------------------------------
    def check_peaks(self):
        specs = []
        for s in self.cfg["scripted"]:
            s = dict(s)
            s["path"] = self.jpath(f"{s['name']}.pt")
            specs.append(s)
        r, exp = self.R.worker("c export", {"kind": "export", "models": specs}, self.T["export"])
        self.results["scripted"] = {"export": exp, "specs": specs}
        if not r.get("dry") and exp is None:
            self.add("c", "peak vs torch", status_of(r), "could not script the models")
            return
        for s in specs:
            self.check_peak(s, exp)

    def check_peak(self, s, exp):
        res = self.results.setdefault("peaks", {}).setdefault(s["label"], {"batch": s["batch"]})
        if exp:
            res["parameters"] = exp[s["name"]]["parameters"]
        if s["kind"] == "tokens":
            mflags = ["--tokens", "--seq-len", str(s["seq"]), "--vocab", str(s["vocab"])]
        else:
            mflags = ["--input", "x".join(map(str, s["input"])), "--classes", str(s["classes"])]
        sat_peak = None
        if self.sat_ok():
            pj = self.jpath(f"probe_{s['name']}.json")
            cmd = [self.sat, "probe", "--model", s["path"], *mflags, "--device", self.dev, "--batch", s["batch"],
                   "--optimizer", "adam", "--lr", "1e-3", "--warmup-steps", "1", "--timed-steps", "1", "--json", pj]
            if not self.cuda:
                cmd += ["--memory-budget", "1GiB"]
            pr = self.R.run(f"c probe {s['name']}", cmd, self.T["probe_c"])
            pjs = load_json(pj) if pr.get("rc") == 0 else None
            res["saturate"] = {"status": dig(pjs, "status") or status_of(pr),
                               "peak_allocated_bytes": dig(pjs, "peak_allocated_bytes"),
                               "peak_reserved_bytes": dig(pjs, "peak_reserved_bytes"),
                               "step_time_ms": dig(pjs, "step_time_ms"),
                               "peak_phase": dig(pjs, "memory_breakdown", "peak_phase")}
            sat_peak = res["saturate"]["peak_allocated_bytes"]
        variants = [{"label": "eager, Adam foreach=False (LibTorch's per-parameter Adam)", "model": "eager",
                     "foreach": False},
                    {"label": "eager, Adam default (foreach on CUDA)", "model": "eager", "foreach": None},
                    {"label": "same .pt via torch.jit.load, optimized_execution(False), foreach=False",
                     "model": "scripted", "foreach": False}]
        wr, w = self.R.worker(f"c torch {s['name']}", {"kind": "peak", "spec": s, "device": self.dev,
                                                       "batch": s["batch"], "variants": variants}, self.T["peak_py"])
        res["torch"] = w["results"] if w else status_of(wr)
        if wr.get("dry"):
            return
        if not w:
            self.add("c", f"peak vs torch {s['label']}", status_of(wr), "the torch side did not run", wr.get("seconds"))
            return
        ref = w["results"][0].get("peak_allocated_bytes")
        if not self.cuda:
            self.add("c", f"peak vs torch {s['label']}", "n/a on CPU",
                     f"saturate {fmt_bytes(sat_peak)} (CPU budget allocator); torch has no CPU peak counter; "
                     f"torch step ran ({fmt_num(w['results'][0]['step_ms'])} ms)")
            return
        ratio = sat_peak / ref if sat_peak and ref else None
        res["ratio"] = ratio
        ok = ratio is not None and abs(ratio - 1) <= 0.05
        self.add("c", f"peak vs torch {s['label']}", ("pass" if ok else "DIFFERS") if ratio else "n/a",
                 f"batch {s['batch']}: saturate {fmt_bytes(sat_peak)} vs torch {fmt_bytes(ref)} "
                 f"(ratio {fmt_num(ratio, 3)}; within 5 %: {'yes' if ok else 'no'})")

    # --- d. plan ------------------------------------------------------------------------------
    def plan_cmd(self, m):
        if self.cuda:
            target = f"{(m['budget_bytes'] + 512 * MiB) // MiB}MiB"  # the plan takes 512 MiB off for the context
            extra = ["--plan-for", target, "--plan-only"]
        else:
            target = m["budget"]
            extra = ["--plan-for", target, "--plan-allocator", "exact", "--plan-only", "--memory-budget", m["budget"]]
        threads = ["--threads", "4"] if self.cuda else []
        return target, [self.sat, "search", *m["flags"], "--device", "cpu", *threads, *extra]

    def start_plans(self):
        """The CPU predictions, in a thread (on the GPU machine they overlap the GPU searches)."""
        self.plan_runs = {}
        if not self.want("d") or not self.sat_ok():
            return None

        def go():
            for m in self.cfg["search"]:
                target, cmd = self.plan_cmd(m)
                pj = self.jpath(f"plan_{m['flags'][1]}.json")
                r = self.R.run(f"d plan {m['label']}", cmd + ["--json", pj], self.T["plan"])
                self.plan_runs[m["label"]] = (target, r, load_json(pj) if r.get("rc") == 0 else None)

        if self.cuda and not self.dry:
            t = threading.Thread(target=go, daemon=True)
            t.start()
            return t
        go()
        return None

    def check_plans(self, thread):
        if thread is not None:
            thread.join(max(1, self.R.remaining() - 5))
        if not self.want("d"):
            return
        if not self.sat_ok():
            self.add("d", "--plan-for vs measured", "skipped", "no saturate binary")
            return
        for m in self.cfg["search"]:
            key = m["label"]
            if key not in self.plan_runs:
                self.add("d", f"plan vs measured {key}", "TIMEOUT", "the CPU prediction did not finish in time")
                continue
            target, r, j = self.plan_runs[key]
            if r.get("dry"):
                continue
            measured = dig(self.results, "search", key, "max_batch")
            measured_rec = dig(self.results, "search", key, "recommended_batch")
            pred = dig(j, "plan", "max_batch")
            res = {"target": target, "predicted_max_batch": pred,
                   "predicted_recommended_batch": dig(j, "plan", "recommended_batch"),
                   "predicted_max_peak_bytes": dig(j, "plan", "predicted_max_peak_bytes"),
                   "measured_max_batch": measured, "measured_recommended_batch": measured_rec,
                   "allocator": dig(j, "plan", "allocator"), "plan_seconds": r.get("seconds"),
                   "status": status_of(r)}
            err = (pred - measured) / measured if pred is not None and measured else None
            res["error"] = err
            self.results.setdefault("plans", {})[key] = res
            if pred is None:
                self.add("d", f"plan vs measured {key}", status_of(r) if r.get("rc") else "ERROR: no plan",
                         f"--plan-for {target}", r.get("seconds"))
                continue
            self.add("d", f"plan vs measured {key}", "ok" if measured else "measured max missing",
                     f"predicted {pred} on CPU for {target}, measured {fmt_num(measured)} on {self.dev} "
                     f"({pct(err, signed=True)})", r.get("seconds"))

    # --- e + f. utilization and throughput ------------------------------------------------------
    def check_train(self):
        c = self.cfg["train"]
        shape = "x".join(map(str, c["input"]))
        flags = ["--model", c["model"], "--input", shape, "--classes", str(c["classes"])]
        res = self.results.setdefault("train", {"config": c})
        if self.sat_ok():
            self.train_with_monitor(c, flags, res)
            pj = self.jpath("probe_train_batch.json")
            pr = self.R.run("f probe", [self.sat, "probe", *flags, "--device", self.dev, "--batch", c["batch"],
                                        "--warmup-steps", "2", "--timed-steps", c["probe_steps"], "--json", pj,
                                        *([] if self.cuda else ["--memory-budget", "2GiB"])], self.T["probe"])
            pjs = load_json(pj) if pr.get("rc") == 0 else None
            res["saturate_probe"] = {"status": dig(pjs, "status") or status_of(pr),
                                     "samples_per_s": dig(pjs, "samples_per_s"),
                                     "step_time_ms": dig(pjs, "step_time_ms"),
                                     "peak_allocated_bytes": dig(pjs, "peak_allocated_bytes")}
            # the same probe with the switches b's search kept for this model (when it kept any)
            first = self.cfg["search"][0]
            chosen = dig(self.results, "search", first["label"], "fast_paths", "chosen")
            if self.R.dry:
                chosen = "<chosen by b>"
            if first["flags"][1] == c["model"] and chosen and chosen != "none":
                pj = self.jpath("probe_train_batch_fast.json")
                pr = self.R.run("f probe --fast-paths chosen",
                                [self.sat, "probe", *flags, "--device", self.dev, "--batch", c["batch"],
                                 "--warmup-steps", "2", "--timed-steps", c["probe_steps"], "--fast-paths", chosen,
                                 "--json", pj, *([] if self.cuda else ["--memory-budget", "2GiB"])], self.T["probe"])
                pjs = load_json(pj) if pr.get("rc") == 0 else None
                res["saturate_probe_fast"] = {"status": dig(pjs, "status") or status_of(pr), "fast_paths": chosen,
                                              "samples_per_s": dig(pjs, "samples_per_s"),
                                              "step_time_ms": dig(pjs, "step_time_ms")}
        else:
            self.add("e", "NVML vs nvidia-smi", "skipped", "no saturate binary")
        base = {"kind": "train", "model": c["model"], "input": c["input"], "classes": c["classes"],
                "batch": c["batch"], "device": self.dev}
        self.base = {"kind": "train", "model": c["model"], "input": c["input"], "classes": c["classes"],
                     "batch": c["batch"], "device": self.dev}
        runs = [("torch eager", {"mode": "eager", "warmup": c["py_warmup"], "steps": c["py_steps"],
                                 "count_flops": True}),
                ("torch eager foreach=False", {"mode": "eager", "warmup": c["py_warmup"], "steps": c["py_steps"],
                                               "foreach": False})]
        for label, extra in runs:
            wr, w = self.R.worker(f"f {label}", {**self.base, **extra}, self.T["py_eager"])
            res.setdefault("torch", {})[label] = w or {"status": status_of(wr)}
            if label == "torch eager":
                # the GEMM peak right after, for g (not while anything else runs)
                self.gemm()
        self.summarize_train(final=False)

    def check_compile(self):
        c = self.cfg["train"]
        label = f"torch.compile {c['compile_backend']}"
        wr, w = self.R.worker(f"f {label}", {**self.base, "mode": "compile", "backend": c["compile_backend"],
                                             "warmup": c["compile_warmup"], "steps": c["py_steps"]},
                              self.T["py_compile"])
        self.results["train"].setdefault("torch", {})[label] = w or {"status": status_of(wr)}
        self.summarize_train(final=True)

    def summarize_train(self, final):
        if self.R.dry:
            return
        c = self.cfg["train"]
        res = self.results["train"]
        sp = dig(res, "saturate_train", "samples_per_s")
        pp = dig(res, "saturate_probe", "samples_per_s")
        parts = [f"saturate train {fmt_num(sp)}", f"saturate probe {fmt_num(pp)}"]
        if res.get("saturate_probe_fast"):
            parts.append(f"saturate probe --fast-paths {res['saturate_probe_fast']['fast_paths']} "
                         f"{fmt_num(res['saturate_probe_fast'].get('samples_per_s'))}")
        for label, w in res.get("torch", {}).items():
            parts.append(f"{label} {fmt_num(w.get('samples_per_s')) if w.get('samples_per_s') else w.get('status')}")
        self.add("f", f"samples/s {c['model']} batch {c['batch']}",
                 ("measured" if sp or pp else "incomplete") + ("" if final else " (torch.compile next)"),
                 ", ".join(parts))

    def gemm(self):
        n = self.cfg["gemm_n"]
        wr, w = self.R.worker("g gemm peak", {"kind": "gemm", "device": self.dev, "n": n}, self.T["gemm"])
        self.results["gemm"] = w or {"status": status_of(wr)}

    def train_with_monitor(self, c, flags, res):
        csv = self.jpath("monitor.csv")
        tj = self.jpath("train.json")
        for p in (csv, tj):
            if os.path.exists(p):
                os.remove(p)
        train = [self.sat, "train", *flags, "--device", self.dev, "--data", "synthetic", "--no-augment", "--workers", c["workers"],
                 "--batch", c["batch"], "--steps", c["train_steps"], "--log-every", "10", "--json", tj]
        if not self.cuda:
            train += ["--memory-budget", "2GiB"]
        cmd = [self.sat, "monitor", "--sample-hz", c["sample_hz"], "--interval", "0", "--log", csv, "--", *train]
        smi_cmd = ["nvidia-smi", "--query-gpu=timestamp,utilization.gpu,memory.used",
                   "--format=csv,noheader,nounits", "-lms", "200"]
        if self.R.dry:
            print(f"[e nvidia-smi, alongside] $ {' '.join(smi_cmd)}")
            self.R.run("e+f train under monitor", cmd, self.T["train"])
            return
        smi = None
        smi_out = self.jpath("nvidia_smi.csv")
        smi_lines = []
        if self.have_smi and (self.cuda or os.environ.get("GPU_CHECK_FORCE_SMI")):  # forced: a rehearsal
            # line-buffered through a pipe (a block-buffered file loses its tail when nvidia-smi is
            # stopped); each line keeps its own timestamp, the arrival time is only kept for the log
            pre = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
            smi = subprocess.Popen(pre + smi_cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                   start_new_session=True)

            def read_smi():
                for line in smi.stdout:
                    smi_lines.append(line.rstrip("\n"))

            smi_thread = threading.Thread(target=read_smi, daemon=True)
            smi_thread.start()
            time.sleep(0.5)
        seen = []  # (wall time first seen, time_s) of each CSV row
        stop = threading.Event()

        def tail():
            pos, buf = 0, ""
            while not stop.is_set():
                try:
                    with open(csv) as f:
                        f.seek(pos)
                        chunk = f.read()
                        pos = f.tell()
                except OSError:
                    chunk = ""
                now = time.time()
                buf += chunk
                while "\n" in buf:
                    line, buf = buf.split("\n", 1)
                    if line and not line.startswith("time_s"):
                        try:
                            seen.append((now, float(line.split(",")[0])))
                        except ValueError:
                            pass
                time.sleep(0.02)

        th = threading.Thread(target=tail, daemon=True)
        th.start()
        r = self.R.run("e+f train under monitor", cmd, self.T["train"])
        time.sleep(0.3)
        stop.set()
        th.join(2)
        if smi is not None:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(smi.pid, sig)  # the group started above, and only it
                    smi.wait(3)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
            smi_thread.join(3)
            with open(smi_out, "w") as f:
                f.write("\n".join(smi_lines) + "\n")
        tjs = load_json(tj)
        res["saturate_train"] = {
            "status": status_of(r) if tjs is None else "ok",
            "samples_per_s": dig(tjs, "samples_per_s"), "phases_ms": dig(tjs, "phases_ms"),
            "bottleneck": dig(tjs, "bottleneck", "verdict"), "utilization_source": dig(tjs, "utilization", "source"),
            "gpu_util_mean": dig(tjs, "utilization", "gpu_util_percent", "mean"),
            "flops_per_sample": dig(tjs, "flops_per_sample"), "achieved_flops_per_s": dig(tjs, "achieved_flops_per_s"),
            "peak_flops_per_s": dig(tjs, "peak_flops_per_s"), "mfu": dig(tjs, "mfu"),
            "peak_method": dig(tjs, "peak_method"), "flops_method": dig(tjs, "flops_method"),
            "analytic_flops_per_sample": dig(tjs, "analytic_flops_per_sample"), "fast_paths": dig(tjs, "fast_paths"),
            "parameters": dig(tjs, "model", "parameters"), "note": "run under saturate monitor (its own process)"}
        self.compare_util(csv, smi_out if smi is not None else None, seen, r)

    def compare_util(self, csv, smi_out, seen, r):
        rows = []
        try:
            with open(csv) as f:
                head = f.readline().strip().split(",")
                for line in f:
                    v = line.strip().split(",")
                    if len(v) == len(head):
                        rows.append(dict(zip(head, v)))
        except OSError:
            pass
        res = self.results.setdefault("util", {})
        res["monitor_samples"] = len(rows)
        res["source"] = rows[0].get("source") if rows else None
        if not rows:
            self.add("e", "NVML vs nvidia-smi", status_of(r) if r.get("rc") else "ERROR",
                     "saturate monitor wrote no samples", r.get("seconds"))
            return
        if smi_out is None:
            self.add("e", "NVML vs nvidia-smi", "skipped: no nvidia-smi" if not self.have_smi else "skipped: CPU run",
                     f"saturate monitor logged {len(rows)} samples (source {res['source']}); "
                     f"CSV parsed and its clock aligned ({len(seen)} rows seen live)", r.get("seconds"))
            return
        # the monitor's clock: wall = origin + time_s, origin = the earliest (seen - time_s)
        origin = min(w - t for w, t in seen) if seen else None
        smi = []
        try:
            with open(smi_out) as f:
                for line in f:
                    p = [x.strip() for x in line.split(",")]
                    if len(p) < 3:
                        continue
                    try:
                        ts = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                        smi.append((ts, float(p[1]), float(p[2])))
                    except ValueError:
                        continue
        except OSError:
            pass
        res["smi_samples"] = len(smi)
        if origin is None or not smi:
            self.add("e", "NVML vs nvidia-smi", "ERROR", f"{len(rows)} monitor samples, {len(smi)} nvidia-smi samples, "
                     f"no clock alignment" if origin is None else "nvidia-smi wrote nothing")
            return
        pairs = []
        for row in rows:
            try:
                t = origin + float(row["time_s"])
                u = float(row["gpu_util_percent"]) if row.get("gpu_util_percent") else None
                mu = float(row["mem_used_bytes"]) / MiB if row.get("mem_used_bytes") else None
            except ValueError:
                continue
            if u is None:
                continue
            best = min(smi, key=lambda s: abs(s[0] - t))
            if abs(best[0] - t) <= 0.15:
                pairs.append({"t": round(t - origin, 3), "dt_ms": round((best[0] - t) * 1e3, 1), "nvml_util": u,
                              "smi_util": best[1], "nvml_mem_mib": mu, "smi_mem_mib": best[2]})
        res["pairs"] = pairs
        res["series_csv"] = "gpu_util_series.csv"
        with open(self.jpath("gpu_util_series.csv"), "w") as f:
            f.write("t_s,dt_ms,nvml_util,smi_util,nvml_mem_mib,smi_mem_mib\n")
            for p in pairs:
                f.write(f"{p['t']},{p['dt_ms']},{p['nvml_util']},{p['smi_util']},{p['nvml_mem_mib']},{p['smi_mem_mib']}\n")
        if not pairs:
            self.add("e", "NVML vs nvidia-smi", "ERROR", "no samples within 150 ms of each other")
            return
        d = [abs(p["nvml_util"] - p["smi_util"]) for p in pairs]
        dm = [abs(p["nvml_mem_mib"] - p["smi_mem_mib"]) for p in pairs if p["nvml_mem_mib"] is not None]
        res.update(mean_abs_util_diff=statistics.mean(d), max_abs_util_diff=max(d),
                   share_within_5=sum(1 for x in d if x <= 5) / len(d),
                   mean_util_nvml=statistics.mean(p["nvml_util"] for p in pairs),
                   mean_util_smi=statistics.mean(p["smi_util"] for p in pairs),
                   mean_abs_mem_diff_mib=statistics.mean(dm) if dm else None)
        self.add("e", "NVML vs nvidia-smi", "pass" if res["mean_abs_util_diff"] <= 5 else "DIFFERS",
                 f"{len(pairs)} matched samples (±150 ms): mean |Δ util| {res['mean_abs_util_diff']:.1f} points "
                 f"(max {res['max_abs_util_diff']:.0f}), mean util NVML {res['mean_util_nvml']:.1f} % vs "
                 f"nvidia-smi {res['mean_util_smi']:.1f} %", r.get("seconds"))

    # --- g. MFU --------------------------------------------------------------------------------
    def check_mfu(self):
        if self.R.dry:
            return
        rows = []
        for key, s in self.results.get("search", {}).items():
            c = s.get("compute") or {}
            method = c.get("flops_method")
            if c.get("analytic_flops_per_sample") is not None:
                method = f"{method}; analytic {fmt_flops(c['analytic_flops_per_sample'])}"
            rows.append({"source": f"saturate search {key} (JSON `compute`, batch {c.get('batch', 'n/a')})",
                         "flops_per_sample": c.get("flops_per_sample"),
                         "method": method, "achieved": c.get("achieved_flops_per_s"),
                         "peak": c.get("peak_flops_per_s"), "peak_method": c.get("peak_method"), "mfu": c.get("mfu")})
        t = self.results.get("train", {})
        st = t.get("saturate_train") or {}
        method = st.get("flops_method")
        if st.get("analytic_flops_per_sample") is not None:
            method = f"{method}; analytic {fmt_flops(st['analytic_flops_per_sample'])}"
        rows.append({"source": "saturate train (JSON)", "flops_per_sample": st.get("flops_per_sample"),
                     "method": method, "achieved": st.get("achieved_flops_per_s"),
                     "peak": st.get("peak_flops_per_s"), "peak_method": st.get("peak_method"), "mfu": st.get("mfu")})
        g = self.results.get("gemm") or {}
        peak = g.get("fp32_flops_per_s")
        peak_tf32 = g.get("tf32_flops_per_s")
        fps = dig(t, "torch", "torch eager", "flops_per_sample")
        for label, sps in [("saturate train", st.get("samples_per_s")),
                           ("saturate probe", dig(t, "saturate_probe", "samples_per_s")),
                           ("saturate probe --fast-paths chosen", dig(t, "saturate_probe_fast", "samples_per_s"))] + \
                [(k, v.get("samples_per_s")) for k, v in (t.get("torch") or {}).items()]:
            if sps is None and "fast-paths" in label:
                continue
            ach = fps * sps if fps and sps else None
            rows.append({"source": f"{label}, computed here", "flops_per_sample": fps,
                         "method": "torch.utils.flop_counter (forward+backward, eager model)", "achieved": ach,
                         "peak": peak, "peak_method": f"measured fp32 GEMM {g.get('n')}^3 (TF32 off)",
                         "mfu": ach / peak if ach and peak else None,
                         "mfu_tf32": ach / peak_tf32 if ach and peak_tf32 else None})
        sat_fps = st.get("flops_per_sample")
        flops_ratio = sat_fps / fps if sat_fps and fps else None
        self.results["mfu"] = {"rows": rows, "gemm": g, "flops_ratio_saturate_over_torch": flops_ratio}
        own = [r for r in rows if r["mfu"] is not None and "computed" not in r["source"]]
        mine = [r for r in rows if r["mfu"] is not None and "computed" in r["source"]]
        txt = "; ".join(f"{r['source'].replace(', computed here', '')} {pct(r['mfu'])}" for r in mine)
        self.add("g", "MFU", "measured" if mine or own else "n/a",
                 (f"FLOPs/sample of {self.cfg['train']['model']}: saturate {fmt_flops(sat_fps)}, "
                  f"torch.utils.flop_counter {fmt_flops(fps)} (ratio {fmt_num(flops_ratio, 4)}); "
                  if sat_fps or fps else "") +
                 ("saturate's own: " + ", ".join(f"{r['source'].split(' (')[0]} {pct(r['mfu'])}" for r in own) + "; "
                  if own else "saturate's own fields: n/a in this binary; ")
                 + (f"computed vs fp32 GEMM peak {fmt_rate(peak)}: " + txt if mine else "computed: n/a"))

    def fast_paths_supported(self):
        if not hasattr(self, "_fast_paths"):
            self._fast_paths = self._fast_paths_supported()
        return self._fast_paths

    def _fast_paths_supported(self):
        if not self.sat_ok() or self.R.dry and not (self.sat and os.path.exists(self.sat)):
            return self.R.dry  # print the step in a dry run without a binary
        try:
            h = subprocess.run([self.sat, "search", "--help"], capture_output=True, text=True, timeout=30,
                               env=self.R.sat_env).stdout
        except (OSError, subprocess.TimeoutExpired):
            return False
        return "--fast-paths" in h

    # --- env ---------------------------------------------------------------------------------
    def check_env(self):
        info = {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ"),
                "loadavg_start": os.getloadavg(), "device": self.dev,
                "quick": self.args.quick, "setup": self.args.setup_note, "saturate": self.sat, "tests": self.tests}
        try:
            info["git"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                         text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            info["git"] = "?"
        man = os.path.join(ROOT, "gpu-pack", "MANIFEST.txt")
        if os.path.exists(man) and self.sat and "gpu-pack" in self.sat:
            with open(man) as f:
                info["pack"] = f.read()
        if self.have_smi and not self.dry:
            r = self.R.run("env nvidia-smi", ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                                              "clocks.max.sm,power.limit", "--format=csv,noheader"], 30,
                           saturate=False)
            info["nvidia_smi"] = (r.get("stdout") or "").strip()
        r, w = self.R.worker("env torch", {"kind": "env"}, self.T["env"])
        info["torch"] = w or status_of(r)
        pkg = os.path.join(ROOT, "gpu-pack", "python")
        if self.sat and "gpu-pack" in self.sat and os.path.isdir(pkg):
            # the packed Python module (_saturate*.so) loads here? (it needs the same CPython as the build)
            r = self.R.run("env import saturate (gpu-pack/python)",
                           [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import saturate; "
                            "print('ok', saturate.__file__)", pkg], 60)
            info["python_package"] = "dry run" if r.get("dry") else (
                "imports" if r.get("rc") == 0 else status_of(r))
        self.results["env"] = info
        if not self.dry:
            self.write()

    # --- the run -------------------------------------------------------------------------------
    def run(self):
        self.check_env()
        if self.want("a"):
            self.check_tests()
        plans = self.start_plans()
        if self.want("b"):
            for m in self.cfg["search"]:
                self.check_search(m)
        if self.want("c"):
            self.check_peaks()
        self.check_plans(plans)
        if self.want("e") or self.want("f"):
            self.check_train()
        if self.want("f"):
            self.check_compile()
        if self.want("g"):
            self.check_mfu()
        if not self.dry:
            self.write(final=True)
            self.R.progress(f"done in {time.time() - self.R.start:.0f} s: {os.path.relpath(self.md_path, ROOT)}")

    # --- the record ------------------------------------------------------------------------------
    def write(self, final=False):
        if self.dry:
            return
        md = self.render(final)
        os.makedirs(os.path.dirname(self.md_path), exist_ok=True)
        with open(self.md_path, "w") as f:
            f.write(md)
        raw = {"results": self.results, "summary": self.summary, "commands": self.R.log,
               "elapsed_s": time.time() - self.R.start, "final": final}
        with open(self.jpath("gpu_raw.json"), "w") as f:
            json.dump(raw, f, indent=1, default=str)
        with open(self.jpath("gpu_logs.txt"), "w") as f:
            for c in self.R.log:
                f.write(f"=== [{c['name']}] rc {c.get('rc')} {c.get('seconds', '')} s"
                        f"{' TIMEOUT' if c.get('timed_out') else ''}{' skipped: ' + c['skipped'] if c.get('skipped') else ''}\n"
                        f"$ {c.get('cmd')}\n")
                if c.get("stdout_tail"):
                    f.write("--- stdout (tail)\n" + c["stdout_tail"] + "\n")
                if c.get("stderr_tail"):
                    f.write("--- stderr (tail)\n" + c["stderr_tail"] + "\n")
            if self.args.setup_log and os.path.exists(self.args.setup_log):
                with open(self.args.setup_log) as s:
                    f.write("=== setup (scripts/gpu_check.sh)\n" + s.read()[-20000:])
        out = os.environ.get("OUT")
        if out:
            os.makedirs(out, exist_ok=True)
            files = [self.md_path, self.jpath("gpu_raw.json"), self.jpath("gpu_logs.txt")]
            if os.path.exists(self.jpath("gpu_util_series.csv")):
                files.append(self.jpath("gpu_util_series.csv"))
            for p in files[:6]:
                try:
                    shutil.copy(p, out)
                except OSError:
                    pass

    def render(self, final):
        e = self.results.get("env", {})
        tw = e.get("torch") if isinstance(e.get("torch"), dict) else {}
        L = []
        if self.cuda:
            L.append("# GPU check (`make gpu-check`)")
        else:
            L.append("# CPU REHEARSAL of `make gpu-check` (not a GPU measurement)")
            L.append("")
            L.append("> This table was made on a CPU with `--device cpu --quick`, small models and CPU budgets, to prove "
                     "the script's logic end to end. None of its figures is a GPU figure; the GPU run writes "
                     "bench/results/gpu.md.")
        L.append("")
        L.append(f"- date (UTC): {e.get('date_utc')}; git {e.get('git')}; elapsed {time.time() - self.R.start:.0f} s of a "
                 f"{self.args.deadline:.0f} s deadline{'' if final else ' (IN PROGRESS or cut short)'}")
        if tw:
            L.append(f"- device: {self.dev}; {e.get('nvidia_smi') or tw.get('gpu') or 'no GPU'}; torch {tw.get('torch')} "
                     f"(CUDA {tw.get('cuda')}, cuDNN {tw.get('cudnn')}), python {tw.get('python')}, torchvision "
                     f"{tw.get('torchvision')}, triton {tw.get('triton')}, {tw.get('cpu_count')} CPUs; PyTorch "
                     f"defaults: cuDNN TF32 {tw.get('cudnn_allow_tf32')}, matmul precision {tw.get('matmul_precision')}")
        else:
            L.append(f"- device: {self.dev}; {e.get('nvidia_smi') or 'no nvidia-smi'}; torch worker: {e.get('torch')}")
        la = e.get("loadavg_start")
        L.append(f"- load average at the start {' '.join(f'{x:.1f}' for x in la) if la else '?'}, now "
                 f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} (1/5/15 min; other work on the machine skews "
                 "timings, never the memory figures)")
        if e.get("python_package"):
            L.append(f"- gpu-pack's Python package (`import saturate`): {e['python_package']}")
        L.append(f"- binaries: {e.get('setup') or 'given'}; saturate `{os.path.relpath(self.sat, ROOT) if self.sat else 'none'}`")
        L.append("")
        L.append("## Summary")
        L.append("")
        L.append("| | check | status | result | s |")
        L.append("|---|---|---|---|---:|")
        for key, check, st, result, sec in self.summary:
            L.append(f"| {key} | {check} | {st} | {result} | {fmt_num(sec)} |")
        L.append("")
        self.render_details(L)
        L.append("## Commands")
        L.append("")
        L.append("| step | rc | s | command |")
        L.append("|---|---:|---:|---|")
        for c in self.R.log:
            rc = "skipped" if c.get("skipped") else ("timeout" if c.get("timed_out") else c.get("rc"))
            cmd = c.get("cmd", "")
            if "gpu_check.py worker" in cmd:
                cmd = cmd.split(" worker ", 1)[0] + " worker " + cmd.split(" worker ", 1)[1][:140] + "…"
            L.append(f"| {c['name']} | {rc} | {fmt_num(c.get('seconds'))} | `{cmd.replace(PIPE, ESC_PIPE)}` |")
        L.append("")
        L.append("Raw: `gpu_raw.json` (every parsed result), `gpu_logs.txt` (each command's output tails), "
                 "`gpu_util_series.csv` (the matched utilization samples), in bench/out/gpu/ and $OUT.")
        return "\n".join(L) + "\n"

    def render_details(self, L):
        R = self.results
        if "tests" in R:
            L.append("## a. `saturate_tests --gtest_filter='*CUDA*'`")
            L.append("")
            L.append("| test | result | s | failure |")
            L.append("|---|---|---:|---|")
            for t in R["tests"]["tests"]:
                L.append(f"| {t['name']} | {t['result']} | {t.get('time') or ''} | {t['failure'][:200].replace(chr(10), ' ')} |")
            L.append("")
        if R.get("search"):
            L.append("## b. Search exactness (search, then fresh `probe` processes at max and max+1)")
            L.append("")
            L.append("| model | budget | max_batch | exact (search) | probe max | probe max+1 | verified | trials | "
                     "trial steps | search s | process s | recommended | throughput batch |")
            L.append("|---|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|")
            for k, s in R["search"].items():
                p = s.get("probes", {})
                L.append(f"| {k} | {s.get('budget')} | {fmt_num(s.get('max_batch'))} | {s.get('max_batch_exact')} | "
                         f"{dig(p, 'max', 'status')} ({fmt_bytes(dig(p, 'max', 'peak_allocated_bytes'))}) | "
                         f"{dig(p, 'max+1', 'status')} | {s.get('verified')} | {fmt_num(s.get('trials'))} | "
                         f"{fmt_num(s.get('trial_steps'))} | {fmt_num(s.get('search_seconds'))} | "
                         f"{fmt_num(s.get('process_seconds'))} | {fmt_num(s.get('recommended_batch'))} | "
                         f"{fmt_num(s.get('throughput_batch'))} |")
            L.append("")
        if R.get("peaks"):
            L.append("## c. Peak allocated: saturate probe vs PyTorch `torch.cuda.max_memory_allocated`")
            L.append("")
            L.append("Same TorchScript file, weights, batch, Adam (lr 1e-3), cross-entropy; 1 warm-up + 1 timed step, "
                     "peak reset before the batch is made (parameters included on both sides). The probe runs one "
                     "micro-batch (no `--global-batch`), so no split. LibTorch's Adam updates parameter by parameter; "
                     "PyTorch's default on CUDA is the foreach (multi-tensor) Adam, whose temporaries can set the peak "
                     "at small batches: both are shown.")
            L.append("")
            L.append("| model | params | batch | saturate peak alloc | saturate peak reserved | peak phase | torch variant | "
                     "torch peak alloc | torch peak reserved | saturate / torch |")
            L.append("|---|---:|---:|---:|---:|---|---|---:|---:|---:|")
            for k, p in R["peaks"].items():
                s = p.get("saturate") or {}
                variants = p.get("torch") if isinstance(p.get("torch"), list) else [{"variant": str(p.get("torch"))}]
                for v in variants:
                    ta = v.get("peak_allocated_bytes")
                    sa = s.get("peak_allocated_bytes")
                    ratio = f"{sa / ta:.3f}" if sa and ta else "n/a"
                    L.append(f"| {k} | {fmt_num(p.get('parameters'))} | {p['batch']} | {fmt_bytes(sa)} | "
                             f"{fmt_bytes(s.get('peak_reserved_bytes'))} | {s.get('peak_phase') or s.get('status')} | "
                             f"{v.get('variant')} | {fmt_bytes(ta)} | {fmt_bytes(v.get('peak_reserved_bytes'))} | {ratio} |")
            L.append("")
        if R.get("plans"):
            L.append("## d. `--plan-for` predicted on the CPU vs the max measured in b")
            L.append("")
            if self.cuda:
                L.append("The plan is asked for the budget + 512 MiB, because it takes its stated 512 MiB CUDA context off "
                         "the card while `--memory-budget` on CUDA limits the caching allocator alone (its memory "
                         "fraction): both then give the allocator the same bytes. Recorded on the CPU at batches 4 and "
                         "8 (`--threads 4`, overlapping the GPU searches).")
            else:
                L.append("CPU rehearsal: `--plan-allocator exact` against the CPU budget (no context).")
            L.append("")
            L.append("| model | --plan-for | allocator | predicted max | measured max | error | predicted recommended | "
                     "measured recommended | predicted max peak | plan s |")
            L.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
            for k, p in R["plans"].items():
                err = p.get("error")
                L.append(f"| {k} | {p['target']} | {p.get('allocator')} | {fmt_num(p.get('predicted_max_batch'))} | "
                         f"{fmt_num(p.get('measured_max_batch'))} | {pct(err, signed=True)} | "
                         f"{fmt_num(p.get('predicted_recommended_batch'))} | {fmt_num(p.get('measured_recommended_batch'))} | "
                         f"{fmt_bytes(p.get('predicted_max_peak_bytes'))} | {fmt_num(p.get('plan_seconds'))} |")
            L.append("")
        u = R.get("util")
        if u:
            L.append("## e. NVML (saturate monitor --log) vs nvidia-smi at the same moments")
            L.append("")
            L.append("saturate monitor samples at 5 Hz while `saturate train` (f) runs; `nvidia-smi -lms 200` polls "
                     "alongside. The monitor's clock is put on the wall clock by the time each CSV row was first seen "
                     "(the file is flushed per sample, read every 20 ms); each NVML sample is paired with the "
                     "nvidia-smi sample nearest in time (within 150 ms).")
            L.append("")
            L.append("| monitor samples | nvidia-smi samples | matched | mean abs Δ util (points) | max abs Δ | within 5 points | "
                     "mean util NVML | mean util nvidia-smi | mean abs Δ memory used |")
            L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            L.append(f"| {u.get('monitor_samples')} | {fmt_num(u.get('smi_samples'))} | {len(u.get('pairs') or [])} | "
                     f"{fmt_num(u.get('mean_abs_util_diff'), 2)} | {fmt_num(u.get('max_abs_util_diff'), 0)} | "
                     f"{pct(u.get('share_within_5'), 0)} | "
                     f"{fmt_num(u.get('mean_util_nvml'))} | {fmt_num(u.get('mean_util_smi'))} | "
                     f"{fmt_num(u.get('mean_abs_mem_diff_mib'), 0)} MiB |")
            L.append("")
        t = R.get("train")
        if t:
            c = t["config"]
            L.append(f"## f. Training samples/s, {c['model']} {'x'.join(map(str, c['input']))}, batch {c['batch']}, "
                     "fp32, Adam, synthetic data")
            L.append("")
            L.append("saturate's resnet18/50 are torchvision's architectures (parameter counts below). `saturate train` "
                     "reads synthetic samples through its loader (CPU workers, host-to-device copy) and reads the loss "
                     "back every step; `saturate probe` makes the batch on the device once, as the PyTorch loops do "
                     "(no `.item()`). cuDNN/TF32 settings are PyTorch's defaults on both sides.")
            L.append("")
            L.append("| runner | samples/s | ms/step | steps | parameters | note |")
            L.append("|---|---:|---:|---:|---:|---|")
            st = t.get("saturate_train") or {}
            ph = st.get("phases_ms") or {}
            ms = c["batch"] / st["samples_per_s"] * 1e3 if st.get("samples_per_s") else None
            L.append(f"| saturate train | {fmt_num(st.get('samples_per_s'))} | {fmt_num(ms)} | {c['train_steps']} | "
                     f"{fmt_num(st.get('parameters'))} | {st.get('status')}; data_wait {fmt_num(ph.get('data_wait'))} ms, "
                     f"h2d {fmt_num(ph.get('h2d'))} ms per step; verdict {st.get('bottleneck')} |")
            sp = t.get("saturate_probe") or {}
            L.append(f"| saturate probe | {fmt_num(sp.get('samples_per_s'))} | {fmt_num(sp.get('step_time_ms'))} | "
                     f"{c['probe_steps']} (median) | | {sp.get('status')} |")
            spf = t.get("saturate_probe_fast")
            if spf:
                L.append(f"| saturate probe --fast-paths {spf['fast_paths']} | {fmt_num(spf.get('samples_per_s'))} | "
                         f"{fmt_num(spf.get('step_time_ms'))} | {c['probe_steps']} (median) | | {spf.get('status')}; "
                         "the switches b's search kept |")
            for label, w in (t.get("torch") or {}).items():
                note = w.get("status") or f"warm-up {fmt_num(w.get('warmup_s'))} s"
                L.append(f"| {label} | {fmt_num(w.get('samples_per_s'))} | {fmt_num(w.get('step_ms'))} | "
                         f"{fmt_num(w.get('steps'))} | {fmt_num(w.get('parameters'))} | {note} |")
            L.append("")
        m = R.get("mfu")
        if m:
            g = m.get("gemm") or {}
            L.append("## g. FLOPs and MFU")
            L.append("")
            L.append(f"Measured GEMM peak ({g.get('n')}³): fp32 {fmt_rate(g.get('fp32_flops_per_s'))}, "
                     f"tf32 {fmt_rate(g.get('tf32_flops_per_s'))}, bf16 {fmt_rate(g.get('bf16_flops_per_s'))}. "
                     "Rows 'computed here' multiply the eager model's counted FLOPs per sample by each runner's "
                     "samples/s; saturate's own rows read its JSON (n/a where this binary has no such field).")
            L.append("")
            L.append("| source | FLOPs/sample | counted by | achieved FLOP/s | peak FLOP/s | peak from | MFU | MFU vs TF32 peak |")
            L.append("|---|---:|---|---:|---:|---|---:|---:|")
            for r in m["rows"]:
                L.append(f"| {r['source']} | {fmt_flops(r.get('flops_per_sample'))} | {r.get('method') or 'n/a'} | "
                         f"{fmt_rate(r.get('achieved'))} | {fmt_rate(r.get('peak'))} | {r.get('peak_method') or 'n/a'} | "
                         f"{pct(r.get('mfu'))} | "
                         f"{pct(r.get('mfu_tf32'), none='')} |")
            L.append("")
        fast = [(k, v.get("fast_paths")) for k, v in (R.get("search") or {}).items() if v.get("fast_paths")]
        if fast or "mfu" in R:
            L.append("### Fast paths tried by b's searches (`--fast-paths try`, at the recommended batch)")
            L.append("")
            if not fast:
                L.append("n/a: this binary's search JSON has no `fast_paths`.")
                L.append("")
            for key, fp in fast:
                tried = fp.get("tried") if isinstance(fp, dict) else fp
                if isinstance(fp, dict):
                    L.append(f"{key}: chosen `{fp.get('chosen')}` at batch {fp.get('batch')} "
                             f"({fmt_num(fp.get('baseline_ms'), 2)} -> {fmt_num(fp.get('chosen_ms'), 2)} ms/step)"
                             f"{'; ' + fp['reason'] if fp.get('reason') else ''}")
                    L.append("")
                if tried:
                    L.append("| switch | kept | baseline ms | with ms | gain | note |")
                    L.append("|---|---|---:|---:|---:|---|")
                    for t in tried:
                        L.append(f"| {t.get('name')} | {t.get('kept')} | {fmt_num(t.get('baseline_ms'), 2)} | "
                                 f"{fmt_num(t.get('with_ms'), 2)} | {pct(t.get('gain'), signed=True)} | "
                                 f"{t.get('note') or ''} |")
                    L.append("")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "worker":
        worker_main(sys.argv[2])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--saturate", help="the saturate binary")
    ap.add_argument("--tests", help="the saturate_tests binary")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (a rehearsal)")
    ap.add_argument("--quick", action="store_true", help="small models and budgets (the CPU rehearsal)")
    ap.add_argument("--dry-run", action="store_true", help="print each step's command, run nothing")
    ap.add_argument("--deadline", type=float, default=560, help="seconds for all checks (default 560)")
    ap.add_argument("--ld-library-path", default="", help="prepended to LD_LIBRARY_PATH for saturate's binaries")
    ap.add_argument("--only", help="comma-separated subset of a,b,c,d,e,f,g")
    ap.add_argument("--results", help="the table (default bench/results/gpu.md; gpu_rehearsal_cpu.md on cpu)")
    ap.add_argument("--setup-note", default="", help="how the binaries were obtained (from gpu_check.sh)")
    ap.add_argument("--setup-log", default="", help="gpu_check.sh's log, appended to gpu_logs.txt")
    args = ap.parse_args()
    if args.device == "cpu" and not args.quick and not args.dry_run:
        print("gpu-check: note: --device cpu without --quick runs the full-size models on the CPU (slow)",
              file=sys.stderr)
    for name in ("saturate", "tests"):
        p = getattr(args, name)
        if p:
            setattr(args, name, os.path.abspath(p))
    chk = Check(args)
    if args.dry_run:
        print(f"# gpu-check dry run: device {args.device}{' quick' if args.quick else ''}, deadline {args.deadline:.0f} s; "
              f"results to {os.path.relpath(chk.md_path, ROOT)} (and $OUT)")
        print(f"# LD_LIBRARY_PATH for saturate: {args.ld_library_path or '(unchanged)'}")
    try:
        chk.run()
    except KeyboardInterrupt:
        chk.write()
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
