"""saturate.shard_plan: how to split a model over the ranks, searched with the batch (issue 42, seed M10).

For each strategy (replicated, FSDP2 resharding after forward, FSDP2 keeping the forward's
parameters) with and without activation checkpointing of the units, a cheap check first: the
strategy's model states a rank (weights, gradients, optimizer state: the law below) against the
smallest rank's budget; one that cannot fit is not searched. The others are built from a fresh
model, searched exactly on every rank together (saturate.search with ranks, the agreement points
of a sharded step: no hang when one rank runs out of memory) and timed at their memory-safe
micro-batch with their real collectives. The plan is the candidate with the most samples/s (or
the largest batch, objective="memory").

Model states a rank, P the weights' bytes, k the optimizer's state bytes per weight byte (measured
on one tensor: 2 for Adam), N ranks, U the largest unit's weights:

    ddp              (2 + k) P                 every rank holds everything
    fsdp             (2 + k) P / N + 2 U       a shard of each, and two units gathered (the one
                                               running and the one prefetched)
    fsdp_no_reshard  P + (1 + k) P / N         every unit's weights stay gathered from its forward
                                               to its backward
"""
from __future__ import annotations

import contextlib
import gc
import json
import math
import time
import types
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from . import _saturate as _C
from ._allocator import counted
from ._budget import Size, current_cpu_budget, to_bytes
from ._memory import cpu_memory_budget, memory_breakdown
from ._shard_sync import agreement_points
from ._step import StepRunner, local_tensor

STRATEGIES = ("ddp", "fsdp_no_reshard", "fsdp")
OBJECTIVES = ("throughput", "memory")
NEAR = 0.03  # candidates within 3 % of the best samples/s: the simpler one wins (the list's order)


@dataclass
class Candidate:
    """One strategy, with or without checkpointing: whether it fits, its batch and its speed."""
    strategy: str
    checkpointing: bool
    fits: bool = False
    reason: str = ""                # why it does not fit, or was not searched
    searched: bool = False          # False: ruled out by the cheap check, no trial ran
    model_state_bytes: int = 0      # a rank's model states by the law (module docstring)
    max_batch: int = 0              # micro-batch a rank, exact when max_batch_exact
    max_batch_exact: bool = False
    capped: bool = False            # the search stopped at the global batch a rank (no need for more)
    micro_batch: int = 0            # the memory-safe one (the search's recommended batch)
    samples_per_s: float = 0.0      # every rank together, at micro_batch, with the real collectives
    step_ms: float = 0.0            # the slowest rank's step
    trials: int = 0                 # every trial of its search (the micro-batch's included)
    trials_to_max: int = 0          # ... up to the one that settled max_batch (max and max + 1 both tried)
    search_s: float = 0.0
    peak_bytes: List[int] = field(default_factory=list)  # per rank, in the timed steps at micro_batch
    # the search's memory model, the largest over the ranks: peak = fixed_bytes + per_sample_bytes x batch
    fixed_bytes: int = 0
    per_sample_bytes: int = 0
    # the search's trials that fit, [batch, peak bytes] (the largest rank's), by batch: the law's evidence
    trial_peaks: List[List[int]] = field(default_factory=list, repr=False)
    # the step's segments (between each unit's forward, its backward, the optimizer's step), each
    # its own [fixed, per sample, bytes of sharded states it holds], every rank's: peak(b) = max
    # over them. Measured at the
    # micro-batch and a third of it; where the peak moves from one segment to another as the
    # batch grows, one line through two trials cannot see it (GPT-2: 4.3 MiB a sample up to batch 6,
    # 5.7 past it, in another part of the backward)
    segment_laws: List[List[int]] = field(default_factory=list, repr=False)
    # per rank: budget, weights, gradients, optimizer state bytes (its own shards), 4 numbers a rank
    rank_bytes: List[int] = field(default_factory=list, repr=False)
    # per rank: saturate.memory_breakdown's parts of the peak at micro_batch (_BREAKDOWN_PARTS, bytes)
    breakdown: List[Dict[str, int]] = field(default_factory=list, repr=False)

    @property
    def name(self) -> str:
        return self.strategy + (" + checkpointing" if self.checkpointing else "")


_BREAKDOWN_PARTS = ("parameters_bytes", "gathered_parameters_bytes", "gradients_bytes", "optimizer_state_bytes",
                    "inputs_bytes", "activations_bytes", "communication_bytes", "workspace_bytes", "other_bytes",
                    "peak_allocated_bytes")


@dataclass
class RankMemory:
    """One rank under the plan: its budget, its measured peak at the micro-batch, and what the
    model states of the plan's strategy take on it (measured: the local shards). `breakdown`: the
    peak of one step at the micro-batch split by saturate.memory_breakdown (the phase each
    allocation was made in; its parts add up to its own peak_allocated_bytes): this rank's shards of
    weights, the units' weights gathered whole, gradients live at the peak, optimizer state,
    activations, the collectives' buffers (communication: all-gather outputs, reduce-scatter inputs,
    the backend's copies), and workspace (the rest: the gathered units' gradients before their
    reduce-scatter among it)."""
    rank: int
    budget_bytes: int
    peak_bytes: int
    parameters_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    breakdown: Dict[str, int] = field(default_factory=dict)


