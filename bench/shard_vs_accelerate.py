#!/usr/bin/env python3
"""Side by side on a model sharded with FSDP2 (issue 42): Accelerate's find_executable_batch_size,
saturate.search and saturate.shard_plan, on the same step (python/tests/shard_lm.py: 4 TransformerEncoderLayer blocks
+ root under fully_shard, AdamW), 2 Gloo ranks of unequal CPU budgets, collective timeout 60 s.

For each: every rank's answer, the batches tried, seconds; then fresh processes check whether each
answer fits on every rank (3 plain steps). shard_plan wraps the model itself: once as the user did
(fsdp without checkpointing; checked in fresh processes wrapped as the plan wraps: it reshards the
root after forward too, where fully_shard's default keeps the root's weights gathered), once choosing among all strategies
(its table of candidates follows, with the trials each took to its exact max).

    python3 bench/shard_vs_accelerate.py [--out bench/results/shard_vs_accelerate_cpu.md]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "python", "tests", "shard_lm.py")
B0, B1 = 72 << 20, 52 << 20


def torchrun(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          WORKER, *map(str, args)], capture_output=True, text=True, timeout=900, env=env)
    return out, time.perf_counter() - started


def fresh(tmp, batch, *wrapping):
    """Each rank's result of 3 plain steps at `batch`: the model wrapped as the user did, or as
    shard_plan wraps it (`wrapping`: strategy, checkpointing 0/1)."""
    for r in (0, 1):
        if os.path.exists(os.path.join(tmp, f"fresh{r}.txt")):
            os.unlink(os.path.join(tmp, f"fresh{r}.txt"))
    torchrun("fresh", tmp, B0, B1, 30, batch, 3, *wrapping)
    return [open(os.path.join(tmp, f"fresh{r}.txt")).read() if os.path.exists(os.path.join(tmp, f"fresh{r}.txt"))
            else "none" for r in (0, 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "shard_vs_accelerate_cpu.md"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        _, acc_s = torchrun("accelerate", tmp, B0, B1, 60, 128)
        acc = [json.load(open(os.path.join(tmp, f"accelerate{r}.json"))) for r in (0, 1)]
        _, sat_s = torchrun("search", tmp, B0, B1, 60)
        sat = [json.load(open(os.path.join(tmp, f"rank{r}.json"))) for r in (0, 1)]
        for name, answers, tried, seconds, whole in (
                ("Accelerate find_executable_batch_size (start 128)", [a["answer"] for a in acc],
                 [len(a["tried"]) for a in acc], [a["seconds"] for a in acc], acc_s),
                ("saturate.search(ranks='auto')", [s["data"]["max_batch"] for s in sat],
                 [len(s["data"]["trials"]) for s in sat], [s["data"].get("search_seconds", 0) for s in sat], sat_s)):
            # each rank's answer; saturate's (the same on every rank) and one more: exact or not
            tries = set(answers) | ({answers[0] + 1} if name.startswith("saturate") else set())
            checks = {b: fresh(tmp, b) for b in sorted(tries) if b > 0}
            verdict = "; ".join(f"{b}: rank 0 {c[0]}, rank 1 {c[1]}" for b, c in checks.items())
            rows.append(f"| {name} | {answers[0]} / {answers[1]} | {tried[0]} / {tried[1]} | "
                        f"{whole:.1f} s | {verdict} |")
        _, one_s = torchrun("plan", tmp, B0, B1, 60, "fsdp", 0)
        one = [json.load(open(os.path.join(tmp, f"plan{r}.json"))) for r in (0, 1)]
        c = one[0]["plan"]["candidates"][0]
        answers = [p["plan"]["max_batch"] for p in one]
        checks = {b: fresh(tmp, b, "fsdp", 0) for b in sorted({answers[0], answers[0] + 1})}
        verdict = "; ".join(f"{b}: rank 0 {v[0]}, rank 1 {v[1]}" for b, v in checks.items())
        rows.append(f"| saturate.shard_plan(strategies=['fsdp'], checkpointing=False), its own wrapping | {answers[0]} / {answers[1]} "
                    f"({'exact' if c['max_batch_exact'] else 'not exact'}) | {c['trials_to_max']} to the max, "
                    f"{c['trials']} with the micro-batch | {one_s:.1f} s (with timing and breakdown) | {verdict} |")
        _, all_s = torchrun("plan", tmp, B0, B1, 60, "all", "auto")
        whole = json.load(open(os.path.join(tmp, "plan0.json")))
        errors = [a["error"] for a in acc if a["error"]]
    lines = [f"# FSDP2, unequal budgets: Accelerate against saturate (bench/shard_vs_accelerate.py, "
             f"{time.strftime('%Y-%m-%d')})", "",
             f"2 Gloo ranks, rank 0 {B0 >> 20} MiB, rank 1 {B1 >> 20} MiB of CPU budget; collective timeout 60 s; "
             f"{os.cpu_count()} cores.", "",
             "| tool | answer rank 0 / rank 1 | batches tried rank 0 / rank 1 | whole run | fresh processes, 3 steps "
             "at each answer |", "|---|---|---|---|---|", *rows, ""]
    searched = [c for c in whole["plan"]["candidates"] if c["searched"]]
    lines += [f"saturate.shard_plan choosing among every strategy on the same model and budgets ({all_s:.1f} s in "
              f"all; trials: to the exact max, and with the micro-batch's):", "", "    " +
              whole["text"].replace("\n", "\n    "), "",
              f"Trials to the exact max per searched candidate: {', '.join(str(c['trials_to_max']) for c in searched)} "
              f"(at most {max(c['trials_to_max'] for c in searched)}).", ""]
    if errors:
        lines += ["Accelerate's errors: " + "; ".join(errors), ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
