"""The user's step as the C++ probe runs it: failures become results, and nothing of a failed
step outlives it (its exception, traceback frames and the tensors they hold, gradients and
optimizer state). Lightning issue #7335 is the pitfall this avoids: a kept traceback keeps the
failed step's activations alive, and every later trial then runs on less memory."""
from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import io
import traceback
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence

import torch

from . import _saturate as _C

def _is_oom_itself(error: BaseException) -> bool:
    """By type (CUDA's and our CPU budget's torch.OutOfMemoryError, host RAM's MemoryError), else
    by the message, told by the library's one classifier (core/oom.cpp): the marks of every
    allocator, cuBLAS, cuDNN, TorchScript's rethrown errors."""
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    if isinstance(error, RuntimeError):
        return _C.is_oom_message(str(error))
    return False


def _oom_in_chain(error: Optional[BaseException]) -> Optional[BaseException]:
    seen = set()
    while error is not None and id(error) not in seen:
        if _is_oom_itself(error):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` means the step did not fit in memory (CUDA, the CPU budget, host RAM),
    itself or through the exceptions it was raised from (code that wraps an OOM in its own)."""
    return _oom_in_chain(error) is not None


def release_exception(error: Optional[BaseException]) -> None:
    """Drops the frames (and so the locals: tensors, graphs) that `error` and the exceptions it
    chains keep alive through their tracebacks."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if error.__traceback__ is not None:
            traceback.clear_frames(error.__traceback__)  # skips frames still executing
            error.__traceback__ = None
        error = error.__cause__ or error.__context__


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".strip()


class StepRunner:
    """Calls `step(batch_size)`; returns None, or ("oom" | "error" | "interrupt", message)."""

    def __init__(self, step: Callable[[int], Any], sync: Any = None):
        self.step = step
        self.sync = sync  # agreement points of a sharded model's ranks (_shard_sync.ShardSync), or None
        self.interrupt: Optional[BaseException] = None
        self.error_traceback: Optional[str] = None
        self.oom_count = 0
        self.from_another_rank = False  # the last failure was another rank's (ShardSync's Peer* errors)

    def __call__(self, batch_size: int):
        if self.interrupt is not None:  # stop the search: every later trial fails at once
            return ("interrupt", "interrupted")
        self.from_another_rank = False
        try:
            if self.sync is not None:
                self.sync.begin()
            self.step(int(batch_size))
            if self.sync is not None:
                self.sync.end()
            return None
        except Exception as error:  # noqa: BLE001 - every failure is a trial result
            oom_error = _oom_in_chain(error)
            oom = oom_error is not None
            message = _first_line(oom_error if oom else error)
            own = not getattr(oom_error, "from_another_rank", False)
            self.from_another_rank = getattr(oom_error or error, "from_another_rank", False)
            oom_error = None
            if not oom:
                self.error_traceback = "".join(traceback.format_exception(error))
            release_exception(error)
            del error
            if self.sync is not None:  # the other ranks learn of it at their next agreement point
                self.sync.failed(oom, int(batch_size), own)
        except BaseException as error:  # KeyboardInterrupt, SystemExit: raised after the search
            message = _first_line(error)
            release_exception(error)
            self.interrupt = error
            if self.sync is not None:
                self.sync.failed(False, int(batch_size), True)
            return ("interrupt", message)
        if oom:
            self.oom_count += 1
            gc.collect()  # cycles a failed step left (frames <-> locals)
            return ("oom", message)
        return ("error", message)


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _refs_of(fn: Any) -> List[Any]:
    """What a callable refers to: a partial's function and arguments, a bound method's self and
    function, a function's closure variables and the globals its code names."""
    if isinstance(fn, functools.partial):
        return [fn.func, *fn.args, *fn.keywords.values()]
    if inspect.ismethod(fn):
        return [fn.__self__, fn.__func__]
    if inspect.isfunction(fn):
        try:
            cv = inspect.getclosurevars(fn)
        except (TypeError, ValueError):
            return []
        return list(cv.nonlocals.values()) + list(cv.globals.values())
    return []


def _candidates(step: Callable, depth: int = 3) -> List[Any]:
    """Objects the step refers to, following the functions it calls by name (a wrapper around
    the real step) `depth` levels deep, and the attributes of objects one level down."""
    objs: List[Any] = []
    seen = set()
    frontier = [step]
    for _ in range(depth + 1):
        nxt = []
        for fn in frontier:
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            refs = _refs_of(fn)
            if not refs and callable(fn) and not inspect.isfunction(fn) and not isinstance(fn, type):
                objs.append(fn)  # a callable object: its attributes below
            for r in refs:
                if isinstance(r, functools.partial) or inspect.ismethod(r) or inspect.isfunction(r):
                    nxt.append(r)
                else:
                    objs.append(r)
        frontier = nxt
    more = []
    for o in objs:
        if isinstance(o, (torch.nn.Module, torch.optim.Optimizer)) or inspect.ismodule(o) or isinstance(o, type):
            continue
        attrs = getattr(o, "__dict__", None)
        if isinstance(attrs, dict):
            more += list(attrs.values())
    return objs + more


class StepState:
    """The model(s) and optimizer(s) a step trains: whose gradients and optimizer state every
    trial starts without (as a fresh process running the step would), and whose weights and
    optimizer state are put back after the search (restore=True)."""

    def __init__(self, step: Callable, model=None, optimizer=None):
        self.modules: List[torch.nn.Module] = _as_list(model)
        self.optimizers: List[torch.optim.Optimizer] = _as_list(optimizer)
        if model is None and optimizer is None:
            for o in _candidates(step):
                if isinstance(o, torch.nn.Module) and all(o is not m for m in self.modules):
                    self.modules.append(o)
                elif isinstance(o, torch.optim.Optimizer) and all(o is not p for p in self.optimizers):
                    self.optimizers.append(o)
        for m in self.modules:
            if not isinstance(m, torch.nn.Module):
                raise TypeError(f"model={m!r} is not a torch.nn.Module: pass the model the step trains (or a list)")
        for o in self.optimizers:
            if not isinstance(o, torch.optim.Optimizer):
                raise TypeError(f"optimizer={o!r} is not a torch.optim.Optimizer: pass the step's optimizer (or a list)")
        self._saved: Optional[bytes] = None

    def parameters(self) -> List[torch.Tensor]:
        seen, out = set(), []
        tensors: Iterable[torch.Tensor] = [p for m in self.modules for p in m.parameters()]
        tensors = list(tensors) + [p for o in self.optimizers for g in o.param_groups for p in g["params"]]
        for p in tensors:
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
        return out

    def memory_parameters(self) -> List[torch.Tensor]:
        """The weights as this process holds them, for counting memory: a sharded weight (FSDP2's
        DTensor) as its local shard, not the whole weight its sizes describe (counted whole, a
        GPT-2 sharded over 2 ranks showed its 30.1 MiB of weights on each rank, and -15.1 MiB of
        "other" to make up for it)."""
        return [local_tensor(p) for p in self.parameters()]

    def optimizer_name(self) -> str:
        return ", ".join(type(o).__name__ for o in self.optimizers) or "(the step's own)"

    def reset(self) -> None:
        """After every trial: no gradients, no optimizer state (the next trial creates its own)."""
        for p in self.parameters():
            p.grad = None
        for o in self.optimizers:
            o.state.clear()

    @contextlib.contextmanager
    def trials(self, restore: bool) -> Iterator[None]:
        """Around a search or breakdown: the first trial starts without gradients or optimizer
        state; with `restore`, weights and optimizer state are as before afterwards."""
        if restore:
            self.save()
        try:
            self.reset()
            yield
        finally:
            if restore:
                self.restore()

    def save(self) -> None:
        """Weights and optimizer state into host bytes (outside any device or CPU budget)."""
        buf = io.BytesIO()
        torch.save({"modules": [m.state_dict() for m in self.modules],
                    "optimizers": [o.state_dict() for o in self.optimizers]}, buf)
        self._saved = buf.getvalue()

    def restore(self, keep: bool = False) -> None:
        """Weights and optimizer state as saved; `keep`: the saved copy stays for a later restore."""
        if self._saved is None:
            return
        state = torch.load(io.BytesIO(self._saved), map_location="cpu", weights_only=False)
        if not keep:
            self._saved = None
        with torch.no_grad():
            for m, s in zip(self.modules, state["modules"]):
                m.load_state_dict(s)
        for o, s in zip(self.optimizers, state["optimizers"]):
            o.load_state_dict(s)


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """What this process holds of `t`: a sharded tensor's (DTensor's) local shard, as a leaf sharing
    its storage and its requires_grad; any other tensor itself."""
    if hasattr(t, "to_local"):
        return t.to_local().detach().requires_grad_(t.requires_grad)
    return t


def step_name(step: Callable) -> str:
    fn = step
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def step_device(device: Optional[str], step: Callable, model=None) -> str:
    """`device` as given; None (every call's default): the device of the step's model (its
    parameters; the model found in the step's closure, or model=), else cuda when a GPU is
    visible, else cpu — where the step itself runs."""
    if device is not None:
        return device
    try:
        modules = StepState(step, model, None).modules
    except TypeError:
        modules = []  # a wrong model= is reported by the call itself
    return device_of(modules, "cuda" if torch.cuda.is_available() else "cpu")


def device_of(modules: Sequence[torch.nn.Module], default: str) -> str:
    for m in modules:
        for p in m.parameters():
            return str(p.device)
    return default
