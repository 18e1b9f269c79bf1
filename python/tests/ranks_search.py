"""Run by test_ranks.py under torchrun: every rank searches the mlp loop with its own CPU budget
(rank 0 64 MiB, the others 40 MiB) through saturate.search's rank-synced search, and writes its
result to DIR/rank<R>.json."""
import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import saturate  # noqa: E402
import torch.distributed as dist  # noqa: E402

from loops import LOOPS  # noqa: E402

MiB = 1 << 20

if __name__ == "__main__":
    out_dir = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model, opt, step = LOOPS["mlp"]()
    r = saturate.search(step, device="cpu", memory_budget=(64 if rank == 0 else 40) * MiB, exact_ranks=True)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"data": r.data, "text": str(r), "ranks": [dataclasses.asdict(k) for k in r.ranks]}, f)
    # every rank reaches the end before the group goes: a rank that tore Gloo down while its peer
    # still had the group's last exchange in flight aborted ("terminate called without an active
    # exception", rank 1 of 2 in a fresh-clone CI; python/tests/shard_lm.py does the same)
    dist.barrier()
    # and no teardown: the barrier alone did not end it (the same abort in a later fresh-clone CI,
    # after the barrier); as ranks_util.py and shard_lm.py do, the results written, the process ends
    sys.stdout.flush()
    os._exit(0)
