"""saturate.search's objectives, the evaluation search and the one OOM classifier, on the user's
own steps under CPU budgets: the library's sessions reached from Python (issue 24)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import saturate
from loops import LOOPS, run_fresh

MiB = 1 << 20


def test_throughput_chooses_the_knee_of_the_curve_it_measured_on_the_users_step():
    model, opt, step = LOOPS["mlp"]()
    r = saturate.search(step, device="cpu", memory_budget=48 * MiB, objective="throughput", knee_fraction=0.8)
    assert not r.error, r.error
    assert r.objective is not None and r.objective.objective == "throughput"
    curve = r.objective.data["throughput_curve"]
    points = [p for p in curve["points"] if p["ok"]]
    assert len(points) >= 3, r.objective.data
    # the knee reaches 80 % of the curve's plateau (the median of the settled points near the best,
    # never above the best), and no smaller settled point does (a dip, one measurement slower than
    # both neighbours, aside)
    plateau = curve["plateau_samples_per_s"]
    assert 0 < plateau <= max(p["samples_per_s"] for p in points)
    knee = next(p for p in points if p["batch"] == r.batch)
    assert knee["samples_per_s"] >= 0.8 * plateau or knee["dip"], knee
    assert all(p["samples_per_s"] < 0.8 * plateau for p in points if p["batch"] < r.batch and p["settled"] and
               not p["dip"]), (r.batch, points)
    assert r.batch == r.objective.batch
    assert r.batch <= r.recommended_batch  # never above the memory-safe batch
    assert "within 80 %" in r.objective.reason
    assert r.data["objective"]["objective"] == "throughput"  # the CLI's JSON key


def test_the_result_leads_with_one_decision_the_same_in_the_json_the_text_and_the_html():
    model, opt, step = LOOPS["mlp"]()
    for objective in ("memory", "throughput"):
        r = saturate.search(step, device="cpu", memory_budget=48 * MiB, objective=objective, knee_fraction=0.8)
        assert not r.error, r.error
        d = r.decision
        assert d is not None and d.objective == objective and d.requested == objective
        assert r.batch == d.batch == r.data["decision"]["batch"]
        assert 0 < d.batch <= r.recommended_batch  # never above the memory-safe batch
        assert all(a.batch <= r.recommended_batch for a in d.alternatives), d.alternatives
        assert r.throughput_batch <= r.recommended_batch
        assert f"decision           train at batch {d.batch} (objective {objective})" in str(r), str(r)
        assert f"Train at batch <b>{d.batch}</b> (objective {objective})" in r.to_html()
        if objective == "throughput":
            assert d.batch == r.objective.batch
            assert [a.name for a in d.alternatives] == ["memory"]
            assert d.alternatives[0].batch == r.recommended_batch


def test_bad_objective_options_name_the_keyword_and_the_range():
    model, opt, step = LOOPS["mlp"]()
    with pytest.raises(ValueError, match=r"knee_fraction: 0 is outside 0.01..1 \(a fraction of the best samples/s\)"):
        saturate.search(step, device="cpu", memory_budget="48MiB", objective="throughput", knee_fraction=0)
    with pytest.raises(ValueError, match=r"noise_steps: 0 is outside 1..10000 \(steps\)"):
        saturate.search(step, device="cpu", memory_budget="48MiB", objective="goodput", noise_steps=0)
    with pytest.raises(ValueError, match="'speed' is not an objective"):
        saturate.search(step, device="cpu", memory_budget="48MiB", objective="speed")
    with pytest.raises(ValueError, match=r"target_memory: 1.5 is outside 0.01..1 \(a fraction of the budget, e.g. 0.9\)"):
        saturate.search(step, device="cpu", memory_budget="48MiB", target_memory=1.5)
    with pytest.raises(ValueError, match=r"timed_steps: 0 is outside 1..1000000 \(steps per trial\)"):
        saturate.search(step, device="cpu", memory_budget="48MiB", timed_steps=0)


class Teacher:
    """A learnable task: labels from a fixed random linear teacher on Gaussian inputs, so the
    gradient at initialisation has a true direction (|G|^2 > 0) besides its noise."""

    def __init__(self, n=4096, d=32, classes=4, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, d, generator=g)
        self.y = (self.x @ torch.randn(d, classes, generator=g)).argmax(1)
        self.gen = torch.Generator().manual_seed(seed + 1)

    def batch(self, b):
        i = torch.randint(0, len(self.x), (b,), generator=self.gen)
        return self.x[i], self.y[i]


def brute_force_noise_scale(model, data):
    """tr(Sigma) / |G|^2 from every sample's own gradient over the whole data set."""
    params = [p for p in model.parameters()]
    grads = []
    for i in range(len(data.x)):
        model.zero_grad()
        F.cross_entropy(model(data.x[i:i + 1]), data.y[i:i + 1]).backward()
        grads.append(torch.cat([p.grad.flatten() for p in params]))
    model.zero_grad(set_to_none=True)
    g = torch.stack(grads)
    mean = g.mean(0)
    return ((g - mean) ** 2).sum(1).mean().item() / (mean ** 2).sum().item()


