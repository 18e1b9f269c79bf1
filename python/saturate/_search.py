"""saturate.search: the batch-size search on the user's own step."""
from __future__ import annotations

import contextlib
import functools
import io
import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional

import torch

from . import _saturate as _C
from ._budget import Size, to_bytes
from ._data import ItemBatches, WorstCase
from ._noise import NoiseFromSteps
from ._ranks import agree, ranks_for
from ._shard_sync import ShardSync, agreement_points, own_oom_batches
from ._step import StepRunner, StepState, step_device, step_name


@dataclass
class Trial:
    """One trial: `steps` training steps of the user's step at `batch`."""
    batch: int
    status: str                 # "ok", "oom", "over-target" (OOM under the lowered target budget), "error"
    peak_bytes: int             # peak reserved (= allocated on the CPU budget) during the trial
    peak_allocated_bytes: int
    ms_per_step: float          # median of the timed steps (0 unless ok)
    samples_per_s: float
    steps: int
    error: str = ""
    data: Dict[str, Any] = field(default_factory=dict, repr=False)  # every field of the JSON

    @classmethod
    def from_typed(cls, t: Any) -> "Trial":
        """From the library's typed trial (_C.Trial)."""
        return cls(batch=t.batch, status=t.status, peak_bytes=t.peak_reserved_bytes,
                   peak_allocated_bytes=t.peak_allocated_bytes, ms_per_step=t.step_time_ms,
                   samples_per_s=t.samples_per_s, steps=t.steps, error=t.error, data=t.json())


@dataclass
class Objective:
    """Which batch is best among those that fit, and why (`objective="throughput"|"goodput"`)."""
    objective: str              # "memory", "throughput" or "goodput"
    batch: int                  # the batch it chose
    reason: str                 # why, in one line
    knee_batch: int = 0         # throughput: the smallest timed batch within knee_fraction of the curve's plateau
    noise_scale: Optional[float] = None  # goodput: B_simple in samples (None: not measurable)
    lr_gain: float = 1.0        # goodput: the learning-rate factor at `batch` (AdaScale)
    data: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_typed(cls, o: Any, data: Dict[str, Any]) -> "Objective":
        """From the library's typed outcome (_C.ObjectiveOutcome) and its JSON (the search JSON's "objective")."""
        return cls(objective=o.objective, batch=o.batch, reason=o.reason, knee_batch=o.knee_batch,
                   noise_scale=o.noise_scale, lr_gain=o.lr_gain, data=data)


@dataclass
class Alternative:
    """A batch the run could train at instead, named by what chose it."""
    name: str                   # "memory", "throughput", "goodput" or "fastest_probe"
    batch: int
    reason: str


@dataclass
class Decision:
    """The one answer of a search: the batch to train at, the objective that chose it and why,
    and the other candidates by name (never one above the memory-safe recommended batch)."""
    batch: int                  # 0: no batch fits within the target
    objective: str              # what chose it: "memory", "throughput" or "goodput"
    requested: str              # what was asked for (goodput falls back to throughput when its noise scale
                                # is not measurable: `fallback` says why)
    reason: str
    alternatives: List[Alternative] = field(default_factory=list)
    fallback: str = ""

    @classmethod
    def from_typed(cls, d: Any) -> "Decision":
        """From the library's typed decision (_C.BatchDecision)."""
        return cls(batch=d.batch, objective=d.objective, requested=d.requested, reason=d.reason,
                   fallback=d.fallback, alternatives=[Alternative(a.name, a.batch, a.reason) for a in d.alternatives])


