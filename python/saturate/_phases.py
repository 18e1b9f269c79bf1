"""Phases of a step that marks none: forward, backward and optimizer, from hooks on the step's
model(s) and optimizer(s), so that a memory breakdown of a plain step splits its peak into
activations, gradients and optimizer state instead of one "workspace" (issue 44).

forward: from the outermost model call's start to its end (with gradients enabled); backward: from
the first gradient reaching that call's outputs to the end of the backward (a callback queued in
it); optimizer: `optimizer.step()`, through its step hooks. The backward runs on autograd's threads
(CUDA's), where no observer is installed: its marker takes the step thread's observer when the
forward starts."""
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
            self._handles.append(m.register_forward_pre_hook(self._before_forward))
            self._handles.append(m.register_forward_hook(self._after_forward))
        for o in optimizers:
            self._handles.append(o.register_step_pre_hook(self._before_step))
            self._handles.append(o.register_step_post_hook(self._after_step))

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def _before_forward(self, module, args) -> None:
        self._depth += 1
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


@contextlib.contextmanager
def auto_phases(modules: List[torch.nn.Module], optimizers: List[torch.optim.Optimizer]) -> Iterator[None]:
    phases = AutoPhases(modules, optimizers)
    try:
        yield
    finally:
        phases.remove()
