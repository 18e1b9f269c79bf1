"""saturate.transformers.find_batch_size (issue 29): a drop-in for Trainer(auto_find_batch_size=True)
on the real transformers package, GPT-2 and BERT from configs, on CPU under a byte budget."""
import gc

import numpy
import pytest

import fresh as new_process
import hf_trainer
from saturate.transformers import find_batch_size

MiB = 1 << 20
BUDGET = 64 * MiB


def fresh(name, batch):
    """trainer.train() in a new process at `batch` under the same budget: "ok" or "oom"."""
    return new_process.call("hf_trainer", "fresh", name, batch, BUDGET, timeout=600)


class StepCounter:
    """Training steps started: forward calls of the model in training mode."""

    def __init__(self, model):
        self.steps = 0
        model.register_forward_pre_hook(self._count)

    def _count(self, module, args):
        if module.training:
            self.steps += 1


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_the_drop_in_keeps_the_effective_batch_and_its_max_is_exact_under_the_trainers_own_loop(tmp_path, name):
    gc.collect()  # what earlier tests left would take budget a fresh process has: a max too low
    trainer = hf_trainer.trainer_of(name, str(tmp_path), batch=4, accumulation=16)  # 64 a device
    # the weights as given, in numpy's memory (a torch copy would take CPU budget from the search)
    before = {k: v.detach().numpy().copy() for k, v in trainer.model.state_dict().items()}
    divisor = find_batch_size(trainer, memory_budget=BUDGET)  # the default: divisors of 64 only, from 4
    found = find_batch_size(trainer, memory_budget=BUDGET, use="max")
    r = found.train
    assert r.max_batch_exact and not r.error, str(r)
    # both train at the largest divisor at or below the exact max (checked fresh below)
    assert (divisor.per_device_train_batch_size, divisor.gradient_accumulation_steps) == \
        (found.per_device_train_batch_size, found.gradient_accumulation_steps), (divisor.reason, found.reason)
    assert all(64 % t.batch == 0 for t in divisor.train.trials), divisor.reason
    args = trainer.args
    micro, accumulation = args.per_device_train_batch_size, args.gradient_accumulation_steps
    assert micro * accumulation == 64 == found.effective_batch
    assert micro == max(d for d in range(1, min(64, r.max_batch) + 1) if 64 % d == 0), (micro, r.max_batch)
    assert micro > 4, "the search gave the device more than the batch it was given"
    assert trainer.optimizer is None  # train() makes its own, as it would have
    for k, v in trainer.model.state_dict().items():
        assert numpy.array_equal(v.detach().numpy(), before[k]), f"{k} moved"
    # exact under the trainer's own training loop, in fresh processes
    assert fresh(name, r.max_batch) == "ok"
    assert fresh(name, r.max_batch + 1) == "oom"
    # and the trainer trains at the answer
    trainer.train()
    assert trainer.state.global_step == 1


def test_an_evaluation_that_does_not_fit_never_lowers_the_training_batch(tmp_path):
    gc.collect()
    # the evaluation asked for 4096 a device, far past the budget (auto_find_batch_size lowers the
    # training batch on an evaluation's out-of-memory, transformers #32215)
    plain = find_batch_size(hf_trainer.trainer_of("gpt2", str(tmp_path / "plain"), batch=4, accumulation=16),
                            memory_budget=BUDGET)
    trainer = hf_trainer.trainer_of("gpt2", str(tmp_path / "eval"), batch=4, accumulation=16, eval_batch=4096,
                                    evaluate=True)
    found = find_batch_size(trainer, memory_budget=BUDGET)
    assert found.train.max_batch == plain.train.max_batch
    assert trainer.args.per_device_train_batch_size == plain.per_device_train_batch_size
    ev = found.eval
    assert ev.max_batch_exact and 0 < ev.max_batch < 4096, str(ev)
    assert trainer.args.per_device_eval_batch_size == ev.max_batch == found.per_device_eval_batch_size
    assert ev.max_batch > found.train.max_batch  # no gradients or activations kept for a backward
    trainer.evaluate()  # runs at the answer


def fresh_eval(batch, samples, accumulation=None):
    return new_process.call("hf_trainer", "fresh_eval", "gpt2", batch, BUDGET, samples, accumulation, timeout=600)


def test_an_evaluation_with_compute_metrics_counts_the_predictions_it_keeps(tmp_path):
    # with compute_metrics, evaluate() keeps every batch's logits (64 tokens x 1000 a sample: 250 KiB)
    # and labels on the device and concatenates them batch after batch. 200 samples: the loss-only
    # step's batch (what the drop-in set before) is under 200, and the trainer's own evaluate() runs
    # out of memory there, fresh; now no batch is said to fit, with the settings that make one fit
    gc.collect()
    samples = 200
    loss_only = find_batch_size(hf_trainer.trainer_of("gpt2", str(tmp_path / "a"), batch=4, evaluate=True,
                                                      eval_samples=samples), memory_budget=BUDGET)
    assert 1 < loss_only.per_device_eval_batch_size < samples
    assert fresh_eval(loss_only.per_device_eval_batch_size, samples) == "oom"
    trainer = hf_trainer.trainer_of("gpt2", str(tmp_path / "b"), batch=4, evaluate=True, eval_samples=samples,
                                    metrics=True)
    found = find_batch_size(trainer, memory_budget=BUDGET)
    kept = found.eval.data["kept_for_metrics"]
    assert kept["bytes_per_sample"] >= 64 * 1000 * 4 and kept["samples"] == samples, kept
    assert found.per_device_eval_batch_size == 0 and trainer.args.per_device_train_batch_size >= 1
    for words in ("keeps every batch's predictions for compute_metrics", "eval_accumulation_steps",
                  "preprocess_logits_for_metrics", "WARNING"):
        assert words in found.reason, found.reason
    # with eval_accumulation_steps 1 the predictions leave the device every step: a batch fits,
    # and the trainer's own evaluate() runs at it
    trainer = hf_trainer.trainer_of("gpt2", str(tmp_path / "c"), batch=4, evaluate=True, eval_samples=samples,
                                    metrics=True, eval_accumulation_steps=1)
    found = find_batch_size(trainer, memory_budget=BUDGET)
    assert found.per_device_eval_batch_size >= 1 and "kept for compute_metrics" in found.reason, found.reason
    assert fresh_eval(found.per_device_eval_batch_size, samples, accumulation=1) == "ok"


