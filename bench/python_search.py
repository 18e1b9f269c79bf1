"""saturate.search vs Lightning's BatchSizeFinder (binsearch) vs Accelerate's
find_executable_batch_size, on plain-Python training steps under the same CPU budget.

For each model: the answer, the training steps each tool started (failed ones too) and its wall
time; every answer is checked in fresh processes running the user's step (3 steps at the answer
and at the answer + 1), so "exact" means: it fits and one more does not.

    PYTHONPATH=build/python python3 bench/python_search.py [--out bench/results/python_search_cpu.md]
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

import saturate  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from loops import LOOPS, run_fresh  # noqa: E402

MiB = 1 << 20
STEPS = 3  # per trial: Lightning's steps_per_trial, saturate's 1 warm-up + 2 timed


class SizeData(torch.utils.data.Dataset):
    """10^7 empty samples: a batch of them tells the step only its size."""

    def __len__(self):
        return 10_000_000

    def __getitem__(self, i):
        return 0


class Counted:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, n):
        self.calls += 1
        return self.fn(n)


def with_saturate(name, budget):
    model, opt, step = LOOPS[name]()
    counted = Counted(step)
    t = time.perf_counter()
    r = saturate.search(counted, device="cpu", memory_budget=budget, model=model, optimizer=opt)
    return r.max_batch, counted.calls, time.perf_counter() - t, f"recommended {r.recommended_batch}"


def with_saturate_binsearch(name, budget):
    model, opt, step = LOOPS[name]()
    counted = Counted(step)
    t = time.perf_counter()
    r = saturate.search(counted, device="cpu", memory_budget=budget, strategy="binsearch", model=model, optimizer=opt)
    return r.max_batch, counted.calls, time.perf_counter() - t, "Lightning's algorithm on the user's step"


def with_accelerate(name, budget, start):
    from accelerate.utils import find_executable_batch_size

    model, opt, step = LOOPS[name]()
    counted = Counted(step)

    @find_executable_batch_size(starting_batch_size=start)
    def run(batch_size):
        for _ in range(STEPS):
            counted(batch_size)
        return batch_size

    t = time.perf_counter()
    with saturate.cpu_memory_budget(budget):
        b = run()
    note = f"starting_batch_size {start}{' (default)' if start == 128 else ''}, x0.9 after each OOM"
    return b, counted.calls, time.perf_counter() - t, note


def with_lightning(name, budget, tmp):
    import lightning.pytorch as L
    from lightning.pytorch.callbacks import BatchSizeFinder

    model, opt, step = LOOPS[name]()
    counted = Counted(step)

    class Module(L.LightningModule):
        """The same model, loss and optimizer as a LightningModule: Lightning's own loop runs
        them (zero_grad before the backward, so gradients live through the next forward)."""

        def __init__(self):
            super().__init__()
            self.batch_size = 2
            self.model = model

        def training_step(self, batch, i):
            counted.calls += 1
            return step.forward_loss(int(batch[0]))

        def configure_optimizers(self):
            return opt

        def train_dataloader(self):
            # batches of one number, the batch size: the loss makes its own tensors, as the step
            # does. The dataset is long: Lightning caps the batch size at the dataset's length.
            return torch.utils.data.DataLoader(SizeData(), batch_size=self.batch_size,
                                               collate_fn=lambda b: torch.tensor([len(b)]))

    finder = BatchSizeFinder(mode="binsearch", steps_per_trial=STEPS)
    trainer = L.Trainer(accelerator="cpu", max_steps=1, callbacks=[finder], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp)
    module = Module()
    t = time.perf_counter()
    with saturate.cpu_memory_budget(budget):
        calls_before = counted.calls
        trainer.fit(module)
    seconds = time.perf_counter() - t
    return finder.optimal_batch_size, counted.calls - calls_before - 1, seconds, "binsearch, margin 0.05 (default)"


def verdict(name, budget, batch):
    if batch <= 0:
        return "none"
    fits = run_fresh(name, budget, batch, STEPS) == "ok"
    if not fits:
        return "does not fit"
    return "exact" if run_fresh(name, budget, batch + 1, STEPS) == "oom" else "fits, not the max"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "results", "python_search_cpu.md"))
    ap.add_argument("--models", default="two_input,resnet18")
    ap.add_argument("--accelerate-start", type=int, default=1024)
    args = ap.parse_args()
    torch.set_num_threads(1)
    budgets = {"two_input": 96 * MiB, "resnet18": 200 * MiB, "mlp": 48 * MiB}
    rows = []
    import tempfile

    for name in args.models.split(","):
        budget = budgets[name]
        tools = [("saturate.search (fit)", lambda: with_saturate(name, budget)),
                 ("saturate.search (binsearch)", lambda: with_saturate_binsearch(name, budget)),
                 ("Lightning BatchSizeFinder", lambda: with_lightning(name, budget, tempfile.mkdtemp())),
                 ("Accelerate find_executable_batch_size",
                  lambda: with_accelerate(name, budget, args.accelerate_start)),
                 ("Accelerate find_executable_batch_size", lambda: with_accelerate(name, budget, 128))]
        for tool, run in tools:
            batch, steps, seconds, note = run()
            v = verdict(name, budget, batch)
            rows.append((name, saturate._saturate.format_bytes(budget), tool, batch, v, steps, seconds, note))
            print(rows[-1], flush=True)
    lines = ["# Batch-size search on plain-Python training steps (CPU budgets)", "",
             f"`python3 bench/python_search.py` on {os.cpu_count()} cores, torch {torch.__version__}, 1 thread. "
             "Each answer is checked in fresh processes running the user's step 3 times at the answer and at "
             "the answer + 1 under the same budget: *exact* = fits and one more does not. Steps: training steps "
             "each tool started (failed ones included).", "",
             "| model | budget | tool | answer | checked | steps | seconds | notes |",
             "|---|---|---|---:|---|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]:.1f} | {r[7]} |")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