@dataclass
class ShardPlan:
    """How to train: `strategy` ("ddp", "fsdp", "fsdp_no_reshard"), `checkpointing`, a rank's
    `micro_batch` and `accumulation` steps to reach `global_batch`; `apply(model)` wraps a model
    so (make its optimizer after)."""
    strategy: str
    checkpointing: bool
    micro_batch: int
    accumulation: int
    global_batch: int               # micro_batch x world_size x accumulation
    max_batch: int
    max_batch_exact: bool
    samples_per_s: float
    world_size: int
    units: List[str]                # the module names wrapped as units (fully_shard / checkpointed)
    mixed_precision: Optional[str]
    candidates: List[Candidate]
    ranks: List[RankMemory]
    min_world_size: Dict[str, Optional[int]]  # per strategy at this budget (model states only); None: never
    reason: str
    objective: str
    parameter_bytes: int
    optimizer_state_factor: float
    largest_unit_bytes: int
    device: str = "cpu"

    def apply(self, model: torch.nn.Module) -> torch.nn.Module:
        """`model` wrapped as planned (checkpointing on the units, then DDP or fully_shard on each
        unit and the root). A collective under torchrun: every rank, the same model."""
        return _wrap(model, self.strategy, self.checkpointing, self.units, self.mixed_precision, self.device)

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(asdict(self), indent=indent)

    def predict(self, world_size: int, memory_budget: Size = None, target_memory: float = 0.9) -> "ShardPrediction":
        """Each candidate on `world_size` ranks of `memory_budget` (bytes, '80GiB', or a card of
        plan_for's table: 'h100-80gb'; default: the smallest budget here), from what was measured
        here: a searched candidate's segment lines (each part of its step, every rank's: fixed + per
        sample, and the sharded states it holds, which scale with the world size; docs/sharding.md),
        or its one line with the model states moved by the law when it has none. Weights and
        activations keep their dtype and device: a prediction for another GPU assumes the same
        step there (its kernels' workspaces may differ)."""
        if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
            raise ValueError(f"world_size={world_size!r}: give the number of ranks, a positive int")
        if isinstance(memory_budget, str) and memory_budget and not memory_budget[0].isdigit():
            name, budget = _C.plan_target(memory_budget)
        elif memory_budget is None:
            name, budget = "the smallest budget here", min(r.budget_bytes for r in self.ranks)
        else:
            budget = to_bytes(memory_budget, "cpu")
            name = _C.format_bytes(budget)
        rows = []
        for c in self.candidates:
            states = model_state_bytes(c.strategy, self.parameter_bytes, self.optimizer_state_factor,
                                       self.largest_unit_bytes, world_size)
            row = Prediction(strategy=c.strategy, checkpointing=c.checkpointing, model_state_bytes=states)
            if states >= budget:
                row.reason = f"its model states alone take {_C.format_bytes(states)} a rank"
            elif not c.searched or c.per_sample_bytes <= 0:
                row.reason = "not measured here (not searched): model states fit, activations unknown"
            else:
                row.segment_laws = self._laws_on(c, world_size)
                row.max_batch, binding = _largest_batch(row.segment_laws, budget)
                row.micro_batch, _ = _largest_batch(row.segment_laws, target_memory * budget)
                row.fixed_bytes, row.per_sample_bytes = binding
                row.fits = row.max_batch >= 1
                if not row.fits:
                    row.reason = f"batch 1 would take {_C.format_bytes(row.peak_bytes(1))}"
            rows.append(row)
        worlds = {}
        for c in self.candidates:
            if c.searched and c.per_sample_bytes > 0:
                worlds[c.name] = next((n for n in range(1, 4097)
                                       if max(f + a for f, a in self._laws_on(c, n)) <= budget), None)
        return ShardPrediction(world_size=world_size, budget_bytes=budget, target=name, from_world_size=self.world_size,
                               candidates=rows, min_world_size=worlds)

    def _laws_on(self, c: Candidate, world_size: int) -> List[List[int]]:
        """The candidate's [fixed, per sample] laws on `world_size` ranks: each segment's sharded
        states (measured at the segment: weight shards, the gradients it holds, optimizer state)
        scaled from this world size to that one (replicated states stay); without segments, its one
        line with the model states moved by the law."""
        if c.segment_laws:
            scale = self.world_size / world_size - 1 if c.strategy != "ddp" else 0.0
            return [[int(f + held * scale), a] for f, a, held in c.segment_laws]
        here = model_state_bytes(c.strategy, self.parameter_bytes, self.optimizer_state_factor,
                                 self.largest_unit_bytes, self.world_size)
        there = model_state_bytes(c.strategy, self.parameter_bytes, self.optimizer_state_factor,
                                  self.largest_unit_bytes, world_size)
        return [[c.fixed_bytes - here + there, c.per_sample_bytes]]

    def __str__(self) -> str:
        fmt = _C.format_bytes
        exact = "exact" if self.max_batch_exact else "not exact"
        lines = [f"shard plan     {self.strategy}{' + checkpointing' if self.checkpointing else ''} on "
                 f"{self.world_size} rank(s): micro-batch {self.micro_batch} (max {self.max_batch}, {exact}) x "
                 f"{self.accumulation} accumulation x {self.world_size} ranks = global batch {self.global_batch}; "
                 f"{self.samples_per_s:.1f} samples/s",
                 f"why            {self.reason}",
                 f"units          {_units_text(self.units)} and the root",
                 f"model states   weights {fmt(self.parameter_bytes)}, optimizer state {self.optimizer_state_factor:g}x "
                 f"weights, largest unit {fmt(self.largest_unit_bytes)}",
                 "",
                 f"{'candidate':<30} {'states/rank':>12} {'max batch':>10} {'micro':>6} {'samples/s':>10} "
                 f"{'trials':>11} {'search':>8}"]
        for c in self.candidates:
            head = f"{c.name:<30} {fmt(c.model_state_bytes):>12} "
            if not c.fits:
                lines.append(head + c.reason)
                continue
            mark = "" if c.max_batch_exact else ("+" if c.capped else "?")
            lines.append(head + f"{str(c.max_batch) + mark:>10} {c.micro_batch:>6} {c.samples_per_s:>10.1f} "
                                f"{f'{c.trials_to_max} ({c.trials})':>11} {c.search_s:>7.1f}s")
        lines.append("")
        for r in self.ranks:
            lines.append(f"rank {r.rank:<9} budget {fmt(r.budget_bytes)}, peak {fmt(r.peak_bytes)}: weights "
                         f"{fmt(r.parameters_bytes)}, gradients {fmt(r.gradients_bytes)}, optimizer state "
                         f"{fmt(r.optimizer_bytes)} (this rank's shards)")
            b = r.breakdown
            if b:
                lines.append(f"{'':15}one step's peak {fmt(b['peak_allocated_bytes'])}: weights "
                             f"{fmt(b['parameters_bytes'])} + {fmt(b.get('gathered_parameters_bytes', 0))} gathered, "
                             f"gradients {fmt(b['gradients_bytes'])}, optimizer state "
                             f"{fmt(b['optimizer_state_bytes'])}, activations {fmt(b['activations_bytes'])}, "
                             f"communication buffers {fmt(b.get('communication_bytes', 0))}, workspace "
                             f"{fmt(b['workspace_bytes'])}, inputs {fmt(b['inputs_bytes'])}, other {fmt(b['other_bytes'])}")
        law = model_state_bytes(self.strategy, self.parameter_bytes, self.optimizer_state_factor,
                                self.largest_unit_bytes, self.world_size)
        lines.append(f"law            {self.strategy}: model states {fmt(law)} a rank ("
                     + {"ddp": "(2 + k) P", "fsdp": "(2 + k) P / N + 2 U",
                        "fsdp_no_reshard": "P + (1 + k) P / N"}[self.strategy]
                     + f", k = {self.optimizer_state_factor:g})")
        worlds = ", ".join(f"{s} {'never' if n is None else n}" for s, n in self.min_world_size.items())
        lines.append(f"min world size {worlds} (ranks of the smallest budget, model states only)")
        return "\n".join(lines)


