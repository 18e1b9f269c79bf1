"""saturate.plan_for: the batch for another GPU, predicted from two small recorded steps of the
user's own step here (seed B10; the command line's `--plan-for`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence

from . import _saturate as _C
from ._budget import Size, to_bytes
from ._step import StepRunner, StepState, step_device, step_name


@dataclass
class Plan:
    target: str                     # the card ("h100-80gb") or the size as given
    capacity_bytes: int
    max_batch: int                  # the largest batch predicted to fit (0: batch 1 does not)
    recommended_batch: int          # the largest within target_memory of the card
    predicted_peak_bytes: int       # the allocator's peak at recommended_batch
    predicted_max_peak_bytes: int   # ... at max_batch
    data: Dict[str, Any] = field(default_factory=dict, repr=False)
    _text: str = field(default="", repr=False)

    def __str__(self) -> str:
        """What `saturate search --plan-for` prints."""
        return self._text


_DEFAULTS = _C.defaults()["plan_for"]  # the library's (PlanRunOptions), one place


def plan_for(step: Callable[[int], Any], target: str, *, device: Optional[str] = None, memory_budget: Size = None,
             batches: Sequence[int] = (_DEFAULTS["batch_a"], _DEFAULTS["batch_b"]),
             target_memory: float = _DEFAULTS["target_fraction"], allocator: Optional[str] = None,
             model=None, optimizer=None, restore: bool = True) -> Plan:
    """Predicts the largest and the recommended batch of `step` on `target`: a card
    ("rtx4090", "a100-40gb", "a100-80gb", "h100-80gb", "h200") or a size ("24GiB"). Two steps at
    the small `batches` are recorded here, allocation by allocation; the target's allocator
    (`allocator`: "cuda-caching", the default, or "exact" for a CPU budget) is replayed over the
    trace extrapolated to each batch. A prediction, checked on a GPU only by running there."""
    if not callable(step):
        raise TypeError(f"step={step!r} is not callable: give a function that runs one training step at a batch size")
    if len(batches) != 2 or not all(isinstance(b, int) for b in batches):
        raise ValueError(f"batches={batches!r}: give two distinct positive ints, e.g. (4, 8)")
    device = step_device(device, step, model)
    state = StepState(step, model, optimizer)
    runner = StepRunner(step)
    with state.trials(restore):
        plan, data, text = _C.plan_for(runner, target=target, device=device, budget_bytes=to_bytes(memory_budget, device),
                           batch_a=int(batches[0]), batch_b=int(batches[1]), target_fraction=float(target_memory),
                           allocator=allocator or "", parameters=state.memory_parameters(), after_trial=state.reset,
                           name=step_name(step))
    if runner.interrupt is not None:
        raise runner.interrupt
    return Plan(target=plan.target, capacity_bytes=plan.capacity_bytes, max_batch=plan.max_batch,
                recommended_batch=plan.recommended_batch, predicted_peak_bytes=plan.predicted_peak_bytes,
                predicted_max_peak_bytes=plan.predicted_max_peak_bytes, data=data, _text=text)
