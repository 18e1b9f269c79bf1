"""Whole-epoch batch sizes on variable-length text (issue #26), side by side in one run.

The corpus and model of python/tests/textlm.py (documents with a long tail of lengths, a
GPT-style model, batches padded to their longest) under a CPU budget:
  1. a search on the first batches (the next batch of a shuffled loader, restarted per size, as
     a finder that reruns training from the start sees it), and one epoch at its answer;
  2. saturate.search(data=...): the worst-case batches, and one epoch at its max;
  3. the same first-batches answer with saturate.OomGuard around the step;
  4. one epoch with saturate.TokenBudgetSampler at the worst case's max_tokens.
Each epoch: OOMs, optimizer steps, samples/s, loss per token. Two rounds of 2 and 4 (same
seeds): the speed ratio of the sampler over the fixed worst-case batch is reported per round.

    PYTHONPATH=build/python OMP_NUM_THREADS=1 python3 bench/whole_epoch.py [--out bench/results/whole_epoch_cpu.md]
"""
import argparse
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

import saturate  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from textlm import (MiB, TextDataset, make_corpus, make_model, pad_collate, real_tokens, run_epoch,  # noqa: E402
                    token_loss, train_step)
from test_wholerun import BUDGET, epoch_loader, first_batches_step  # noqa: E402


def timed_epoch(loader, guard_on=False):
    model, opt = make_model()
    guard = saturate.OomGuard(lambda b: token_loss(model, b), opt, weight=real_tokens) if guard_on else None
    with saturate.cpu_memory_budget(BUDGET):
        start = time.perf_counter()
        r = run_epoch(model, opt, loader, guard=guard)
        r["seconds"] = time.perf_counter() - start
    r["samples_per_s"] = r["samples"] / r["seconds"]
    r["backoffs"] = len(guard.backoffs) if guard else 0
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    ds = TextDataset(make_corpus())
    lengths = [len(t) for t in ds.docs]
    model, opt = make_model()
    t0 = time.perf_counter()
    first = saturate.search(first_batches_step(model, opt, ds), device="cpu", memory_budget=BUDGET, model=model,
                            optimizer=opt, max_batch=len(ds) // 8)
    t1 = time.perf_counter()
    worst = saturate.search(lambda b: train_step(model, opt, b), device="cpu", memory_budget=BUDGET,
                            data=DataLoader(ds, collate_fn=pad_collate), model=model, optimizer=opt)
    t2 = time.perf_counter()
    w = worst.worst_case
    sampler = saturate.TokenBudgetSampler(lengths, w.max_tokens, seed=3)
    # the same items per step as the fixed batch, grouped by length: the same optimizer steps
    grouped = saturate.TokenBudgetSampler(lengths, w.max_tokens, max_items=worst.max_batch, seed=3)
    lines = [f"# Whole-epoch batch sizes on variable-length text (issue #26)", "",
             f"{platform.node()}, {os.cpu_count()} cores, torch {torch.__version__}, OMP_NUM_THREADS="
             f"{os.environ.get('OMP_NUM_THREADS', '')}; CPU budget {BUDGET // MiB} MiB; {len(ds)} documents, "
             f"lengths median {w.median_size}, longest {w.largest_size} (bytes); TinyGPT d=64, 2 layers, AdamW.", "",
             "| search | max | recommended | exact | trials | steps | seconds |", "|---|---|---|---|---|---|---|",
             f"| first batches | {first.max_batch} | {first.recommended_batch} | {first.max_batch_exact} | "
             f"{len(first.trials)} | {first.trial_steps} | {t1 - t0:.1f} |",
             f"| worst case (data=) | {worst.max_batch} | {worst.recommended_batch} | {worst.max_batch_exact} | "
             f"{len(worst.trials)} + {w.median_trials} median | {worst.trial_steps} | {t2 - t1:.1f} |", "",
             f"Median batches would allow {w.median_max_batch}; the worst case's max_tokens is {w.max_tokens}.", "",
             "| round | epoch | batch | OOMs | guard backoffs | steps | samples | samples/s | loss/token |",
             "|---|---|---|---|---|---|---|---|---|"]
    ratios = []
    for rnd in range(args.rounds):
        runs = [("first-batches answer", f"{first.recommended_batch}", epoch_loader(ds, first.recommended_batch), False),
                ("first-batches answer + OomGuard", f"{first.recommended_batch}",
                 epoch_loader(ds, first.recommended_batch), True),
                ("worst-case max", f"{worst.max_batch}", epoch_loader(ds, worst.max_batch), False),
                ("token budget, grouped", f"<= {w.max_tokens} tokens, <= {worst.max_batch} items",
                 DataLoader(ds, batch_sampler=grouped, collate_fn=pad_collate), False),
                ("token budget", f"<= {w.max_tokens} tokens", DataLoader(ds, batch_sampler=sampler,
                                                                         collate_fn=pad_collate), False)]
        got = {}
        for name, batch, loader, guard_on in runs:
            r = timed_epoch(loader, guard_on)
            got[name] = r
            lines.append(f"| {rnd + 1} | {name} | {batch} | {r['ooms']} | {r['backoffs']} | {r['steps']} | "
                         f"{r['samples']} | {r['samples_per_s']:.1f} | {r['loss_per_token']:.4f} |")
            print(lines[-1], flush=True)
        ratios.append((got["token budget, grouped"]["samples_per_s"] / got["worst-case max"]["samples_per_s"],
                       got["token budget"]["samples_per_s"] / got["worst-case max"]["samples_per_s"]))
    lines += ["", "Over the fixed worst-case batch, samples/s per round: " +
              "; ".join(f"grouped {a:.2f}x, unlimited {b:.2f}x" for a, b in ratios), "",
              "- grouped: as many items per step as the fixed batch, grouped by length (Hugging Face's "
              "group_by_length with a token cap): the same optimizer steps, less padding; its loss per token is "
              "the one to compare with the fixed batch's.",
              "- unlimited: batches fill the token budget (fairseq's --max-tokens): fewer, larger steps; after "
              "one epoch it has taken fewer optimizer steps, so its loss is higher at the same learning rate.",
              "- first-batches answer: the epoch's batches that ran out of memory are skipped (not trained on).", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
