#!/usr/bin/env python3
"""Why TorchScript trials reported seconds per step (issue 10): the time of each of the first
steps at a new batch size, with LibTorch's default graph executor (SATURATE_TORCHSCRIPT_OPTIMIZE=1:
profile the first run, compile an optimised plan in the second) and with saturate's setting
(optimizer off: one plan, eager autograd). Step times come from the monitor's trace (--trace).

  fresh process: `saturate probe --batch B --warmup 0 --timed-steps 6 --trace` (steps 1..6 of a new process)
  new batch in a running process: `saturate search --trace` (every trial's steps, in search order)

Needs torchvision for the models (pip install torchvision==0.26.0), or give --model FILE.pt.
usage: bench/torchscript_timing.py --saturate build/saturate [--threads 2]
"""
import argparse, json, os, subprocess, sys, tempfile

MODELS = ["mobilenet_v2", "efficientnet_b0"]


def export(name, path):
    code = ("import sys, torch, torchvision\ntorch.manual_seed(0)\n"
            f"m = torchvision.models.{name}(num_classes=10).train()\n"
            "torch.jit.script(m).save(sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", code, path], check=True)


def steps_of(trace_path):
    """[(trial name, [step ms, ...]), ...] in time order."""
    events = json.load(open(trace_path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    trials = sorted((e for e in events if e.get("cat") == "trial"), key=lambda e: e["ts"])
    steps = sorted((e for e in events if e.get("cat") == "step"), key=lambda e: e["ts"])
    out = []
    for t in trials:
        inside = [s["dur"] / 1000.0 for s in steps if t["ts"] <= s["ts"] <= t["ts"] + t["dur"]]
        out.append((t["name"], inside))
    return out


def run(saturate, args, optimize, trace):
    env = dict(os.environ)
    if optimize:
        env["SATURATE_TORCHSCRIPT_OPTIMIZE"] = "1"
    else:
        env.pop("SATURATE_TORCHSCRIPT_OPTIMIZE", None)
    out = subprocess.run([saturate] + args + ["--trace", trace, "--json", "-"], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"saturate {' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", default="build/saturate")
    ap.add_argument("--dir", default="/tmp/saturate_torchscript_exact")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--budget", default="1GiB")
    ap.add_argument("--threads", default="")
    ap.add_argument("--search", action="store_true", help="also trace a whole search per setting")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    tmp = tempfile.mkdtemp()
    for name in MODELS:
        path = os.path.join(a.dir, name + ".pt")
        if not os.path.exists(path):
            export(name, path)
        common = ["--model", path, "--input", "3x64x64", "--classes", "10", "--optimizer", "adam", "--device", "cpu",
                  "--memory-budget", a.budget]
        if a.threads:
            common += ["--threads", a.threads]
        for optimize in (True, False):
            label = "default executor (optimize on)" if optimize else "saturate (optimize off)"
            trace = os.path.join(tmp, "probe.json")
            j = run(a.saturate, ["probe"] + common + ["--batch", str(a.batch), "--warmup", "0", "--timed-steps", "6"],
                    optimize, trace)
            for trial, ms in steps_of(trace):
                print(f"| {name} | {label} | fresh process, {trial} | " + " | ".join(f"{v:.0f}" for v in ms) +
                      f" | median {j['step_time_ms']:.0f} |", flush=True)
            if a.search:
                trace = os.path.join(tmp, "search.json")
                s = run(a.saturate, ["search"] + common + ["-q"], optimize, trace)
                for trial, ms in steps_of(trace):
                    print(f"| {name} | {label} | search, {trial} | " + " | ".join(f"{v:.0f}" for v in ms) + " |",
                          flush=True)
                print(f"| {name} | {label} | search: max {s['max_batch']}, {len(s['trials'])} trials, "
                      f"{s.get('search_seconds', 0):.0f} s |", flush=True)


if __name__ == "__main__":
    main()
