"""A Lightning callback that replaces `BatchSizeFinder` and runs saturate's search on Lightning's
own training loop (needs `lightning`):

    from saturate.lightning import SaturateBatchSizeFinder
    trainer = L.Trainer(callbacks=[SaturateBatchSizeFinder()])
    trainer.fit(model, datamodule=dm)   # model.batch_size (or dm.batch_size) is set first

Each trial sets the batch attribute and runs Lightning's fit loop for `steps_per_trial` steps,
exactly as BatchSizeFinder does (same loop, same data loaders, same hooks, its validation
batches), so the answer holds for the loop that trains: gradients alive during the forward,
logits held through the backward, whatever the module's training_step does. Between trials
the gradients and optimizer state are dropped (each trial measures what a fresh fit holds); the
weights come back from a checkpoint afterwards, as BatchSizeFinder does. The answer is exact
(max fits, max + 1 ran out of memory), found in fewer steps than power or binsearch.

With `eval_batch_arg_name` (the attribute your val_dataloader reads, e.g. "eval_batch_size"), the
validation batch gets its own search: the training trials run without validation (a validation
out-of-memory never limits the training batch), then each evaluation trial sets that attribute
and runs Lightning's own validation loop for `steps_per_trial` batches beside what fit keeps
while it validates (the optimizer's state; Lightning zeroes the gradients first).
"""
from __future__ import annotations

import gc
import os
import uuid
from typing import Optional

import lightning.pytorch as pl
from lightning.pytorch.callbacks import BatchSizeFinder
from lightning.pytorch.utilities.parsing import lightning_hasattr, lightning_setattr

from . import _lightning_seam as seam
from ._budget import Size
from ._search import SearchResult, _training_state_held, search
from ._step import StepState

seam.check()  # every private part of Lightning used below (_lightning_seam.py), or an ImportError naming it


def _set_batch_size(trainer: "pl.Trainer", name: str, batch_size: int) -> None:
    """The module's batch attribute and its loader anew. Not Lightning's _adjust_batch_size: it
    leaves the attribute as it is once it reached the data's length, so after a trial at or above
    it every later trial, and the fit after the search, ran at that batch (issue 44: the fit trained
    at 4096 where the answer was 2048)."""
    lightning_setattr(trainer.lightning_module, name, batch_size)
    seam.reset_dataloaders(trainer)


def _capped_at_the_data(trainer: "pl.Trainer", max_batch: int) -> int:
    """max_batch, at most the training data's length (a larger batch is never one the loader
    gives: it holds every sample once)."""
    length = seam.training_data_length(trainer)
    return min(max_batch, length) if length > 0 else max_batch


