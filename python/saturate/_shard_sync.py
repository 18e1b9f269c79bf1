"""Trials on a model the user sharded with FSDP2 (`fully_shard`) that never hang (issue 42).

A sharded step is a chain of collectives: each unit's all-gather before its forward (and again
before its backward when it reshards after forward), each unit's reduce-scatter after its
backward. When one rank runs out of memory inside a unit, it leaves the step, while the others
wait in that unit's next collective for a rank that never comes: a hang until the collective
timeout (10-30 minutes on NCCL).

During the search's trials, an agreement point (an all-reduce of one integer: "did any rank
fail?") runs on every rank at the same places of the step: before each unit's forward, before
each unit's backward (the gradient reaching its outputs), before each unit's gradients are
reduce-scattered (the gradient reaching its inputs), at the end of the backward and at the end
of the step. Between two points every rank runs the same collectives; a rank that fails does so
after the last collective of its stretch (its compute), and announces the failure at what is
its next point, where the others, having run the same stretch, are too. They learn of it there
and raise `PeerOutOfMemory` (an out-of-memory to the search): every rank leaves the step at the
same point, with no collective left waiting, and the ranks back off together. A rank that would
run out of memory in the buffer of a collective itself (before any rank has entered it) is told
so at the point before: each point first reserves, and frees at once, the bytes of the unit's
unsharded parameters (or gradients), so the allocation fails there, not inside the collective.

The points exist only while a trial runs; they are removed when the search ends (training runs
without them)."""
from __future__ import annotations

import time
import weakref
from typing import Any, Callable, List, Optional, Tuple

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from . import _saturate as _C

_OK, _OOM, _ERROR = 0, 1, 2
# how long a point that finds no room in the CPU budget waits for finished collectives' buffers
# to be freed (ShardSync._room_after_late_frees): measured, they go within 50 ms on 2 loaded cores
LATE_FREE_S = 0.5


class PeerOutOfMemory(torch.OutOfMemoryError):
    """Another rank ran out of memory in this sharded step: this rank leaves it at the same point."""

    from_another_rank = True


class PeerFailed(RuntimeError):
    """Another rank failed in this sharded step with an error that is not out-of-memory."""

    from_another_rank = True


