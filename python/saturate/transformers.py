"""Hugging Face `Trainer`'s batch size, found exactly before training (issue 29).

`Trainer(auto_find_batch_size=True)` wraps the whole training loop in Accelerate's
`find_executable_batch_size`: after every out-of-memory it restarts training from the beginning
at 0.9 of the batch, never adjusts `gradient_accumulation_steps` (so the effective batch changes)
and shrinks the training batch on an evaluation's out-of-memory. `find_batch_size(trainer)`
searches the trainer's own step instead, before `trainer.train()`:

- the training step is the trainer's `training_step` (its model, loss, accelerator's autocast for
  bf16/fp16, activation checkpointing when the arguments ask for it, gradient clipping, and an
  optimizer the trainer makes as it would, its state made first as from the second step on) on batches its collator builds from the training data,
  the longest samples first (a padding collator's worst batch: the answer holds for every batch),
  beside the next batch on the device (the trainer's loader, Accelerate's DataLoaderShard, fetches
  it before it yields the current one: at an exact max without it, BERT ran out one batch above);
- `per_device_train_batch_size` becomes the largest divisor of the per-device effective batch
  (`per_device_train_batch_size x gradient_accumulation_steps` as given) that fits, and
  `gradient_accumulation_steps` the rest: the effective batch is the user's, exactly. Only
  divisors are tried (use='divisor', the default): from the batch given, up by doubling or down by
  halving, then bisecting the divisors between, until the next divisor above the answer was seen
  not to fit (GPT-2 and BERT given above their max: 2 training steps, where auto_find_batch_size
  starts 6 and 4); use='max' finds the largest batch that fits, exact, first;
- with an evaluation dataset, `per_device_eval_batch_size` is searched on its own (the trainer's
  `prediction_step`, beside the optimizer's state as during training): an evaluation that does not
  fit never lowers the training batch;
- the weights end as they began; under torchrun every rank searches and the ranks agree, with
  DDP's gradient buckets (twice the gradients) held beside each trial, as training holds them.

    from saturate.transformers import find_batch_size
    trainer = Trainer(model, args, train_dataset=..., eval_dataset=..., data_collator=...)
    found = find_batch_size(trainer)   # sets trainer.args' batch sizes and accumulation
    trainer.train()
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import torch

from ._budget import Size
from ._search import SearchResult, search
from ._step import StepState

log = logging.getLogger("saturate")

_LENGTH_SCAN_LIMIT = 200_000  # samples whose length is read to order the data longest first


@dataclass
class TrainerBatchSizes:
    """What `find_batch_size` set on the trainer's arguments, and the searches behind it."""
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    per_device_eval_batch_size: Optional[int]  # None: no evaluation dataset (left as given)
    effective_batch: int                       # per device: train batch x accumulation (as given)
    train: SearchResult
    eval: Optional[SearchResult]
    reason: str
    # use='divisor': the next divisor of the effective batch above the train batch, seen not to fit
    # (0: the effective batch itself fits); use='max': the max + 1 when exact
    seen_not_to_fit: int = 0

    def __str__(self) -> str:
        return self.reason


def _length(sample: Any) -> int:
    """A sample's length: its input_ids' (or its largest sequence's), 0 when it has none."""
    if isinstance(sample, dict):
        if "input_ids" in sample:
            return len(sample["input_ids"])
        lengths = [len(v) for v in sample.values() if hasattr(v, "__len__") and not isinstance(v, str)]
        return max(lengths, default=0)
    return 0


def _longest_first(dataset: Any) -> List[int]:
    """The dataset's indices, the longest samples first (a padding collator's worst batches)."""
    n = len(dataset)
    if n > _LENGTH_SCAN_LIMIT:
        return list(range(n))
    return sorted(range(n), key=lambda i: -_length(dataset[i]))


def _batches(dataset: Any, collate: Callable[[list], Any], what: str) -> Callable[[int], Any]:
    if dataset is None or len(dataset) == 0:
        raise ValueError(f"the trainer has no {what} dataset: give Trainer({what}_dataset=...) before find_batch_size")
    order = _longest_first(dataset)

    def batch(batch_size: int) -> Any:
        return collate([dataset[order[i % len(order)]] for i in range(batch_size)])
    return batch


def _largest_divisor_at_most(total: int, limit: int) -> int:
    return max(d for d in range(1, min(total, limit) + 1) if total % d == 0)


def _next_divisor_seen_not_to_fit(train: SearchResult) -> int:
    """The smallest batch above the answer that a trial ran and did not fit (0: none: the effective
    batch itself fits); with use='divisor', the next divisor of the effective batch."""
    return min((t.batch for t in train.trials if t.status != "ok" and t.batch > train.max_batch), default=0)


