"""saturate.search_configs on a user's step that takes (batch_size, config): activation
checkpointing switched by the config, searched under one CPU budget; the rule (C++'s) keeps the
baseline unless another configuration wins, and a required batch that only fits with
checkpointing chooses it."""
import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential

import saturate

MiB = 1 << 20


def make_step():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(512, 512), nn.ReLU()) for _ in range(8)], nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch_size, config):
        x = torch.randn(batch_size, 512)
        y = torch.randint(0, 10, (batch_size,))
        if config["checkpointing"]:
            out = checkpoint_sequential(model, 3, x, use_reentrant=False)
        else:
            out = model(x)
        F.cross_entropy(out, y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, model, opt


CONFIGS = [{"checkpointing": False}, {"checkpointing": True}]


def test_checkpointing_fits_more_and_a_batch_only_it_fits_chooses_it():
    step, model, opt = make_step()
    free = saturate.search_configs(step, CONFIGS, device="cpu", memory_budget=48 * MiB, model=model, optimizer=opt)
    plain, ckpt = free.results
    assert ckpt.max_batch > plain.max_batch > 0, (plain.max_batch, ckpt.max_batch)
    needed = saturate.search_configs(step, CONFIGS, device="cpu", memory_budget=48 * MiB, model=model,
                                     optimizer=opt, required_batch=plain.max_batch + 1)
    assert needed.config == {"checkpointing": True}
    assert "only fits with" in needed.reason
    assert needed.batch >= plain.max_batch + 1 or needed.result.max_batch >= plain.max_batch + 1
    assert json.loads(needed.to_json())["config"] == {"checkpointing": True}


def test_a_required_batch_nothing_fits_keeps_the_baseline_and_says_so():
    step, model, opt = make_step()
    r = saturate.search_configs(step, CONFIGS, device="cpu", memory_budget=48 * MiB, model=model, optimizer=opt,
                                required_batch=10 ** 7, max_batch=4096)
    assert r.config == {"checkpointing": False}
    assert "no configuration fits the required batch 10000000" in r.reason


def test_bad_configs_are_refused_by_keyword():
    step, _, _ = make_step()
    with pytest.raises(ValueError, match="configs="):
        saturate.search_configs(step, [], device="cpu")
    with pytest.raises(ValueError, match="required_batch="):
        saturate.search_configs(step, CONFIGS, device="cpu", required_batch=0)