def fsdp_modules(modules: List[torch.nn.Module]) -> List[torch.nn.Module]:
    """The FSDP2 units (`fully_shard`ed modules) inside `modules`, each once, in module order."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch without FSDP2
        return []
    seen, out = set(), []
    for m in modules:
        for sub in m.modules():
            if isinstance(sub, FSDPModule) and id(sub) not in seen:
                seen.add(id(sub))
                out.append(sub)
    return out


def _unit_bytes(unit: torch.nn.Module, units: List[torch.nn.Module], world: int) -> Tuple[int, int, int]:
    """The bytes of the parameters `unit` itself manages (not those of the units inside it),
    unsharded: what its all-gather allocates at most, in the dtype it gathers in (its
    MixedPrecisionPolicy's param_dtype: bf16 gathers half of float32's bytes), and what its
    gradients' reduce-scatter does, in the dtype it reduces in (reduce_dtype, else param_dtype);
    third, this rank's shards cast to param_dtype where it differs from the weights' (FSDP2 casts
    them before the all-gather and holds the casts until the call returns: a bf16 hang when not
    reserved, a rank out of memory for Gloo's copy inside the call while its peer waited in it)."""
    inner = set()
    for other in units:
        if other is not unit and any(other is m for m in unit.modules()):
            inner.update(id(p) for p in other.parameters())
    param_dtype, reduce_dtype = _policy_dtypes(unit)
    gather = reduce = cast = 0
    for p in unit.parameters():
        if id(p) not in inner:  # a DTensor's numel is the whole parameter's
            gather += p.numel() * _size_of(param_dtype, p)
            reduce += p.numel() * _size_of(reduce_dtype or param_dtype, p)
            if param_dtype is not None and param_dtype != p.dtype:
                cast += -(-p.numel() // world) * _size_of(param_dtype, p)  # the padded shard
    return gather, reduce, cast


def _policy_dtypes(unit: torch.nn.Module) -> Tuple[Optional[torch.dtype], Optional[torch.dtype]]:
    """The unit's FSDP2 MixedPrecisionPolicy's param_dtype and reduce_dtype (None: the weights' own)."""
    try:
        policy = unit._get_fsdp_state()._fsdp_param_group.mp_policy
    except AttributeError:  # not an FSDP2 unit, or one with no parameters of its own
        return None, None
    return getattr(policy, "param_dtype", None), getattr(policy, "reduce_dtype", None)


def _size_of(dtype: Optional[torch.dtype], p: torch.Tensor) -> int:
    return torch.empty((), dtype=dtype).element_size() if dtype is not None else p.element_size()


class _Agreement(torch.autograd.Function):
    """Identity in the forward; its backward is an agreement point (before the gradient flows on)."""

    @staticmethod
    def forward(ctx, sync: "ShardSync", reserve: Callable[[], int], *tensors: torch.Tensor):
        ctx.sync = sync
        ctx.reserve = reserve
        # an output no gradient reaches (a model's logits beside the loss it computed from them)
        # passes None on, not zeros: materialized, they were a logits-sized tensor more at the
        # backward's peak than the plain step holds (bf16 GPT-2: 128 KiB a sample, 2.1 MiB at the
        # max, the search one batch short of a fresh run)
        ctx.set_materialize_grads(False)
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        ctx.sync.backward_point(ctx.reserve())
        return (None, None, *grads)


class _Points:
    """What ShardSync and DdpSync share: the agreement itself (an all-reduce of one flag), and a
    failed step announced at this rank's next point, then the model put back as before a step."""

    ranks: Any
    active: bool
    learned: bool
    points: int
    own_oom_batches: List[int]

    def _agree(self, flag: int) -> int:
        self.points += 1
        return int(self.ranks.all_reduce_max([flag])[0])

    def failed(self, out_of_memory: bool, batch: int, own: bool) -> None:
        """This rank's step raised: announce it at this rank's next point, unless every rank
        already knows (it was raised at a point). `own`: this rank's own failure, not a peer's."""
        if out_of_memory and own:
            self.own_oom_batches.append(batch)
        try:
            if self.active and not self.learned:
                self.learned = True
                self._agree(_OOM if out_of_memory else _ERROR)
        finally:
            self.active = False
            self._put_back()

    def _put_back(self) -> None:
        """After a failed step, on every rank: the model's wrapper as before a step."""


class ShardSync(_Points):
    """Agreement points on every FSDP2 unit of the step's modules, active only inside `step()`.
    `ranks` is the search's group (TorchRanks: `all_reduce_max`)."""

    def __init__(self, ranks: Any, units: List[torch.nn.Module]):
        self.ranks = ranks
        self.units = units
        self.active = False
        self.learned = False   # this step's failure is known to every rank (announced or heard)
        self.points = 0        # agreement points so far (for the docs' cost figure)
        self.own_oom_batches: List[int] = []  # the batches at which this rank itself ran out of memory
        self._queued = False
        self._handles: List[Any] = []
        self._world = max(1, int(getattr(ranks, "world_size", 1)))
        sizes = [_unit_bytes(unit, units, self._world) for unit in units]
        self._bytes = [gather for gather, _, _ in sizes]          # all-gathered, in the gather dtype
        self._reduce_sizes = [reduce for _, reduce, _ in sizes]   # reduce-scattered, in the reduce dtype
        self._casts = [cast for _, _, cast in sizes]              # this rank's shards cast for the gather
        # Gloo's all-gather and reduce-scatter copy their buffer inside the call, on the caller's
        # thread, before they communicate (measured under the CPU budget, which leaves Gloo's
        # worker threads out: all_gather_into_tensor of 8 MiB out and reduce_scatter_tensor of
        # 8 MiB in each allocated 8 MiB more); NCCL works in place
        self._backend_copies = 1 if "gloo" in str(getattr(ranks, "backend", "")) else 0
        self._order: List[int] = []  # the units in the order their forward ended, this step
        for i, unit in enumerate(units):
            device = next((p.device for p in unit.parameters()), torch.device("cpu"))
            self._handles.append(unit.register_forward_pre_hook(self._before_forward(i, device), prepend=True))
            self._handles.append(unit.register_forward_pre_hook(self._wrap_inputs(i), with_kwargs=True))
            self._handles.append(unit.register_forward_hook(self._wrap_outputs(i)))

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    # -- the points --
    def _reserve(self, nbytes: int, device: Optional[torch.device] = None) -> bool:
        """Whether `nbytes` can be allocated now (allocated and freed at once)."""
        if nbytes <= 0:
            return True
        dev = torch.device(device or self._device)
        if dev.type == "cpu":
            # the CPU budget is exact arithmetic: room is what it has left, asked without allocating,
            # so the trial's peak is the step's own (a reservation of up to three units' bytes at
            # every point raised the peak of small batches and bent the search's memory model:
            # 2.8 MiB a sample fitted on GPT-2 where the step takes 4.1)
            counters = _C.cpu_counters()
            if counters["budget_bytes"] > 0:
                return self._room_after_late_frees(nbytes)
        try:
            t = torch.empty(nbytes, dtype=torch.uint8, device=dev)
            del t
            return True
        except torch.OutOfMemoryError:
            return False

    @staticmethod
    def _room_after_late_frees(nbytes: int) -> bool:
        """Whether the CPU budget has `nbytes` left, once the collectives already finished have
        freed their buffers. Gloo copies a collective's buffer on the caller's thread (counted) and
        the copy goes when the last holder of the finished work lets go, often Gloo's worker thread,
        a moment after the caller has gone on: a point checked in that moment saw a unit's bytes
        (7.1 MB on GPT-2) that a real step's allocation, later, does not (2 ranks of 116 MiB: the
        search answered 6 in 1 run of 3 where 7 fits in fresh processes; 50 ms later the bytes were
        free). So a point that finds no room waits, up to LATE_FREE_S, for room to come; a real
        shortage costs that once in the trial that fails."""
        deadline = time.monotonic() + LATE_FREE_S
        while True:
            counters = _C.cpu_counters()
            if counters["allocated_bytes"] + nbytes <= counters["budget_bytes"]:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)  # lets the worker thread finish; the condition is what is waited for

    def _point(self, nbytes: int, device: Optional[torch.device] = None) -> None:
        if not self.active or self.learned:
            return
        mine = _OK if self._reserve(nbytes, device) else _OOM
        seen = self._agree(mine)
        if seen == _OK:
            return
        self.learned = True
        if mine == _OOM:
            raise torch.OutOfMemoryError(
                f"out of memory: {nbytes} bytes for a sharded unit's collective buffer did not fit (found at the "
                f"agreement point before the collective)")
        if seen == _OOM:
            raise PeerOutOfMemory("out of memory on another rank in this sharded step: every rank stops it here")
        raise PeerFailed("another rank failed in this sharded step (not out of memory): every rank stops it here")

    # -- what the collectives after a point allocate --
    def _unsharded(self, i: int) -> bool:
        """Whether unit i's weights are gathered already (not resharded after forward, or prefetched)."""
        try:
            group = self.units[i]._get_fsdp_state()._fsdp_param_group
            return group is None or group.is_unsharded or group._all_gather_result is not None
        except AttributeError:  # another torch: assume it gathers
            return False

    def _gather_bytes(self, i: int) -> int:
        """Before unit i's forward: its all-gather's output and the backend's copy, allocated before
        it communicates (copying the output into the unit's weights comes after: a rank that fails
        there does so in its compute, before the next point)."""
        return 0 if self._unsharded(i) else self._bytes[i] * (1 + self._backend_copies) + self._casts[i]

    def _backward_gather_bytes(self, i: int) -> int:
        """Before unit i's backward FSDP gathers it (output and backend copy, then its weights copied
        out of the output) and then prefetches the unit whose forward ended just before its own (the
        reverse of the forward order), with unit i's weights held: the most of these held at once
        before the prefetch communicates."""
        copies = 1 + self._backend_copies
        own, own_cast = (0, 0) if self._unsharded(i) else (self._bytes[i], self._casts[i])
        prefetch = prefetch_cast = 0
        if i in self._order:
            at = len(self._order) - 1 - self._order[::-1].index(i)
            if at > 0 and self._order[at - 1] != i and not self._unsharded(self._order[at - 1]):
                prefetch, prefetch_cast = self._bytes[self._order[at - 1]], self._casts[self._order[at - 1]]
        # Gloo frees its copy on its own thread, so the unit's copy may still be held while the
        # prefetch allocates (a hang on 4 ranks when it was not counted): gathering, the output and
        # the copy; copying out, the output, the weights and the copy; prefetching, the weights, the
        # copy and the prefetch's output and copy
        late = own * self._backend_copies
        return max(own * copies + own_cast, 2 * own + late, own + late + prefetch * copies + prefetch_cast)

    def _reduce_bytes(self, i: int) -> int:
        """Unit i's reduce-scatter: its gradients copied into one buffer (the gradients then freed),
        then this rank's shard of the output and the backend's copy, before it communicates."""
        b = self._reduce_sizes[i]
        return max(b, b // self._world + b * self._backend_copies)

    def _before_forward(self, i: int, device: torch.device):
        def hook(module, args):
            self._point(self._gather_bytes(i), device)
        return hook

    def _wrap(self, value: Any, reserve: Callable[[], int]) -> Any:
        flat, spec = tree_flatten(value)
        at = [i for i, t in enumerate(flat) if torch.is_tensor(t) and t.requires_grad]
        if not at:
            return value
        wrapped = _Agreement.apply(self, reserve, *[flat[i] for i in at])
        for i, t in zip(at, wrapped):
            flat[i] = t
        return tree_unflatten(flat, spec)

    def _wrap_inputs(self, i: int):
        # runs after FSDP's own pre-forward, which hooks the unit's reduce-scatter onto the
        # inputs' gradients: this point comes before it in the backward
        def hook(module, args, kwargs):
            if not self.active or not torch.is_grad_enabled():
                return None
            reserve = lambda: self._reduce_bytes(i)  # noqa: E731
            return self._wrap(args, reserve), self._wrap(kwargs, reserve)
        return hook

    def _wrap_outputs(self, i: int):
        # runs after FSDP's post-forward, which hooks the unit's backward all-gather onto the
        # outputs' gradients: this point comes before it in the backward
        def hook(module, args, output):
            if not self.active or not torch.is_grad_enabled():
                return None
            self._order.append(i)
            return self._wrap(output, lambda: self._backward_gather_bytes(i))
        return hook

    def backward_point(self, nbytes: int) -> None:
        if self.active and not self._queued:
            # the end of the backward is a point too, before FSDP's final callback (queued after
            # this one, by the root's pre-backward) reduce-scatters the root's gradients
            self._queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
        self._point(nbytes)

    def _end_of_backward(self) -> None:
        self._queued = False
        self._point(self._reduce_bytes(0) if self.units else 0)

    # -- a step --
    @property
    def _device(self) -> torch.device:
        for unit in self.units:
            for p in unit.parameters():
                return p.device
        return torch.device("cpu")

    def begin(self) -> None:
        self.active, self.learned, self._queued = True, False, False
        self._order = []

    def end(self) -> None:
        """The step ran through on this rank: the last point (another rank may have failed after
        the last unit, in its loss or its optimizer step)."""
        try:
            self._point(0)
        finally:
            self.active = False

    def _put_back(self) -> None:
        self._queued = False
        # a step left mid-way leaves units unsharded: idle first (a unit left in its forward
        # that keeps its weights after forward ignores reshard(), while the peer that finished
        # that forward reshards it: the next step then all-gathers it on one rank only, a hang),
        # then resharded, alike on every rank
        _fsdp_idle(self.units)
        for unit in self.units:
            try:
                unit.reshard()
            except Exception:  # noqa: BLE001 - best effort; the next forward reshards anyway
                pass


class DdpSync(_Points):
    """Agreement points on a replicated (DDP) model's steps, the same contract as ShardSync's: a
    DDP step all-reduces each gradient bucket inside the backward, as the bucket becomes ready, so a
    rank that runs out of memory in its backward leaves the others waiting in a bucket's all-reduce.
    A communication hook puts a point before each bucket's all-reduce and `end()` one after the
    step: a rank that fails announces it at its next point (`failed()`), where the others are at
    theirs (between two points every rank runs the same collectives). A rank that hears of it there
    skips the rest of its buckets' all-reduces (the hook hands the bucket back unreduced), lets its
    backward finish on its own and raises `PeerOutOfMemory` at its next forward (a step of several
    micro-batches) or at `end()`. The hook stays on the model (DDP keeps one for good) but is plain
    DDP's all-reduce outside `begin()`..`end()`. After a failed step every rank puts its reducer
    back as before a step, so the model trains on."""

    def __init__(self, ranks: Any, model: torch.nn.Module):
        import torch.distributed as dist

        self.ranks = ranks
        self.active = False
        self.learned = False
        self.points = 0
        self.own_oom_batches: List[int] = []
        self._heard = _OK
        self._dist = dist
        self._group = model.process_group
        # the model by a weak reference: DDP's reducer holds this object (the hook's state) from
        # C++, where Python's collector cannot see it, so a reference back to the reducer or the
        # model would keep both alive for good (a plan's ddp candidate held its weights and
        # buckets, 7.1 MiB, through every later candidate's search: fsdp answered 20, 24 alone)
        self._model = weakref.ref(model)
        model.register_comm_hook(self, DdpSync._hook)
        # a step of several micro-batches: a rank that heard at a bucket stops at its next forward,
        # before DDP's own (which rebuilds its buckets after a reset: a broadcast the rank that
        # failed would never enter)
        model.register_forward_pre_hook(self._before_forward)

    @staticmethod
    def _hook(state: "DdpSync", bucket):  # DDP checks the name `bucket`
        return state._before_allreduce(bucket)

    def _before_allreduce(self, bucket) -> torch.futures.Future:
        buffer = bucket.buffer()
        if self.active and not self.learned:
            self._heard = self._agree(_OK)
            self.learned = self._heard != _OK
        if self.active and self.learned:  # another rank failed: no collective it would not enter
            done: torch.futures.Future = torch.futures.Future()
            done.set_result(buffer)
            return done
        buffer.div_(self._dist.get_world_size(self._group))  # DDP's own: the mean of the ranks' gradients
        work = self._dist.all_reduce(buffer, group=self._group, async_op=True)
        return work.get_future().then(lambda fut: fut.value()[0])

    def _before_forward(self, module, args) -> None:
        if self.active:
            self._raise_heard()

    def _raise_heard(self) -> None:
        if self._heard == _OOM:
            raise PeerOutOfMemory("out of memory on another rank in this replicated step: every rank stops it")
        if self._heard != _OK:
            raise PeerFailed("another rank failed in this replicated step (not out of memory): every rank stops it")

    def begin(self) -> None:
        self.active, self.learned, self._heard = True, False, _OK

    def end(self) -> None:
        """The step ran through on this rank: the last point, then what was heard at any point."""
        try:
            if not self.learned:
                self._heard = self._agree(_OK)
                self.learned = self._heard != _OK
            self._raise_heard()
        finally:
            self.active = False

    def _put_back(self) -> None:
        # DDP's reducer, left mid-backward on the rank that failed, refuses the next forward
        # ("Expected to have finished reduction in the prior iteration"): put back as before a
        # step, on every rank alike (it rebuilds its buckets after the next backward, a
        # broadcast every rank then runs)
        model = self._model()
        if model is not None:
            model.reducer._reset_state()

    def remove(self) -> None:
        """Nothing to remove: the hook is inert outside a step."""


def agreement_points(ranks: Any, modules: List[torch.nn.Module]) -> Optional[Any]:
    """The agreement points of a step on several ranks, for every call that runs a user's step on
    them (the search, OomGuard, shard_plan's candidates): ShardSync on the FSDP2 units among
    `modules`, else DdpSync on a DDP model among them (one per model, kept on it: DDP takes one
    communication hook for good); None on one rank, or for a DDP model that has a hook of the
    user's already (DDP takes no second: its steps then run without points, as before)."""
    if ranks is None or int(getattr(ranks, "world_size", 1)) < 2:
        return None
    units = fsdp_modules(modules)
    if units:
        return ShardSync(ranks, units)
    ddp = next((m for root in modules for m in root.modules()
                if isinstance(m, torch.nn.parallel.DistributedDataParallel)), None)
    if ddp is None:
        return None
    sync = getattr(ddp, "_saturate_sync", None)
    if sync is None:
        try:
            sync = DdpSync(ranks, ddp)
        except RuntimeError:  # "register_comm_hook ... can only be called once": the user's own
            return None
        ddp._saturate_sync = sync
    sync.ranks = ranks
    return sync


def _fsdp_idle(units: List[torch.nn.Module]) -> None:
    """FSDP2's bookkeeping of a step left mid-way put back as after a whole step, without its
    collectives: every unit idle, no final callback taken as queued, no prefetch order, no pending
    all-gather. Left as it was, the next step runs with units in a backward state and a root that
    believes its final callback queued: some units' gradients are then never reduced (seen: after a
    failed trial only one block of four got gradients, so the optimizer stepped only that block)."""
    try:
        from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState
    except ImportError:  # another torch: nothing known to put back
        return
    for unit in units:
        try:
            state = unit._get_fsdp_state()
        except Exception:  # noqa: BLE001 - not an FSDP2 unit after all
            continue
        state._training_state = TrainingState.IDLE
        getattr(state, "_modules_to_run_forward", set()).clear()
        group = getattr(state, "_fsdp_param_group", None)
        if group is not None:
            group._training_state = TrainingState.IDLE
            # gradients of the whole weights a failed backward made but never reduce-scattered: left,
            # they held a unit's size each into the next trial (the search's max then depended on
            # whether a trial ran after a failed one: GPT-2's 6 or 7 from run to run) and the next
            # backward would add them to its own
            for fsdp_param in getattr(group, "fsdp_params", []):
                unsharded = getattr(fsdp_param, "_unsharded_param", None)
                if unsharded is not None:
                    unsharded.grad = None
                fsdp_param.unsharded_accumulated_grad = None
            group._post_forward_indices.clear()
            pending = group._all_gather_result
            if pending is not None:  # a prefetch every rank issued: let it finish, then drop it
                work = getattr(pending, "all_gather_work", None)
                if work is not None and hasattr(work, "wait"):
                    work.wait()
                group._all_gather_result = None
            group._post_reduce_event = None
            group._all_reduce_state = None
        ctx = getattr(state, "_state_ctx", None)
        if ctx is not None:
            ctx.post_backward_final_callback_queued = False
        comm = getattr(state, "_comm_ctx", None)
        if comm is not None:
            comm.post_forward_order.clear()
            comm.reduce_scatter_state = None


def own_oom_batches(sync: ShardSync, ranks: Any, trials: Any) -> List[int]:
    """Each rank's own limit after a sharded search, by rank: the smallest batch at which that
    rank itself (not a peer) ran out of memory (0: never). A rank cannot run a sharded step alone,
    so its max is what the common trials showed, exact only when it ran out at max + 1. A
    collective."""
    # under the full budget only: a trial run under the lowered target budget ("over-target") is
    # not this rank's limit
    full = {t.batch for t in trials if t.status == "oom"}
    own = [b for b in sync.own_oom_batches if b in full]
    mine = min(own) if own else 0
    return [int(b) for b in ranks.all_gather([mine])]