class SaturateBatchSizeFinder(BatchSizeFinder):
    """BatchSizeFinder's arguments, plus saturate's: strategy ('fit', or Lightning's 'power' and
    'binsearch'), memory_budget (bytes, '512MiB' or a fraction; on CPU required unless inside
    saturate.cpu_memory_budget), target_memory, and use='max' (the largest that fits, as
    BatchSizeFinder) or 'recommended' (the largest within target_memory of the budget). The
    search's result is kept in `search_result`."""

    def __init__(self, strategy: str = "fit", steps_per_trial: int = 3, init_val: int = 2, max_trials: int = 25,
                 batch_arg_name: str = "batch_size", max_val: int = 8192, *, memory_budget: Size = None,
                 target_memory: float = 0.9, use: str = "max", eval_batch_arg_name: Optional[str] = None,
                 eval_max_val: int = 65536) -> None:
        super().__init__(mode="binsearch", steps_per_trial=steps_per_trial, init_val=init_val,
                         max_trials=max_trials, batch_arg_name=batch_arg_name, margin=0.0, max_val=max_val)
        if use not in ("max", "recommended"):
            raise ValueError(f"use={use!r}: give 'max' or 'recommended'")
        self._strategy = strategy
        self._memory_budget = memory_budget
        self._target_memory = target_memory
        self._use = use
        if eval_batch_arg_name is not None and (not isinstance(eval_batch_arg_name, str) or not eval_batch_arg_name):
            raise ValueError(f"eval_batch_arg_name={eval_batch_arg_name!r}: give the attribute your val_dataloader "
                             "reads its batch size from, e.g. 'eval_batch_size'")
        if eval_batch_arg_name == batch_arg_name:
            raise ValueError(f"eval_batch_arg_name={eval_batch_arg_name!r} is the training batch's attribute too: give "
                             "the validation its own attribute (or leave eval_batch_arg_name out)")
        if not isinstance(eval_max_val, int) or eval_max_val < 1:
            raise ValueError(f"eval_max_val={eval_max_val!r}: give a positive int")
        self._eval_name = eval_batch_arg_name
        self._eval_max_val = eval_max_val
        self.search_result: Optional[SearchResult] = None
        self.eval_search_result: Optional[SearchResult] = None
        self.optimal_eval_batch_size: Optional[int] = None

    def scale_batch_size(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        if trainer.fast_dev_run:
            return
        if self._eval_name and not lightning_hasattr(pl_module, self._eval_name):  # before any trial
            raise AttributeError(f"eval_batch_arg_name={self._eval_name!r}: neither the LightningModule nor its "
                                 "datamodule has that attribute; give the one your val_dataloader reads")
        ckpt_path = os.path.join(trainer.default_root_dir, f".saturate_batch_size_{uuid.uuid4()}.ckpt")
        trainer.save_checkpoint(ckpt_path)
        params = seam.dump_params(trainer)
        seam.reset_params(trainer, self._steps_per_trial)
        if self._eval_name:
            trainer.limit_val_batches = 0  # the training trials do not validate (an evaluation of its own below)
        if trainer.progress_bar_callback:
            trainer.progress_bar_callback.disable()
        try:
            def trial(batch_size: int) -> None:
                seam.drop_failed_batch(trainer.fit_loop)
                _set_batch_size(trainer, self._batch_arg_name, batch_size)
                seam.run_fit_trial(trainer, params)

            result = search(trial, device=str(trainer.strategy.root_device), memory_budget=self._memory_budget,
                            target_memory=self._target_memory, strategy=self._strategy,
                            max_batch=_capped_at_the_data(trainer, self._max_val),
                            min_batch=self._init_val, warmup_steps=0, timed_steps=1, model=pl_module,
                            optimizer=list(trainer.optimizers), restore=False)
            self.search_result = result
            if result.error and not result.max_batch:
                raise RuntimeError(f"saturate's batch-size search failed: {result.error}")
            new_size = result.recommended_batch if self._use == "recommended" else result.max_batch
            new_size = max(new_size, 1)
            _set_batch_size(trainer, self._batch_arg_name, new_size)
            if self._eval_name:
                self._search_eval_batch(trainer, pl_module)
        finally:
            seam.restore_params(trainer, params)
            if trainer.progress_bar_callback:
                trainer.progress_bar_callback.enable()
            seam.restore_checkpoint(trainer, ckpt_path)
            trainer.strategy.remove_checkpoint(ckpt_path)
        self.optimal_batch_size = new_size
        if self._early_exit:
            raise seam.tuner_exit()

    def _search_eval_batch(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        """The validation batch: Lightning's validation loop at each trial's batch, beside the
        optimizer's state (fit validates after zeroing the gradients)."""
        val_loop = trainer.fit_loop.epoch_loop.val_loop
        trainer.limit_val_batches = self._steps_per_trial
        # the training trials' fetcher still holds a batch of the last trial: let it go (fit holds no
        # training batch while it validates; the fit after the search sets up its loader anew)
        seam.let_go_of_training_batch(trainer)
        seam.drop_failed_batch(trainer.fit_loop)
        gc.collect()

        def trial(batch_size: int) -> None:
            # (not Lightning's _adjust_batch_size: it keeps a batch at or above the training data's length)
            lightning_setattr(pl_module, self._eval_name, batch_size)
            seam.drop_failed_batch(val_loop)
            seam.reset_validation_loader(val_loop)
            val_loop.batch_progress.reset()
            trainer.validating = True
            try:
                val_loop.run()
            finally:
                trainer.training = True

        trial.__qualname__ = f"{type(pl_module).__name__}.validation_step"
        training = StepState(trial, [pl_module], list(trainer.optimizers))
        with _training_state_held(training, gradients=False):
            result = search(trial, device=str(trainer.strategy.root_device), memory_budget=self._memory_budget,
                            target_memory=self._target_memory, strategy=self._strategy, max_batch=self._eval_max_val,
                            min_batch=1, warmup_steps=0, timed_steps=1, model=pl_module, optimizer=[],
                            restore=False)
        pl_module.train()  # an out-of-memory mid-validation left it in eval mode
        self.eval_search_result = result
        if result.error and not result.max_batch:
            raise RuntimeError(f"saturate's validation-batch search failed: {result.error}")
        size = max(1, result.recommended_batch if self._use == "recommended" else result.max_batch)
        lightning_setattr(pl_module, self._eval_name, size)
        self.optimal_eval_batch_size = size