@dataclass
class Compute:
    """The step's FLOPs, the rate it ran at, the device's GEMM peak and their ratio (MFU), at the
    throughput batch (else the recommended, else the largest that counted FLOPs): the search
    JSON's `compute`. Read as attributes (`r.compute.mfu`) or by the JSON's keys (`r.compute["mfu"]`)."""
    batch: int                  # the trial the rate was read at; 0: no trial counted FLOPs
    flops_per_sample: float     # counted from the step's matrix products and convolutions
    peak_flops_per_s: float     # the device's measured GEMM rate at the step's precision
    peak_method: str            # how: "measured: fp32 GEMM 1024^3, best of 10, 2 threads"
    peak_threads: int
    achieved_flops_per_s: Optional[float] = None  # flops_per_sample x the trial's samples/s
    mfu: Optional[float] = None                   # achieved / peak (None: mfu_note says why)
    mfu_note: str = ""
    hfu: Optional[float] = None                   # with checkpointing: the recomputation counted too
    recompute_flops_per_step: float = 0.0
    analytic_flops_per_sample: Optional[float] = None  # built-in models: the formula's figure
    peak_others_busy_cpus: Optional[float] = None      # other processes' load while the peak ran
    trials_others_busy_cpus: Optional[float] = None    # ... over the trials
    peak_first_flops_per_s: Optional[float] = None     # the first peak, when a trial outran it
    load_note: str = ""         # the load moved between the peak and the trials ("" when not)
    flops_method: str = "counted"

    @classmethod
    def from_typed(cls, c: Any) -> "Compute":
        """From the library's typed summary (_C.ComputeSummary)."""
        return cls(batch=c.batch, flops_per_sample=c.flops_per_sample, peak_flops_per_s=c.peak_flops_per_s,
                   peak_method=c.peak_method, peak_threads=c.peak_threads, achieved_flops_per_s=c.achieved_flops_per_s,
                   mfu=c.mfu, mfu_note=c.mfu_note, hfu=c.hfu, recompute_flops_per_step=c.recompute_flops_per_step,
                   analytic_flops_per_sample=c.analytic_flops_per_sample,
                   peak_others_busy_cpus=c.peak_others_busy_cpus, trials_others_busy_cpus=c.trials_others_busy_cpus,
                   peak_first_flops_per_s=c.peak_first_flops_per_s, load_note=c.load_note)

    def __getitem__(self, key: str) -> Any:
        """The field by its JSON key (the same names); KeyError for a key the JSON never has."""
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        value = self[key] if key in self.__dataclass_fields__ else None
        return default if value is None else value