def test_goodput_measures_the_noise_scale_from_the_users_own_gradients():
    torch.manual_seed(0)
    data = Teacher()
    model = nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(b):
        x, y = data.batch(b)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    truth = brute_force_noise_scale(model, data)
    before = [p.detach().clone() for p in model.parameters()]
    r = saturate.search(step, device="cpu", memory_budget=64 * MiB, max_batch=512, objective="goodput",
                        base_batch=32, noise_steps=4000)
    assert not r.error, r.error
    assert r.objective.objective == "goodput"
    assert r.objective.noise_scale is not None, r.objective.data
    # 4000 measurements of independent batches (1000: 0.88-1.10 of the truth over 10 runs, docs/python.md)
    assert abs(r.objective.noise_scale - truth) <= 0.10 * truth, (r.objective.noise_scale, truth)
    assert r.objective.data["noise_scale"]["batch"] == 32
    assert r.objective.data["goodput"]["lr_rule"] == "adascale"  # SGD
    for p, b in zip(model.parameters(), before):  # restore=True: the weights as they were
        assert torch.equal(p, b)


def test_goodput_without_an_optimizer_says_what_to_give():
    w = torch.zeros(8, requires_grad=True)

    def step(b):
        (torch.randn(b, 8) @ w).sum().backward()
        w.grad = None

    with pytest.raises(ValueError, match="optimizer="):
        saturate.search(step, device="cpu", memory_budget="48MiB", objective="goodput", model=[])


def test_the_evaluation_batch_is_larger_than_the_training_batch_and_exact_in_fresh_processes():
    budget = 48 * MiB
    model, opt, step = LOOPS["mlp"]()
    train = saturate.search(step, device="cpu", memory_budget=budget)
    evaluation = saturate.search_eval(step.forward_loss, device="cpu", memory_budget=budget, model=model)
    assert not evaluation.error, evaluation.error
    assert model.training, "the model's mode is put back"
    assert evaluation.max_batch_exact, str(evaluation)
    assert evaluation.max_batch > train.max_batch, (evaluation.max_batch, train.max_batch)
    assert run_fresh("mlp", budget, evaluation.max_batch, 3, mode="eval") == "ok"
    assert run_fresh("mlp", budget, evaluation.max_batch + 1, 3, mode="eval") == "oom"


def test_an_evaluation_has_no_goodput():
    model, opt, step = LOOPS["mlp"]()
    with pytest.raises(ValueError, match="gradients"):
        saturate.search_eval(step.forward_loss, device="cpu", memory_budget="48MiB", objective="goodput")


