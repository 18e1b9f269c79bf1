"""A user's own DDP model on 2 Gloo ranks of unequal budgets (rank 0 64 MiB, rank 1 40 MiB), run by
test_ranks.py on ranks with torchrun's environment (fresh.ranks; `torchrun` runs it the same
way); each rank a CPU device of its own budget.

    ranks_ddp.py search OUT_DIR TIMEOUT_S
        saturate.search on the DDP model (its step all-reduces the gradients inside the backward,
        where rank 1 runs out of memory first), then 3 OomGuard(model=) steps on batches that do
        not fit rank 1 whole; writes OUT_DIR/ddp<R>.json (rank 0 also the largest weight difference
        from one process on both ranks' batches together)
    ranks_ddp.py throughput OUT_DIR TIMEOUT_S
        saturate.search(objective="throughput") on the DDP model: the curve timed with every rank's
        step together (the all-reduce in its time); writes OUT_DIR/tp<R>.json
    ranks_ddp.py fresh OUT_DIR TIMEOUT_S BATCH
        3 plain DDP steps at BATCH in new processes (no saturate in the step): each rank writes "ok",
        "oom" or "peer-gone" to OUT_DIR/fresh<R>.txt"""
import datetime
import gc
import json
import os
import sys
import time
import weakref

import saturate
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from ranks_util import run_fresh

MiB = 1 << 20


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def data(rank, i, n):
    gen = torch.Generator().manual_seed(1000 * rank + i)
    return {"x": torch.randn(n, 1, 28, 28, generator=gen), "y": torch.randint(0, 10, (n,), generator=gen)}


if __name__ == "__main__":
    mode, out_dir, timeout_s = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    rank = dist.get_rank()
    budget = (64 if rank == 0 else 40) * MiB
    torch.set_num_threads(1)
    if mode == "fresh":
        batch = int(sys.argv[4])

        def steps():
            with saturate.cpu_memory_budget(budget):
                model = nn.parallel.DistributedDataParallel(make_model())
                opt = torch.optim.SGD(model.parameters(), lr=0.05)
                for i in range(3):
                    b = data(rank, i, batch)
                    F.cross_entropy(model(b["x"]), b["y"]).backward()
                    opt.step()
                    opt.zero_grad()

        run_fresh(os.path.join(out_dir, f"fresh{rank}.txt"), steps)
    model = nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    calls = [0]

    def step(batch_size):
        calls[0] += 1
        b = data(rank, calls[0], batch_size)
        F.cross_entropy(model(b["x"]), b["y"]).backward()
        opt.step()
        opt.zero_grad()

    started = time.perf_counter()
    if mode == "throughput":
        r = saturate.search(step, device="cpu", memory_budget=budget, model=model, optimizer=opt,
                            objective="throughput", timed_steps=1)
        with open(os.path.join(out_dir, f"tp{rank}.json"), "w") as f:
            json.dump({"data": r.data, "text": str(r), "batch": r.batch,
                       "search_s": time.perf_counter() - started}, f, default=str)
        dist.barrier()
        sys.stdout.flush()
        os._exit(0)
    r = saturate.search(step, device="cpu", memory_budget=budget, model=model, optimizer=opt)
    search_s = time.perf_counter() - started
    # OomGuard on batches of 1.3 times the common max: rank 1 cannot hold one whole, rank 0 can
    batch = int(1.3 * r.max_batch)
    guard = saturate.OomGuard(lambda b: F.cross_entropy(model(b["x"]), b["y"]), opt, model=model)
    losses = []
    for i in range(3):
        b = data(rank, 100 + i, batch)
        with saturate.cpu_memory_budget(budget):
            losses.append(guard.step(b))
        del b
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    every = [torch.empty_like(weights) for _ in range(2)]
    dist.all_gather(every, weights)
    out = {"data": r.data, "text": str(r), "search_s": search_s, "batch": batch, "losses": losses,
           "backoffs": [b.__dict__ for b in guard.backoffs], "micro_batch": guard.micro_batch,
           "replicas_differ": (every[0] - every[1]).abs().max().item()}
    if rank == 0:
        # one process, no budget: the same 3 optimizer steps on both ranks' batches together (DDP
        # averages the ranks' mean gradients: the mean over both, the batches being of one size)
        ref = make_model()
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
        for i in range(3):
            parts = [data(r_, 100 + i, batch) for r_ in (0, 1)]
            x, y = torch.cat([p["x"] for p in parts]), torch.cat([p["y"] for p in parts])
            F.cross_entropy(ref(x), y).backward()
            ref_opt.step()
            ref_opt.zero_grad()
        out["max_abs_diff"] = max((a - b).abs().max().item() for a, b in zip(model.module.parameters(),
                                                                                 ref.parameters()))
    # the user drops the model: its weights go (the agreement points' hook, which DDP's reducer
    # holds from C++, once held the reducer back: the weights and buckets stayed for good)
    first = weakref.ref(next(model.module.parameters()))
    del model, opt, guard, weights, every
    gc.collect()
    out["weights_freed"] = first() is None
    with open(os.path.join(out_dir, f"ddp{rank}.json"), "w") as f:
        json.dump(out, f, default=str)
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)