@dataclass
class RankLimit:
    """One rank's own budget and largest batch after a search on several ranks (`result.ranks`)."""
    rank: int
    budget_bytes: int
    max_batch: int              # the largest batch seen to fit on this rank
    max_batch_exact: bool       # max_batch + 1 was seen not to fit on this rank
    own_oom_batch: Optional[int] = None  # sharded: the smallest batch this rank itself ran out at (0: never)

    @classmethod
    def from_typed(cls, r: Any) -> "RankLimit":
        """From the library's typed rank (_C.RankMax)."""
        return cls(rank=r.rank, budget_bytes=r.budget_bytes, max_batch=r.max_batch, max_batch_exact=r.exact)

    def to_json(self) -> Dict[str, Any]:
        """The entry of the search JSON's `ranks`."""
        j = {"rank": self.rank, "budget_bytes": self.budget_bytes, "max_batch": self.max_batch,
             "max_batch_exact": self.max_batch_exact}
        if self.own_oom_batch is not None:
            j["own_oom_batch"] = self.own_oom_batch
        return j


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
    # the throughput batch, the device's measured GEMM peak and MFU (None: no search ran)
    compute: Optional[Compute] = None
    # objective="throughput" or "goodput": what it chose and why (None for "memory")
    objective: Optional[Objective] = None
    # data=: the worst-case batches the search ran on, and the answer at the median length
    worst_case: Optional[WorstCase] = None
    # the one answer: the batch to train at, what chose it and why, the alternatives by name
    decision: Optional[Decision] = None
    # several ranks: each rank's own budget and largest batch (empty for one process)
    ranks: List[RankLimit] = field(default_factory=list)
    data: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_outcome(cls, outcome: Any, data: Optional[Dict[str, Any]] = None) -> "SearchResult":
        """From the library's typed search (_C.SearchOutcome): its fields, its JSON (`data`, what
        `saturate search --json` writes; `outcome.json()` unless given) and its console text."""
        r = outcome.search
        data = outcome.json() if data is None else data
        result = cls(max_batch=r.max_batch, max_batch_exact=r.max_batch_exact, capped=r.capped,
                     recommended_batch=r.recommended_batch, throughput_batch=r.throughput_batch,
                     trials=[Trial.from_typed(t) for t in r.trials], trial_steps=r.trial_steps,
                     budget_bytes=r.budget_bytes, target_bytes=r.target_bytes, error=r.error,
                     compute=Compute.from_typed(outcome.compute),
                     objective=(Objective.from_typed(outcome.objective, outcome.objective.json())
                                if outcome.objective is not None else None),
                     decision=Decision.from_typed(outcome.decision),
                     ranks=[RankLimit.from_typed(k) for k in outcome.ranks], data=data)
        result._text = outcome.text
        result._typed = r
        return result

    @property
    def batch(self) -> int:
        """The batch to train at: the decision's (the objective's, capped at the recommended batch)."""
        if self.decision is not None:
            return self.decision.batch
        if self.objective is not None and self.objective.batch > 0:
            return min(self.objective.batch, self.recommended_batch or self.objective.batch)
        return self.recommended_batch

    def to_json(self, indent: Optional[int] = 2) -> str:
        """The same fields as `saturate search --json`."""
        return json.dumps(self.data, indent=indent)

    def to_html(self) -> str:
        """The run as one self-contained HTML page, as `saturate report` draws a search's JSON."""
        return _C.html_report(json.dumps(self.data))

    _text: str = field(default="", repr=False)
    _typed: Any = field(default=None, repr=False)  # the library's SearchResult (_C.SearchResult)

    def __str__(self) -> str:
        """What `saturate search` prints: the trials, the answer, the objective, the compute."""
        return self._text


# the library's defaults, from its option structs (one place; test_defaults.py holds the command line,
# these signatures and docs/python.md to them)
_DEFAULTS = _C.defaults()