@dataclass
class Prediction:
    """One candidate on another world size and budget (ShardPlan.predict)."""
    strategy: str
    checkpointing: bool
    model_state_bytes: int            # a rank's, by the law
    fits: bool = False
    reason: str = ""
    fixed_bytes: int = 0              # predicted: the measured fixed cost with the model states moved
    per_sample_bytes: int = 0
    max_batch: int = 0                # a rank's largest micro-batch that fits the budget
    micro_batch: int = 0              # ... within target_memory of it
    # each segment's [fixed, per sample] with the model states moved (Candidate.segment_laws);
    # fixed_bytes and per_sample_bytes are the segment that binds at max_batch
    segment_laws: List[List[int]] = field(default_factory=list, repr=False)

    @property
    def name(self) -> str:
        return self.strategy + (" + checkpointing" if self.checkpointing else "")

    def peak_bytes(self, batch: int) -> int:
        """The predicted peak of a rank at `batch` items a rank."""
        laws = self.segment_laws or [[self.fixed_bytes, self.per_sample_bytes]]
        return max(f + a * batch for f, a in laws)


@dataclass
class ShardPrediction:
    world_size: int
    budget_bytes: int
    target: str
    from_world_size: int
    candidates: List[Prediction]
    min_world_size: Dict[str, Optional[int]]  # per searched candidate: the fewest ranks where batch 1 fits

    def __str__(self) -> str:
        fmt = _C.format_bytes
        lines = [f"predicted for {self.world_size} ranks of {fmt(self.budget_bytes)} ({self.target}), from "
                 f"{self.from_world_size} measured here",
                 f"{'candidate':<30} {'states/rank':>12} {'fixed':>11} {'per sample':>11} {'max batch':>10} {'micro':>6}"]
        for p in self.candidates:
            head = f"{p.name:<30} {fmt(p.model_state_bytes):>12} "
            if p.fits:
                lines.append(head + f"{fmt(p.fixed_bytes):>11} {fmt(p.per_sample_bytes):>11} {p.max_batch:>10} "
                                    f"{p.micro_batch:>6}")
            else:
                lines.append(head + "does not fit: " + p.reason if "not measured" not in p.reason else head + p.reason)
        worlds = ", ".join(f"{k} {'never' if v is None else v}" for k, v in self.min_world_size.items())
        lines.append(f"min world size {worlds} (batch 1 within the budget, activations included)")
        return "\n".join(lines)


def _units_text(units: Sequence[str]) -> str:
    if not units:
        return "none"
    if len(units) <= 3:
        return ", ".join(units)
    return f"{len(units)} blocks ({units[0]} .. {units[-1]})"


# -- the model's units ------------------------------------------------------------------------

def find_units(model: torch.nn.Module, classes: Optional[Sequence[str]] = None) -> List[str]:
    """The names of the modules to wrap as units: those of `classes` (class names, outermost
    ones), or the repeated blocks: the children of one ModuleList/Sequential that share a class,
    the container whose blocks hold the most parameters."""
    if classes is not None:
        if isinstance(classes, str) or not all(isinstance(c, str) for c in classes) or not classes:
            raise ValueError(f"units={classes!r}: give a list of module class names, e.g. ['GPT2Block']")
        wanted, names = set(classes), []
        for name, m in model.named_modules():
            if name and type(m).__name__ in wanted and not any(name.startswith(n + ".") for n in names):
                names.append(name)
        if not names:
            present = sorted({type(m).__name__ for _, m in model.named_modules()})
            raise ValueError(f"units={list(classes)!r}: no module of these classes in the model; its classes are "
                             f"{', '.join(present[:20])}")
        return names
    best: List[str] = []
    best_params = 0
    for name, m in model.named_modules():
        if not isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        by_class: Dict[type, List[str]] = {}
        for child_name, child in m.named_children():
            by_class.setdefault(type(child), []).append(child_name)
        for cls, children in by_class.items():
            if len(children) < 2:
                continue
            params = sum(p.numel() for c in children for p in getattr(m, c).parameters())
            if params > best_params:
                best_params = params
                best = [f"{name}.{c}" if name else c for c in children]
    if not best:
        raise ValueError("found no repeated blocks to shard (a ModuleList or Sequential of modules of one class): "
                         "give units=[the block's class name]")
    return best


