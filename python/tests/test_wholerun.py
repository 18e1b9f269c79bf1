"""The answer holds for the whole epoch (issue #26): on a corpus with a long tail of lengths, a
search on the first batches picks a batch that runs out of memory within the epoch; the search on
the data's worst-case batches trains the whole epoch without one; the OOM guard recovers a loop
that runs out of memory and keeps its global batch and its losses; the token-budget sampler fills
its batches and never runs out of memory either."""
import gc

import fresh as new_process
import pytest
import torch
from torch.utils.data import DataLoader

import saturate
from textlm import (MiB, TextDataset, make_corpus, make_model, pad_collate, real_tokens, run_epoch, token_loss,
                    train_step)

BUDGET = 160 * MiB


@pytest.fixture(scope="module")
def data():
    return TextDataset(make_corpus())


def quiet_seed(ds, first=300):
    """A shuffle seed whose first `first` items hold none of the long documents: the first batches a
    finder measures miss the tail, as they do in the runs users report (the tail is a few items)."""
    lengths = [len(t) for t in ds.docs]
    long_ones = {i for i, n in enumerate(lengths) if n > 200}
    assert 0 < len(long_ones) < 10, "the corpus has no tail of a few long documents"
    for seed in range(1000):
        # the order the finder's loader draws: the same sampler and generator over the indices
        g = torch.Generator().manual_seed(seed)
        order = next(iter(DataLoader(range(len(ds)), batch_size=first, shuffle=True, generator=g))).tolist()
        if not long_ones & set(order):
            return seed
    raise AssertionError("no seed keeps the long documents out of the first batches")


def first_batches_step(model, opt, ds):
    """How a user writes a step for a finder: the next batch of a shuffled loader, restarted (at the
    same seed) for every batch size, as a finder that reruns the training from the start sees it."""
    loaders = {}
    seed = quiet_seed(ds)

    def step(batch_size):
        if batch_size not in loaders:
            g = torch.Generator().manual_seed(seed)
            loaders[batch_size] = iter(DataLoader(ds, batch_size=batch_size, shuffle=True, generator=g,
                                                  collate_fn=pad_collate))
        train_step(model, opt, next(loaders[batch_size]))

    return step


def epoch_loader(ds, batch, seed=1):
    return DataLoader(ds, batch_size=batch, shuffle=True, generator=torch.Generator().manual_seed(seed),
                      collate_fn=pad_collate)


