"""Every private part of Lightning that saturate.lightning touches, in one place.

Lightning's public API has no way to run its fit loop for a few steps at a batch and put the
trainer back after (BatchSizeFinder itself does it with the private helpers below), so the drop-in
uses the same ones BatchSizeFinder uses, and the few loop attributes a trial must reset. Each is
named in PRIVATE; `check()` runs at `import saturate.lightning` and refuses a Lightning that lacks
one with an ImportError naming it and the version tested (scripts/setup.sh pins it), instead of an
AttributeError mid-search. Test: test_dropins.py checks every name against the pinned Lightning
and the refusal.
"""
from __future__ import annotations

import inspect
from typing import Any, List, Tuple

import lightning.pytorch as pl
from lightning.pytorch.callbacks import BatchSizeFinder
from lightning.pytorch.loops import _EvaluationLoop, _FitLoop
from lightning.pytorch.tuner import batch_size_scaling as _bss
from lightning.pytorch.utilities import exceptions as _exceptions

TESTED = "2.6.6"  # scripts/setup.sh's pin

# (where, name, what saturate uses it for)
PRIVATE: List[Tuple[Any, str, str]] = [
    (_bss, "__scale_batch_dump_params", "the trainer's loop settings before the trials"),
    (_bss, "__scale_batch_reset_params", "the fit loop set to a trial's few steps"),
    (_bss, "__scale_batch_restore_params", "the loop settings given back after the trials"),
    (_bss, "_reset_dataloaders", "the training loader anew at a trial's batch"),
    (_bss, "_reset_progress", "the loop's step counters back to 0 for a trial"),
    (_bss, "_try_loop_run", "the fit loop run for a trial"),
    (_FitLoop, "_combined_loader", "the training data's length (a batch above it is never given)"),
    (_FitLoop, "_data_fetcher", "the last trial's batch let go before the validation trials"),
    (_EvaluationLoop, "_combined_loader", "the validation loader anew at a trial's batch"),
    (_FitLoop, "_results", "a batch that ran out of memory let go"),
    (_EvaluationLoop, "_results", "a validation batch that ran out of memory let go"),
    (pl.Trainer, "_checkpoint_connector", "the weights restored from the checkpoint after the search"),
    (_exceptions, "_TunerExitException", "BatchSizeFinder's early exit after the search"),
    (BatchSizeFinder, "_steps_per_trial", "BatchSizeFinder's own settings, read by the subclass"),
    (BatchSizeFinder, "_batch_arg_name", "BatchSizeFinder's own settings, read by the subclass"),
    (BatchSizeFinder, "_init_val", "BatchSizeFinder's own settings, read by the subclass"),
    (BatchSizeFinder, "_max_val", "BatchSizeFinder's own settings, read by the subclass"),
    (BatchSizeFinder, "_early_exit", "BatchSizeFinder's own settings, read by the subclass"),
]


class MissingLightningPrivate(ImportError):
    pass


def _has(where: Any, name: str) -> bool:
    if hasattr(where, name):
        return True
    # loop attributes are set in __init__: look at a class's __init__ source names
    init = inspect.unwrap(getattr(where, "__init__", None) or (lambda: None))  # Trainer's is decorated
    code = getattr(init, "__code__", None)
    return code is not None and name in code.co_names


def check() -> None:
    """Raises MissingLightningPrivate naming each private part this Lightning lacks."""
    missing = [f"{getattr(w, '__name__', w)}.{n} ({why})" for w, n, why in PRIVATE if not _has(w, n)]
    if missing:
        raise MissingLightningPrivate(
            f"saturate.lightning needs Lightning's private {', '.join(missing)}, which lightning "
            f"{pl.__version__} does not have; it was tested with lightning=={TESTED} "
            f"(pip install lightning=={TESTED}, as scripts/setup.sh does)")


def _private(where: Any, name: str) -> Any:
    return getattr(where, name)


def dump_params(trainer: "pl.Trainer") -> dict:
    return _private(_bss, "__scale_batch_dump_params")(trainer)


def reset_params(trainer: "pl.Trainer", steps: int) -> None:
    _private(_bss, "__scale_batch_reset_params")(trainer, steps)


def restore_params(trainer: "pl.Trainer", params: dict) -> None:
    _private(_bss, "__scale_batch_restore_params")(trainer, params)


def reset_dataloaders(trainer: "pl.Trainer") -> None:
    _bss._reset_dataloaders(trainer)


def run_fit_trial(trainer: "pl.Trainer", params: dict) -> None:
    """The fit loop from step 0 for the steps reset_params set."""
    _bss._reset_progress(trainer)
    _bss._try_loop_run(trainer, params)


def training_data_length(trainer: "pl.Trainer") -> int:
    """The training data's length (0: unknown, an iterable dataset)."""
    loop = trainer.fit_loop
    loop.setup_data()
    try:
        return loop._combined_loader._dataset_length() if loop._combined_loader is not None else 0
    except NotImplementedError:  # iterable datasets: no length
        return 0


def let_go_of_training_batch(trainer: "pl.Trainer") -> None:
    fit_loop = trainer.fit_loop
    if fit_loop._data_fetcher is not None:
        fit_loop._data_fetcher.teardown()
        fit_loop._data_fetcher = None


def reset_validation_loader(val_loop: Any) -> None:
    val_loop._combined_loader = None  # the val dataloader again, at the new batch


def drop_failed_batch(loop: Any) -> None:
    """A batch that ran out of memory stays referenced by the loop's results (Lightning drops it at
    the batch's end, which never came): the next trial would hold it beside its own."""
    results = getattr(loop, "_results", None)
    if results is not None:
        results.batch = None
        results.batch_size = None


def restore_checkpoint(trainer: "pl.Trainer", path: str) -> None:
    trainer._checkpoint_connector.restore(path)


def tuner_exit() -> BaseException:
    """What BatchSizeFinder raises to end the fit after the search (its early_exit)."""
    return _exceptions._TunerExitException()
