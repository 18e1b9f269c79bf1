"""A drop-in for Accelerate's `find_executable_batch_size`, running saturate's search.

    @saturate.find_executable_batch_size(starting_batch_size=128)
    def train(batch_size, model, optimizer): ...
    train(model, optimizer)

Accelerate runs the whole function at 128, 115, 103, ... (x 0.9 after each out-of-memory) until
one run does not run out of memory. Here each trial runs the function only until its optimizer
has stepped `steps_per_trial` times (a global optimizer step hook stops it there), saturate's
search finds the largest batch up to `starting_batch_size` whose peak stays within
`target_memory` of the budget, and the function then runs once at that batch. Should that run
still run out of memory (memory the first steps did not show, e.g. an evaluation), the batch is
reduced as Accelerate would and the function runs again.
"""
from __future__ import annotations

import functools
import gc
import inspect
from typing import Callable, Optional

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from ._budget import Size
from ._step import is_out_of_memory, release_exception


class _EnoughSteps(BaseException):
    """Raised from the optimizer hook to end a trial's run (not an Exception: `except Exception`
    in the user's function does not swallow it)."""


def find_executable_batch_size(function: Optional[Callable] = None, starting_batch_size: int = 128,
                               reduce_batch_size_fn: Optional[Callable[[], int]] = None, *,
                               device: Optional[str] = None, memory_budget: Size = None,
                               target_memory: float = 0.9, steps_per_trial: int = 3,
                               strategy: str = "fit"):
    """Accelerate's signature; see the module's documentation. The batch found is kept as
    `train.search_result` (a saturate.SearchResult) on the decorated function."""
    if function is None:
        return functools.partial(find_executable_batch_size, starting_batch_size=starting_batch_size,
                                 reduce_batch_size_fn=reduce_batch_size_fn, device=device,
                                 memory_budget=memory_budget, target_memory=target_memory,
                                 steps_per_trial=steps_per_trial, strategy=strategy)
    if not isinstance(starting_batch_size, int) or starting_batch_size < 1:
        raise ValueError(f"starting_batch_size={starting_batch_size!r}: give a positive int")
    if not isinstance(steps_per_trial, int) or steps_per_trial < 2:
        raise ValueError(f"steps_per_trial={steps_per_trial!r}: give an int >= 2 (the optimizer state exists "
                         "from the second step on)")
    params = list(inspect.signature(function).parameters)
    if not params or params[0] != "batch_size":
        raise TypeError(f"{function.__name__}'s first argument must be `batch_size` "
                        f"(as Accelerate requires), not {params[:1]}")

    @functools.wraps(function)
    def decorator(*args, **kwargs):
        from ._search import search  # late: _search imports the package's module

        if len(args) + 1 > len(params):
            raise TypeError(f"Batch size was passed into `{function.__name__}` as the first argument when called. "
                            f"Remove this as the decorator already does so: `{function.__name__}({args_text(args)})`")

        # a model and optimizer passed in are trained by every trial: their gradients and state
        # are dropped between trials and their weights put back after the search
        given = list(args) + list(kwargs.values())
        models = [a for a in given if isinstance(a, torch.nn.Module)]
        optimizers = [a for a in given if isinstance(a, torch.optim.Optimizer)]

        def clean() -> None:
            # a run stopped after its optimizer step leaves gradients the function would have
            # zeroed next: each run starts as the first would, without gradients or state
            for m in models:
                for p in m.parameters():
                    p.grad = None
            for o in optimizers:
                o.state.clear()

        def one_trial(batch_size: int) -> None:
            count = 0
            clean()

            def hook(optimizer, a, k):
                nonlocal count
                count += 1
                if count >= steps_per_trial:
                    raise _EnoughSteps()

            handle = register_optimizer_step_post_hook(hook)
            try:
                function(batch_size, *args, **kwargs)
            except _EnoughSteps as done:
                release_exception(done)
            finally:
                handle.remove()
                clean()

        dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        result = search(one_trial, device=dev, memory_budget=memory_budget, target_memory=target_memory,
                        strategy=strategy, max_batch=starting_batch_size, warmup_steps=0, timed_steps=1,
                        model=models, optimizer=optimizers, restore=bool(models or optimizers))
        decorator.search_result = result
        if result.error and not result.max_batch:
            raise RuntimeError(f"saturate's search failed: {result.error}")
        batch_size = result.recommended_batch or result.max_batch
        reduce = reduce_batch_size_fn or (lambda: int(batch_size * 0.9))
        while True:
            if batch_size == 0:
                raise RuntimeError("No executable batch size found, reached zero.")
            try:
                return function(batch_size, *args, **kwargs)
            except Exception as e:  # noqa: BLE001
                if not is_out_of_memory(e):
                    raise
                release_exception(e)
                del e
                gc.collect()
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                batch_size = reduce()

    decorator.search_result = None
    return decorator


def args_text(args) -> str:
    return ", ".join(repr(a) for a in args)
