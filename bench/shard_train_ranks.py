#!/usr/bin/env python3
"""A model whose replicated training does not fit a rank, trained under saturate.shard_plan's choice
on 2 and on 4 Gloo ranks (issue 42's first "done when"; the 4-rank run is too slow for `make test`,
whose python/tests/test_shard_plan.py runs the 2-rank case).

For each world size: the plan (transformers GPT-2 from a config, rank 0 160 MiB, the others 116 MiB,
global batch 16), 10 steps under it compared with one unsharded process on the same global batches
(float64: equal to rounding; float32 recorded beside) and with one unsharded process accumulating the
same micro-batches (the ranks' matmul shapes: float64 to rounding; float32 bit for bit on 2 ranks,
1.0-1.3e-5 on 4, where Gloo's ring sums each chunk of the gradients in another order), and the
plan's micro-batch rerun in fresh
processes per rank with the plain step (it fits on every rank), and its max + 1 when the max was
not capped by the global batch (it runs out on some rank); then 4 ranks again without a global
batch (fsdp alone), so that the max is searched to its end.

    python3 bench/shard_train_ranks.py [--out bench/results/shard_train_ranks_cpu.md]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "python", "tests", "shard_plan_lm.py")
B0, B1 = 160 << 20, 116 << 20


def torchrun(world, *args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                           str(world), WORKER, *map(str, args)], capture_output=True, text=True, timeout=3600, env=env)


def fresh(world, out, strategy, ckpt, batch):
    for r in range(world):
        if os.path.exists(os.path.join(out, f"fresh{r}.txt")):
            os.remove(os.path.join(out, f"fresh{r}.txt"))
    torchrun(world, "fresh", out, B0, B1, 60, strategy, int(ckpt), batch)
    results = []
    for r in range(world):
        path = os.path.join(out, f"fresh{r}.txt")
        results.append(open(path).read() if os.path.exists(path) else "none")
    return results


def one_world(world, out, *plan_args):
    started = time.perf_counter()
    run = torchrun(world, "plan", out, B0, B1, 600, *plan_args)
    if run.returncode != 0:
        sys.exit(f"the {world}-rank plan failed:\n{run.stderr[-4000:]}")
    seconds = time.perf_counter() - started
    plan = json.load(open(os.path.join(out, "plan0.json")))
    trained = json.load(open(os.path.join(out, "train.json")))
    p = plan["plan"]
    chosen = next(c for c in p["candidates"] if (c["strategy"], c["checkpointing"]) == (p["strategy"], p["checkpointing"]))
    p["capped"] = chosen["capped"]
    at_micro = fresh(world, out, p["strategy"], p["checkpointing"], p["micro_batch"])
    above = fresh(world, out, p["strategy"], p["checkpointing"], p["max_batch"] + 1) if not p["capped"] else None
    return {"world": world, "seconds": seconds, "plan": p, "text": plan["text"], "trained": trained,
            "fresh_micro": at_micro, "fresh_above": above}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "shard_train_ranks_cpu.md"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [one_world(2, tmp, 16), one_world(4, tmp, 16)]
        # uncapped (no global batch), fsdp alone: the max itself is exact on 4 ranks
        rows.append(one_world(4, tmp, 0, "fsdp", 0))
    lines = [f"# Trained under the shard plan on 2 and 4 ranks (bench/shard_train_ranks.py, {time.strftime('%Y-%m-%d')})",
             "", f"transformers GPT-2 from a config (7.9 M weights, AdamW: 120.5 MiB of model states), rank 0 160 MiB, "
             f"the others 116 MiB of CPU budget, Gloo, global batch 16, {os.cpu_count()} cores "
             f"({platform.processor() or 'cpu'}).", "",
             "| ranks | chosen (global batch) | micro x accumulation x ranks | max (exact / capped) | fresh at the micro-batch | "
             "fresh at max + 1 | 10 steps vs one process, one backward a global batch: float64 / float32 (weights moved) | "
             "vs one process accumulating the same micro-batches: float64 / float32 | "
             "one process against itself (one backward vs the micro-batches accumulated): float64 / float32 | "
             "plan + training s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    ok = True
    for r in rows:
        p, t = r["plan"], r["trained"]
        f64, f32 = t["torch.float64"], t["torch.float32"]
        above = ", ".join(r["fresh_above"]) if r["fresh_above"] else "capped by the global batch"
        ok = ok and all(x == "ok" for x in r["fresh_micro"]) and f64["max_abs_diff"] < 1e-9
        # accumulated: float64 to rounding everywhere; float32 bit for bit on 2 ranks (Gloo sums two
        # gradients, then halves: exact), on 4 its ring sums each chunk in another order (recorded)
        ok = ok and f64["max_abs_diff_accumulated"] < 1e-9 and (r["world"] > 2 or f32["max_abs_diff_accumulated"] < 1e-5)
        ok = ok and (r["fresh_above"] is None or "oom" in r["fresh_above"]) and f64["stepped"] == f64["weights"]
        lines.append(f"| {r['world']} | {p['strategy']}{' + checkpointing' if p['checkpointing'] else ''} "
                     f"({p['global_batch'] if p['capped'] else 'none given'}) | "
                     f"{p['micro_batch']} x {p['accumulation']} x {r['world']} = {p['global_batch']} | {p['max_batch']} "
                     f"({'exact' if p['max_batch_exact'] else 'not exact'}{', capped' if p['capped'] else ''}) | "
                     f"{', '.join(r['fresh_micro'])} | {above} | {f64['max_abs_diff']:.1e} / {f32['max_abs_diff']:.1e} "
                     f"({f32['moved']:.1e}); {f64['stepped']} of {f64['weights']} weights stepped | "
                     f"{f64['max_abs_diff_accumulated']:.1e} / {f32['max_abs_diff_accumulated']:.1e} | "
                     f"{f64['reference_rounding']:.1e} / {f32['reference_rounding']:.1e} | {r['seconds']:.0f} |")
    lines += ["", f"Every check held: {ok}.", ""]
    for r in rows:
        lines += [f"The {r['world']}-rank plan:", "", "```", r["text"], "```", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
