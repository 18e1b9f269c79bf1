"""Phases of a step that marks none: forward, backward and optimizer, from hooks on the step's
model(s) and optimizer(s), so that a memory breakdown of a plain step splits its peak into
activations, gradients and optimizer state instead of one "workspace" (issue 44).

forward: from the outermost model call's start to its end (with gradients enabled); backward: from
the first gradient reaching that call's outputs to the end of the backward (a callback queued in
it); optimizer: `optimizer.step()`, through its step hooks. The backward runs on autograd's threads
(CUDA's), where no observer is installed: its marker takes the step thread's observer when the
forward starts.

A model sharded with FSDP2 gets two regions of the memory log besides: "communication" (what the
all-gathers and reduce-scatters allocate for themselves: the all-gather's output and the bf16
casts of this rank's shards, the reduce-scatter's input, the backend's copies inside the calls)
and "gathered_parameters" (a unit's weights copied out of the all-gather, whole), so that the
breakdown of a sharded step names them instead of one workspace (issue 42). They wrap FSDP2's
own collectives for as long as the phases are marked (torch 2.11's
`torch.distributed.fsdp._fully_shard._fsdp_param_group`; another torch without those names gets
no regions, the bytes stay workspace)."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, List

import torch
from torch.utils._pytree import tree_flatten

from . import _saturate as _C


class AutoPhases:
    def __init__(self, modules: List[torch.nn.Module], optimizers: List[torch.optim.Optimizer]):
        self._depth = 0
        self._forward = None
        self._backward = None
        self._optimizer = None
        self._handles: List[Any] = []
        for m in modules:
            # first: before FSDP's own pre-forward, whose all-gather the regions mark
            self._handles.append(m.register_forward_pre_hook(self._before_forward, prepend=True))
            self._handles.append(m.register_forward_hook(self._after_forward))
        for o in optimizers:
            self._handles.append(o.register_step_pre_hook(self._before_step))
            self._handles.append(o.register_step_post_hook(self._after_step))
        self._regions = {}  # name -> MemoryRegion, made at each step's forward (its thread's observer)
        self._patched = _patch_fsdp(self) if _sharded(modules) else []

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        for owner, name, original in self._patched:
            setattr(owner, name, original)
        self._patched = []

    def region(self, name: str):
        """The region `name` of this step, as a context manager (nothing before the first forward)."""
        r = self._regions.get(name)
        return _Region(r) if r is not None else contextlib.nullcontext()

    def _before_forward(self, module, args) -> None:
        self._depth += 1
        if self._depth == 1 and self._patched:
            self._regions = {n: _C.MemoryRegion(n) for n in ("communication", "gathered_parameters")}
        if self._depth == 1 and torch.is_grad_enabled():
            self._forward = _C.PhaseMarker("forward")
            self._forward.enter()

    def _after_forward(self, module, args, output) -> None:
        self._depth -= 1
        if self._depth or self._forward is None:
            return
        self._forward.exit(True)
        self._forward = None
        tensors = [t for t in tree_flatten(output)[0] if torch.is_tensor(t) and t.requires_grad]
        if not tensors:
            return
        marker = _C.PhaseMarker("backward")
        marker.capture()  # this thread's observer: the backward may run on another
        started = []

        def end() -> None:
            marker.exit(True)

        def begin(grad):
            if not started:
                started.append(True)
                marker.enter()
                torch.autograd.Variable._execution_engine.queue_callback(end)
            return grad

        for t in tensors:
            t.register_hook(begin)

    def _before_step(self, optimizer, args, kwargs) -> None:
        self._optimizer = _C.PhaseMarker("optimizer")
        self._optimizer.enter()

    def _after_step(self, optimizer, args, kwargs) -> None:
        if self._optimizer is not None:
            self._optimizer.exit(True)
            self._optimizer = None


class _Region:
    def __init__(self, region):
        self._region = region

    def __enter__(self):
        self._region.enter()

    def __exit__(self, kind, value, tb):
        self._region.exit(kind is None)
        return False


def _sharded(modules: List[torch.nn.Module]) -> bool:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return any(isinstance(sub, FSDPModule) for m in modules for sub in m.modules())


class _MarkedComm:
    """FSDP2's reduce-scatter communicator inside one foreach_reduce: its first buffer (the input,
    every gradient of the unit copied in) and the call are communication; the second (the output:
    this rank's gradient shards, kept) is not."""

    def __init__(self, comm, phases: "AutoPhases"):
        self._comm = comm
        self._phases = phases
        self._buffers = 0

    def allocate(self, *args, **kwargs):
        self._buffers += 1
        if self._buffers > 1:
            return self._comm.allocate(*args, **kwargs)
        with self._phases.region("communication"):
            return self._comm.allocate(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        with self._phases.region("communication"):
            return self._comm(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._comm, name)


def _patch_fsdp(phases: "AutoPhases") -> list:
    """Wraps FSDP2's collectives (module globals of its parameter group) with the regions; returns
    (module, name, original) to put back."""
    try:
        from torch.distributed.fsdp._fully_shard import _fsdp_param_group as group
        gather, copy_out, reduce = group.foreach_all_gather, group.foreach_all_gather_copy_out, group.foreach_reduce
    except (ImportError, AttributeError):
        return []

    def all_gather(*args, **kwargs):
        with phases.region("communication"):
            return gather(*args, **kwargs)

    def all_gather_copy_out(*args, **kwargs):
        with phases.region("gathered_parameters"):
            return copy_out(*args, **kwargs)

    def reduce_scatter(*args, **kwargs):
        if len(args) > 4:  # (fsdp_params, grads, group, stream, reduce_scatter_comm, ...)
            args = (*args[:4], _MarkedComm(args[4], phases), *args[5:])
        elif "reduce_scatter_comm" in kwargs:
            kwargs["reduce_scatter_comm"] = _MarkedComm(kwargs["reduce_scatter_comm"], phases)
        return reduce(*args, **kwargs)

    group.foreach_all_gather = all_gather
    group.foreach_all_gather_copy_out = all_gather_copy_out
    group.foreach_reduce = reduce_scatter
    return [(group, "foreach_all_gather", gather), (group, "foreach_all_gather_copy_out", copy_out),
            (group, "foreach_reduce", reduce)]


@contextlib.contextmanager
def auto_phases(modules: List[torch.nn.Module], optimizers: List[torch.optim.Optimizer]) -> Iterator[None]:
    phases = AutoPhases(modules, optimizers)
    try:
        yield
    finally:
        phases.remove()
