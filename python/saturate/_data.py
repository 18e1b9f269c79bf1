"""Batches built from the user's data (issue #26): the worst-case batches a search runs on, and
the token-budget sampler a DataLoader trains with. The orders come from the library
(data/worst_case.h, data/token_budget.h); this file reads the items' sizes once and hands the
user's collate function the items chosen."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, List, Optional, Sequence

import torch

from . import _saturate as _C


def item_size(item: Any) -> int:
    """An item's cost for the worst case: the element count of its largest tensor or sequence (a
    token sequence: its length; an image: its pixels x channels). Dicts, tuples and lists of
    tensors count by their largest member; a plain number counts 1."""
    if isinstance(item, torch.Tensor):
        return max(1, item.numel())
    if isinstance(item, (str, bytes)):
        return max(1, len(item))
    if isinstance(item, dict):
        return max((item_size(v) for v in item.values()), default=1)
    if isinstance(item, (list, tuple)):
        if item and all(isinstance(v, (int, float, bool)) for v in item):
            return len(item)  # a list of token ids
        return max((item_size(v) for v in item), default=1)
    if hasattr(item, "__len__"):
        try:
            return max(1, len(item))
        except TypeError:
            pass
    return 1


def _unwrap(data: Any, collate_fn: Optional[Callable]):
    """(dataset, collate_fn) from a Dataset or a DataLoader (whose collate_fn is used when none is given)."""
    if isinstance(data, torch.utils.data.DataLoader):
        return data.dataset, collate_fn or data.collate_fn
    if not hasattr(data, "__getitem__") or not hasattr(data, "__len__"):
        raise TypeError(f"data={type(data).__name__}: give a map-style dataset (with __len__ and __getitem__) or a "
                        f"DataLoader over one; an iterable dataset has no index to read the items' sizes from")
    return data, collate_fn or torch.utils.data.default_collate


def item_sizes(dataset: Any, size_fn: Optional[Callable[[Any], int]] = None) -> List[int]:
    """Every item's size, read once (`size_fn(item)`, default `item_size`)."""
    fn = size_fn or item_size
    sizes = []
    for i in range(len(dataset)):
        s = fn(dataset[i])
        if not isinstance(s, (int,)) and not (isinstance(s, torch.Tensor) and s.numel() == 1):
            raise TypeError(f"item_size returned {s!r} for item {i}: give a function returning an int (its length)")
        sizes.append(int(s))
    return sizes


@dataclass
class WorstCase:
    """What the search's batches were: the costliest items of the data (issue #26)."""
    items: int                  # items in the data
    largest_size: int           # the costliest item's size (its length)
    median_size: int            # the median item's size
    worst_items: List[int]      # the indices of the worst batch at max_batch (its first 16)
    max_tokens: int             # max_batch x largest_size: padded tokens a batch may hold
    recommended_tokens: int     # recommended_batch x largest_size
    median_max_batch: Optional[int] = None          # the max on batches of median items (compare_median)
    median_recommended_batch: Optional[int] = None
    median_trials: int = 0

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


class ItemBatches:
    """The step's batches at a batch size: collate_fn of the items the library chose."""

    def __init__(self, data: Any, collate_fn: Optional[Callable], size_fn: Optional[Callable]):
        self.dataset, self.collate = _unwrap(data, collate_fn)
        self.sizes = item_sizes(self.dataset, size_fn)
        self.order = _C.WorstCaseOrder(self.sizes, "data")

    def step_on(self, step: Callable[[Any], Any], which: str) -> Callable[[int], Any]:
        pick = self.order.worst_items if which == "worst" else self.order.median_items

        def sized_step(batch_size: int):
            batch = self.collate([self.dataset[i] for i in pick(int(batch_size))])
            return step(batch)

        sized_step.__qualname__ = getattr(step, "__qualname__", type(step).__name__)
        return sized_step


class TokenBudgetSampler(torch.utils.data.Sampler):
    """A batch sampler for DataLoader(batch_sampler=...) whose batches hold at most `max_tokens`
    padded tokens (items x the batch's longest) instead of a fixed count of items: similar lengths
    share a batch, so short items travel in large batches and long ones in small (fairseq's
    --max-tokens). Every item once per epoch; `set_epoch(e)` draws the next epoch's grouping and
    order from (seed, e). `lengths[i]` is item i's length; `max_tokens` is typically
    `saturate.search(step, data=...).worst_case.max_tokens`. Normalise the loss per token (mean
    over the batch's real tokens), so the gradient does not depend on how items were grouped."""

    def __init__(self, lengths: Sequence[int], max_tokens: int, *, max_items: int = 0, shuffle: bool = True,
                 seed: int = 0):
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens!r}: give a positive int, e.g. a search's worst_case.max_tokens")
        self.lengths = [int(n) for n in lengths]
        self.max_tokens = max_tokens
        self.max_items = int(max_items)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.epoch = 0
        self._batches: Optional[List[List[int]]] = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        self._batches = None

    def batches(self) -> List[List[int]]:
        if self._batches is None:
            self._batches = _C.token_budget_batches(self.lengths, max_tokens=self.max_tokens, max_items=self.max_items,
                                                    shuffle=self.shuffle, seed=self.seed, epoch=self.epoch)
        return self._batches

    def __iter__(self) -> Iterator[List[int]]:
        yield from self.batches()

    def __len__(self) -> int:
        return len(self.batches())
