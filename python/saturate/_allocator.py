"""saturate's counting CPU allocator is in charge only while saturate measures.

`import saturate` leaves the process's CPU allocator alone. A call that measures CPU memory (a
search, memory_breakdown, leak_check, plan_for, fast_paths, the zoo, shard_plan, a monitor's life,
a `cpu_memory_budget` block) puts the counting allocator in charge for its length and gives the one
before it back after. On entry it adopts the storages of every CPU tensor alive in Python (the
model, its gradients and optimizer state, built before), so they count against the budget as they
would on a GPU, and their frees count too. Not counted: storages LibTorch's default CPU allocator
did not make (numpy's, from_blob, mmap, another allocator's) and tensors only C++ holds that were
made before the call (a DDP model's gradient buckets, built and rebuilt before it: build the model
inside a `cpu_memory_budget` block, or set SATURATE_CPU_ALLOCATOR=import to count from the import).

Every function of the extension passes `watch` (below; its classes do not: they measure inside those calls), so a new measuring call is counted
without a line of its own; PURE names the calls that allocate nothing worth a scan.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import types
from typing import Callable, Iterator, List

import torch

from . import _saturate as _C

# extension calls that measure nothing (sizes, text, counters, the switch itself): no scan
PURE = frozenset({
    "parse_memory_size", "device_capacity", "format_bytes", "plan_target", "html_report", "is_oom_message",
    "set_allocation_site", "gradient_sq_norm", "cpu_counters", "set_cpu_budget", "reset_cpu_peak",
    "start_cpu_math", "acquire_cpu_allocator", "release_cpu_allocator", "cpu_allocator_in_charge",
    "adopt_cpu_tensors", "token_budget_batches", "shard_model_state_bytes", "shard_min_world_size",
    "apply_fast_paths", "defaults",
})


def _live_cpu_tensors() -> List[torch.Tensor]:
    found = []
    for o in gc.get_objects():
        if issubclass(type(o), torch.Tensor):  # type(): a proxy whose __class__ warns is not asked
            try:
                if o.device.type == "cpu" and not o.is_meta:
                    found.append(o)
            except Exception:  # noqa: BLE001 - a subclass without a device of its own
                continue
    return found


def _adopt(tensors: List[torch.Tensor]) -> None:
    try:
        _C.adopt_cpu_tensors(tensors)
    except TypeError:  # a tensor subclass the extension cannot take: the others one by one, it left out
        for t in tensors:
            try:
                _C.adopt_cpu_tensors([t])
            except TypeError:
                continue


@contextlib.contextmanager
def counting() -> Iterator[None]:
    """The counting allocator in charge for the block (nested blocks: the outermost decides)."""
    if _C.acquire_cpu_allocator():
        try:
            _adopt(_live_cpu_tensors())
        except BaseException:
            _C.release_cpu_allocator()
            raise
    try:
        yield
    finally:
        _C.release_cpu_allocator()


def counted(function: Callable) -> Callable:
    """`function` run with the counting allocator in charge (a public call that builds what it measures)."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        with counting():
            return function(*args, **kwargs)
    return call


def watch(module: types.ModuleType) -> None:
    """Wraps each measuring function of the extension `module` in `counting` (once)."""
    if getattr(module, "_saturate_counted", False):
        return
    for name in dir(module):
        value = getattr(module, name)
        if name in PURE or name.startswith("__") or isinstance(value, type) or not callable(value):
            continue
        setattr(module, name, counted(value))
    module._saturate_counted = True
