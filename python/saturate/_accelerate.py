"""A drop-in for Accelerate's `find_executable_batch_size`, running saturate's search.

    @saturate.find_executable_batch_size(starting_batch_size=128)
    def train(batch_size, model, optimizer): ...
    train(model, optimizer)

Accelerate runs the whole function at 128, 115, 103, ... (x 0.9 after each out-of-memory) until
one run does not run out of memory. Here each trial runs the function only until its optimizer
has stepped `steps_per_trial` times (a global optimizer step hook stops it there), saturate's
search finds the largest batch up to `starting_batch_size` whose peak stays within
`target_memory` of the budget, and the function then runs once at that batch. Should that run
still run out of memory in training (memory the first steps did not show), the batch is reduced
as Accelerate would and the function runs again.

An out-of-memory in an evaluation never changes the training batch (Hugging Face #32215). It is
told apart by the model: an evaluation puts it in eval mode and the out-of-memory leaves it there
(the models among the function's arguments all in eval mode, after a forward in train mode or one
without gradients; a model trained in eval mode throughout is not evaluating). Without a model
among the arguments, the last module call tells (a no-grad forward of a module in eval mode; a
frozen teacher's no-grad forward inside a training step then counts as an evaluation too). A
function with an `eval_batch_size` parameter is given it (its default, or the training batch
when the default is None) and runs again with it halved; one without such a parameter gets an
error that says so. Each run starts with the models in the mode the call found them in.
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
    signature = inspect.signature(function).parameters
    params = [n for n in signature if n != "eval_batch_size"]
    takes_eval = "eval_batch_size" in signature
    eval_default = signature["eval_batch_size"].default if takes_eval else None
    if eval_default is inspect.Parameter.empty:
        eval_default = None
    if eval_default is not None and (not isinstance(eval_default, int) or eval_default < 1):
        raise ValueError(f"{function.__name__}'s eval_batch_size default is {eval_default!r}: give a positive int "
                         "or None (the training batch)")
    if not params or params[0] != "batch_size":
        raise TypeError(f"{function.__name__}'s first argument must be `batch_size` "
                        f"(as Accelerate requires), not {params[:1]}")

    eval_size = [eval_default]  # the evaluation batch the function is given (takes_eval)

    def with_eval(batch_size: int, kwargs: dict) -> dict:
        if not takes_eval:
            return kwargs
        if eval_size[0] is None:
            eval_size[0] = batch_size
        return dict(kwargs, eval_batch_size=eval_size[0])

    @functools.wraps(function)
    def decorator(*args, **kwargs):
        from ._search import search  # late: _search imports the package's module

        if len(args) + 1 > len(params):
            raise TypeError(f"Batch size was passed into `{function.__name__}` as the first argument when called. "
                            f"Remove this as the decorator already does so: `{function.__name__}({args_text(args)})`")

        if takes_eval and "eval_batch_size" in kwargs:
            raise TypeError(f"eval_batch_size was passed to `{function.__name__}`: the decorator passes it (set its "
                            "default in the function's signature instead)")
        eval_size[0] = eval_default
        decorator.eval_backoffs = []
        # a model and optimizer passed in are trained by every trial: their gradients and state
        # are dropped between trials and their weights put back after the search
        given = list(args) + list(kwargs.values())
        models = [a for a in given if isinstance(a, torch.nn.Module)]
        modes = [m.training for m in models]  # an out-of-memory mid-evaluation leaves them in eval mode
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
                function(batch_size, *args, **with_eval(batch_size, kwargs))
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
            for m, mode in zip(models, modes):  # each run starts as the first did
                m.train(mode)
            last_call = _LastModuleCall()
            try:
                with last_call:
                    out = function(batch_size, *args, **with_eval(batch_size, kwargs))
                decorator.eval_batch_size = eval_size[0]
                return out
            except Exception as e:  # noqa: BLE001
                if not is_out_of_memory(e):
                    raise
                what = str(e).splitlines()[0] if str(e) else type(e).__name__
                # an evaluation puts the model in eval mode and the out-of-memory left it there,
                # after a forward in train mode or in one without gradients (a model trained in
                # eval mode throughout, e.g. for frozen batch norms, is not evaluating); without a
                # model among the arguments, the last module call tells
                evaluating = (all(not m.training for m in models) and (last_call.evaluating or last_call.training)
                              if models else last_call.evaluating)
                release_exception(e)
                del e
                gc.collect()
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                if evaluating:
                    # the training batch stays: the evaluation is what did not fit
                    if not takes_eval:
                        raise RuntimeError(
                            f"an evaluation in {function.__name__} ran out of memory at training batch {batch_size} "
                            f"({what}); the training batch is not lowered for an evaluation. Give "
                            f"{function.__name__} an `eval_batch_size` parameter (the decorator lowers it), or size "
                            "it with saturate.search_eval(..., optimizer=)") from None
                    eval_size[0] = eval_size[0] // 2
                    decorator.eval_backoffs.append(eval_size[0])
                    if eval_size[0] == 0:
                        raise RuntimeError(f"an evaluation in {function.__name__} ran out of memory at "
                                           "eval_batch_size 1: nothing smaller is left") from None
                    continue
                batch_size = reduce()

    decorator.search_result = None
    decorator.eval_batch_size = None  # the evaluation batch the last run finished with (eval_batch_size)
    decorator.eval_backoffs = []      # each evaluation batch tried after an evaluation ran out of memory
    return decorator


class _LastModuleCall:
    """Within the block, the last module call: `evaluating`, a forward with no gradients (no_grad
    or inference mode) of a module in eval mode; `training`, of a module in train mode (False
    before any call)."""

    def __init__(self) -> None:
        self.evaluating = False
        self.training = False
        self._handle = None

    def _hook(self, module: torch.nn.Module, inputs) -> None:
        self.training = module.training
        self.evaluating = not module.training and not torch.is_grad_enabled()

    def __enter__(self) -> "_LastModuleCall":
        self._handle = torch.nn.modules.module.register_module_forward_pre_hook(self._hook)
        return self

    def __exit__(self, *exc) -> bool:
        self._handle.remove()
        return False


def args_text(args) -> str:
    return ", ".join(repr(a) for a in args)
