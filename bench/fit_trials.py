#!/usr/bin/env python3
"""How many trials `search --strategy fit` takes on the zoo at two CPU budgets each (issue 26: the
exact max in few trials), and whether its answer is exact: the max and max + 1 probed afresh, each
in its own process (max fits, max + 1 runs out of memory).

usage: bench/fit_trials.py --saturate build/saturate [--out bench/results/fit_trials_cpu.md]
       [--before "9,7,..."]   (the same table's trial counts from an older binary, in order)
"""
import argparse
import json
import statistics
import subprocess
import sys

MODELS = {
    "mlp": ["--model", "mlp"],
    "convnet": ["--model", "convnet"],
    "resnet18": ["--model", "resnet18", "--input", "3x64x64", "--classes", "10"],
    "gpt": ["--model", "gpt", "--layers", "2", "--width", "128", "--heads", "4", "--seq-len", "64", "--vocab", "2048"],
}
# the search bench's budgets (bench/search_strategies.py) and half of each
CASES = [("mlp", "256MiB"), ("convnet", "512MiB"), ("resnet18", "1GiB"), ("gpt", "512MiB"),
         ("mlp", "128MiB"), ("convnet", "256MiB"), ("resnet18", "512MiB"), ("gpt", "256MiB")]


def saturate(binary, args):
    p = subprocess.run([binary] + args + ["--device", "cpu", "--threads", "1", "--json", "-"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        sys.exit(f"saturate {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saturate", default="build/saturate")
    ap.add_argument("--out", default="bench/results/fit_trials_cpu.md")
    ap.add_argument("--before", default="")
    a = ap.parse_args()
    before = [int(x) for x in a.before.split(",")] if a.before else []
    rows, totals, to_max = [], [], []
    for i, (model, budget) in enumerate(CASES):
        args = MODELS[model] + ["--memory-budget", budget]
        j = saturate(a.saturate, ["search"] + args + ["--strategy", "fit", "-q"])
        trials = j["trials"]
        m = j["max_batch"]
        # the trial after which both are known: max ran, max + 1 did not
        first_over = None
        if j["max_batch_exact"]:
            first_over = 1 + max(next(k for k, t in enumerate(trials) if t["batch"] == m and t["status"] == "ok"),
                                 next(k for k, t in enumerate(trials) if t["batch"] == m + 1))
        fits = saturate(a.saturate, ["probe"] + args + ["--batch", str(m), "--warmup", "1", "--timed-steps", "1"])["status"]
        over = saturate(a.saturate, ["probe"] + args + ["--batch", str(m + 1), "--warmup", "1", "--timed-steps", "1"])["status"]
        exact = "yes" if fits == "ok" and over == "oom" else f"NO (max {fits}, max+1 {over})"
        totals.append(len(trials))
        to_max.append(first_over or len(trials))
        rows.append(f"| {model} | {budget} | {len(trials)} | {first_over or '-'} | {j['trial_steps']} | "
                    f"{before[i] if i < len(before) else '-'} | {m} | {exact} | {j['recommended_batch']} | "
                    f"{' '.join(str(t['batch']) + ('' if t['status'] == 'ok' else '!') for t in trials)} |")
        print(rows[-1], file=sys.stderr, flush=True)
    lines = ["| model | budget | trials | to the exact max | trial steps | trials before | max | exact (fresh probes) | "
             "recommended | trials (batch; ! = out of memory / over the target) |",
             "|---|---|---|---|---|---|---|---|---|---|"] + rows
    lines.append("")
    lines.append(f"- median trials: {statistics.median(totals)} (to the exact max: {statistics.median(to_max)})"
                 + (f"; before: {statistics.median(before)}" if before else ""))
    open(a.out, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