def search(step: Callable[[int], Any], *, device: Optional[str] = None, memory_budget: Size = None,
           target_memory: float = _DEFAULTS["target_fraction"], strategy: str = _DEFAULTS["strategy"],
           max_batch: Optional[int] = None, min_batch: int = 1, model=None, optimizer=None, restore: bool = True,
           warmup_steps: int = _DEFAULTS["warmup_steps"], timed_steps: int = _DEFAULTS["measure_steps"],
           monitor: bool = False, objective: str = _DEFAULTS["objective"],
           knee_fraction: float = _DEFAULTS["knee_fraction"], noise_steps: int = _DEFAULTS["noise_steps"],
           base_batch: Optional[int] = None, ranks: Any = "auto", exact_ranks: bool = False,
           after_trial: Optional[Callable[[], None]] = None,
           on_trial: Optional[Callable[[Trial], None]] = None, data: Any = None,
           collate_fn: Optional[Callable[[list], Any]] = None, item_size: Optional[Callable[[Any], int]] = None,
           compare_median: bool = True, start_batch: Optional[int] = None) -> SearchResult:
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
    'power' or 'binsearch' (Lightning's), or 'divisors': only the divisors of `max_batch` (a
    micro-batch that splits an effective batch into whole accumulation steps), the largest that
    fits, with the next divisor above it seen not to fit (few trials: from `start_batch` up by
    doubling or down by halving, then bisecting the divisors between). min_batch: the smallest
    batch that is of use (a smaller max is reported in `error`), and the first batch of
    power/binsearch/divisors unless `start_batch` is given.

    objective: which batch is best among those that fit (`result.batch`). 'memory': the
    recommended one; 'throughput': the smallest batch within `knee_fraction` of the plateau
    of the measured samples/s curve (seed B1); 'goodput': samples/s x statistical efficiency
    from the gradient noise scale (Pollux, seed B9), measured from the step's own gradients over
    `noise_steps` measurements (the step run at half the base batch and at the base batch, with
    its optimizer's learning rate at 0), relative to `base_batch` (the batch the learning rate
    was tuned for; default 32). A step that runs whole epochs per call is not a step: give one
    optimizer step per call.

    data: your dataset (map-style) or a DataLoader over one; `step` then receives a batch, not a
    batch size: `collate_fn` (default: the DataLoader's, else torch's default_collate) of the items
    the search chose. Those are the costliest items of the data (their sizes read once with
    `item_size(item)`, default: the element count of an item's largest tensor or sequence), so
    the answer holds for every batch of an epoch, not only the first ones: variable lengths padded
    to the batch's longest never make a batch larger than the worst one searched. With
    compare_median (default), a second search on batches of median items reports what a typical
    batch would have allowed. `result.worst_case` has both, and `max_tokens` (max_batch x the
    longest item) for `saturate.TokenBudgetSampler`.

    ranks: under torchrun (torch.distributed initialised, several ranks) every rank runs your step
    at the same batches and all get the same answer: an OOM on any rank is one for all, the
    budget is the smallest rank's (seed M8); `result.ranks` (saturate.RankLimit; the JSON's
    `ranks`) has each rank's own budget and maximum (exact for every rank with `exact_ranks=True`). 'auto' (default): the default group
    when there are several ranks; None: each rank alone; or a process group. A collective: call it
    on every rank. objective='throughput' times the curve with every rank's step run together (its own
    collectives, the gradients' all-reduce among them, in its time; each point the slowest rank's),
    so every rank gets the same curve and knee, in samples/s of all ranks; 'goodput' is refused there.
    A model you sharded with FSDP2 (`fully_shard`) is searched too: during the trials every rank
    agrees at each sharded unit's forward and backward whether any rank has run out of memory, so
    that one rank's out-of-memory inside a sharded step stops every rank at the same point instead
    of leaving the others in a collective until its timeout (docs/sharding.md). A DDP model
    (`DistributedDataParallel`, given as `model=`) likewise, with a point before each gradient
    bucket's all-reduce. Each rank's entry in `result.ranks` then has `own_oom_batch` (the
    smallest batch at which that rank itself ran out of memory); `exact_ranks` does not apply (a
    rank cannot run a step with collectives alone).

    device: None (default) is where the step runs: its model's device, else cuda when a GPU is
    visible, else cpu.
    """
    built: List[ItemBatches] = []  # the data's batches, made in check() (a rank's data may be refused)
    device = step_device(device, step, model)

    def check() -> None:
        if not callable(step):
            raise TypeError(f"step={step!r} is not callable: give a function that runs one training step at a batch "
                            "size")
        if max_batch is not None and (not isinstance(max_batch, int) or max_batch < 1):
            raise ValueError(f"max_batch={max_batch!r}: give a positive int, or None for no limit")
        if not isinstance(min_batch, int) or min_batch < 1:
            raise ValueError(f"min_batch={min_batch!r}: give a positive int (default 1)")
        if start_batch is not None and (not isinstance(start_batch, int) or start_batch < 1):
            raise ValueError(f"start_batch={start_batch!r}: give a positive int, or None (min_batch)")
        if strategy == "divisors" and max_batch is None:
            raise ValueError("strategy='divisors' tries the divisors of max_batch: give max_batch= (the effective "
                             "batch the micro-batch must divide)")
        if max_batch is not None and min_batch > max_batch:
            raise ValueError(f"min_batch={min_batch} is above max_batch={max_batch}")
        if base_batch is not None and (not isinstance(base_batch, int) or base_batch < 1):
            raise ValueError(f"base_batch={base_batch!r}: give the batch the learning rate was tuned for, or None (32)")
        if data is None and (collate_fn is not None or item_size is not None):
            raise ValueError("collate_fn= and item_size= build batches from data=: give data= too (your dataset)")
        to_bytes(memory_budget, device)  # this rank's own: may differ, but must be a size
        if data is not None:
            built.append(ItemBatches(data, collate_fn, item_size))

    group = ranks_for(ranks)
    if group is None:
        check()
    else:  # every rank at once: a refused or mismatched call stops all of them here, none waits
        agree(group, "saturate.search", dict(
            strategy=strategy, target_memory=target_memory, max_batch=max_batch, min_batch=min_batch,
            start_batch=start_batch,
            warmup_steps=warmup_steps, timed_steps=timed_steps, objective=objective, knee_fraction=knee_fraction,
            noise_steps=noise_steps, base_batch=base_batch, exact_ranks=exact_ranks, restore=restore,
            monitor=monitor, data=data is not None, compare_median=compare_median), check)
    items = built[0] if built else None
    user_step = step
    if items is not None:
        step = items.step_on(user_step, "worst")
    state = StepState(user_step, model, optimizer)
    # a sharded or DDP model on several ranks: the ranks agree inside each step (its collectives)
    sync = agreement_points(group, state.modules)
    runner = StepRunner(step, sync)

    def reset():
        state.reset()
        if after_trial is not None:
            after_trial()

    report = None
    if on_trial is not None:
        report = lambda t: on_trial(Trial.from_typed(t))  # noqa: E731
    noise = None
    if objective == "goodput":
        noise = NoiseFromSteps(step, state, reset)
    with state.trials(restore), _removed_after(sync):
        outcome = _C.search(runner, device=device, budget_bytes=to_bytes(memory_budget, device),
                         target_fraction=float(target_memory), strategy=strategy, max_batch=int(max_batch or 0),
                         start_batch=start_batch or max(min_batch, 2), warmup_steps=int(warmup_steps),
                         measure_steps=int(timed_steps), objective=objective, knee_fraction=float(knee_fraction),
                         noise_steps=int(noise_steps), base_batch=int(base_batch or 0),
                         parameters=state.memory_parameters(), after_trial=reset, name=step_name(step),
                         optimizer=state.optimizer_name(), monitor=bool(monitor), on_trial=report, noise=noise,
                         ranks=group, exact_ranks=bool(exact_ranks) and sync is None)
    data_json = outcome.json()
    own = None
    if sync is not None:  # a collective: every rank, an interrupted one too, before it raises
        own = own_oom_batches(sync, group, outcome.search.trials)
        data_json["sharded_units"] = len(getattr(sync, "units", []))  # 0: a DDP model's points
        data_json["agreement_points"] = sync.points
    if runner.interrupt is not None:
        raise runner.interrupt
    result = SearchResult.from_outcome(outcome, data_json)
    if own is not None and result.ranks:  # sharded: each rank's max is exact only where it ran out itself
        for r in result.ranks:
            r.own_oom_batch = own[r.rank]
            r.max_batch_exact = r.own_oom_batch != 0 and r.own_oom_batch == r.max_batch + 1
        result.data["ranks"] = [r.to_json() for r in result.ranks]
    if result.error and runner.error_traceback:
        result.data["error_traceback"] = runner.error_traceback
        warnings.warn(f"saturate.search stopped: the step failed with an error that is not out-of-memory:\n"
                      f"{runner.error_traceback}", RuntimeWarning, stacklevel=2)
    if outcome.memory_growth_warning:  # the step keeps tensors alive: the max is for a few steps only
        warnings.warn(f"saturate.search: {outcome.memory_growth_warning}", RuntimeWarning, stacklevel=2)
    if result.max_batch < min_batch and not result.error:
        result.error = (f"batch {min_batch} (min_batch) does not fit in {_C.format_bytes(result.budget_bytes)}: "
                        f"the largest that does is {result.max_batch}")
        result.data["error"] = result.error
    if items is not None:
        result.worst_case = _worst_case(items, result)
        if compare_median and not result.error and result.max_batch > 0:
            median = search(items.step_on(user_step, "median"), device=device, memory_budget=memory_budget,
                            target_memory=target_memory, strategy=strategy, max_batch=max_batch,
                            min_batch=min_batch, model=state.modules, optimizer=state.optimizers, restore=restore,
                            warmup_steps=warmup_steps, timed_steps=timed_steps, ranks=ranks,
                            after_trial=after_trial, start_batch=start_batch)
            result.worst_case.median_max_batch = median.max_batch
            result.worst_case.median_recommended_batch = median.recommended_batch
            result.worst_case.median_trials = len(median.trials)
        result.data["worst_case"] = result.worst_case.to_json()
        result._text += _worst_case_text(result.worst_case)
    return result


@contextlib.contextmanager
def _removed_after(sync: Optional[ShardSync]) -> Iterator[None]:
    """The agreement points are the search's: training runs without them."""
    try:
        yield
    finally:
        if sync is not None:
            sync.remove()


