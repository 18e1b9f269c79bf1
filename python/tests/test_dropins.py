"""The drop-ins: Accelerate's find_executable_batch_size and Lightning's BatchSizeFinder, with
saturate's search inside, against the originals on the same model and budget."""
import gc

import fresh
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_post_hook

import saturate

MiB = 1 << 20


class StepCounter:
    """Counts every optimizer step in the process (all tools' trials end in one)."""

    def __enter__(self):
        self.steps = 0

        def hook(opt, args, kwargs):
            self.steps += 1

        self._h = register_optimizer_step_post_hook(hook)
        return self

    def __exit__(self, *exc):
        self._h.remove()
        return False


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


STARTED = [0]  # training steps started by train_steps (failed ones too)


def train_steps(batch_size, model, optimizer, steps=3):
    for _ in range(steps):
        STARTED[0] += 1
        x = torch.randn(batch_size, 784)
        y = torch.randint(0, 10, (batch_size,))
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    return batch_size


def steps_under_24mib(batch_size):
    """train_steps at `batch_size` on a new mlp and Adam (built before the budget, as the test does)
    under 24 MiB: "ok" or "oom" (run in a fresh process by fresh.call)."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    try:
        with saturate.cpu_memory_budget("24MiB"):
            train_steps(batch_size, model, opt)
        return "ok"
    except torch.OutOfMemoryError:
        return "oom"


def test_the_accelerate_drop_in_runs_once_at_an_exact_search_answer():
    import accelerate  # installed by scripts/setup.sh: missing fails, not skips
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    with saturate.cpu_memory_budget("24MiB"):
        ours = saturate.find_executable_batch_size(train_steps, starting_batch_size=4096)
        STARTED[0] = 0
        used = ours(model, opt)
        our_steps = STARTED[0]
        theirs = accelerate.utils.find_executable_batch_size(train_steps, starting_batch_size=4096)
        STARTED[0] = 0
        their_batch = theirs(model, opt)
        their_steps = STARTED[0]
    r = ours.search_result
    assert r.max_batch_exact and not r.capped, str(r)
    # exact, checked apart from the search's own flag: in fresh processes the max fits, one more does not
    assert fresh.call("test_dropins", "steps_under_24mib", r.max_batch) == "ok"
    assert fresh.call("test_dropins", "steps_under_24mib", r.max_batch + 1) == "oom"
    assert used == r.recommended_batch
    assert their_batch <= r.max_batch  # Accelerate's 0.9x steps land at or below the boundary
    print(f"ours: max {r.max_batch}, used {used}, {our_steps} steps; accelerate: {their_batch}, {their_steps} steps")


def test_the_accelerate_drop_in_keeps_accelerates_signature_rules():
    with pytest.raises(TypeError, match="batch_size"):
        saturate.find_executable_batch_size(lambda model: None)

    @saturate.find_executable_batch_size(starting_batch_size=8)
    def f(batch_size, x):
        return batch_size

    with pytest.raises(TypeError, match="Remove this"):
        f(8, 1)


def evaluate(model, eval_batch_size):
    """An evaluation as a loop writes it: eval mode, no gradients, one batch of its own size."""
    model.eval()
    with torch.no_grad():
        model(torch.randn(eval_batch_size, 784)).argmax(1)
    model.train()


def test_an_evaluation_that_runs_out_of_memory_lowers_the_evaluation_batch_not_the_training_batch():
    import accelerate  # installed by scripts/setup.sh: missing fails, not skips
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    runs = []

    def train_then_evaluate(batch_size, model, optimizer, eval_batch_size=16384):
        runs.append((batch_size, eval_batch_size))
        train_steps(batch_size, model, optimizer)
        evaluate(model, eval_batch_size)
        return batch_size, eval_batch_size

    with saturate.cpu_memory_budget("24MiB"):
        ours = saturate.find_executable_batch_size(train_then_evaluate, starting_batch_size=4096)
        trained, evaluated = ours(model, opt)
        r = ours.search_result
        assert trained == r.recommended_batch, (trained, str(r))
        # every run after the search trained at the same batch; only the evaluation's was lowered
        after_search = runs[-(len(ours.eval_backoffs) + 1):]
        assert [b for b, _ in after_search] == [trained] * len(after_search)
        assert ours.eval_backoffs and ours.eval_backoffs[0] == 8192 and evaluated == ours.eval_backoffs[-1]
        assert ours.eval_batch_size == evaluated
        # Accelerate lowers the training batch for the evaluation's out-of-memory, down to nothing
        runs.clear()
        theirs = accelerate.utils.find_executable_batch_size(train_then_evaluate, starting_batch_size=4096)
        with pytest.raises(RuntimeError, match="No executable batch size"):
            theirs(model, opt)
        assert len({b for b, _ in runs}) > 10, runs[:5]


def test_an_evaluation_out_of_memory_without_an_eval_batch_parameter_is_an_error_that_keeps_the_training_batch():
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    runs = []

    def train_then_evaluate(batch_size, model, optimizer):
        runs.append(batch_size)
        train_steps(batch_size, model, optimizer)
        evaluate(model, 16384)

    with saturate.cpu_memory_budget("24MiB"):
        ours = saturate.find_executable_batch_size(train_then_evaluate, starting_batch_size=4096)
        with pytest.raises(RuntimeError, match="eval_batch_size") as error:
            ours(model, opt)
    r = ours.search_result
    assert f"training batch {r.recommended_batch}" in str(error.value)
    # one run after the search's trials, at the search's batch: no run at a lowered training batch
    assert runs[-1] == r.recommended_batch and len(runs) == len(r.trials) + 1, (runs, len(r.trials))


def lightning_module(batch_size, net=None):
    import lightning.pytorch as L  # installed by scripts/setup.sh

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.batch_size = batch_size
            self.net = net if net is not None else mlp()
            self.trained_batches = []  # each training step's batch, the trials' and the fit's
            g = torch.Generator().manual_seed(0)
            self.data = torch.utils.data.TensorDataset(torch.randn(4096, 784, generator=g),
                                                       torch.randint(0, 10, (4096,), generator=g))

        def training_step(self, batch, i):
            x, y = batch
            self.trained_batches.append(len(x))
            return F.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters())

        def train_dataloader(self):
            return torch.utils.data.DataLoader(self.data, batch_size=self.batch_size, shuffle=True)

    return L, Module()


def run_finder(finder, tmp_path, headroom, net=None):
    L, module = lightning_module(2, net)
    gc.collect()  # garbage of earlier tests freed during a search would give it more room than the budget says
    budget = saturate._memory.cpu_allocated_bytes() + headroom  # the model and its data, and headroom
    trainer = L.Trainer(accelerator="cpu", max_steps=1, callbacks=[finder], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(tmp_path))
    with saturate.cpu_memory_budget(budget), StepCounter() as count:
        trainer.fit(module)
    return module, count.steps - 1  # the fit's own step


def test_the_lightning_callback_finds_lightnings_binsearch_answer_in_fewer_steps(tmp_path):
    from saturate.lightning import SaturateBatchSizeFinder
    from lightning.pytorch.callbacks import BatchSizeFinder

    ours = SaturateBatchSizeFinder()
    module, our_steps = run_finder(ours, tmp_path / "ours", 20 * MiB)
    theirs = BatchSizeFinder(mode="binsearch", margin=0.0, max_trials=40)
    _, their_steps = run_finder(theirs, tmp_path / "theirs", 20 * MiB)
    r = ours.search_result
    assert r.max_batch_exact, str(r)
    assert ours.optimal_batch_size == r.max_batch == module.batch_size
    assert module.trained_batches[-1] == r.max_batch, module.trained_batches  # the fit trains at the answer
    assert theirs.optimal_batch_size == r.max_batch, (theirs.optimal_batch_size, str(r))
    assert our_steps < their_steps, (our_steps, their_steps)


@pytest.mark.parametrize("strategy", ["fit", "power"])
def test_the_lightning_callback_on_a_batchnorm_model_from_init_val_1_answers_an_exact_positive_batch(
        tmp_path, strategy):
    # issue 44: on a model with BatchNorm1d (which refuses a training batch of 1) the callback logged a
    # traceback and recommended 0: every trial must run, the answer fit and be set on the module
    from saturate.lightning import SaturateBatchSizeFinder

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(784, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 10))
    finder = SaturateBatchSizeFinder(strategy=strategy, init_val=1)
    module, _ = run_finder(finder, tmp_path, 20 * MiB, net)
    r = finder.search_result
    assert not r.error and r.max_batch >= 2, str(r)
    assert all(t.status != "error" for t in r.trials), str(r)  # no trial failed otherwise
    assert finder.optimal_batch_size == module.batch_size == r.max_batch, (finder.optimal_batch_size, str(r))
    assert module.trained_batches[-1] == r.max_batch, (module.trained_batches, str(r))  # the fit's own step
    if strategy == "fit":
        assert r.max_batch_exact, str(r)


def test_a_model_trained_in_eval_mode_throughout_is_not_taken_for_an_evaluation():
    gc.collect()  # what earlier tests' out-of-memory errors left
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    runs = []

    def train_in_eval_mode(batch_size, model, optimizer, eval_batch_size=64):
        model.eval()  # e.g. frozen batch norms: the training step runs in eval mode, with gradients
        after_search = ours.search_result is not None
        runs.append((batch_size, after_search))
        if after_search and sum(a for _, a in runs) == 1:  # the first run after the search: 4x its batch
            batch_size *= 4
        train_steps(batch_size, model, optimizer)
        return batch_size

    with saturate.cpu_memory_budget("24MiB"):
        ours = saturate.find_executable_batch_size(train_in_eval_mode, starting_batch_size=4096)
        trained = ours(model, opt)
    # the training batch was lowered as Accelerate would (0.9x), the evaluation batch never
    recommended = ours.search_result.recommended_batch
    assert not ours.eval_backoffs
    assert [b for b, a in runs if a] == [recommended, int(recommended * 0.9)] and trained == int(recommended * 0.9)


class RandomRows(torch.utils.data.Dataset):
    """Validation rows made when read: as many as a search may ask for, and no memory until then."""

    def __len__(self):
        return 1 << 16

    def __getitem__(self, i):
        return torch.randn(784), i % 10


def validating_module(batch_size, eval_batch_size):
    L, module = lightning_module(batch_size)

    class Validating(type(module)):
        def __init__(self):
            super().__init__()
            self.eval_batch_size = eval_batch_size
            self.validated = 0  # rows validated

        def validation_step(self, batch, i):
            x, y = batch
            self.validated += x.shape[0]
            self.log("val_loss", F.cross_entropy(self.net(x), y))

        def val_dataloader(self):
            return torch.utils.data.DataLoader(RandomRows(), batch_size=self.eval_batch_size)

    return L, Validating()


def fit_and_validate(L, module, tmp_path, budget, callbacks=()):
    # one training step, then the validation (val_check_interval=1: after that step)
    trainer = L.Trainer(accelerator="cpu", max_steps=1, limit_val_batches=2, val_check_interval=1,
                        callbacks=list(callbacks), logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, default_root_dir=str(tmp_path))
    try:
        with saturate.cpu_memory_budget(budget):
            trainer.fit(module)
        return "ok"
    except torch.OutOfMemoryError as error:
        saturate.release_exception(error)
        return "oom"


def test_the_lightning_callback_searches_the_validation_batch_on_its_own_exact_and_keeps_the_training_batch(
        tmp_path):
    from saturate.lightning import SaturateBatchSizeFinder

    # the validation starts at a batch that runs out of memory: it must not limit the training batch
    L, module = validating_module(2, 1 << 15)
    gc.collect()
    budget = saturate._memory.cpu_allocated_bytes() + 20 * MiB
    finder = SaturateBatchSizeFinder(eval_batch_arg_name="eval_batch_size")
    assert fit_and_validate(L, module, tmp_path / "search", budget, [finder]) == "ok"
    train, ev = finder.search_result, finder.eval_search_result
    assert train.max_batch_exact and ev.max_batch_exact, (str(train), str(ev))
    assert module.batch_size == train.max_batch and module.eval_batch_size == ev.max_batch
    assert module.training
    # the training batch is the one found for the same module without a validation
    plain = SaturateBatchSizeFinder()
    run_finder(plain, tmp_path / "plain", 20 * MiB)
    assert train.max_batch == plain.search_result.max_batch, (train.max_batch, plain.search_result.max_batch)

    # exact in a fit of its own: the training step, then the validation at max and at max + 1
    def fit_at(eval_batch):
        gc.collect()
        L2, m2 = validating_module(train.max_batch, eval_batch)
        return fit_and_validate(L2, m2, tmp_path / f"check{eval_batch}",
                                saturate._memory.cpu_allocated_bytes() + 20 * MiB)

    assert fit_at(ev.max_batch) == "ok"
    assert fit_at(ev.max_batch + 1) == "oom"


def test_an_eval_batch_attribute_the_module_lacks_is_refused_before_any_trial(tmp_path):
    from saturate.lightning import SaturateBatchSizeFinder

    L, module = lightning_module(2)
    finder = SaturateBatchSizeFinder(eval_batch_arg_name="eval_batch_size")
    with StepCounter() as count, pytest.raises(AttributeError, match="eval_batch_size"):
        fit_and_validate(L, module, tmp_path, saturate._memory.cpu_allocated_bytes() + 20 * MiB, [finder])
    assert count.steps == 0 and finder.search_result is None


def test_every_private_part_of_lightning_the_drop_in_uses_is_named_in_one_place_and_present_in_the_pinned_lightning():
    import os
    import re

    import lightning

    from saturate import _lightning_seam as seam
    setup = open(os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "setup.sh")).read()
    assert re.search(r"lightning==([0-9.]+)", setup).group(1) == seam.TESTED == lightning.__version__
    seam.check()  # every name of PRIVATE is there
    # and saturate.lightning touches no private Lightning name but through the seam
    source = open(os.path.join(os.path.dirname(saturate.__file__), "lightning.py")).read()
    assert "_bss" not in source and "lightning.pytorch.tuner" not in source
    for _, name, _ in seam.PRIVATE:
        assert re.search(r"\." + re.escape(name) + r"\b", source) is None or name in (
            "_steps_per_trial", "_batch_arg_name", "_init_val", "_max_val", "_early_exit"), name


def test_a_lightning_without_a_private_part_the_drop_in_uses_is_refused_naming_it_and_the_tested_version(monkeypatch):
    from lightning.pytorch.tuner import batch_size_scaling

    from saturate import _lightning_seam as seam
    monkeypatch.delattr(batch_size_scaling, "_try_loop_run")
    with pytest.raises(seam.MissingLightningPrivate) as e:
        seam.check()
    assert "_try_loop_run" in str(e.value) and f"lightning=={seam.TESTED}" in str(e.value)
