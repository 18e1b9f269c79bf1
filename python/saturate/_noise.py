"""The gradient noise scale of the user's own step, for `saturate.search(objective="goodput")`.

The library measures and decides (C++: the unbiased estimators, their moving averages, the
goodput choice); this hands it the two squared gradient norms it needs per measurement: the
user's step is run at half the batch and at the whole batch, and each time the gradient is read
in the optimizer's step pre-hook, when `.grad` holds the step's gradient and before the update,
with the learning rate at 0 so that the weights stay where the search left them."""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator, List

import torch

from . import _saturate as _C
from ._step import StepRunner, StepState


class NoiseFromSteps:
    """`measure(batch) -> (batch // 2, |g_half|^2, batch, |g_batch|^2)` for the C++ estimator."""

    def __init__(self, step: Callable[[int], object], state: StepState, reset: Callable[[], None]):
        if not state.optimizers:
            raise ValueError("objective='goodput' reads the step's gradients in its optimizer's step: no "
                             "torch.optim.Optimizer was found in the step's closure or globals; pass optimizer=")
        self.step = step
        self.state = state
        self.reset = reset
        self.runner = StepRunner(step)
        self.started = False

    @contextlib.contextmanager
    def _lr_zero(self) -> Iterator[None]:
        saved = [[g["lr"] for g in o.param_groups] for o in self.state.optimizers]
        try:
            for o in self.state.optimizers:
                for g in o.param_groups:
                    g["lr"] = 0.0 if not isinstance(g["lr"], torch.Tensor) else torch.zeros_like(g["lr"])
            yield
        finally:
            for o, lrs in zip(self.state.optimizers, saved):
                for g, lr in zip(o.param_groups, lrs):
                    g["lr"] = lr

    def _sq_norm_at(self, batch: int) -> float:
        params = self.state.parameters()
        seen: List[float] = []

        def hook(optimizer, args, kwargs):
            if not seen:  # the first optimizer step of the call: the gradient of `batch` samples
                seen.append(_C.gradient_sq_norm(params))

        handles = [o.register_step_pre_hook(hook) for o in self.state.optimizers]
        try:
            failure = self.runner(batch)
        finally:
            for h in handles:
                h.remove()
            self.reset()  # no gradients or optimizer state kept between measurements
        if failure is not None:
            kind, message = failure
            raise RuntimeError(f"objective='goodput': the step failed at batch {batch} while the noise scale "
                               f"was measured ({kind}): {message}")
        if not seen:
            raise ValueError("objective='goodput': the step ran no optimizer step, so its gradient could not be "
                             "read; give a step that calls optimizer.step() once per call")
        return seen[0]

    def __call__(self, batch: int):
        if not self.started:
            # the search's trials ran optimizer steps: measure at the weights the user gave
            self.state.restore(keep=True)
            self.started = True
        small = max(1, batch // 2)
        with self._lr_zero(), _keep_buffers(self.state.modules):
            return (small, self._sq_norm_at(small), batch, self._sq_norm_at(batch))


@contextlib.contextmanager
def _keep_buffers(modules) -> Iterator[None]:
    """BatchNorm statistics and other buffers as they were: a measurement trains nothing."""
    saved = [[b.detach().clone() for b in m.buffers()] for m in modules]
    try:
        yield
    finally:
        with torch.no_grad():
            for m, bufs in zip(modules, saved):
                for b, s in zip(m.buffers(), bufs):
                    b.copy_(s)
