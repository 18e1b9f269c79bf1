"""saturate: the batch size, memory breakdown and bottleneck of *your* training step.

    import saturate
    def step(batch_size):                       # your own step: batch, forward, loss, backward, optimizer
        x, y = make_batch(batch_size)
        loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()
    result = saturate.search(step, device="cuda")  # exact: max_batch fits, max_batch + 1 does not
    print(result.max_batch, result.recommended_batch)

On CPU, `saturate.cpu_memory_budget("512MiB")` (or `memory_budget=`) makes this process run out
of memory at that size, as a GPU of that size would: every CPU tensor alive counts, the model built
before included. Importing saturate changes nothing in the process: its counting CPU allocator is
in charge only while one of its calls measures (_allocator.py); SATURATE_CPU_ALLOCATOR=import puts
it in charge from the import on (tensors only C++ holds, made before a call, count too).
"""
from __future__ import annotations

import os as _os

import torch as _torch  # loads LibTorch before the extension that links it

from . import _saturate as _C
from ._allocator import watch as _watch
from ._boundary import guard as _guard

_guard(_C)  # a number the core cannot hold is a ValueError naming it, from every call (_boundary.py)
_watch(_C)  # CPU bytes counted while a call measures, the allocator before given back after (_allocator.py)
_C.start_cpu_math()  # a warm-up: MKL's vector math first run on one thread (core/cpu_math.h)
if _os.environ.get("SATURATE_CPU_ALLOCATOR", "") == "import":  # asked for: every CPU tensor from here on
    _C.acquire_cpu_allocator()  # (not released: tensors only C++ holds, a DDP's buckets, count too)
elif _os.environ.get("SATURATE_CPU_ALLOCATOR", "") not in ("", "calls"):
    raise ValueError(f"SATURATE_CPU_ALLOCATOR={_os.environ['SATURATE_CPU_ALLOCATOR']!r}: 'calls' (the default: "
                     "saturate's counting CPU allocator is in charge while its calls measure) or 'import' (from "
                     "`import saturate` on, for the whole process)")

from ._step import is_out_of_memory, release_exception
from ._search import (Alternative, Compute, ConfigSearchResult, Decision, Objective, RankLimit, SearchResult, Trial,
                      search, search_configs, search_eval)
from ._memory import MemoryBreakdown, cpu_memory_budget, memory_breakdown
from ._leak import LeakReport, LeakSite, leak_check
from ._plan import Plan, plan_for
from ._monitor import Monitor, MonitorReport, monitor, phase
from ._accelerate import find_executable_batch_size
from ._fast_paths import FastPaths, fast_paths
from ._zoo import ZooMemoryReport, zoo_memory, zoo_search
from ._data import TokenBudgetSampler, WorstCase, item_size
from ._guard import Backoff, OomGuard
from ._shard_plan import Candidate, Prediction, RankMemory, ShardPlan, ShardPrediction, shard_plan

__version__ = _C.__version__

__all__ = [
    "search", "search_eval", "search_configs", "ConfigSearchResult", "SearchResult", "Trial", "Objective", "Decision", "Alternative",
    "Compute", "RankLimit",
    "cpu_memory_budget", "memory_breakdown", "MemoryBreakdown", "leak_check", "LeakReport", "LeakSite",
    "plan_for", "Plan",
    "monitor", "Monitor", "MonitorReport", "phase",
    "find_executable_batch_size", "is_out_of_memory", "release_exception",
    "zoo_search", "zoo_memory", "ZooMemoryReport", "fast_paths", "FastPaths",
    "TokenBudgetSampler", "WorstCase", "item_size", "OomGuard", "Backoff",
    "shard_plan", "ShardPlan", "Candidate", "RankMemory", "ShardPrediction", "Prediction",
]
