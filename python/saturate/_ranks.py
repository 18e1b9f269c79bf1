"""Several ranks (torchrun, one process per GPU) searching the user's own step together (seed M8):
the library's rank-synced search (dist/rank_synced.h) decides; torch.distributed, on the group the
user already made, carries its few integer collectives."""
from __future__ import annotations

from typing import Any, List, Optional

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