@pytest.fixture(scope="module")
def searches(data):
    model, opt = make_model()
    first = saturate.search(first_batches_step(model, opt, data), device="cpu", memory_budget=BUDGET, model=model,
                            optimizer=opt, max_batch=len(data) // 8)
    worst = saturate.search(lambda batch: train_step(model, opt, batch), device="cpu", memory_budget=BUDGET,
                            data=DataLoader(data, collate_fn=pad_collate), model=model, optimizer=opt)
    return first, worst


def test_the_worst_case_search_reports_the_costliest_items_and_the_median_answer(data, searches):
    _, worst = searches
    w = worst.worst_case
    lengths = [len(t) for t in data.docs]
    assert w.items == len(data)
    assert w.largest_size == max(lengths)
    assert w.median_size == sorted(lengths, reverse=True)[len(lengths) // 2]
    assert all(lengths[i] == max(lengths) for i in w.worst_items[:1])
    assert w.max_tokens == worst.max_batch * max(lengths)
    # typical items fit several times more: what a search that never meets the tail answers
    assert w.median_max_batch >= 2 * worst.max_batch, (w.median_max_batch, worst.max_batch)
    assert worst.data["worst_case"]["max_tokens"] == w.max_tokens
    assert "worst case" in str(worst)


def test_a_search_on_the_first_batches_runs_out_of_memory_within_an_epoch(data, searches):
    first, worst = searches
    assert first.max_batch_exact and worst.max_batch_exact
    assert first.recommended_batch > worst.max_batch, (first.recommended_batch, worst.max_batch)
    model, opt = make_model()
    with saturate.cpu_memory_budget(BUDGET):
        r = run_epoch(model, opt, epoch_loader(data, first.recommended_batch))
    assert r["ooms"] >= 1, r


def test_the_worst_case_answer_trains_the_whole_epoch_without_running_out_of_memory(data, searches):
    _, worst = searches
    model, opt = make_model()
    with saturate.cpu_memory_budget(BUDGET):
        r = run_epoch(model, opt, epoch_loader(data, worst.max_batch))
    assert r["ooms"] == 0, r
    assert r["samples"] == len(data)


def test_the_worst_case_max_is_exact_in_a_fresh_process(searches):
    _, worst = searches

    assert fresh(worst.max_batch) == "ok"
    assert fresh(worst.max_batch + 1) == "oom"


def fresh(batch, mode="train", width=64):
    """textlm.steps_under_budget in a fresh process (fresh.py): two steps of the worst batch of
    `batch` under the budget, on one thread."""
    return new_process.call("textlm", "steps_under_budget", BUDGET, batch, mode, width, timeout=600)


def test_the_evaluation_is_searched_on_its_own_worst_case_and_exact_in_a_fresh_process(data, searches):
    _, worst = searches
    model, opt = make_model()
    ev = saturate.search_eval(lambda batch: token_loss(model, batch), device="cpu", memory_budget=BUDGET, data=data,
                              collate_fn=pad_collate, model=model, compare_median=False)
    assert ev.max_batch_exact and ev.worst_case.largest_size == worst.worst_case.largest_size
    # not a multiple of the training batch: here it is below it (60 against 67), as eval mode's fused
    # encoder path holds the attention scores that training's flash attention never does
    # so the usual guess (an evaluation batch of 4x the training batch) would run out of memory
    assert ev.max_batch < 4 * worst.max_batch, (ev.max_batch, worst.max_batch)
    assert model.training  # put back in train mode
    assert fresh(ev.max_batch, "eval") == "ok"
    assert fresh(ev.max_batch + 1, "eval") == "oom"
    # the epoch's evaluation at that batch: every batch fits, and the training answer is untouched
    model.eval()
    with saturate.cpu_memory_budget(BUDGET), torch.no_grad():
        for batch in DataLoader(data, batch_size=ev.max_batch, collate_fn=pad_collate):
            token_loss(model, batch)


def test_an_evaluation_between_training_steps_is_searched_beside_the_optimizer_state_and_exact(data):
    # a model wide enough that AdamW's state and the gradients take several evaluation samples' room
    width = 256
    model, opt = make_model(d_model=width)
    kw = dict(device="cpu", memory_budget=BUDGET, data=data, collate_fn=pad_collate, model=model, compare_median=False)
    # the weights as host bytes (a tensor copy would count against the budget and move the answers)
    weights = [p.detach().numpy().tobytes() for p in model.parameters()]
    alone = saturate.search_eval(lambda batch: token_loss(model, batch), **kw)
    beside = saturate.search_eval(lambda batch: token_loss(model, batch), optimizer=opt, **kw)
    with_grads = saturate.search_eval(lambda batch: token_loss(model, batch), optimizer=opt, gradients=True, **kw)
    assert alone.max_batch > beside.max_batch > with_grads.max_batch, (alone.max_batch, beside.max_batch,
                                                                      with_grads.max_batch)
    # the zero-gradient step that made AdamW's state (its weight decay moves weights) is undone
    assert not opt.state and all(p.grad is None for p in model.parameters())
    assert [p.detach().numpy().tobytes() for p in model.parameters()] == weights
    # the evaluation's answer on its own runs out of memory after a training step
    assert fresh(alone.max_batch, "eval-training", width) == "oom"
    assert fresh(beside.max_batch, "eval-training", width) == "ok"
    assert fresh(beside.max_batch + 1, "eval-training", width) == "oom"
    assert fresh(with_grads.max_batch, "eval-training-grads", width) == "ok"
    assert fresh(with_grads.max_batch + 1, "eval-training-grads", width) == "oom"


def test_the_guard_recovers_an_epoch_at_the_first_batches_answer_and_keeps_every_batch(data, searches):
    first, _ = searches
    model, opt = make_model()
    guard = saturate.OomGuard(lambda b: token_loss(model, b), opt, weight=real_tokens)
    with saturate.cpu_memory_budget(BUDGET):
        r = run_epoch(model, opt, epoch_loader(data, first.recommended_batch), guard=guard)
    assert r["ooms"] == 0 and r["samples"] == len(data), r
    assert guard.backoffs, "the epoch never ran out of memory: the test shows nothing"
    assert all(b.rows == first.recommended_batch or b.rows == len(data) % first.recommended_batch
               for b in guard.backoffs)


def test_a_guarded_step_that_runs_out_of_memory_equals_accumulation_from_the_start(data, searches):
    first, _ = searches
    # a few batches that fit, then the epoch's long ones among more that fit: the OOM is at step 4
    all_batches = list(epoch_loader(data, first.recommended_batch))
    long_ones = [b for b in all_batches if b["ids"].shape[1] > 200]
    short = [b for b in all_batches if b["ids"].shape[1] <= 200]
    batches = short[:4] + long_ones[:1] + short[4:9]
    # the guarded loop, under the budget
    model, opt = make_model()
    guard = saturate.OomGuard(lambda b: token_loss(model, b), opt, weight=real_tokens)
    losses, allocated = [], []
    with saturate.cpu_memory_budget(BUDGET):
        for b in batches:
            losses.append(guard.step(b))
            gc.collect()
            allocated.append(saturate._memory.cpu_allocated_bytes())
    assert guard.backoffs, "no batch of the 12 ran out of memory: the test shows nothing"
    k = guard.backoffs[0].step
    assert k >= 1, "the first step ran out of memory: no baseline to compare with"
    # nothing of the failed attempt is left: memory after the step as after the one before
    assert allocated[k] == allocated[k - 1], (k, allocated)
    # the same loop with the guard's micro-batch from the start (no budget): the same losses
    micro = guard.backoffs[-1].new_micro_batch

    def accumulated(split_all):
        model2, opt2 = make_model()
        losses2 = []
        for i, b in enumerate(batches):
            rows = b["ids"].shape[0]
            m = micro if split_all or i == k else rows
            total = real_tokens(b)
            loss_sum = 0.0
            for s in range(0, rows, m):
                part = {key: v[s:s + m] for key, v in b.items()}
                loss = token_loss(model2, part) * (real_tokens(part) / total) if m < rows else token_loss(model2, part)
                loss.backward()
                loss_sum += float(loss.detach())
            opt2.step()
            opt2.zero_grad(set_to_none=True)
            losses2.append(loss_sum)
        return model2, losses2

    _, reference = accumulated(split_all=True)
    assert losses == pytest.approx(reference, rel=1e-5, abs=1e-5)
    # and split where the guard split, the very same update: the weights agree to the last bits
    model3, _ = accumulated(split_all=False)
    for p, q in zip(model.parameters(), model3.parameters()):
        assert torch.allclose(p, q, rtol=0, atol=1e-7)


def test_the_guard_raises_when_a_single_item_does_not_fit():
    model, opt = make_model()
    guard = saturate.OomGuard(lambda b: token_loss(model, b), opt, weight=real_tokens)
    ids = torch.randint(0, 256, (2, 300))
    gc.collect()
    # 1 MiB above what the process holds (tests before this one may hold more): one item of 300
    # tokens needs about 3 MiB
    with saturate.cpu_memory_budget(saturate._memory.cpu_allocated_bytes() + MiB):
        with pytest.raises(torch.OutOfMemoryError, match="micro-batch of 1"):
            guard.step({"ids": ids, "labels": ids})
    assert all(p.grad is None for p in model.parameters())


def test_token_budget_batches_train_the_epoch_within_the_searched_budget(data, searches):
    _, worst = searches
    lengths = [len(t) for t in data.docs]
    sampler = saturate.TokenBudgetSampler(lengths, worst.worst_case.max_tokens, seed=3)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(data)))
    assert all(len(b) * max(lengths[i] for i in b) <= worst.worst_case.max_tokens for b in batches)
    fixed_steps = -(-len(data) // worst.max_batch)
    assert len(batches) * 2 <= fixed_steps, (len(batches), fixed_steps)  # fewer, fuller batches
    model, opt = make_model()
    with saturate.cpu_memory_budget(BUDGET):
        r = run_epoch(model, opt, DataLoader(data, batch_sampler=sampler, collate_fn=pad_collate))
    assert r["ooms"] == 0 and r["samples"] == len(data), r


def test_grouped_token_budget_batches_take_the_fixed_batches_steps_and_reach_the_same_loss(data, searches):
    _, worst = searches
    lengths = [len(t) for t in data.docs]
    grouped = saturate.TokenBudgetSampler(lengths, worst.worst_case.max_tokens, max_items=worst.max_batch, seed=3)
    padded = sum(len(b) * max(lengths[i] for i in b) for b in grouped)
    fixed_padded = sum(b["ids"].numel() for b in epoch_loader(data, worst.max_batch))
    assert padded < 0.6 * fixed_padded, (padded, fixed_padded)  # the padding the grouping saves
    runs = {}
    for name, loader in [("fixed", epoch_loader(data, worst.max_batch)),
                         ("grouped", DataLoader(data, batch_sampler=grouped, collate_fn=pad_collate))]:
        model, opt = make_model()
        with saturate.cpu_memory_budget(BUDGET):
            runs[name] = run_epoch(model, opt, loader)
    assert runs["grouped"]["ooms"] == 0 and runs["grouped"]["samples"] == len(data), runs
    assert runs["grouped"]["steps"] <= runs["fixed"]["steps"] + 2, runs
    # the loss per token of the epoch: the same to within noise (a few %), grouping or not
    assert runs["grouped"]["loss_per_token"] == pytest.approx(runs["fixed"]["loss_per_token"], rel=0.05), runs


def test_data_without_an_index_or_a_collate_without_data_is_refused():
    with pytest.raises(ValueError, match="give data="):
        saturate.search(lambda b: None, collate_fn=pad_collate, memory_budget="64MiB", device="cpu")
    with pytest.raises(TypeError, match="map-style"):
        saturate.search(lambda b: None, data=iter([1, 2]), memory_budget="64MiB", device="cpu")
    with pytest.raises(ValueError, match="max_tokens"):
        saturate.TokenBudgetSampler([3, 4], 0)
