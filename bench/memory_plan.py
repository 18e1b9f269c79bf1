#!/usr/bin/env python3
"""Prediction error of `saturate search --plan-for` against measurement, on CPU budgets.

For each (model, budget): predict the largest batch for the budget from two small recorded
batches (`--plan-for BUDGET --plan-allocator exact --plan-only`), then measure: the exact
largest batch with `saturate search` under that budget, and the peak of a probe at the
predicted batch under it. Writes a markdown table (bench/results/memory_plan.md by default).

    python3 bench/memory_plan.py --binary build/saturate [--out FILE] [--quick]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

CASES = [
    # name, model flags, budget
    ("mlp", ["--model", "mlp"], "256MiB"),
    ("mlp 256 wide", ["--model", "mlp", "--width", "256"], "64MiB"),
    ("convnet", ["--model", "convnet"], "256MiB"),
    ("resnet18 3x64x64", ["--model", "resnet18", "--input", "3x64x64", "--classes", "10"], "256MiB"),
    ("gpt 2x128", ["--model", "gpt", "--layers", "2", "--width", "128", "--heads", "4", "--seq-len", "64",
                   "--vocab", "512"], "256MiB"),
]
QUICK = CASES[:1] + CASES[2:3]


def run_json(cmd):
    out = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if out.returncode not in (0,):
        sys.stderr.write(out.stderr)
        raise SystemExit(f"failed ({out.returncode}): {' '.join(cmd)}")
    return json.loads(out.stdout)


def mib(b):
    return b / 2**20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/saturate")
    ap.add_argument("--out", default="bench/results/memory_plan.md")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--plan-batches", default="4,8")
    args = ap.parse_args()
    sat = args.binary
    rows = []
    for name, flags, budget in (QUICK if args.quick else CASES):
        t0 = time.time()
        plan = run_json([sat, "search", *flags, "--device", "cpu", "--memory-budget", budget, "--plan-for", budget,
                         "--plan-allocator", "exact", "--plan-only", "--plan-batches", args.plan_batches,
                         "--target-memory", "1", "--json", "-"])["plan"]
        t_plan = time.time() - t0
        t0 = time.time()
        search = run_json([sat, "search", *flags, "--device", "cpu", "--memory-budget", budget, "-q", "--json", "-"])
        t_search = time.time() - t0
        pred = plan["max_batch"]
        probe = run_json([sat, "probe", *flags, "--device", "cpu", "--memory-budget", budget, "--batch", str(pred),
                          "--warmup", "1", "--timed-steps", "1", "--json", "-"])
        measured_max = search["max_batch"]
        status = probe["status"]
        peak = probe["peak_allocated_bytes"]
        pred_peak = plan["predicted_max_peak_bytes"]
        rows.append(dict(name=name, budget=budget, pred=pred, meas=measured_max,
                         batch_err=100.0 * (pred - measured_max) / measured_max,
                         status=status, pred_peak=pred_peak, peak=peak,
                         peak_err=100.0 * (pred_peak - peak) / peak if status == "ok" else float("nan"),
                         t_plan=t_plan, t_search=t_search))
        r = rows[-1]
        print(f"{name:18} {budget:>7} predicted {pred:>6} measured {measured_max:>6} ({r['batch_err']:+.2f} %), "
              f"peak at predicted {status} {mib(peak):.1f} MiB vs {mib(pred_peak):.1f} MiB ({r['peak_err']:+.2f} %)",
              file=sys.stderr)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [
        "# `--plan-for` prediction error on CPU budgets",
        "",
        f"Machine: {platform.node()} ({os.cpu_count()} cores), commit {commit}, "
        f"`python3 bench/memory_plan.py --binary {args.binary}`. Recorded batches {args.plan_batches}; "
        "allocator model `exact` (the CPU budget: no cache, no rounding).",
        "",
        "| model | budget | predicted max batch | measured max batch | batch error | run at predicted | "
        "predicted peak | measured peak | peak error | plan s | search s |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['name']} | {r['budget']} | {r['pred']} | {r['meas']} | {r['batch_err']:+.2f} % | "
                     f"{r['status']} | {mib(r['pred_peak']):.2f} MiB | {mib(r['peak']):.2f} MiB | "
                     f"{r['peak_err']:+.2f} % | {r['t_plan']:.1f} | {r['t_search']:.1f} |")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
