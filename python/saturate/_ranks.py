"""Several ranks (torchrun, one process per GPU) searching the user's own step together (seed M8):
the library's rank-synced search (dist/rank_synced.h) decides; torch.distributed, on the group the
user already made, carries its few integer collectives."""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Dict, List, Optional

import torch


class TorchRanks:
    """`rank`, `world_size`, `backend`, `all_reduce_max(list)` and `all_gather(list)` of int64s over a
    torch.distributed process group (the default one unless given)."""

    def __init__(self, group: Optional[Any] = None):
        import torch.distributed as dist

        self._dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        name = str(dist.get_backend(group))
        self.backend = f"torch.distributed {name}"
        self.device = torch.device("cuda", torch.cuda.current_device()) if name == "nccl" else torch.device("cpu")

    def all_reduce_max(self, values: List[int]) -> List[int]:
        t = torch.tensor(values, dtype=torch.int64, device=self.device)
        self._dist.all_reduce(t, op=self._dist.ReduceOp.MAX, group=self.group)
        return t.tolist()

    def all_gather(self, values: List[int]) -> List[int]:
        t = torch.tensor(values, dtype=torch.int64, device=self.device)
        parts = [torch.empty_like(t) for _ in range(self.world_size)]
        self._dist.all_gather(parts, t, group=self.group)
        return [v for p in parts for v in p.tolist()]


def ranks_for(ranks: Any) -> Optional[TorchRanks]:
    """'auto': the default group when torch.distributed runs with several ranks, else none; None:
    none (each rank searches alone); a process group: that group."""
    if ranks is None:
        return None
    if isinstance(ranks, str):
        if ranks != "auto":
            raise ValueError(f"ranks={ranks!r}: give 'auto', None, or a torch.distributed process group")
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
            return None
        return TorchRanks()
    return TorchRanks(ranks)


def agree(group: TorchRanks, call: str, settings: Dict[str, Any], check: Callable[[], None]) -> None:
    """The first collective of a call that runs on every rank (`call`, e.g. "saturate.search"):
    each rank checks its own arguments (`check()` raises what it finds wrong: a ValueError, or a
    RuntimeError from a device this process cannot use) and hashes the
    `settings` every rank must give alike; one all-gather of both. A rank whose arguments were
    refused raises its own error; every other rank raises one naming it; ranks called with
    different settings all raise one naming the keys that differ. So a refused or mismatched call
    stops every rank here, at once, instead of leaving some waiting in a later collective (a
    search with max_batch=64 on one rank and 32 on another ran different trials: a hang until the
    collective timeout)."""
    error: Optional[BaseException] = None
    try:
        check()
    except Exception as e:  # noqa: BLE001 - any refusal, raised after every rank has heard of it
        error = e
    keys = sorted(settings)
    mine = [1 if error is not None else 0] + [_digest(settings[k]) for k in keys]
    every = group.all_gather(mine)
    n = len(mine)
    rows = [every[r * n:(r + 1) * n] for r in range(group.world_size)]
    if error is not None:
        raise error
    refused = [r for r, row in enumerate(rows) if row[0]]
    if refused:
        raise ValueError(f"{call}: rank {', '.join(map(str, refused))} refused its arguments (its own error says why): "
                         f"every rank stops here instead of waiting for it in a collective")
    differ = [k for i, k in enumerate(keys) if len({row[1 + i] for row in rows}) > 1]
    if differ:
        ranks = {k: [r for r, row in enumerate(rows) if row[1 + keys.index(k)] != rows[0][1 + keys.index(k)]]
                 for k in differ}
        where = "; ".join(f"{k} (rank {', '.join(map(str, rs))} differs from rank 0, which has {settings[k]!r} "
                          f"here)" if group.rank == 0 else f"{k} (this rank has {settings[k]!r})"
                          for k, rs in ranks.items())
        raise ValueError(f"{call}: the ranks were called with different {', '.join(differ)}: {where}. Give every rank "
                         f"the same {', '.join(differ)} (only memory_budget may differ from rank to rank)")


def _digest(value: Any) -> int:
    """A 62-bit hash of a setting's repr, the same in every process."""
    return int.from_bytes(hashlib.sha256(repr(value).encode()).digest()[:8], "big") >> 2
