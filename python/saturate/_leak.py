"""saturate.leak_check: does memory stay flat over a run of the user's own steps (seed M2), and if
not, which lines of their code made what stays alive.

The library runs the loop and decides (C++: the bytes allocated after each step through the leak
detector; over the last steps, the allocations still alive grouped by site, per step). This
side names the sites: during those steps a TorchDispatchMode labels every operator's
allocations with the Python lines running it, the step's own line first, then the innermost
line outside torch ("train.py:41 (step) > model.py:12 (forward)")."""
from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _saturate as _C
from ._budget import Size, to_bytes
from ._step import StepRunner, StepState, step_device

_SKIP_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (torch, sys.modules[__package__]))


def _code_of(step: Callable) -> Optional[Any]:
    """The code object of the step's own function (a partial's, a method's, a callable object's
    __call__): the outermost frame a site names."""
    fn = step
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        code = getattr(getattr(type(fn), "__call__", None), "__code__", None)
    return code


def _where(frame) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} ({frame.f_code.co_name})"


class _SiteLabels(TorchDispatchMode):
    """Names each operator's allocations after the Python lines that ran it."""

    def __init__(self, step: Callable):
        super().__init__()
        self.step_code = _code_of(step)

    def _label(self, frame) -> Optional[str]:
        inner = outer = None
        while frame is not None:
            path = frame.f_code.co_filename
            if not path.startswith(_SKIP_DIRS) and not path.startswith("<"):
                if inner is None:
                    inner = frame
                outer = frame
                if frame.f_code is self.step_code:
                    break
            frame = frame.f_back
        if inner is None:
            return None
        if outer is None or outer is inner or outer.f_code is not self.step_code:
            return _where(inner)
        return f"{_where(outer)} > {_where(inner)}"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        _C.set_allocation_site(self._label(sys._getframe(1)))
        try:
            return func(*args, **(kwargs or {}))
        finally:
            _C.set_allocation_site(None)


@dataclass
class LeakSite:
    site: str                   # "train.py:41 (step) > model.py:12 (forward)"
    bytes_per_step: float       # left alive per step
    allocations_per_step: float


@dataclass
class LeakReport:
    detected: bool              # memory grew steadily after warm-up
    bytes_per_step: float
    first_step: int             # the first step after which memory never came back down (-1: none)
    steps: int
    sites: List[LeakSite]       # what the last steps left alive, by the lines that made it
    oom_step: int = -1          # the step that ran out of memory (the check stops there); -1: none
    error: str = ""
    # the verdict watches tensor bytes; beside it, how much the process's resident memory grew over
    # the steps after warm-up (Python objects, graphs Python holds, caches: what tensors do not show)
    host_growth_bytes: Optional[int] = None
    data: Dict[str, Any] = field(default_factory=dict, repr=False)
    _text: str = field(default="", repr=False)

    def __str__(self) -> str:
        """What `saturate memory --leak-check-steps` prints."""
        return self._text


_DEFAULTS = _C.defaults()["leak_check"]  # the library's (LeakLoopOptions), one place


def leak_check(step: Callable[[int], Any], batch_size: int, *, device: Optional[str] = None, memory_budget: Size = None,
               steps: int = _DEFAULTS["steps"], site_steps: int = _DEFAULTS["site_steps"],
               warmup_steps: int = _DEFAULTS["warmup_steps"], min_bytes_per_step: int = _DEFAULTS["min_bytes_per_step"],
               model=None, optimizer=None, restore: bool = True) -> LeakReport:
    """Runs `step(batch_size)` `steps` times, as your loop does, and checks that the memory still
    allocated after each step stays flat once warm (`warmup_steps`). A loop that keeps tensors
    across steps (a list of losses with their graphs, of outputs, of activations) grows; the last
    `site_steps` steps then name the lines of your code that made what stays alive. Sites are
    named on CPU (the counting allocator's log); on CUDA the verdict alone. An out-of-memory ends
    the check and is reported (`oom_step`). With restore=True the weights and optimizer state are
    put back afterwards (what your loop kept stays kept: it is yours)."""
    if not callable(step):
        raise TypeError(f"step={step!r} is not callable: give a function that runs one training step at a batch size")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}: give a positive int")
    device = step_device(device, step, model)
    state = StepState(step, model, optimizer)
    runner = StepRunner(step)
    labels = _SiteLabels(step)

    def run(k: int, site_step: bool):
        if site_step:
            with labels:
                return runner(batch_size)
        return runner(batch_size)

    with state.trials(restore):
        leak, data, text = _C.leak_check(run, device=device, budget_bytes=to_bytes(memory_budget, device), steps=int(steps),
                             site_steps=int(site_steps), warmup_steps=int(warmup_steps),
                             min_bytes_per_step=int(min_bytes_per_step))
    if runner.interrupt is not None:
        raise runner.interrupt
    return LeakReport(detected=leak.detected, bytes_per_step=leak.bytes_per_step, first_step=leak.first_step,
                      steps=leak.steps,
                      sites=[LeakSite(s.site, s.bytes_per_step, s.allocations_per_step) for s in leak.sites],
                      oom_step=leak.oom_step, error=leak.error, host_growth_bytes=leak.host_growth_bytes, data=data,
                      _text=text)