def _module(model: torch.nn.Module, name: str) -> torch.nn.Module:
    return model.get_submodule(name)


def _unit_param_bytes(model: torch.nn.Module, units: Sequence[str]) -> List[int]:
    """Each unit's weights, and last the root's own (those in no unit)."""
    inside, sizes = set(), []
    for name in units:
        ps = list(_module(model, name).parameters())
        inside.update(id(p) for p in ps)
        sizes.append(sum(p.numel() * p.element_size() for p in ps))
    sizes.append(sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in inside))
    return sizes


# -- wrapping ---------------------------------------------------------------------------------

def _checkpointed(unit: torch.nn.Module) -> None:
    """The unit's forward under torch.utils.checkpoint (non-reentrant, RNG state preserved): its
    activations are recomputed in the backward instead of kept."""
    from torch.utils.checkpoint import checkpoint

    inner = unit.forward

    def forward(self, *args, **kwargs):
        return checkpoint(inner, *args, use_reentrant=False, preserve_rng_state=True, **kwargs)

    unit.forward = types.MethodType(forward, unit)


_MESHES: Dict[str, Any] = {}


def _mesh(device: str):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    kind = torch.device(device).type
    if kind not in _MESHES:
        _MESHES[kind] = init_device_mesh(kind, (dist.get_world_size(),))
    return _MESHES[kind]


def _wrap(model: torch.nn.Module, strategy: str, checkpointing: bool, units: Sequence[str],
          mixed_precision: Optional[str], device: str) -> torch.nn.Module:
    model = _wrapped(model, strategy, checkpointing, units, mixed_precision, device)
    # the whole weights fully_shard replaced can sit in reference cycles until Python's collector
    # runs: up to the model's size counted against the rank's memory for the first steps, or not,
    # as the collector's timing falls (measured: GPT-2's max micro-batch 6, 7 or 8 from run to run)
    gc.collect()
    return model


def _wrapped(model: torch.nn.Module, strategy: str, checkpointing: bool, units: Sequence[str],
             mixed_precision: Optional[str], device: str) -> torch.nn.Module:
    import torch.distributed as dist

    if strategy not in STRATEGIES:
        raise ValueError(f"strategy={strategy!r}: one of {', '.join(STRATEGIES)}")
    missing = [u for u in units if not _has(model, u)]
    if missing:
        raise ValueError(f"the model has no module {missing[0]!r} (a unit of the plan): apply the plan to a model "
                         "made as the one it was planned for")
    if checkpointing:
        for name in units:
            _checkpointed(_module(model, name))
        # a Hugging Face model's key/value cache under recomputation: each recomputed block appends
        # to the step's cache again, and the cache outlived the step (measured: 17 MiB kept after
        # a plan of GPT-2); transformers' own gradient_checkpointing_enable() turns it off so too
        config = getattr(model, "config", None)
        if getattr(config, "use_cache", False):
            config.use_cache = False
    dev = torch.device(device)
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = model.to(dev)
        if not dist.is_initialized() or dist.get_world_size() < 2:
            return model
        return DistributedDataParallel(model, device_ids=[dev] if dev.type == "cuda" else None,
                                       gradient_as_bucket_view=True)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy()
    if mixed_precision == "bf16":
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    reshard = strategy == "fsdp"
    mesh = _mesh(device)
    for name in units:
        fully_shard(_module(model, name), mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    return model


def _has(model: torch.nn.Module, name: str) -> bool:
    try:
        model.get_submodule(name)
        return True
    except AttributeError:
        return False


# -- the law ----------------------------------------------------------------------------------

def optimizer_state_factor(make_optimizer: Callable[[Any], torch.optim.Optimizer]) -> float:
    """The optimizer's state bytes per weight byte, measured: one step of a fresh optimizer over
    one weight tensor (Adam: 2, SGD with momentum: 1, plain SGD: 0)."""
    w = torch.nn.Parameter(torch.zeros(4096))
    opt = make_optimizer([w])
    w.grad = torch.zeros_like(w)
    opt.step()
    state = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                if torch.is_tensor(t) and t.numel() == w.numel())
    return state / (w.numel() * w.element_size())


def model_state_bytes(strategy: str, parameter_bytes: int, factor: float, largest_unit_bytes: int,
                      world_size: int) -> int:
    """A rank's model states under `strategy` by the law (module docstring): the core's one law
    (search/fixed_cost.h), which the command line's "shard it over at least N ranks" uses too."""
    return int(_C.shard_model_state_bytes(strategy, int(parameter_bytes), float(factor), int(largest_unit_bytes),
                                          int(world_size)))


def min_world_size(strategy: str, parameter_bytes: int, factor: float, largest_unit_bytes: int,
                   budget_bytes: int) -> Optional[int]:
    """The fewest ranks of `budget_bytes` whose model states fit under `strategy` (None: none do)."""
    n = int(_C.shard_min_world_size(strategy, int(parameter_bytes), float(factor), int(largest_unit_bytes),
                                    int(budget_bytes)))
    return n or None


# -- the plan ---------------------------------------------------------------------------------