def test_the_result_prints_the_command_lines_table_and_draws_its_report():
    model, opt, step = LOOPS["mlp"]()
    r = saturate.search(step, device="cpu", memory_budget=48 * MiB)
    text = str(r)
    assert f"max_batch {r.max_batch}".replace(" ", "") in text.replace(" ", ""), text
    assert "recommended_batch" in text
    page = r.to_html()
    assert page.lstrip().lower().startswith("<!doctype html")
    assert str(r.max_batch) in page


def test_out_of_memory_is_told_by_the_librarys_one_classifier():
    assert saturate.is_out_of_memory(RuntimeError("std::bad_alloc"))
    assert saturate.is_out_of_memory(RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"))
    assert saturate.is_out_of_memory(RuntimeError("CPU budget exceeded: tried to allocate 4 MiB"))
    # a TorchScript traceback quotes the model's source: a comment there is not an OOM
    scripted = ("The following operation failed in the TorchScript interpreter.\n"
                "Traceback of TorchScript (most recent call last):\n"
                "  File \"m.py\", line 3\n"
                "    # avoid out of memory here\n"
                "RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert not saturate.is_out_of_memory(RuntimeError(scripted))


def test_plan_for_a_cpu_sized_target_predicts_the_peak_measured_at_its_batch_within_2_percent():
    model, opt, step = LOOPS["mlp"]()
    plan = saturate.plan_for(step, "64MiB", allocator="exact", device="cpu", memory_budget=256 * MiB)
    assert plan.max_batch > plan.recommended_batch > 8, str(plan)
    measured = saturate.memory_breakdown(step, plan.recommended_batch, device="cpu", memory_budget=256 * MiB)
    assert abs(plan.predicted_peak_bytes - measured.peak_allocated_bytes) <= 0.02 * measured.peak_allocated_bytes, (
        plan.predicted_peak_bytes, measured.peak_allocated_bytes)
    r = saturate.search(step, device="cpu", memory_budget=64 * MiB)  # the same size, measured
    assert abs(plan.max_batch - r.max_batch) <= 0.02 * r.max_batch, (plan.max_batch, r.max_batch)
    assert "prediction" in str(plan).lower() or "predict" in str(plan).lower(), str(plan)


def test_plan_for_an_unknown_card_names_the_keyword_and_the_cards():
    model, opt, step = LOOPS["mlp"]()
    with pytest.raises(ValueError, match="target: unknown card 'tpu'.*h100-80gb"):
        saturate.plan_for(step, "tpu", device="cpu", memory_budget="64MiB")


def test_the_result_names_the_budget_it_searched_in():
    model, opt, step = LOOPS["mlp"]()
    r = saturate.search(step, device="cpu", memory_budget=48 * MiB)
    assert r.budget_bytes == 48 * MiB
    assert r.data["budget_bytes"] == 48 * MiB
    assert "48.0 MiB" in str(r).split("\n")[3], str(r)  # the context's budget line


def test_a_batchnorm_model_times_its_curve_from_the_smallest_batch_it_accepts():
    # issue 44: the curve started at batch 1, which BatchNorm refuses in training, and the search
    # returned batch 0 with no error
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch_size):
        x, y = torch.randn(batch_size, 64), torch.randint(0, 10, (batch_size,))
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    r = saturate.search(step, device="cpu", memory_budget=24 * MiB, objective="throughput", max_batch=64,
                        knee_fraction=0.8)
    assert not r.error, r.error
    points = r.objective.data["throughput_curve"]["points"]
    assert points[0]["batch"] == 1 and not points[0]["ok"] and "channel" in points[0]["error"]
    assert r.batch >= 2 and r.objective.batch >= 2
    # a step that fails at every batch is an error, not a silent 0
    def broken(batch_size):
        raise RuntimeError("Expected more than 1 value per channel when training")
    with pytest.warns(RuntimeWarning):
        bad = saturate.search(broken, device="cpu", memory_budget=24 * MiB, objective="throughput", max_batch=8,
                              model=model, optimizer=opt)
    assert bad.batch == 0 and "value per channel" in bad.error
