"""saturate.monitor: phases, utilization and the bottleneck verdict of the user's own loop."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, TypeVar

import torch

from . import _saturate as _C

T = TypeVar("T")


class phase:
    """Marks a phase of the step for saturate (search trials, memory breakdown, monitor):

        with saturate.phase("forward"):
            loss = loss_fn(model(x), y)

    Names: data_wait, h2d, forward, backward, optimizer, allreduce. Outside a search, breakdown
    or monitor it does nothing (a few hundred nanoseconds)."""

    __slots__ = ("_marker",)

    def __init__(self, name: str):
        self._marker = _C.PhaseMarker(name)

    def __enter__(self) -> "phase":
        self._marker.enter()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._marker.exit(exc_type is None)  # a failed step leaves its phase open, as in C++
        return False


_SAMPLE_HZ = _C.defaults()["monitor"]["sample_hz"]  # the library's (MonitorOptions), one place


@dataclass
class MonitorReport:
    verdict: str                # data-bound, compute-bound, launch-bound, communication-bound, balanced, borderline ("" without timed steps)
    reason: str
    fix: str
    phases_ms: Dict[str, float]  # mean per timed step
    steps: int
    timed_steps: int
    data: Dict[str, Any] = field(default_factory=dict, repr=False)
    between: List[str] = field(default_factory=list)  # borderline: the verdicts it lies between
    shares: Dict[str, float] = field(default_factory=dict)  # each cause's share of the step

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.data, indent=indent)

    def __str__(self) -> str:
        phases = ", ".join(f"{k} {v:.2f} ms" for k, v in self.phases_ms.items() if v > 0)
        text = f"{self.steps} steps ({self.timed_steps} timed): {phases or 'no phases marked'}\n"
        if self.verdict:
            text += f"bottleneck: {self.verdict} - {self.reason}\n"
            if self.fix:
                text += f"fix: {self.fix}\n"
        return text


class Monitor:
    """Samples utilization and times the phases of your loop; `report` after the block.

        with saturate.monitor() as mon:
            for x, y in mon.loop(loader):          # time in the loader is data_wait; one step per batch
                with saturate.phase("forward"):
                    loss = loss_fn(model(x), y)
                with saturate.phase("backward"):
                    loss.backward()
                with saturate.phase("optimizer"):
                    opt.step(); opt.zero_grad()
        print(mon.report)

    Steps can also be marked with `with mon.step():` or `mon.step_begin()` / `mon.step_end()`.
    The first `warmup_steps` steps are not timed."""

    def __init__(self, device: Optional[str] = None, sample_hz: float = _SAMPLE_HZ, warmup_steps: int = 1,
                 trace: Optional[str] = None):
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self._c = _C.LoopMonitor(device, float(sample_hz), int(warmup_steps), trace or "")
        self.report: Optional[MonitorReport] = None

    def __enter__(self) -> "Monitor":
        self._c.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        findings, d, _ = self._c.stop(exc_type is not None)
        b = findings.bottleneck
        self.report = MonitorReport(verdict=b.verdict if b else "", reason=b.reason if b else "",
                                    fix=b.fix if b else "", phases_ms=findings.phases_ms, steps=self._c.steps,
                                    timed_steps=self._c.timed_steps, data=d, between=list(b.between) if b else [],
                                    shares=b.evidence().get("shares", {}) if b else {})
        return False

    def step_begin(self) -> None:
        self._c.step_begin()

    def step_end(self) -> None:
        self._c.step_end()

    class _Step:
        __slots__ = ("_m",)

        def __init__(self, m: "Monitor"):
            self._m = m

        def __enter__(self):
            self._m._c.step_begin()
            return self

        def __exit__(self, exc_type, exc, tb):
            if exc_type is None:
                self._m._c.step_end()
            return False

    def step(self) -> "Monitor._Step":
        return Monitor._Step(self)

    def loop(self, iterable: Iterable[T]) -> Iterator[T]:
        """Yields the items of `iterable`, one step each: the step is the loop's body plus the
        wait for the next item (data_wait); the first item is fetched before the first step."""
        it = iter(iterable)
        try:
            item = next(it)
        except StopIteration:
            return
        while True:
            self._c.step_begin()
            yield item
            done = False
            with phase("data_wait"):
                try:
                    item = next(it)
                except StopIteration:
                    done = True
            self._c.step_end()
            if done:
                return


def monitor(device: Optional[str] = None, sample_hz: float = _SAMPLE_HZ, warmup_steps: int = 1,
            trace: Optional[str] = None) -> Monitor:
    """A Monitor for `with saturate.monitor() as mon:` (see Monitor)."""
    return Monitor(device=device, sample_hz=sample_hz, warmup_steps=warmup_steps, trace=trace)
