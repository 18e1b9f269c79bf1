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


def one(name, tmp):
    given = GIVEN[name]
    ours = hf_trainer.trainer_of(name, os.path.join(tmp, "ours"), batch=given)
    steps = Steps(ours.model)
    t = time.perf_counter()
    found = find_batch_size(ours, memory_budget=BUDGET)
    our_s, our_steps = time.perf_counter() - t, steps.n
    m = found.train.max_batch
    our_exact = fresh(name, m) == "ok" and fresh(name, m + 1) == "oom"
    theirs = hf_trainer.trainer_of(name, os.path.join(tmp, "theirs"), batch=given, auto_find=True)
    steps = Steps(theirs.model)
    t = time.perf_counter()
    with saturate.cpu_memory_budget(BUDGET):
        theirs.train()
    their_s, their_steps = time.perf_counter() - t, steps.n - 1  # less the step at its answer
    b = theirs._train_batch_size
    their_exact = fresh(name, b) == "ok" and fresh(name, b + 1) == "oom"
    return [
        f"| {name} | saturate.transformers.find_batch_size | max {m}: trains {found.per_device_train_batch_size} x "
        f"{found.gradient_accumulation_steps} | {'yes' if our_exact else 'no'} | {our_steps} | {our_s:.1f} | "
        f"{found.per_device_train_batch_size * found.gradient_accumulation_steps} (kept) |",
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
             "train() in a fresh process fits at the answer and runs out of memory one above. Steps: training "
             "steps started before the answer.", "",
             "| model | finder | answer (batch x accumulation) | exact | steps | seconds | effective batch |",
             "|---|---|---|---|---|---|---|", *rows, ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
