"""Run by test_ranks.py under torchrun: calls that run on every rank, given arguments that one rank
refuses or that differ between the ranks. Every rank writes what it raised to DIR/args<R>.json,
after a barrier that only passes when no rank was left inside a collective."""
import datetime
import json
import os
import sys
import time

import saturate
import torch
import torch.distributed as dist


def outcome(call):
    started = time.perf_counter()
    try:
        call()
        return {"raised": None, "seconds": time.perf_counter() - started}
    except Exception as e:  # noqa: BLE001 - what each rank raised is the measurement
        return {"raised": type(e).__name__, "message": str(e), "seconds": time.perf_counter() - started}


if __name__ == "__main__":
    out_dir = sys.argv[1]
    # a rank left waiting in a collective would fail the barrier below after this long
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    rank = dist.get_rank()
    torch.set_num_threads(1)
    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch_size):
        model(torch.randn(batch_size, 16)).sum().backward()
        opt.step()
        opt.zero_grad()

    def search(**kwargs):
        return lambda: saturate.search(step, device="cpu", memory_budget="64MiB", **kwargs)

    def plan(**kwargs):
        kwargs = {"memory_budget": "64MiB", "device": "cpu", **kwargs}
        return lambda: saturate.shard_plan(lambda: torch.nn.Sequential(torch.nn.Linear(16, 16)),
                                           lambda p: torch.optim.SGD(p, lr=0.1), lambda m, o, b: None, **kwargs)

    results = {
        # one rank's own argument refused
        "search_refused": outcome(search(max_batch=-3 if rank == 1 else 64)),
        # the ranks' settings differ: different trials, a hang before
        "search_differ": outcome(search(max_batch=32 if rank == 1 else 64)),
        "plan_refused": outcome(plan(global_batch=0 if rank == 1 else 8)),
        "plan_differ": outcome(plan(global_batch=16 if rank == 1 else 8)),
        # a refusal that is not a ValueError: rank 1 names a device this machine has none of
        "plan_device": outcome(plan(global_batch=8, **({"device": "cuda", "memory_budget": None} if rank == 1 else {}))),
        "guard_refused": outcome(lambda: saturate.OomGuard(lambda b: model(b).sum(), opt, model=model,
                                                           max_grad_norm=-1.0 if rank == 1 else 1.0)),
        "guard_differ": outcome(lambda: saturate.OomGuard(lambda b: model(b).sum(), opt, model=model,
                                                          max_grad_norm=2.0 if rank == 1 else 1.0)),
    }
    dist.barrier()
    with open(os.path.join(out_dir, f"args{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()
    os._exit(0)  # written: no interpreter teardown (see shard_plan_lm.py)
