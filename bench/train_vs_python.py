#!/usr/bin/env python3
"""`saturate train` against the equivalent PyTorch Python loop on the CPU, with equal resources
and both sides profiled, so that the gap is explained rather than only measured.

Equal resources: one intra-op thread on both sides and no loader thread on either (saturate
`--workers 0` assembles each batch in the training thread; Python indexes a tensor in memory).
The same model (mlp / convnet), batch, optimizer (Adam, lr 1e-3), data (Fashion-MNIST).

Three sides, alternated in every round (so drifting load hits all alike), each a fresh process:
  python          the plain loop
  python+malloc   the same loop with glibc's malloc told to keep freed memory
                  (MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ set: no trimming of the heap
                  top, no mmap per large tensor) -- what any Python user can set
  saturate        `saturate train`
  saturate+malloc the same with the same malloc settings

Per side and round: samples/s from the first step to the last (in-process on both sides), and
per step: user and system CPU ms and minor page faults, from the children's rusage of a long run
minus a short one (start-up cancels). Once per side: the brk/mmap/munmap system calls per step
(strace -c, long minus short), and an operator profile (torch.profiler's key_averages in Python;
`saturate train --profile-ops`, LibTorch's profiler, in C++) with self time per op per step.

usage: bench/train_vs_python.py --saturate build/saturate [--rounds 3] [--models mlp,convnet]
                                [--out bench/results/train_cpu.md]
"""
import argparse, gzip, json, os, resource, shutil, statistics, subprocess, sys, tempfile, time

import numpy as np

MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
BATCH = {"mlp": 128, "convnet": 64}
STEPS = {"mlp": (20, 120), "convnet": (5, 25)}  # short and long run