def _worst_case(items: ItemBatches, result: SearchResult) -> WorstCase:
    order = items.order
    worst = order.worst_items(max(1, min(result.max_batch, 16)))
    return WorstCase(items=order.items, largest_size=order.largest_size, median_size=order.median_size,
                     worst_items=list(worst), max_tokens=result.max_batch * order.largest_size,
                     recommended_tokens=result.recommended_batch * order.largest_size)


def _worst_case_text(w: WorstCase) -> str:
    text = (f"\nworst case         the {w.items} items' costliest: size {w.largest_size} (median {w.median_size}), "
            f"items {w.worst_items[:4]}...; max_tokens {w.max_tokens}\n")
    if w.median_max_batch is not None:
        text += (f"median batches     max {w.median_max_batch}, recommended {w.median_recommended_batch} "
                 f"({w.median_trials} trials): a batch of typical items; unsafe once the longest come\n")
    return text


def search_eval(step: Callable[[int], Any], *, model=None, optimizer=None, gradients: bool = False,
                objective: str = "memory", **kwargs) -> SearchResult:
    """Finds the largest evaluation batch (seed M3): `step(batch_size)` is your evaluation step at a
    batch size (the forward pass and the metric); it runs under torch.no_grad() with the model(s)
    in eval mode (put back afterwards), so it needs no room for activations kept for a backward
    and the answer is usually several times the training batch. The model is found in the step's
    closure, or given as `model=`.

    An evaluation between training steps runs beside what training keeps: give the training's
    `optimizer=` and every trial holds its state (Adam's two moments per weight; made by one step
    over zero gradients when the optimizer has none yet), and with `gradients=True` also one
    gradient per weight (a loop that evaluates before `zero_grad(set_to_none=True)`, or zeroes
    with set_to_none=False). Without them the answer is for an evaluation on its own and can run
    out of memory mid-training. Weights, optimizer state and gradients are as before afterwards.
    Other keywords as `search` (objective 'memory' or 'throughput': an evaluation has no gradient
    noise scale)."""
    if not callable(step):
        raise TypeError(f"step={step!r} is not callable: give a function that evaluates one batch of a size")
    if objective == "goodput":
        raise ValueError("objective='goodput' needs gradients, which an evaluation does not make: use 'memory' or "
                         "'throughput'")
    if gradients not in (True, False):
        raise TypeError(f"gradients={gradients!r}: give True (the trials hold one gradient per weight, as a loop "
                        "that evaluates before zeroing them) or False")
    modules = StepState(step, model, None).modules
    training = StepState(step, modules, optimizer)  # what training keeps while the evaluation runs
    if gradients and not training.parameters():
        raise ValueError("gradients=True but no model or optimizer was found: pass model= or optimizer=")

    def eval_step(batch_size: int) -> None:
        with torch.no_grad():
            step(batch_size)

    eval_step.__qualname__ = f"{step_name(step)} (eval)"
    was_training = [m.training for m in modules]
    with _training_state_held(training, gradients):
        for m in modules:
            m.eval()
        try:
            result = search(eval_step, model=modules, optimizer=[], objective=objective, **kwargs)
        finally:
            for m, was in zip(modules, was_training):
                m.train(was)
    return result


