"""The CPU byte budget of this process, and the memory breakdown of one step."""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, Optional

import torch

from . import _saturate as _C
from ._allocator import counting
from ._budget import Size, to_bytes
from ._phases import auto_phases
from ._step import StepRunner, StepState, device_of, step_name


@contextlib.contextmanager
def cpu_memory_budget(size: Size) -> Iterator[int]:
    """Within the block, CPU tensors of this process may hold at most `size` bytes together
    ('512MiB', bytes, or a fraction of RAM): one more allocation raises torch.OutOfMemoryError,
    as a GPU of that size would (what the command line's --memory-budget does). Counted: every
    CPU tensor alive, the ones made before the block included (the model). saturate's counting
    allocator is in charge within the block, the one before it after. Yields the budget in bytes; the previous one (or none)
    is back after the block. Inside another budget the smaller one holds (a block cannot give
    itself more than the block around it allows)."""
    if size is None:
        raise ValueError("cpu_memory_budget(None): give a size such as '512MiB' or a number of bytes")
    budget = to_bytes(size, "cpu", "size")
    with counting():
        before = _C.cpu_counters()["budget_bytes"]
        if before:
            budget = min(budget, before)
        _C.set_cpu_budget(budget)
        try:
            yield budget
        finally:
            _C.set_cpu_budget(before)


def cpu_allocated_bytes() -> int:
    """CPU tensor bytes alive now (every tensor the budget counts)."""
    with counting():
        return _C.cpu_counters()["allocated_bytes"]


@dataclass
class MemoryBreakdown:
    """Where the step's peak memory goes: parameters, gradients, optimizer state, inputs,
    activations, workspace (and for a model sharded with FSDP2 communication buffers and gathered
    weights); the same fields as `saturate memory --json`'s memory_breakdown."""
    parameters_bytes: int
    gradients_bytes: int
    optimizer_state_bytes: int
    inputs_bytes: int
    activations_bytes: int
    workspace_bytes: int
    other_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    peak_phase: str
    table: str = field(repr=False)
    # a model sharded with FSDP2: the collectives' buffers, and units' weights gathered whole
    communication_bytes: int = 0
    gathered_parameters_bytes: int = 0
    data: Dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.data, indent=indent)

    def __str__(self) -> str:
        return self.table


def memory_breakdown(step: Callable[[int], Any], batch_size: int, *, model=None, optimizer=None,
                     device: Optional[str] = None, memory_budget: Size = None, warmup_steps: int = 1,
                     restore: bool = True, phases: str = "auto") -> MemoryBreakdown:
    """Runs `warmup_steps` steps and one recorded step of `step(batch_size)` and splits the peak
    into its parts (as `saturate memory`): the phase in which each allocation was made names it.
    phases="auto" (default): forward, backward and optimizer are marked from hooks on the step's
    model(s) and optimizer(s) (found in its closure, or `model=`, `optimizer=`); "marked": only the
    step's own `saturate.phase` marks (give it when your step marks its phases). A model sharded
    with FSDP2 counts this rank's shards. Raises torch.OutOfMemoryError when the step does not fit."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}: give a positive int")
    if phases not in ("auto", "marked"):
        raise ValueError(f"phases={phases!r}: give 'auto' (forward, backward and optimizer marked from hooks) or "
                         "'marked' (the step's own saturate.phase marks only)")
    state = StepState(step, model, optimizer)
    if device is None:
        device = device_of(state.modules, "cuda" if torch.cuda.is_available() else "cpu")
    runner = StepRunner(step)
    marks = auto_phases(state.modules, state.optimizers) if phases == "auto" else contextlib.nullcontext()
    with state.trials(restore), marks:
        trial, b, data, table = _C.memory_breakdown(runner, batch_size, device, to_bytes(memory_budget, device), state.memory_parameters(),
                                   state.reset, step_name(step), int(warmup_steps))
    if runner.interrupt is not None:
        raise runner.interrupt
    if trial.status != "ok":
        message = trial.error or trial.status
        if trial.status in ("oom", "over-target"):
            raise torch.OutOfMemoryError(f"batch {batch_size} does not fit: {message}")
        raise RuntimeError(f"the step failed at batch {batch_size}: {message}\n{runner.error_traceback or ''}")
    return MemoryBreakdown(parameters_bytes=b.parameters_bytes, gradients_bytes=b.gradients_bytes,
                           optimizer_state_bytes=b.optimizer_state_bytes, inputs_bytes=b.inputs_bytes,
                           activations_bytes=b.activations_bytes, workspace_bytes=b.workspace_bytes,
                           other_bytes=b.other_bytes, peak_allocated_bytes=b.peak_allocated_bytes,
                           peak_reserved_bytes=b.peak_reserved_bytes, peak_phase=b.peak_phase,
                           table=table, data=data, communication_bytes=b.communication_bytes,
                           gathered_parameters_bytes=b.gathered_parameters_bytes)
