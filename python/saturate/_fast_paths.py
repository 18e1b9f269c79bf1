"""saturate.fast_paths: which of the framework's process-wide switches make *your* step faster at
a batch (seed B7; the command line's `--fast-paths try`), each timed against the choice so far
by the C++ session (session/user_search.h) and kept when the step runs at least 3 % faster."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from . import _saturate as _C
from ._budget import Size, to_bytes
from ._step import StepRunner, StepState, step_device, step_name


@dataclass
class FastPaths:
    chosen: List[str]          # the switches kept: "cudnn_benchmark", "tf32", "threads=N"
    baseline_ms: float         # the step as it was
    chosen_ms: float           # with the chosen switches
    tried: List[Dict[str, Any]]  # every switch tried: name, kept, baseline_ms, with_ms, gain, note
    data: Dict[str, Any] = field(default_factory=dict, repr=False)

    def apply(self) -> None:
        """Turns the chosen switches on in this process (saturate put them back after timing)."""
        if self.chosen:
            _C.apply_fast_paths(",".join(self.chosen))  # the switches as the library sets them


def fast_paths(step: Callable[[int], Any], batch_size: int, *, device: Optional[str] = None, memory_budget: Size = None,
               timed_steps: int = _C.defaults()["fast_paths"]["timed_steps"], model=None, optimizer=None,
               restore: bool = True) -> FastPaths:
    """Times `step(batch_size)` with each switch that applies to a step saturate does not own —
    cudnn.benchmark and TF32 on CUDA, half the CPU threads on a CPU — and returns those that
    made it faster (`.apply()` turns them on). The process's switches are as before afterwards.
    channels_last and fused optimizers change your model and optimizer: set them yourself."""
    if not callable(step):
        raise TypeError(f"step={step!r} is not callable: give a function that runs one training step at a batch size")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}: give a positive int (a batch that fits, e.g. the search's)")
    device = step_device(device, step, model)
    state = StepState(step, model, optimizer)
    runner = StepRunner(step)
    with state.trials(restore):
        choice, data, _ = _C.fast_paths(runner, device=device, batch=batch_size, budget_bytes=to_bytes(memory_budget, device),
                             timed_steps=int(timed_steps), parameters=state.memory_parameters(), after_trial=state.reset,
                             name=step_name(step))
    if runner.interrupt is not None:
        raise runner.interrupt
    tried = [{"name": t.name, "kept": t.kept, "baseline_ms": t.baseline_ms, "with_ms": t.with_ms, "gain": t.gain,
              "note": t.note} for t in choice.tried]
    return FastPaths(chosen=list(choice.chosen), baseline_ms=choice.baseline_ms, chosen_ms=choice.chosen_ms,
                     tried=tried, data=data)
