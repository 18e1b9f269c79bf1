"""saturate's built-in models (mlp, convnet, resnet18, resnet50, gpt) and TorchScript files, searched
and measured from Python through the same C++ sessions `saturate search` and `saturate memory` run:
the same options, the same JSON (session/workload_search.h, session/memory_session.h).

    r = saturate.zoo_search("mlp", width=64, memory_budget="24MiB", objective="throughput")
    m = saturate.zoo_memory("gpt", batch_size=8, leak_check_steps=20, layers=2, seq_len=64)
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from . import _saturate as _C
from ._search import SearchResult


_DEFAULTS = _C.defaults()  # the library's (its option structs), as the command line's flags


def zoo_search(model: str = "convnet", *, device: str = "auto", memory_budget: Optional[str] = None,
               objective: str = _DEFAULTS["objective"], target_memory: float = _DEFAULTS["target_fraction"],
               strategy: str = _DEFAULTS["strategy"], max_batch: int = _DEFAULTS["max_batch"],
               min_batch: int = _DEFAULTS["start_batch"], timed_steps: int = _DEFAULTS["measure_steps"],
               knee_fraction: float = _DEFAULTS["knee_fraction"], noise_steps: int = _DEFAULTS["noise_steps"],
               base_batch: int = _DEFAULTS["base_batch"], precision: str = "fp32",
               **model_options: Any) -> SearchResult:
    """`saturate search --model MODEL` with synthetic batches. `model_options` are the command
    line's model flags as keywords: input="3x32x32", classes, layers, width, heads, seq_len, vocab,
    tokens, seed, optimizer, lr, threads. `memory_budget` as --memory-budget ("512MiB", "0.9");
    None: 4 GiB on CPU, the whole GPU on CUDA."""
    outcome = _C.zoo_search(model=model, device=device, memory_budget=memory_budget or "",
                            target_fraction=float(target_memory), strategy=strategy,
                            max_batch=int(max_batch or 0), start_batch=int(min_batch),
                            measure_steps=int(timed_steps), objective=objective,
                            knee_fraction=float(knee_fraction), noise_steps=int(noise_steps),
                            base_batch=int(base_batch or 0), precision=precision, spec=model_options)
    return SearchResult.from_outcome(outcome)


@dataclass
class ZooMemoryReport:
    """`saturate memory`'s result: the recorded step, its breakdown, timeline and leak check."""
    data: Dict[str, Any] = field(default_factory=dict, repr=False)
    text: str = field(default="", repr=False)
    leak_detected: bool = False  # a leak check ran (leak_check_steps) and found memory growing

    def to_json(self, indent: Optional[int] = 2) -> str:
        """The same fields as `saturate memory --json`."""
        return json.dumps(self.data, indent=indent)

    def __str__(self) -> str:
        return self.text


def zoo_memory(model: str = "convnet", *, batch_size: int, device: str = "auto",
               memory_budget: Optional[str] = None, warmup_steps: int = 1, leak_check_steps: int = 0,
               keep_loss: bool = False, precision: str = "fp32", **model_options: Any) -> ZooMemoryReport:
    """`saturate memory --model MODEL --batch N`: one step's breakdown and timeline, and with
    leak_check_steps a run of steps checked for a leak (keep_loss: a deliberate one)."""
    result, data, console = _C.zoo_memory(model=model, device=device, memory_budget=memory_budget or "",
                                          batch=int(batch_size), warmup_steps=int(warmup_steps),
                                          leak_check_steps=int(leak_check_steps), keep_loss=bool(keep_loss),
                                          precision=precision, spec=model_options)
    return ZooMemoryReport(data=data, text=console, leak_detected=result.leak_detected)
