"""saturate.search: the batch-size search on the user's own step."""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from . import _saturate as _C
from ._budget import Size, to_bytes
from ._step import StepRunner, StepState, step_name


@dataclass
class Trial:
    """One trial: `steps` training steps of the user's step at `batch`."""
    batch: int
    status: str                 # "ok", "oom", "over_target" (OOM under the lowered target budget), "error"
    peak_bytes: int             # peak reserved (= allocated on the CPU budget) during the trial
    peak_allocated_bytes: int
    ms_per_step: float          # median of the timed steps (0 unless ok)
    samples_per_s: float
    steps: int
    error: str = ""
    data: Dict[str, Any] = field(default_factory=dict, repr=False)  # every field of the JSON

    @classmethod
    def from_json(cls, j: Dict[str, Any]) -> "Trial":
        return cls(batch=j["batch"], status=j["status"], peak_bytes=j["peak_reserved_bytes"],
                   peak_allocated_bytes=j["peak_allocated_bytes"], ms_per_step=j["step_time_ms"],
                   samples_per_s=j["samples_per_s"], steps=j["steps"], error=j.get("error", ""), data=j)


@dataclass
class SearchResult:
    max_batch: int              # the largest batch that fits (0: batch 1 does not)
    max_batch_exact: bool       # max_batch fit and max_batch + 1 was seen not to
    capped: bool                # the search stopped at max_batch= (the step may fit more)
    recommended_batch: int      # the largest whose peak stays within target_memory of the budget
    throughput_batch: int       # the smallest measured batch within 3 % of the best samples/s
    trials: List[Trial]
    trial_steps: int            # every training step the search ran
    budget_bytes: int
    target_bytes: int
    error: str = ""             # a trial failed with something else than out-of-memory
    # FLOPs counted from the step's matrix products and convolutions (per sample), the rate at
    # the throughput batch, the device's measured GEMM peak and MFU: flops_per_sample,
    # achieved_flops_per_s, peak_flops_per_s, peak_method, mfu, batch
    compute: Dict[str, Any] = field(default_factory=dict)
    data: Dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self, indent: Optional[int] = 2) -> str:
        """The same fields as `saturate search --json`."""
        return json.dumps(self.data, indent=indent)

    def __str__(self) -> str:
        lines = [f"{'batch':>8} {'status':<11} {'peak':>12} {'ms/step':>9} {'samples/s':>10}"]
        for t in self.trials:
            lines.append(f"{t.batch:>8} {t.status:<11} {_C.format_bytes(t.peak_bytes):>12} "
                         f"{t.ms_per_step:>9.2f} {t.samples_per_s:>10.1f}")
        exact = "exact" if self.max_batch_exact else "not exact"
        lines.append(f"max batch {self.max_batch} ({exact}), recommended {self.recommended_batch}, "
                     f"throughput {self.throughput_batch}; {len(self.trials)} trials, {self.trial_steps} steps")
        if self.error:
            lines.append(f"error: {self.error}")
        return "\n".join(lines)


def search(step: Callable[[int], Any], *, device: str = "cuda", memory_budget: Size = None,
           target_memory: float = 0.9, strategy: str = "fit", max_batch: Optional[int] = None,
           min_batch: int = 1, model=None, optimizer=None, restore: bool = True,
           warmup_steps: int = 1, timed_steps: int = 2, monitor: bool = False,
           after_trial: Optional[Callable[[], None]] = None,
           on_trial: Optional[Callable[[Trial], None]] = None) -> SearchResult:
    """Finds the largest batch `step(batch_size)` runs at without running out of memory.

    `step` is one whole training step of yours: it builds a batch of `batch_size`, runs forward,
    loss, backward and the optimizer step. Each trial runs it `warmup_steps + timed_steps` times
    and measures the peak memory and the step time; an out-of-memory is a result (the trial's
    exception and what it held are freed). Before every trial the gradients and optimizer state
    of the step's model and optimizer are dropped, so each trial measures what a fresh run of the
    step holds; they are found in the step's closure and globals, or given as `model=` and
    `optimizer=` (each may be a list). With restore=True (default) their weights and optimizer
    state are put back afterwards.

    memory_budget: bytes, '512MiB', or a fraction of the device (0.8); None: the whole GPU, or on
    CPU the budget of an enclosing `saturate.cpu_memory_budget`. strategy: 'fit' (saturate's),
    'power' or 'binsearch' (Lightning's). min_batch: the first batch of power/binsearch, and the
    smallest batch that is of use (a smaller max is reported in `error`).
    """
    if not callable(step):
        raise TypeError(f"step={step!r} is not callable: give a function that runs one training step at a batch size")
    if max_batch is not None and (not isinstance(max_batch, int) or max_batch < 1):
        raise ValueError(f"max_batch={max_batch!r}: give a positive int, or None for no limit")
    if not isinstance(min_batch, int) or min_batch < 1:
        raise ValueError(f"min_batch={min_batch!r}: give a positive int (default 1)")
    if max_batch is not None and min_batch > max_batch:
        raise ValueError(f"min_batch={min_batch} is above max_batch={max_batch}")
    if strategy not in ("fit", "power", "binsearch"):
        raise ValueError(f"strategy={strategy!r}: use 'fit' (saturate's), 'power' or 'binsearch' (Lightning's)")
    if not isinstance(target_memory, (int, float)) or not 0 < target_memory <= 1:
        raise ValueError(f"target_memory={target_memory!r}: give a fraction of the budget in (0, 1], e.g. 0.9")
    state = StepState(step, model, optimizer)
    runner = StepRunner(step)

    def reset():
        state.reset()
        if after_trial is not None:
            after_trial()

    report = None
    if on_trial is not None:
        report = lambda text: on_trial(Trial.from_json(json.loads(text)))  # noqa: E731
    with state.trials(restore):
        text = _C.search(runner, device, to_bytes(memory_budget, device), float(target_memory), strategy,
                         int(max_batch or 0), max(min_batch, 2), int(warmup_steps), int(timed_steps),
                         state.parameters(), reset, step_name(step), state.optimizer_name(), bool(monitor), report)
    if runner.interrupt is not None:
        raise runner.interrupt
    data = json.loads(text)
    result = SearchResult(max_batch=data["max_batch"], max_batch_exact=data["max_batch_exact"],
                          capped=data["capped"],
                          recommended_batch=data["recommended_batch"], throughput_batch=data["throughput_batch"],
                          trials=[Trial.from_json(t) for t in data["trials"]], trial_steps=data["trial_steps"],
                          budget_bytes=data["budget_bytes"], target_bytes=data["target_bytes"],
                          error=data.get("error", ""), compute=data.get("compute", {}), data=data)
    if result.error and runner.error_traceback:
        result.data["error_traceback"] = runner.error_traceback
        warnings.warn(f"saturate.search stopped: the step failed with an error that is not out-of-memory:\n"
                      f"{runner.error_traceback}", RuntimeWarning, stacklevel=2)
    if result.max_batch < min_batch and not result.error:
        result.error = (f"batch {min_batch} (min_batch) does not fit in {_C.format_bytes(result.budget_bytes)}: "
                        f"the largest that does is {result.max_batch}")
        result.data["error"] = result.error
    return result
