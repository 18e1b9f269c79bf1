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
"""
from __future__ import annotations

import os
import uuid
from typing import Optional

import lightning.pytorch as pl
from lightning.pytorch.callbacks import BatchSizeFinder
from lightning.pytorch.tuner import batch_size_scaling as _bss

from ._budget import Size
from ._search import SearchResult, search

# Lightning's private helpers, by name (the double underscore would be mangled in a class body)
_dump_params = getattr(_bss, "__scale_batch_dump_params")
_reset_params = getattr(_bss, "__scale_batch_reset_params")
_restore_params = getattr(_bss, "__scale_batch_restore_params")


class SaturateBatchSizeFinder(BatchSizeFinder):
    """BatchSizeFinder's arguments, plus saturate's: strategy ('fit', or Lightning's 'power' and
    'binsearch'), memory_budget (bytes, '512MiB' or a fraction; on CPU required unless inside
    saturate.cpu_memory_budget), target_memory, and use='max' (the largest that fits, as
    BatchSizeFinder) or 'recommended' (the largest within target_memory of the budget). The
    search's result is kept in `search_result`."""

    def __init__(self, strategy: str = "fit", steps_per_trial: int = 3, init_val: int = 2, max_trials: int = 25,
                 batch_arg_name: str = "batch_size", max_val: int = 8192, *, memory_budget: Size = None,
                 target_memory: float = 0.9, use: str = "max") -> None:
        super().__init__(mode="binsearch", steps_per_trial=steps_per_trial, init_val=init_val,
                         max_trials=max_trials, batch_arg_name=batch_arg_name, margin=0.0, max_val=max_val)
        if use not in ("max", "recommended"):
            raise ValueError(f"use={use!r}: give 'max' or 'recommended'")
        self._strategy = strategy
        self._memory_budget = memory_budget
        self._target_memory = target_memory
        self._use = use
        self.search_result: Optional[SearchResult] = None

    def scale_batch_size(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        if trainer.fast_dev_run:
            return
        ckpt_path = os.path.join(trainer.default_root_dir, f".saturate_batch_size_{uuid.uuid4()}.ckpt")
        trainer.save_checkpoint(ckpt_path)
        params = _dump_params(trainer)
        _reset_params(trainer, self._steps_per_trial)
        if trainer.progress_bar_callback:
            trainer.progress_bar_callback.disable()
        try:
            def trial(batch_size: int) -> None:
                _bss._adjust_batch_size(trainer, self._batch_arg_name, value=batch_size)
                _bss._reset_dataloaders(trainer)
                _bss._reset_progress(trainer)
                _bss._try_loop_run(trainer, params)

            result = search(trial, device=str(trainer.strategy.root_device), memory_budget=self._memory_budget,
                            target_memory=self._target_memory, strategy=self._strategy, max_batch=self._max_val,
                            min_batch=self._init_val, warmup_steps=0, timed_steps=1, model=pl_module,
                            optimizer=list(trainer.optimizers), restore=False)
            self.search_result = result
            if result.error and not result.max_batch:
                raise RuntimeError(f"saturate's batch-size search failed: {result.error}")
            new_size = result.recommended_batch if self._use == "recommended" else result.max_batch
            new_size = max(new_size, 1)
            _bss._adjust_batch_size(trainer, self._batch_arg_name, value=new_size)
        finally:
            _restore_params(trainer, params)
            if trainer.progress_bar_callback:
                trainer.progress_bar_callback.enable()
            trainer._checkpoint_connector.restore(ckpt_path)
            trainer.strategy.remove_checkpoint(ckpt_path)
        self.optimal_batch_size = new_size
        if self._early_exit:
            from lightning.pytorch.utilities.exceptions import _TunerExitException

            raise _TunerExitException()