def test_an_evaluation_set_that_fits_in_one_batch_is_evaluated_in_one(tmp_path):
    # one batch keeps nothing before it: 64 samples fit at once beside the model
    gc.collect()
    trainer = hf_trainer.trainer_of("gpt2", str(tmp_path / "d"), batch=4, evaluate=True, eval_samples=64,
                                    metrics=True)
    found = find_batch_size(trainer, memory_budget=BUDGET)
    assert found.per_device_eval_batch_size == 64, found.reason
    assert fresh_eval(64, 64) == "ok"


@pytest.mark.parametrize("name,given", [("gpt2", 64), ("bert", 128)])
def test_the_drop_in_starts_fewer_training_steps_than_auto_find_batch_size_and_keeps_the_effective_batch(
        tmp_path, name, given):
    import saturate

    gc.collect()
    # given above the max (GPT-2 32, BERT 90 under 64 MiB): both finders search
    ours = hf_trainer.trainer_of(name, str(tmp_path / "ours"), batch=given)
    counted = StepCounter(ours.model)
    found = find_batch_size(ours, memory_budget=BUDGET)
    our_steps = counted.steps
    # exact among the batches training can run at, in fresh processes: the answer fits, the next
    # divisor of the effective batch runs out of memory
    micro, above = found.per_device_train_batch_size, found.seen_not_to_fit
    assert above == min(d for d in range(micro + 1, given + 1) if given % d == 0), found.reason
    assert fresh(name, micro) == "ok" and fresh(name, above) == "oom", found.reason
    theirs = hf_trainer.trainer_of(name, str(tmp_path / "theirs"), batch=given, auto_find=True)
    their_counter = StepCounter(theirs.model)
    with saturate.cpu_memory_budget(BUDGET):
        theirs.train()
    their_steps = their_counter.steps - 1  # less the step that trained at its answer
    their_batch = theirs._train_batch_size
    assert our_steps < their_steps, (our_steps, their_steps)
    assert found.per_device_train_batch_size * found.gradient_accumulation_steps == given
    # theirs trains at a smaller batch than it was given, with no accumulation to make up for it
    assert their_batch < given and theirs.args.gradient_accumulation_steps == 1


def test_under_torchrun_every_rank_gets_the_same_batch_from_unequal_budgets_and_trains_at_it(tmp_path):
    import json

    import ranks_util

    out = ranks_util.torchrun("hf_trainer.py", "ranks", tmp_path, 64 * MiB, 48 * MiB, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert (r0["micro"], r0["accumulation"], r0["max"]) == (r1["micro"], r1["accumulation"], r1["max"])
    assert r0["micro"] * r0["accumulation"] == 64 and r0["micro"] <= r0["max"]
    # the default (divisors only) agrees on every rank and with the largest divisor under the max
    assert r0["divisor"] == r1["divisor"] and r0["divisor"][:2] == [r0["micro"], r0["accumulation"]], r0
    assert r0["divisor"][2] == 2 * r0["micro"] > r0["max"], r0  # the next divisor ran out of memory
    budgets = {r["rank"]: r["budget_bytes"] for r in r0["ranks"]}
    assert budgets == {0: 64 * MiB, 1: 48 * MiB}
    # the smaller budget's exact max is every rank's
    assert r0["max"] == next(r["max_batch"] for r in r0["ranks"] if r["rank"] == 1)
    assert r0["steps"] == r1["steps"] == 1  # and DDP trained a step at it on both
    # exact for the trainer's own DDP step, in new processes: the max fits on both ranks, one more
    # runs out of memory on rank 1 (2026-12-07: 23 and 24)
    def fresh(batch):
        return ranks_util.fresh_results(tmp_path, "hf_trainer.py", 64 * MiB, 48 * MiB, batch, mode="fresh_ranks")

    assert fresh(r0["max"]) == ["ok", "ok"]
    assert fresh(r0["max"] + 1)[1] == "oom"


@pytest.mark.parametrize("flag", ["is_fsdp_enabled", "is_deepspeed_enabled"])
def test_a_trainer_that_shards_the_model_in_train_is_refused_naming_the_engine(tmp_path, flag):
    # the Trainer decides at construction whether train() wraps the model with FSDP or DeepSpeed
    # and keeps it in these attributes (a CPU trainer here cannot enable either: accelerate keeps
    # them False without accelerators), so the test sets the one the trainer's own train() reads
    trainer = hf_trainer.trainer_of("gpt2", str(tmp_path), batch=4)
    setattr(trainer, flag, True)
    given = trainer.args.per_device_train_batch_size
    with pytest.raises(ValueError, match=f"trainer.{flag}.*saturate.search.*shard_plan"):
        find_batch_size(trainer, memory_budget=BUDGET)
    assert trainer.args.per_device_train_batch_size == given  # nothing changed
