#!/usr/bin/env python3
"""Runs every search strategy on mlp, convnet, resnet18 and a small gpt under a CPU budget and
records trial_steps, search_seconds and the answer against the true max (the exact answer that
binsearch and fit agree on, checked by probing max and max+1 afresh).

usage: bench/search_strategies.py --saturate build/saturate [--out bench/results/search_cpu.md]
"""
import argparse, json, subprocess, sys, time

WORKLOADS = [
    ("mlp", ["--model", "mlp", "--memory-budget", "256MiB"]),
    ("convnet", ["--model", "convnet", "--memory-budget", "512MiB"]),
    ("resnet18", ["--model", "resnet18", "--input", "3x64x64", "--classes", "10", "--memory-budget", "1GiB"]),
    ("gpt", ["--model", "gpt", "--layers", "2", "--width", "128", "--heads", "4", "--seq-len", "64",
             "--vocab", "2048", "--memory-budget", "512MiB"]),
]
STRATEGIES = ["fit", "binsearch", "power"]


def run(saturate, args):
    quiet = ["-q"] if args[0] == "search" else []
    out = subprocess.run([saturate] + args + ["--device", "cpu", "--json", "-"] + quiet,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"saturate {' '.join(args)} failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


def probe_status(saturate, args, batch):
    j = run(saturate, ["probe"] + args + ["--batch", str(batch), "--warmup", "1", "--timed-steps", "1"])
    return j["status"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", default="build/saturate")
    ap.add_argument("--out", default="bench/results/search_cpu.md")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    rows = []
    for name, args in WORKLOADS:
        if a.only and name not in a.only.split(","):
            continue
        results = {}
        for s in STRATEGIES:
            t0 = time.time()
            results[s] = run(a.saturate, ["search"] + args + ["--strategy", s])
            print(f"{name:9s} {s:9s} max {results[s]['max_batch']:6d} steps {results[s]['trial_steps']:4d} "
                  f"{time.time() - t0:6.1f} s", file=sys.stderr, flush=True)
        truth = results["binsearch"]["max_batch"]
        verified = (probe_status(a.saturate, args, truth) == "ok" and
                    probe_status(a.saturate, args, truth + 1) == "oom")
        for s in STRATEGIES:
            r = results[s]
            rows.append((name, s, len(r["trials"]), r["trial_steps"], r["search_seconds"], r["max_batch"], truth,
                         "yes" if r["max_batch"] == truth else "no", r["recommended_batch"], r["throughput_batch"],
                         "yes" if verified else "NO"))
    lines = ["| model | strategy | trials | trial_steps | search_seconds | max_batch | true max | exact | "
             "recommended | throughput | truth verified (max ok, max+1 oom) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in r) + " |")
    ratios = []
    for name, _ in WORKLOADS:
        f = [r for r in rows if r[0] == name and r[1] == "fit"]
        b = [r for r in rows if r[0] == name and r[1] == "binsearch"]
        if f and b:
            ratios.append(f"{name}: fit/binsearch trial steps = {f[0][3]}/{b[0][3]} = {f[0][3] / b[0][3]:.2f}")
    text = "\n".join(lines) + "\n\n" + "\n".join("- " + r for r in ratios) + "\n"
    with open(a.out, "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