def fashion_mnist():
    d = "/usr/share/datasets/fashion-mnist"
    import torch
    with gzip.open(f"{d}/train-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read()[16:], dtype=np.uint8).reshape(-1, 1, 28, 28)
    with gzip.open(f"{d}/train-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read()[8:], dtype=np.uint8)
    x = (torch.from_numpy(x.copy()).float() / 255.0 - 0.5) / 0.5  # saturate's default normalisation
    return x, torch.from_numpy(y.copy()).long()


def convnet(nn):
    def block(i, o, pool):
        layers = [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
        return layers + ([nn.MaxPool2d(2)] if pool else [])
    return nn.Sequential(*block(1, 32, False), *block(32, 64, True), *block(64, 128, True),
                         nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128 * 16, 10))


def mlp(nn):
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def python_child(model_name, batch, steps, profile_path):
    """The Python loop, in its own process (as saturate runs in its own)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.set_num_threads(1)
    x, y = fashion_mnist()
    torch.manual_seed(0)
    m = convnet(nn) if model_name == "convnet" else mlp(nn)
    m.train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    perm = torch.randperm(x.shape[0])

    def step(i):
        idx = perm[(i * batch) % (x.shape[0] - batch):][:batch]
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(x[idx]), y[idx]).backward()
        opt.step()

    if profile_path:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            for i in range(steps):
                step(i)
            wall = time.perf_counter() - t0
        ops = [{"name": e.key, "calls": e.count, "self_ms": e.self_cpu_time_total / 1000.0}
               for e in prof.key_averages()]
        ops.sort(key=lambda o: -o["self_ms"])
        with open(profile_path, "w") as f:
            json.dump({"steps": steps, "wall_ms": wall * 1000, "ops": ops}, f)
        return {"samples_per_s": steps * batch / wall}
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    return {"samples_per_s": steps * batch / (time.perf_counter() - t0), "threads": torch.get_num_threads()}


def command(side, exe, model_name, steps, extra=()):
    if side.startswith("saturate"):
        return [exe, "train", "--model", model_name, "--data", "fashion-mnist", "--device", "cpu",
                "--batch", str(BATCH[model_name]), "--steps", str(steps), "--optimizer", "adam", "--lr", "0.001",
                "--workers", "0", "--no-augment", "--threads", "1", "--json", "-", "-q", *extra]
    return [sys.executable, os.path.abspath(__file__), "--child", model_name, "--batch", str(BATCH[model_name]),
            "--steps", str(steps), *extra]


def environment(side):
    env = dict(os.environ)
    for k in MALLOC_ENV:
        env.pop(k, None)
    if side.endswith("+malloc"):
        env.update(MALLOC_ENV)
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_child(side, exe, model_name, steps, extra=()):
    """(samples/s, rusage of the child: user s, sys s, minor faults)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(command(side, exe, model_name, steps, extra), capture_output=True, text=True,
                         env=environment(side))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(out.stderr)
    sps = json.loads(out.stdout)["samples_per_s"]
    return sps, (after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime,
                 after.ru_minflt - before.ru_minflt)


def measure(side, exe, model_name):
    short, long_ = STEPS[model_name]
    _, r_short = run_child(side, exe, model_name, short)
    sps, r_long = run_child(side, exe, model_name, long_)
    n = long_ - short
    return {"samples_per_s": sps, "user_ms": 1000 * (r_long[0] - r_short[0]) / n,
            "sys_ms": 1000 * (r_long[1] - r_short[1]) / n, "minflt": (r_long[2] - r_short[2]) / n}


def syscalls(side, exe, model_name):
    """brk, mmap and munmap calls per step (strace -c of a long run minus a short one)."""
    if not shutil.which("strace"):
        return None
    counts = []
    for steps in STEPS[model_name]:
        with tempfile.NamedTemporaryFile("r", suffix=".strace") as f:
            subprocess.run(["strace", "-f", "-c", "-e", "trace=brk,mmap,munmap", "-o", f.name]
                           + command(side, exe, model_name, steps), capture_output=True, env=environment(side))
            c = {}
            for line in f.read().splitlines():
                parts = line.split()
                if parts and parts[-1] in ("brk", "mmap", "munmap"):
                    c[parts[-1]] = int(parts[3] if len(parts) >= 6 else parts[3])
            counts.append(c)
    n = STEPS[model_name][1] - STEPS[model_name][0]
    return {k: (counts[1].get(k, 0) - counts[0].get(k, 0)) / n for k in ("brk", "mmap", "munmap")}


def profile(side, exe, model_name, steps=10):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ops.json")
        run_child(side, exe, model_name, steps, ["--profile-ops" if side.startswith("saturate") else "--profile", path])
        with open(path) as f:
            prof = json.load(f)
    ops = {o["name"]: (o["calls"] / steps, o["self_ms"] / steps) for o in prof["ops"]}
    return {"ops": ops, "self_ms_per_step": sum(v[1] for v in ops.values()), "wall_ms_per_step": prof["wall_ms"] / steps}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", default="build/saturate")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="mlp,convnet")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--child", default="")
    ap.add_argument("--profile", default="")
    ap.add_argument("--out", default="bench/results/train_cpu.md")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(python_child(a.child, a.batch, a.steps, a.profile)))
        return
    sides = ["python", "python+malloc", "saturate", "saturate+malloc"]
    lines = [f"`python3 bench/train_vs_python.py --rounds {a.rounds} --models {a.models}` "
             f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores; one thread and no "
             "loader thread on every side)", ""]
    for model_name in a.models.split(","):
        rows = {s: [] for s in sides}
        for r in range(a.rounds):
            order = sides if r % 2 == 0 else list(reversed(sides))
            load = os.getloadavg()[0]
            for s in order:
                m = measure(s, a.saturate, model_name)
                m["load"] = load
                rows[s].append(m)
                print(f"{model_name} round {r + 1} {s}: {m}", file=sys.stderr, flush=True)
        lines += [f"### {model_name}, batch {BATCH[model_name]}, Adam", "",
                  "| side | round | samples/s | vs python | user CPU ms/step | system CPU ms/step | minor faults/step "
                  "| load (1 min) |", "|---|---|---|---|---|---|---|---|"]
        for r in range(a.rounds):
            py = rows["python"][r]["samples_per_s"]
            for s in sides:
                m = rows[s][r]
                lines.append(f"| {s} | {r + 1} | {m['samples_per_s']:.0f} | {m['samples_per_s'] / py:.2f} | "
                             f"{m['user_ms']:.1f} | {m['sys_ms']:.1f} | {m['minflt']:.0f} | {m['load']:.1f} |")
        lines.append("")
        for s in sides[1:]:
            ratios = [rows[s][r]["samples_per_s"] / rows["python"][r]["samples_per_s"] for r in range(a.rounds)]
            lines.append(f"- {s} / python: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, "
                         f"max {max(ratios):.2f}, {a.rounds} rounds)")
        for num in ("saturate", "saturate+malloc"):
            sat = [rows[num][r]["samples_per_s"] / rows["python+malloc"][r]["samples_per_s"] for r in range(a.rounds)]
            lines.append(f"- {num} / python+malloc: median {statistics.median(sat):.2f} (min {min(sat):.2f}, "
                         f"max {max(sat):.2f})")
        lines.append("")
        sc = {s: syscalls(s, a.saturate, model_name) for s in sides}
        if all(sc.values()):
            lines += ["| side | brk calls/step | mmap calls/step | munmap calls/step |", "|---|---|---|---|"]
            lines += [f"| {s} | {sc[s]['brk']:.1f} | {sc[s]['mmap']:.1f} | {sc[s]['munmap']:.1f} |" for s in sides]
            lines.append("")
        prof = {s: profile(s, a.saturate, model_name) for s in ("python+malloc", "saturate")}
        names = sorted(set(prof["python+malloc"]["ops"]) | set(prof["saturate"]["ops"]),
                       key=lambda n: -max(prof["python+malloc"]["ops"].get(n, (0, 0))[1],
                                          prof["saturate"]["ops"].get(n, (0, 0))[1]))
        lines += [f"Operator profile, 10 steps (profiler on; python+malloc vs saturate): self ms per step, "
                  f"total {prof['python+malloc']['self_ms_per_step']:.1f} vs {prof['saturate']['self_ms_per_step']:.1f}; "
                  f"wall ms per step {prof['python+malloc']['wall_ms_per_step']:.1f} vs "
                  f"{prof['saturate']['wall_ms_per_step']:.1f}", "",
                  "| op | python calls/step | python self ms/step | saturate calls/step | saturate self ms/step |",
                  "|---|---|---|---|---|"]
        for n in names[:14]:
            p = prof["python+malloc"]["ops"].get(n, (0, 0))
            c = prof["saturate"]["ops"].get(n, (0, 0))
            lines.append(f"| {n} | {p[0]:.1f} | {p[1]:.2f} | {c[0]:.1f} | {c[1]:.2f} |")
        lines.append("")
    text = "\n".join(lines) + "\n"
    if a.out != "-":
        with open(a.out + ".new", "w") as f:
            f.write(text)
        os.replace(a.out + ".new", a.out)
    print(text)


if __name__ == "__main__":
    main()