def _enable_checkpointing(trainer: Any) -> None:
    """Activation checkpointing as trainer.train() turns it on (it does so again, alike)."""
    args, model = trainer.args, trainer.model
    if not (getattr(args, "activation_checkpointing", False) or getattr(args, "gradient_checkpointing", False)):
        return
    kwargs = dict(getattr(args, "activation_checkpointing_kwargs", None) or
                  getattr(args, "gradient_checkpointing_kwargs", None) or {})
    kwargs.pop("every_n_layers", None)
    kwargs.pop("offload", None)
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs or None)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs or None)


def _prime(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """The optimizer's state as from the second step on (Adam's moments), made by one step at
    learning rate 0 on zero gradients: the weights do not move. The trials keep it (the search is
    given no optimizer to reset), so a trial of one step has the peak of every later step (at the
    first the state is made only after the backward: without it the answer was 1.35 MiB of AdamW
    state too large on GPT-2, out of memory at the trainer's second step)."""
    if optimizer.state:
        return
    lrs = [g["lr"] for g in optimizer.param_groups]
    for g in optimizer.param_groups:
        g["lr"] = 0.0
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    for g, lr in zip(optimizer.param_groups, lrs):
        g["lr"] = lr


_USES = ("divisor", "max", "recommended")


def find_batch_size(trainer: Any, memory_budget: Size = None, *, use: str = "divisor", target_memory: float = 0.9,
                    ranks: Any = "auto") -> TrainerBatchSizes:
    """Searches `trainer`'s training step (and its evaluation step, with an eval dataset) exactly and
    sets `trainer.args.per_device_train_batch_size`, `gradient_accumulation_steps` (the effective
    batch kept) and `per_device_eval_batch_size`. memory_budget: bytes, '512MiB' or a fraction of
    the device (on CPU required unless inside saturate.cpu_memory_budget); use: 'divisor' (default:
    only the divisors of the effective batch are tried, from the batch given: the largest that
    fits, the next one above seen not to; the fewest trials), 'max' (the largest batch that fits,
    exact, then the largest divisor at or below it) or 'recommended' (the largest within
    target_memory of the budget, then its divisor)."""
    if use not in _USES:
        raise ValueError(f"use={use!r}: give 'divisor' (the largest divisor of the effective batch that fits), "
                         "'max' (the largest batch that fits) or 'recommended' (within target_memory of the budget)")
    args, model = trainer.args, trainer.model
    for engine, flag in (("FSDP", "is_fsdp_enabled"), ("DeepSpeed", "is_deepspeed_enabled")):
        if getattr(trainer, flag, False):  # train() would shard the model: the unsharded step is not it
            raise ValueError(f"find_batch_size: this Trainer trains with {engine} (trainer.{flag}), which shards the "
                             "model in train(); the drop-in searches the unsharded step and would answer for a model "
                             "that does not train: search the sharded step with saturate.search(step, model=...) "
                             "under torchrun (an FSDP2 model's ranks agree at every unit), or plan it with "
                             "saturate.shard_plan (docs/sharding.md)")
    if model is None:
        raise ValueError("the trainer has no model (model_init trainers build theirs in train(): give Trainer(model=...))")
    effective = int(args.per_device_train_batch_size) * int(args.gradient_accumulation_steps)
    device = "cpu" if args.device.type == "cpu" else str(args.device)  # under torchrun: "cpu:0"
    train_batch = _batches(trainer.train_dataset,
                           trainer._get_collator_with_removed_columns(trainer.data_collator, description="training"),
                           "train")
    _enable_checkpointing(trainer)
    made_optimizer = trainer.optimizer is None
    if made_optimizer:
        trainer.create_optimizer()
    optimizer = trainer.optimizer
    had_ga = hasattr(trainer, "current_gradient_accumulation_steps")
    if not had_ga:
        trainer.current_gradient_accumulation_steps = 1  # set by train()'s loop; training_step reads it
    autocast = trainer.accelerator.autocast
    # under torchrun the trainer wraps the model in DDP, whose reducer keeps a copy of every gradient
    # in its buckets and as much again for the bucket in flight (as saturate train counts it): held
    # through the search, as training will hold it
    world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    ddp_buckets = torch.empty(2 * grad_bytes if world > 1 else 0, dtype=torch.uint8, device=device)
    saved = StepState(train_batch, model=[model], optimizer=[optimizer])
    saved.save()  # weights and optimizer state (host bytes), put back after the searches

    def train_step(batch_size: int) -> None:
        inputs = train_batch(batch_size)
        ahead = trainer._prepare_inputs(train_batch(batch_size))  # the loader's next batch (below)
        with autocast():
            trainer.training_step(model, inputs)
        del inputs, ahead
        if args.max_grad_norm and args.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    train_step.__qualname__ = f"{type(trainer).__name__}.training_step ({type(model).__name__})"

    try:
        _prime(model, optimizer)
        # with use="max" no trials are spent on the target's boundary (the recommended batch)
        target = target_memory if use == "recommended" else 1.0
        # divisor: only batches training can run at, from the one given; else every batch up to
        # what the data holds (no batch holds more)
        batches = (dict(strategy="divisors", max_batch=effective, start_batch=int(args.per_device_train_batch_size))
                   if use == "divisor" else dict(max_batch=min(65536, len(trainer.train_dataset))))
        train = search(train_step, device=device, memory_budget=memory_budget, target_memory=target, model=model,
                       optimizer=[], restore=False, ranks=ranks, warmup_steps=0, timed_steps=1, **batches)
        if train.error and not train.max_batch:
            raise RuntimeError(f"saturate.transformers.find_batch_size: the training step does not fit: {train.error}")
        fits = train.recommended_batch if use == "recommended" else train.max_batch
        micro = _largest_divisor_at_most(effective, max(1, fits))
        accumulation = effective // micro
        evaluated = None
        eval_size = None
        if trainer.eval_dataset is not None:
            evaluated = _search_eval(trainer, model, optimizer, device, memory_budget, target, ranks, autocast)
            eval_size = evaluated.recommended_batch if use == "recommended" else evaluated.max_batch
    finally:
        del ddp_buckets
        saved.restore()  # the weights as given, the optimizer's state as it was (none: Adam's step count 0)
        if made_optimizer:
            trainer.optimizer = None  # train() makes its own, as it would have
        if not had_ga:
            del trainer.current_gradient_accumulation_steps
    given = (int(args.per_device_train_batch_size), int(args.gradient_accumulation_steps))
    args.per_device_train_batch_size = micro
    args.gradient_accumulation_steps = accumulation
    reason = (f"saturate.transformers: per_device_train_batch_size {given[0]} -> {micro}, gradient_accumulation_steps "
              f"{given[1]} -> {accumulation} (effective batch {effective} a device, kept): ")
    if use == "divisor":
        above = _next_divisor_seen_not_to_fit(train)
        reason += (f"the largest divisor of {effective} that fits (" +
                   (f"{above}, the next, does not" if above else "the effective batch itself") +
                   f"; {len(train.trials)} trials; use='max' finds the largest batch too)")
    else:
        exact = f"exact: {train.max_batch + 1} does not fit" if train.max_batch_exact else "not exact"
        reason += (f"the largest divisor of {effective} within the {use} batch {fits} (max {train.max_batch}, {exact}; "
                   f"{len(train.trials)} trials)")
    if evaluated is not None:
        args.per_device_eval_batch_size = max(1, eval_size)
        kept = evaluated.data.get("kept_for_metrics")
        held = (f", beside the predictions kept for compute_metrics: {kept['samples']} samples x "
                f"{kept['bytes_per_sample']} bytes, twice" if kept else "")
        reason += (f"; per_device_eval_batch_size {args.per_device_eval_batch_size} (searched on its own{held}: max "
                   f"{evaluated.max_batch}, {len(evaluated.trials)} trials)")
        if eval_size < 1:  # said, not a silent 1: the evaluation will run out of memory as it is
            reason += (f"; WARNING: no evaluation batch fits ({evaluated.error or 'batch 1 does not fit'}): "
                       "evaluate with more memory, or without eval_dataset")
            log.warning(reason)
    log.info(reason)
    return TrainerBatchSizes(micro, accumulation, eval_size if evaluated is not None else None, effective, train,
                             evaluated, reason, _next_divisor_seen_not_to_fit(train))


def _keeps_predictions(trainer: Any) -> bool:
    """Whether trainer.evaluate() keeps every batch's predictions for compute_metrics: it does
    when compute_metrics is set (evaluate() then asks for more than the loss), unless
    prediction_loss_only or batch_eval_metrics says otherwise."""
    args = trainer.args
    return (trainer.compute_metrics is not None and not getattr(args, "prediction_loss_only", False)
            and not getattr(args, "batch_eval_metrics", False))


def _nbytes(value: Any) -> int:
    if torch.is_tensor(value):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0


def _kept_bytes_per_sample(trainer: Any, model: torch.nn.Module, eval_batch: Callable[[int], Any],
                           autocast: Callable) -> int:
    """What evaluate() keeps a sample for compute_metrics: its logits (after
    preprocess_logits_for_metrics), its labels, its loss, and its inputs when include_for_metrics
    names them; from one step of 2 of the longest samples."""
    inputs = trainer._prepare_inputs(eval_batch(2))
    with torch.no_grad(), autocast():
        loss, logits, labels = trainer.prediction_step(model, inputs, prediction_loss_only=False)
    if trainer.preprocess_logits_for_metrics is not None and logits is not None:
        logits = trainer.preprocess_logits_for_metrics(logits, labels)
    kept = _nbytes(logits) + _nbytes(labels) + (_nbytes(loss.repeat(2)) if loss is not None else 0)
    if "inputs" in (getattr(trainer.args, "include_for_metrics", None) or []):
        kept += _nbytes(inputs.get(getattr(model, "main_input_name", "input_ids"))) if isinstance(inputs, dict) else 0
    del inputs, loss, logits, labels
    return -(-kept // 2)


def _search_eval(trainer: Any, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: str,
                 memory_budget: Size, target_memory: float, ranks: Any, autocast: Callable) -> SearchResult:
    """The evaluation batch: the trainer's prediction_step beside the optimizer's state, gradients
    released as after a training step. With compute_metrics, evaluate() keeps every batch's
    predictions (logits, labels, losses) on the device and concatenates them batch after batch
    (without eval_accumulation_steps, the whole evaluation set's; gathered from every rank): each
    trial holds that much twice (the kept and the concatenation's new copy), a bound from above."""
    eval_batch = _batches(trainer.eval_dataset,
                          trainer._get_collator_with_removed_columns(trainer.data_collator, description="evaluation"),
                          "eval")
    keeps = _keeps_predictions(trainer)
    samples = len(trainer.eval_dataset)
    every = trainer.args.eval_accumulation_steps
    was_training = model.training
    model.eval()
    per_sample = _kept_bytes_per_sample(trainer, model, eval_batch, autocast) if keeps else 0

    hold = False  # the kept predictions held beside the step (below)

    def held_bytes(batch_size: int) -> int:
        if not hold or batch_size >= samples:  # one batch: nothing kept before it, nothing concatenated
            return 0
        rows = samples if not every else min(samples, 2 * int(every) * batch_size)
        return 2 * rows * per_sample

    def eval_step(batch_size: int) -> None:
        kept = torch.empty(held_bytes(batch_size), dtype=torch.uint8, device=device)  # the predictions so far
        inputs = eval_batch(batch_size)
        ahead = trainer._prepare_inputs(eval_batch(batch_size))  # the loader's next batch
        with autocast():
            trainer.prediction_step(model, inputs, prediction_loss_only=not keeps)
        del inputs, ahead, kept
    eval_step.__qualname__ = f"{type(trainer).__name__}.prediction_step ({type(model).__name__})"

    def searched(cap: int, held: bool) -> SearchResult:
        nonlocal hold
        hold = held
        return search(eval_step, device=device, memory_budget=memory_budget, target_memory=target_memory,
                      model=model, optimizer=[], restore=False, ranks=ranks, warmup_steps=0, timed_steps=1,
                      max_batch=cap)

    try:
        # the whole evaluation set in one batch keeps nothing before it: where that fits, it is the
        # answer; otherwise every batch below it holds the kept predictions (memory is not monotonic
        # in the batch there: the search runs below it)
        r = searched(min(65536, samples), held=False)
        if keeps and r.max_batch < samples and samples > 1:
            r = searched(min(65536, samples - 1), held=True)
    finally:
        model.train(was_training)
    if keeps:
        held = held_bytes(1)
        r.data["kept_for_metrics"] = {"bytes_per_sample": per_sample, "samples": samples,
                                      "eval_accumulation_steps": every, "held_bytes_at_batch_1": held}
        if r.max_batch < 1:
            from . import _saturate as _C
            r.error = (f"evaluate() keeps every batch's predictions for compute_metrics: {samples} samples x "
                       f"{_C.format_bytes(per_sample)} (logits, labels, loss), held twice while concatenated = "
                       f"{_C.format_bytes(held)} on the device"
                       + ("" if every else " (no eval_accumulation_steps)")
                       + "; set eval_accumulation_steps (moves them off the device every N steps) or "
                         "preprocess_logits_for_metrics (keeps less a sample: e.g. the argmax)")
    return r