@contextlib.contextmanager
def _training_state_held(training: StepState, gradients: bool) -> Iterator[None]:
    """Within the block, the optimizers' state and (with `gradients`) a gradient per weight exist, as
    between two training steps; afterwards weights, optimizer state and gradients are as before.
    The gradients are held apart from `.grad`, which the search clears between its trials."""
    if not training.optimizers and not gradients:
        yield
        return
    params = [p for p in training.parameters() if p.requires_grad]
    before = [p.grad for p in params]
    training.save()
    # the weights on their own too: an optimizer's step changes weights no model= names (weight decay)
    saved_weights = io.BytesIO()
    torch.save([p.detach() for p in params], saved_weights)
    held: List[torch.Tensor] = []
    try:
        fresh = [o for o in training.optimizers if not o.state]
        if fresh:
            # one step over zero gradients makes each optimizer's state at its real size
            for p in params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            for o in fresh:
                o.step()
        if gradients:
            held = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        for p in params:
            p.grad = None
        yield
    finally:
        del held
        training.restore()
        weights = torch.load(io.BytesIO(saved_weights.getvalue()), map_location="cpu", weights_only=True)
        with torch.no_grad():
            for p, w, g in zip(params, weights, before):
                p.copy_(w)
                p.grad = g


@dataclass
class ConfigSearchResult:
    """search_configs' answer: the configuration to train with, why, and every configuration's
    own search (`results[i]` for `configs[i]`)."""
    config: Any
    result: SearchResult
    reason: str
    configs: List[Any]
    results: List[SearchResult]

    @property
    def batch(self) -> int:
        """The batch to train at, with `config`."""
        return self.result.batch

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps({"config": _plain(self.config), "reason": self.reason,
                           "configs": [{"config": _plain(c), "search": r.data} for c, r in
                                       zip(self.configs, self.results)]}, indent=indent)

    def __str__(self) -> str:
        lines = [f"config       {_plain(self.config)}: {self.reason}"]
        for c, r in zip(self.configs, self.results):
            lines.append(f"  {str(_plain(c)):<40} max_batch {r.max_batch:>6}  recommended {r.recommended_batch:>6}")
        return "\n".join(lines) + "\n\n" + str(self.result)