@counted  # the candidates' models, built here (a DDP's gradient buckets only C++ holds), are counted
def shard_plan(make_model: Callable[[], torch.nn.Module], make_optimizer: Callable[[Any], torch.optim.Optimizer],
               step: Callable[[torch.nn.Module, torch.optim.Optimizer, int], Any], *, memory_budget: Size = None,
               ranks: Any = "auto", global_batch: Optional[int] = None, units: Optional[Sequence[str]] = None,
               strategies: Optional[Sequence[str]] = None, checkpointing: Any = "auto",
               objective: str = "throughput", mixed_precision: Optional[str] = None, device: str = "cuda",
               timed_steps: int = 2) -> ShardPlan:
    """Chooses how to split the model over the ranks, and the micro-batch (seed M10).

    `make_model()` returns a fresh model (on the CPU, or the meta device's factories permitting),
    `make_optimizer(params)` its optimizer, `step(model, optimizer, batch_size)` one training step
    at a rank's micro-batch. Under torchrun (torch.distributed initialised; a collective: call it
    on every rank with the same arguments but each rank's own `memory_budget`). Each strategy of
    `strategies` (default: "ddp", "fsdp_no_reshard", "fsdp"), without and with activation
    checkpointing of the units (`checkpointing`: "auto" both, True or False only), is checked
    against the smallest rank's budget by its model states, then searched exactly and timed; the
    plan is the fastest (`objective="throughput"`) or the one with the largest micro-batch
    ("memory"). `units`: class names of the blocks to wrap (default: the repeated blocks found).
    `global_batch`: the samples an optimizer step must see; the plan's accumulation reaches it and
    no micro-batch above global_batch / ranks is searched. `mixed_precision="bf16"`: FSDP2's bf16
    parameters with fp32 gradient reduction. `memory_budget`: this rank's, as `saturate.search`.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("shard_plan runs on every rank under torchrun: call "
                           "torch.distributed.init_process_group() first (e.g. torchrun --nproc-per-node 2 train.py)")
    from ._ranks import TorchRanks, agree
    from ._search import search

    try:
        chosen = list(strategies) if strategies is not None else list(STRATEGIES)
    except TypeError:  # not a list: refused in check()
        chosen = []
    budgets_here: List[int] = []

    def check() -> None:
        if not callable(make_model) or not callable(make_optimizer) or not callable(step):
            raise TypeError("shard_plan(make_model, make_optimizer, step): give make_model() -> a fresh nn.Module, "
                            "make_optimizer(params) -> its optimizer, step(model, optimizer, batch_size) -> one step")
        if objective not in OBJECTIVES:
            raise ValueError(f"objective={objective!r}: give one of {', '.join(OBJECTIVES)}")
        bad = [s for s in chosen if s not in STRATEGIES]
        if bad or not chosen:
            raise ValueError(f"strategies={strategies!r}: give a list of {', '.join(STRATEGIES)}")
        if checkpointing not in ("auto", True, False):
            raise ValueError(f"checkpointing={checkpointing!r}: give 'auto' (without and with), True or False")
        if mixed_precision not in (None, "bf16"):
            raise ValueError(f"mixed_precision={mixed_precision!r}: give None (fp32) or 'bf16'")
        if global_batch is not None and (not isinstance(global_batch, int) or global_batch < 1):
            raise ValueError(f"global_batch={global_batch!r}: give a positive int, or None")
        if ranks != "auto":
            raise ValueError(f"ranks={ranks!r}: shard_plan runs on the default group ('auto')")
        mine = to_bytes(memory_budget, device) or (current_cpu_budget() or 0 if torch.device(device).type == "cpu"
                                                    else int(_C.device_capacity(device)))
        if mine <= 0:
            raise ValueError("memory_budget=None and no CPU budget is set: give memory_budget= (this rank's bytes)")
        budgets_here.append(mine)

    group = TorchRanks()
    world = group.world_size
    # every rank at once: a refused or mismatched call stops all of them here, none waits
    agree(group, "saturate.shard_plan", dict(
        strategies=chosen, checkpointing=checkpointing, objective=objective, mixed_precision=mixed_precision,
        global_batch=global_batch, units=list(units) if units is not None else None, timed_steps=timed_steps), check)
    budget = budgets_here[0]
    budgets = group.all_gather([budget])
    smallest = min(budgets)

    # the model's size and units, from a model made on the meta device (no memory) when it can be
    try:
        with torch.device("meta"):
            shape = make_model()
    except Exception:  # noqa: BLE001 - a model that cannot be made on meta: a real one, dropped at once
        shape = make_model()
    unit_names = find_units(shape, units)
    sizes = _unit_param_bytes(shape, unit_names)
    parameter_bytes = sum(sizes)
    largest_unit = max(sizes)
    del shape
    factor = optimizer_state_factor(make_optimizer)

    per_rank_cap = math.ceil(global_batch / world) if global_batch else None
    variants = [False, True] if checkpointing == "auto" else [bool(checkpointing)]
    candidates: List[Candidate] = []
    for strategy in chosen:
        for ckpt in variants:
            c = Candidate(strategy=strategy, checkpointing=ckpt,
                          model_state_bytes=model_state_bytes(strategy, parameter_bytes, factor, largest_unit, world))
            candidates.append(c)
            if world < 2 and strategy != "ddp":
                c.reason = "one rank: nothing to shard"
                continue
            if c.model_state_bytes >= smallest:
                c.reason = (f"does not fit: its model states alone take {_C.format_bytes(c.model_state_bytes)} a rank "
                            f"(law), over the smallest budget {_C.format_bytes(smallest)}")
                continue
            same = next((o for o in candidates if o.strategy == strategy and not o.checkpointing and o.fits), None)
            if ckpt and same is not None and per_rank_cap is not None and same.micro_batch >= per_rank_cap:
                c.reason = (f"not searched: {same.name} already runs the global batch a rank ({per_rank_cap}) "
                            "within the memory target without checkpointing, which only adds compute")
                continue
            _run_candidate(c, make_model, make_optimizer, step, unit_names, mixed_precision, device, budget,
                           per_rank_cap, timed_steps, group, search)

    fitting = [c for c in candidates if c.fits]
    worlds = {s: min_world_size(s, parameter_bytes, factor, largest_unit, smallest) for s in chosen}
    if not fitting:
        need = [f"{s}: {n} ranks" for s, n in worlds.items() if n is not None]
        raise RuntimeError(f"no strategy fits {world} rank(s) of {_C.format_bytes(smallest)} (the smallest budget): "
                           + "; ".join(f"{c.name}: {c.reason}" for c in candidates)
                           + (f". Model states alone need at least {', '.join(need)}" if need else ""))
    best, reason = _choose(fitting, objective)
    micro = best.micro_batch
    accumulation = 1
    target = global_batch or micro * world
    if global_batch:
        accumulation = math.ceil(global_batch / (world * best.micro_batch))
        micro = math.ceil(global_batch / (world * accumulation))
        if micro * world * accumulation != global_batch:
            reason += (f"; global batch {global_batch} is not a multiple of {world} ranks x {accumulation} steps: "
                       f"{micro * world * accumulation} samples a step")
        target = micro * world * accumulation
    memories = _rank_memories(best, group)
    return ShardPlan(strategy=best.strategy, checkpointing=best.checkpointing, micro_batch=micro,
                     accumulation=accumulation, global_batch=target, max_batch=best.max_batch,
                     max_batch_exact=best.max_batch_exact, samples_per_s=best.samples_per_s, world_size=world,
                     units=unit_names, mixed_precision=mixed_precision, candidates=candidates, ranks=memories,
                     min_world_size=worlds, reason=reason, objective=objective, parameter_bytes=parameter_bytes,
                     optimizer_state_factor=factor, largest_unit_bytes=largest_unit, device=device)


def _choose(fitting: List[Candidate], objective: str):
    if objective == "memory":
        best = max(fitting, key=lambda c: c.max_batch)  # the first of the largest
        return best, f"the largest micro-batch ({best.max_batch} a rank) of {len(fitting)} that fit"
    top = max(c.samples_per_s for c in fitting)
    best = next(c for c in fitting if c.samples_per_s >= (1 - NEAR) * top)
    fastest = max(fitting, key=lambda c: c.samples_per_s)
    if best is fastest:
        return best, f"the most samples/s of {len(fitting)} candidates that fit"
    return best, (f"within {NEAR:.0%} of the fastest ({fastest.name}, {fastest.samples_per_s:.1f} samples/s) and "
                  "simpler")


def _fresh(make_model, make_optimizer, strategy, ckpt, unit_names, mixed_precision, device):
    model = _wrap(make_model(), strategy, ckpt, unit_names, mixed_precision, device)
    return model, make_optimizer(model.parameters())


def _free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _peak_reset(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    else:
        _C.reset_cpu_peak()


def _peak(device: str) -> int:
    if torch.device(device).type == "cuda":
        return int(torch.cuda.max_memory_allocated())
    return int(_C.cpu_counters()["peak_allocated_bytes"])


def _run_candidate(c: Candidate, make_model, make_optimizer, step, unit_names, mixed_precision, device, budget,
                   cap, timed_steps, group, search) -> None:
    model, opt = _fresh(make_model, make_optimizer, c.strategy, c.checkpointing, unit_names, mixed_precision, device)
    replicated = c.strategy == "ddp" and hasattr(model, "no_sync")

    def trial_step(batch_size: int) -> None:
        # a replicated model's trials skip its gradients' all-reduce (its buckets, the gradients' own
        # storage, are held all the same; DdpSync's points would make it safe, but not cheaper);
        # the timed steps below run it
        if replicated:
            with model.no_sync():
                step(model, opt, batch_size)
        else:
            step(model, opt, batch_size)

    trial_step.__qualname__ = f"{getattr(step, '__qualname__', 'step')} ({c.name})"
    started = time.perf_counter()
    r = search(trial_step, device=device, memory_budget=budget, model=model, optimizer=opt, restore=False,
               max_batch=cap, ranks="auto", objective="memory")
    c.search_s = time.perf_counter() - started
    c.searched = True
    c.trials = len(r.trials)
    c.trials_to_max = _trials_to_max(r.trials, r.max_batch, r.capped)
    c.max_batch, c.max_batch_exact, c.capped = r.max_batch, r.max_batch_exact, r.capped
    c.micro_batch = r.recommended_batch
    fixed, per_sample = _activation_law(r)
    c.trial_peaks = sorted([t.batch, t.peak_bytes] for t in r.trials if t.status == "ok" and t.peak_bytes > 0)
    c.fixed_bytes, c.per_sample_bytes = group.all_reduce_max([fixed, per_sample])
    if r.error or c.micro_batch < 1:
        c.reason = f"does not fit: {r.error or 'batch 1 does not fit'}"
        del model, opt
        _free()
        return
    c.fits = True
    guard = _AfterSearch(model, group)
    try:
        _measure_candidate(c, model, opt, step, unit_names, device, budget, timed_steps, group, guard)
    except _Stopped as stopped:
        c.fits = False
        c.reason = str(stopped)
    finally:
        guard.remove()
    if guard.interrupt is not None:
        raise guard.interrupt
    del model, opt, guard
    _free()


class _Stopped(Exception):
    """A step after the search did not run on some rank; every rank raises it (the same words)."""


class _AfterSearch:
    """The steps a candidate runs after its search (the warm-up, the timed steps, the segments' and
    the breakdown's steps) are at batches the search saw fit on every rank, but a rank may have
    less memory by then (another process on a shared device, a cache that grew, Gloo's late frees).
    Each runs so that a rank that cannot finish it is known to every rank at once, through agreement
    points: on a sharded model ShardSync's (the search's), on a replicated one DdpSync's (before
    each gradient bucket's all-reduce, which the search's trials skipped). So no rank waits in a
    collective that another never enters; the candidate is then out, with the rank named."""

    def __init__(self, model: torch.nn.Module, group):
        self.model, self.group = model, group
        self.sync = agreement_points(group, [model])
        self.interrupt: Optional[BaseException] = None

    def run(self, batch: int, fn: Callable[[], None]) -> None:
        """fn() once, agreed; raises _Stopped on every rank when it failed on any."""
        runner = StepRunner(lambda _: fn(), self.sync)
        got = runner(batch)
        if runner.interrupt is not None:
            self.interrupt = runner.interrupt
        # 1: this rank's own failure; 2: it stopped because another rank failed (ShardSync's points)
        mine = 0 if got is None else 2 if runner.from_another_rank else 1
        every = self.group.all_gather([mine])
        if not any(every):
            return
        ranks = ",".join(str(r) for r, f in enumerate(every) if f == 1) or "?"
        raise _Stopped(f"does not fit now: its search found batch {batch} fits every rank, but rank {ranks} could "
                       f"not run it afterwards (less free memory than during the search: another process on the "
                       f"device?); every rank stopped it")

    def remove(self) -> None:
        if self.sync is not None:
            self.sync.remove()


def _measure_candidate(c: Candidate, model, opt, step, unit_names, device, budget, timed_steps, group,
                       guard: _AfterSearch) -> None:
    # every step from here on is agreed on several ranks (_AfterSearch): the same batch's peak
    # moves from step to step (Gloo frees its copies on its own threads), so a warm-up that fit
    # proves nothing about the next step on a rank at its limit (seen: the warm-up fit, the first
    # timed step ran out). A replicated model's steps all-reduce its gradients as training does,
    # with a point before each bucket
    agreed = guard.sync is not None

    def agreed_step(b: int) -> None:
        if agreed:
            guard.run(b, lambda: step(model, opt, b))
        else:
            step(model, opt, b)

    # timed at the micro-batch, every rank, with the real collectives; the slowest rank's time
    # (the agreement points included: one all-reduce of a flag before each sharded unit's
    # collectives, or each gradient bucket's all-reduce of a replicated model)
    budget_block = _budget_block(device, budget)
    with budget_block:
        guard.run(c.micro_batch, lambda: step(model, opt, c.micro_batch))  # warm
        _peak_reset(device)
        started = time.perf_counter()
        for _ in range(timed_steps):
            agreed_step(c.micro_batch)
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()
        mine_us = int((time.perf_counter() - started) / timed_steps * 1e6)
        peak = _peak(device)
    slowest_us = group.all_reduce_max([mine_us])[0]
    c.step_ms = slowest_us / 1e3
    c.samples_per_s = c.micro_batch * group.world_size / (slowest_us / 1e6) if slowest_us else 0.0
    c.peak_bytes = group.all_gather([peak])

    # each segment's law, from the micro-batch and half of it: the smallest of three steps' peaks
    # at each (Gloo frees its copy of a gathered unit on its own threads: a late free adds up to a
    # unit's size to a backward segment, 6 MiB on GPT-2 in 1 step of 5, never less); every rank's
    # laws kept, so that the prediction is the largest rank's at every batch
    if c.micro_batch >= 2:
        # (a segment's peak is the largest of the moments in it, each growing at its own rate, so
        # a line through small batches runs under it at large ones: GPT-2's first backward segment
        # rose 5.02 MiB a sample from 1 to 4, 5.39 from 2 to 4, 5.68 from 3 to 9; the 4-rank
        # prediction from a third of the micro-batch was 5.0 % low, from a half 3.1 %)
        low, high = max(1, c.micro_batch // 2), c.micro_batch
        with _budget_block(device, budget):
            measured, sharded = {}, []
            for b in (low, high):
                agreed_step(b)
                runs = [_segment_peaks(model, opt, unit_names, lambda: agreed_step(b), device) for _ in range(3)]
                same = len({len(peaks) for peaks, _ in runs}) == 1
                measured[b] = [min(p) for p in zip(*(peaks for peaks, _ in runs))] if same else runs[-1][0]
                sharded = runs[-1][1]
        laws = _segment_laws(measured[low], measured[high], low, high, sharded)
        counts = group.all_gather([len(laws)])
        if len(set(counts)) == 1 and laws:
            flat = group.all_gather([x for law in laws for x in law])
            c.segment_laws = [flat[i:i + 3] for i in range(0, len(flat), 3)]
    # this rank's model states, measured on its own shards: weights, optimizer state, and one
    # gradient a trainable weight (the step zeroes them, so counted at the weights' local size)
    params = list(model.parameters())
    state = _optimizer_state_bytes(opt)
    c.rank_bytes = group.all_gather([budget, _local_bytes(params), _local_bytes(p for p in params if p.requires_grad),
                                     state])
    del params
    # the peak split into its parts, one step at the micro-batch (phases from hooks); a failure
    # that every rank heard of comes out of memory_breakdown as its error: _Stopped again
    stopped: List[_Stopped] = []

    def breakdown_step(n: int) -> None:
        try:
            agreed_step(n)
        except _Stopped as e:
            stopped.append(e)
            raise

    try:
        parts = memory_breakdown(breakdown_step, c.micro_batch, model=model, optimizer=opt, device=device,
                                 memory_budget=budget, restore=False)
    except (RuntimeError, torch.OutOfMemoryError):
        if stopped:
            raise stopped[0] from None
        raise
    every = group.all_gather([int(getattr(parts, k)) for k in _BREAKDOWN_PARTS])
    n = len(_BREAKDOWN_PARTS)
    c.breakdown = [dict(zip(_BREAKDOWN_PARTS, every[r * n:(r + 1) * n])) for r in range(group.world_size)]


def _trials_to_max(trials, max_batch: int, capped: bool) -> int:
    """How many trials the search ran until its max was settled: the later of the first that fit at
    max_batch and the first that did not at max_batch + 1 (at max_batch alone when capped)."""
    fit = next((i for i, t in enumerate(trials) if t.batch == max_batch and t.status == "ok"), None)
    over = next((i for i, t in enumerate(trials) if t.batch == max_batch + 1 and t.status != "ok"), None)
    if fit is None or (over is None and not capped):
        return len(trials)
    return max(fit, over if over is not None else -1) + 1


def _largest_batch(laws: List[List[int]], limit: float) -> tuple:
    """The largest batch whose peak, the largest over `laws` ([fixed, per sample] each), stays within
    `limit`, and the law that binds it (0 and the largest at batch 1 when batch 1 does not fit)."""
    best, binding = None, None
    for f, a in laws:
        room = limit - f
        b = (int(room // a) if a > 0 else (1 << 62)) if room >= 0 else -1
        if best is None or b < best:
            best, binding = b, [f, a]
    if best is None:
        return 0, [0, 0]
    return max(0, min(best, 1 << 62)), binding


def _segment_peaks(model: torch.nn.Module, opt, units: Sequence[str], run: Callable[[], None],
                   device: str) -> tuple:
    """The peaks of one step, segment by segment: the memory between consecutive marks (each unit's
    forward and, through a hook on its output's gradient, its backward; the optimizer's step) has
    its own peak. Segments come in the same order at every batch, so each has a line of its own.
    Also, at each segment's end, this rank's bytes of the states that shard: its weight shards,
    their gradients so far, the optimizer state (a segment early in the backward holds few
    gradients). Returns (peaks, sharded bytes)."""
    peaks: List[int] = []
    sharded: List[int] = []
    params = list(model.parameters())

    def mark(*_):
        peaks.append(_peak(device))
        sharded.append(_local_bytes(params) + _local_bytes(p.grad for p in params if p.grad is not None)
                       + _optimizer_state_bytes(opt))
        _peak_reset(device)

    def grad_mark(grad):
        mark()
        return grad

    def forward_done(_module, _inputs, output):
        for t in (output if isinstance(output, (tuple, list)) else [getattr(output, "logits", output)]):
            if torch.is_tensor(t) and t.requires_grad:
                t.register_hook(grad_mark)
                break

    base = model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
    handles = []
    for name in list(units) + [""]:
        module = _module(base, name) if name else model
        handles.append(module.register_forward_pre_hook(lambda *_: mark()))
        handles.append(module.register_forward_hook(forward_done))
    handles.append(opt.register_step_pre_hook(lambda *_: mark()))
    try:
        _peak_reset(device)
        run()
        mark()
    finally:
        for h in handles:
            h.remove()
    return peaks, sharded


def _segment_laws(low: List[int], high: List[int], b_low: int, b_high: int, sharded: List[int]) -> List[List[int]]:
    """[fixed, per sample, sharded bytes] of each segment, from its peaks at two batches (a segment
    whose peak does not grow keeps its larger peak as fixed)."""
    laws = []
    for p1, p2, held in zip(low, high, sharded):
        slope = max(0, (p2 - p1) // (b_high - b_low))
        laws.append([int(p2 - slope * b_high), int(slope), int(held)])
    return laws


def _activation_law(r) -> tuple:
    """This rank's peak as fixed + per sample x batch, from the largest trial that fit and the
    largest that fit at no more than 3/4 of its batch (else the next below it). Not a fit over
    every trial: a small batch's peak is often the optimizer step's (its temporaries scale with the
    weights, not the batch), which flattens a fit (GPT-2 on 2 ranks: 2.8 MiB a sample fitted over
    all trials where the step takes about 5). Not the two largest either: an exact search leaves
    them one batch apart, where Gloo's buffer timing moves a peak by a MiB, a quarter of a sample's
    cost (the 4-rank prediction from 2 ranks was 10-12 % low with them)."""
    ok = sorted({t.batch: t.peak_bytes for t in r.trials if t.status == "ok" and t.peak_bytes > 0}.items())
    if len(ok) >= 2:
        b2, p2 = ok[-1]
        below = [bp for bp in ok[:-1] if bp[0] <= 0.75 * b2]
        b1, p1 = below[-1] if below else ok[-2]
        if p2 > p1:
            slope = (p2 - p1) / (b2 - b1)
            return int(p2 - slope * b2), int(slope)
    law = r._typed.memory_model if r._typed is not None else None  # least squares over the fitting trials
    if law is not None and law.valid:
        return int(law.fixed_bytes), int(law.per_sample_bytes)
    return 0, 0


def _budget_block(device: str, budget: int):
    if torch.device(device).type == "cpu":
        return cpu_memory_budget(budget)
    return contextlib.nullcontext()


def _optimizer_state_bytes(opt) -> int:
    """This rank's bytes of the optimizer's state tensors (its shards; step counters left out)."""
    return _local_bytes(t for s in opt.state.values() for t in s.values() if torch.is_tensor(t) and t.dim() > 0)


def _local_bytes(tensors) -> int:
    return sum(local.numel() * local.element_size() for local in map(local_tensor, tensors))


def _rank_memories(best: Candidate, group) -> List[RankMemory]:
    every = best.rank_bytes
    peaks = best.peak_bytes or [0] * group.world_size
    return [RankMemory(rank=r, budget_bytes=every[4 * r], peak_bytes=peaks[r], parameters_bytes=every[4 * r + 1],
                       gradients_bytes=every[4 * r + 2], optimizer_bytes=every[4 * r + 3],
                       breakdown=best.breakdown[r] if best.breakdown else {})
            for r in range(group.world_size)]
