#!/usr/bin/env python3
"""saturate.transformers.find_batch_size against Trainer(auto_find_batch_size=True) (issue 29), on
GPT-2 and BERT built from configs, CPU under a 64 MiB budget, the user's batch 64 a device: each one's
answer, whether it is exact (fresh processes: the trainer's own train() at the answer and one more),
the training steps it started to get there, its seconds, and the effective batch it trains at.

    PYTHONPATH=build/python python3 bench/hf_trainer_vs_auto_find.py [--out bench/results/hf_trainer_cpu.md]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "python", "tests")
sys.path.insert(0, TESTS)

import hf_trainer  # noqa: E402
import saturate  # noqa: E402
from saturate.transformers import find_batch_size  # noqa: E402

BUDGET = 64 << 20
GIVEN = {"gpt2": 64, "bert": 128}  # per device, x 1: above each model's max, so that both finders search


def fresh(name, batch):
    out = subprocess.run([sys.executable, os.path.join(TESTS, "hf_trainer.py"), "fresh", name, str(batch), str(BUDGET)],
                         capture_output=True, text=True, timeout=900)
    return out.stdout.strip().splitlines()[-1] if out.returncode == 0 else "error"


class Steps:
    def __init__(self, model):
        self.n = 0
        model.register_forward_pre_hook(lambda m, a: setattr(self, "n", self.n + 1) if m.training else None)


def ours(name, tmp, use):
    """find_batch_size's row: what it set, whether that is exact in fresh processes, steps, seconds."""
    given = GIVEN[name]
    trainer = hf_trainer.trainer_of(name, os.path.join(tmp, use), batch=given)
    steps = Steps(trainer.model)
    t = time.perf_counter()
    found = find_batch_size(trainer, memory_budget=BUDGET, use=use)
    seconds, n = time.perf_counter() - t, steps.n
    micro, acc = found.per_device_train_batch_size, found.gradient_accumulation_steps
    if use == "max":  # the max fits and the max + 1 does not
        m = found.train.max_batch
        answer = f"max {m}: trains {micro} x {acc}"
        exact = fresh(name, m) == "ok" and fresh(name, m + 1) == "oom"
    else:  # the divisor fits and the next divisor of the effective batch does not
        above = found.seen_not_to_fit
        answer = f"{micro} x {acc} ({above} x {given // above} runs out)"
        exact = fresh(name, micro) == "ok" and fresh(name, above) == "oom"
    row = (f"| {name} | saturate.transformers.find_batch_size(use=\"{use}\") | {answer} | "
           f"{'yes' if exact else 'no'} | {n} | {seconds:.1f} | {micro * acc} (kept) |")
    return row, found


def one(name, tmp):
    given = GIVEN[name]
    divisor_row, _ = ours(name, tmp, "divisor")
    max_row, found = ours(name, tmp, "max")
    m = found.train.max_batch
    theirs = hf_trainer.trainer_of(name, os.path.join(tmp, "theirs"), batch=given, auto_find=True)
    steps = Steps(theirs.model)
    t = time.perf_counter()
    with saturate.cpu_memory_budget(BUDGET):
        theirs.train()
    their_s, their_steps = time.perf_counter() - t, steps.n - 1  # less the step at its answer
    b = theirs._train_batch_size
    their_exact = fresh(name, b) == "ok" and fresh(name, b + 1) == "oom"
    return [
        divisor_row, max_row,
        f"| {name} | Trainer(auto_find_batch_size=True) | {b} x {theirs.args.gradient_accumulation_steps} | "
        f"{'yes' if their_exact else f'no (max {m})'} | {their_steps} | {their_s:.1f} (training included) | "
        f"{b * theirs.args.gradient_accumulation_steps}{' (kept)' if b * theirs.args.gradient_accumulation_steps == given else ' (changed)'} |"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "hf_trainer_cpu.md"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("gpt2", "bert"):
            rows += one(name, tmp)
    lines = [f"# The Hugging Face Trainer drop-in against auto_find_batch_size (bench/hf_trainer_vs_auto_find.py, "
             f"{time.strftime('%Y-%m-%d')})", "",
             f"GPT-2 and BERT (2 layers, width 64, sequences of 64 tokens) from configs, CPU budget {BUDGET >> 20} MiB, "
             f"per_device_train_batch_size (GPT-2 {GIVEN['gpt2']}, BERT {GIVEN['bert']}) x 1 given, {os.cpu_count()} cores. Exact: the trainer's own "
             "train() in a fresh process fits at the answer and runs out of memory one above (use=\"divisor\": at the "
             "next divisor of the effective batch, the next batch training could run at). Steps: training steps "
             "started before the answer.", "",
             "| model | finder | answer (batch x accumulation) | exact | steps | seconds | effective batch |",
             "|---|---|---|---|---|---|---|", *rows, ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
