"""saturate.OomGuard: the user's own loop survives an out-of-memory mid-run (issue #26).

A batch that runs out of memory is freed (its exception, frames and gradients), split into
micro-batches whose gradients accumulate to the same update (each micro-batch's loss weighted by
its share of the batch), and the optimizer steps once: the global batch is kept. What worked is
remembered in tokens (items x length) by the library's MicroBatchMemory, the rule `saturate
train`'s back-off uses, so a later batch as costly starts split and a cheaper one runs whole."""
from __future__ import annotations

import gc
import math
import logging
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import torch

from . import _saturate as _C
from ._step import _oom_in_chain, release_exception

log = logging.getLogger("saturate")


@dataclass
class Backoff:
    """One out-of-memory the guard recovered from."""
    step: int              # the guard's step (0-based) whose batch ran out of memory
    rows: int              # items in that batch
    length: int            # its length (tokens per item; 1 for fixed-size items)
    old_micro_batch: int
    new_micro_batch: int


def _tensors(batch: Any) -> List[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, dict):
        return [t for v in batch.values() for t in _tensors(v)]
    if isinstance(batch, (list, tuple)):
        return [t for v in batch for t in _tensors(v)]
    return []


def batch_rows(batch: Any) -> int:
    """Items in a batch: dim 0 of its tensors (they must agree)."""
    rows = {t.shape[0] for t in _tensors(batch) if t.dim() > 0}
    if len(rows) != 1:
        raise ValueError(f"cannot tell the batch's items: its tensors have first dimensions {sorted(rows)}; give "
                         f"OomGuard(split=..., rows=...) for this batch type")
    return rows.pop()


def batch_length(batch: Any) -> int:
    """Tokens per item: dim 1 of the batch's largest tensor with two or more dimensions (1 otherwise)."""
    ts = [t for t in _tensors(batch) if t.dim() >= 2]
    return int(max(ts, key=lambda t: t.numel()).shape[1]) if ts else 1