def _plain(config: Any) -> Any:
    return config if isinstance(config, (dict, list, str, int, float, bool)) or config is None else repr(config)


def search_configs(step: Callable[[int, Any], Any], configs: List[Any], *, required_batch: Optional[int] = None,
                   **search_kwargs: Any) -> ConfigSearchResult:
    """Searches `step(batch_size, config)` for each configuration and chooses one (seeds B5, M5):
    e.g. configs=[{"precision": "fp32"}, {"precision": "bf16"}] or checkpointing off and on —
    whatever your step can switch. Each configuration gets the same search (`search`'s keywords)
    on the same budget; the first is the baseline and another is chosen only when its fastest
    usable batch runs measurably faster (beyond 3 %), or when `required_batch` fits only with it
    (saturate's rule, the one `saturate search --checkpointing auto` applies)."""
    if not callable(step):
        raise TypeError(f"step={step!r} is not callable: give step(batch_size, config)")
    if not isinstance(configs, (list, tuple)) or not configs:
        raise ValueError(f"configs={configs!r}: give a non-empty list of configurations for step(batch_size, config)")
    if required_batch is not None and (not isinstance(required_batch, int) or required_batch < 1):
        raise ValueError(f"required_batch={required_batch!r}: give a positive int, or None")
    results = [search(functools.partial(step, config=c), **search_kwargs) for c in configs]
    index, reason = _C.choose_config([r._typed for r in results], [str(_plain(c)) for c in configs],
                                     int(required_batch or 0))
    return ConfigSearchResult(config=configs[index], result=results[index], reason=reason, configs=list(configs),
                              results=results)
