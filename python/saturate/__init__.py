"""saturate: the batch size, memory breakdown and bottleneck of *your* training step.

    import saturate
    def step(batch_size):                       # your own step: batch, forward, loss, backward, optimizer
        x, y = make_batch(batch_size)
        loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()
    result = saturate.search(step, device="cuda")  # exact: max_batch fits, max_batch + 1 does not
    print(result.max_batch, result.recommended_batch)

On CPU, `saturate.cpu_memory_budget("512MiB")` (or `memory_budget=`) makes this process run out
of memory at that size, as a GPU of that size would. Import saturate before creating the model:
the budget counts CPU tensors made after the import (SATURATE_NO_CPU_ALLOCATOR=1 turns that off).
"""
from __future__ import annotations

import os as _os

import torch as _torch  # loads LibTorch before the extension that links it

from . import _saturate as _C
from ._boundary import guard as _guard

_guard(_C)  # a number the core cannot hold is a ValueError naming it, from every call (_boundary.py)

if _os.environ.get("SATURATE_NO_CPU_ALLOCATOR", "") in ("", "0"):
    _C.install_cpu_allocator()  # first: the budget sees CPU tensors made from here on

from ._step import is_out_of_memory, release_exception
from ._search import (Alternative, ConfigSearchResult, Decision, Objective, SearchResult, Trial, search, search_configs,
                      search_eval)
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
    "cpu_memory_budget", "memory_breakdown", "MemoryBreakdown", "leak_check", "LeakReport", "LeakSite",
    "plan_for", "Plan",
    "monitor", "Monitor", "MonitorReport", "phase",
    "find_executable_batch_size", "is_out_of_memory", "release_exception",
    "zoo_search", "zoo_memory", "ZooMemoryReport", "fast_paths", "FastPaths",
    "TokenBudgetSampler", "WorstCase", "item_size", "OomGuard", "Backoff",
    "shard_plan", "ShardPlan", "Candidate", "RankMemory", "ShardPrediction", "Prediction",
]