def split_batch(batch: Any, start: int, stop: int) -> Any:
    """Items [start, stop) of a batch: tensors sliced on dim 0, lists of the batch's length too."""
    rows = batch_rows(batch)

    def cut(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return v[start:stop] if v.dim() > 0 else v
        if isinstance(v, dict):
            return type(v)((k, cut(x)) for k, x in v.items())
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return type(v)(*[cut(x) for x in v])
        if isinstance(v, (list, tuple)):
            if len(v) == rows and not any(isinstance(x, torch.Tensor) for x in v):
                return v[start:stop]
            return type(v)(cut(x) for x in v)
        return v

    return cut(batch)


class OomGuard:
    """Runs one training step on a batch; never loses the run to an out-of-memory.

        guard = saturate.OomGuard(lambda batch: loss_fn(model(batch["x"]), batch["y"]), optimizer)
        for batch in loader:
            loss = guard.step(batch)          # the batch's mean loss, a float

    `loss_fn(batch)` returns the mean loss of the batch it is given (a micro-batch after a
    split). `weight(batch)` is a batch's share of the mean: default its items; for a loss
    averaged over tokens, the batch's real tokens, e.g. `lambda b: int((b["labels"] != -100).sum())`,
    so that the accumulated gradient is the whole batch's to rounding. `split(batch, start, stop)`
    and `rows(batch)` cut a batch (default: tensors on dim 0), `length(batch)` is its tokens per
    item (default: dim 1 of its largest tensor). `scaler`: a torch.amp.GradScaler for fp16.
    `max_grad_norm`: clip before the step. Each recovery is logged (logger "saturate") and kept in
    `backoffs`. An out-of-memory at a micro-batch of 1 is raised: nothing smaller is left.

    Under torchrun give `model=` (and `ranks="auto"`, the default): every rank splits its batch into
    the same number of micro-batches (the most any rank needs; a rank with fewer items runs a
    zero-weight one), since each backward of a DDP or FSDP model runs collectives. On a model
    sharded with FSDP2 (`fully_shard`) or replicated with DDP, each step runs with the agreement
    points of `saturate.search` (docs/sharding.md): one rank's out-of-memory inside a forward or
    backward stops every rank at the same point, and all back off together, no rank left waiting
    in a collective (a DDP model with a communication hook of your own has no points: DDP takes
    one hook). An out-of-memory at micro-batch 1 on any rank is raised on every rank."""

    def __init__(self, loss_fn: Callable[[Any], torch.Tensor], optimizer: torch.optim.Optimizer, *,
                 weight: Optional[Callable[[Any], float]] = None, split: Optional[Callable[[Any, int, int], Any]] = None,
                 rows: Optional[Callable[[Any], int]] = None, length: Optional[Callable[[Any], int]] = None,
                 scaler: Any = None, max_grad_norm: float = 0.0, model: Any = None, ranks: Any = "auto"):
        def check() -> None:
            if not callable(loss_fn):
                raise TypeError(f"loss_fn={loss_fn!r} is not callable: give loss_fn(batch) -> the batch's mean loss")
            if not isinstance(optimizer, torch.optim.Optimizer):
                raise TypeError(f"optimizer={optimizer!r} is not a torch.optim.Optimizer")
            if not isinstance(max_grad_norm, (int, float)) or isinstance(max_grad_norm, bool) or \
                    not math.isfinite(max_grad_norm) or max_grad_norm < 0:
                # NaN compared False with every bound: clipping was silently off
                raise ValueError(f"max_grad_norm={max_grad_norm!r}: give 0 (off) or a positive, finite norm")

        from ._ranks import agree, ranks_for

        group = ranks_for(ranks) if model is not None else None
        if group is None:
            check()
        else:  # every rank at once (its steps are collectives): a refused or mismatched guard stops all here
            agree(group, "saturate.OomGuard", dict(max_grad_norm=max_grad_norm, scaler=scaler is not None,
                                                   weight=weight is not None), check)
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.weight = weight
        self.split = split or split_batch
        self.rows = rows or batch_rows
        self.length = length or batch_length
        self.scaler = scaler
        self.max_grad_norm = float(max_grad_norm)
        self.memory = _C.MicroBatchMemory()
        self.backoffs: List[Backoff] = []
        self.steps = 0
        self.micro_batch = 0  # the last step's micro-batch
        self._group = None  # several ranks: they agree on the split of every step
        self._sync = None   # a sharded or DDP model: agreement points inside each step
        if model is not None:
            from ._shard_sync import agreement_points
            from ._step import _as_list

            self._group = group
            self._sync = agreement_points(self._group, _as_list(model))

    def _weight(self, part: Any, rows: int) -> float:
        w = float(self.weight(part)) if self.weight is not None else float(rows)
        if not math.isfinite(w) or w < 0:  # a NaN weight turns every parameter NaN at the step
            raise ValueError(f"weight() of a micro-batch is {w!r}: give its share of the mean, a finite number >= 0 "
                             "(its items, or its real tokens)")
        return w

    def _run(self, batch: Any, rows: int, micro: int, count: int = 0) -> float:
        """Forward and backward of every micro-batch; returns the batch's mean loss. `count`: run
        exactly this many (several ranks), the missing ones on the first item with weight 0."""
        parts = [(s, min(s + micro, rows)) for s in range(0, rows, micro)]
        pieces = [batch if (a, b) == (0, rows) else self.split(batch, a, b) for a, b in parts]
        weights = [self._weight(p, b - a) for p, (a, b) in zip(pieces, parts)]
        total = sum(weights)
        if total <= 0:
            raise ValueError(f"weight() of the batch is {total}: a batch needs a positive weight (items or tokens)")
        while count and len(pieces) < count:  # the same backwards (collectives) as the other ranks
            pieces.append(self.split(batch, 0, 1))
            weights.append(0.0)
        loss_sum = 0.0
        for piece, w in zip(pieces, weights):
            if w == 0 and not count:
                continue
            loss = self.loss_fn(piece) * (w / total)
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            loss_sum += float(loss.detach())
            del loss
        return loss_sum

    def step(self, batch: Any) -> float:
        """One optimizer step on `batch` (split into micro-batches when it does not fit)."""
        rows, length = int(self.rows(batch)), int(self.length(batch))
        micro = self.memory.micro_for(rows, length)
        count, give_up = 0, 0  # give_up: this rank ran out of memory at micro-batch 1
        while True:
            if self._group is not None:  # every rank runs as many micro-batches as the most split one
                count, anyone = self._group.all_reduce_max([math.ceil(rows / micro), give_up])
                if anyone:
                    raise torch.OutOfMemoryError(
                        f"OomGuard: step {self.steps} runs out of memory with a micro-batch of 1 on "
                        f"{'this rank' if give_up else 'another rank'} (rank {self._group.rank} of "
                        f"{self._group.world_size} here): give the ranks more memory or shorter items")
                micro = math.ceil(rows / count)
            self.optimizer.zero_grad(set_to_none=True)
            try:
                if self._sync is not None:
                    self._sync.begin()
                loss = self._run(batch, rows, micro, count)
                if self._sync is not None:
                    self._sync.end()
                break
            except Exception as error:  # noqa: BLE001 - an OOM is recovered from, the rest re-raised
                oom = _oom_in_chain(error)
                own = oom is not None and not getattr(oom, "from_another_rank", False)
                if self._sync is not None:  # the other ranks learn of it at their next point
                    self._sync.failed(oom is not None, rows, own)
                if oom is None:
                    raise
                message = str(oom).strip().splitlines()[0][:200]
                oom = None
                release_exception(error)
                del error
            # the failed attempt's graph died with its frames; its partial gradients go too
            self.optimizer.zero_grad(set_to_none=True)
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            # another rank's out-of-memory: this rank's micro-batch did fit; the split is agreed above
            smaller = self.memory.after_oom(rows, length, micro) if own else micro
            if smaller == 0 and self._group is not None:
                give_up = 1
                continue
            if smaller == 0:
                raise torch.OutOfMemoryError(f"OomGuard: step {self.steps} runs out of memory with a micro-batch of 1 "
                                             f"(length {length}): {message}; give the step more memory or shorter items")
            if not own:
                continue
            self.backoffs.append(Backoff(self.steps, rows, length, micro, smaller))
            log.warning("saturate.OomGuard: step %d (%d items of length %d) ran out of memory at micro-batch %d; "
                        "retrying at %d with accumulation (the batch stays %d): %s", self.steps, rows, length, micro,
                        smaller, rows, message)
            micro = smaller
        self.memory.after_success(rows, length, micro)
        if self.scaler is not None:
            if self.max_grad_norm > 0:
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]],
                                               self.max_grad_norm)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            if self.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]],
                                               self.max_grad_norm)
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.micro_batch = micro
        self.steps += 1
        return loss
