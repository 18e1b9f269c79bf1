"""saturate.search on plain-Python training steps under CPU budgets."""
import json
import os
import subprocess
import warnings

import pytest
import torch

import saturate
from loops import LOOPS, run_fresh

MiB = 1 << 20


def search_loop(name, budget, **kw):
    model, opt, step = LOOPS[name]()
    return saturate.search(step, device="cpu", memory_budget=budget, **kw)


@pytest.mark.parametrize("name,budget", [("two_input", 96 * MiB), ("resnet18", 200 * MiB)])
def test_the_max_is_exact_for_the_users_loop_in_fresh_processes(name, budget):
    r = search_loop(name, budget)
    assert not r.error, r.error
    assert r.max_batch_exact, str(r)
    assert r.max_batch > 4, str(r)
    steps = 3  # one warm-up and two timed steps, as each trial ran
    assert run_fresh(name, budget, r.max_batch, steps) == "ok"
    assert run_fresh(name, budget, r.max_batch + 1, steps) == "oom"


def test_fit_needs_fewer_steps_than_lightnings_binsearch_for_the_same_answer():
    fit = search_loop("two_input", 96 * MiB)
    binsearch = search_loop("two_input", 96 * MiB, strategy="binsearch")
    assert fit.max_batch == binsearch.max_batch, f"{fit}\n{binsearch}"
    assert fit.trial_steps < binsearch.trial_steps, f"{fit.trial_steps} vs {binsearch.trial_steps}"


def test_each_trial_reports_its_batch_status_peak_and_step_time():
    r = search_loop("mlp", 48 * MiB)
    assert {t.status for t in r.trials} >= {"ok", "oom"}
    for t in r.trials:
        assert t.batch > 0 and t.steps > 0
        if t.status == "ok":
            assert 0 < t.peak_bytes <= 48 * MiB and t.ms_per_step > 0 and t.samples_per_s > 0
    fits = [t for t in r.trials if t.status == "ok"]
    assert max(t.batch for t in fits) == r.max_batch
    assert 0 < r.recommended_batch <= r.max_batch
    within = [t for t in fits if t.batch == r.recommended_batch]
    assert not within or within[0].peak_bytes <= r.target_bytes
    assert r.target_bytes == pytest.approx(0.9 * 48 * MiB, rel=1e-6)


def test_to_json_has_the_fields_of_the_command_lines_json(tmp_path):
    build = os.environ.get("SATURATE_BUILD_DIR", "")
    tool = os.path.join(build, "saturate")
    if not os.path.exists(tool):
        pytest.skip("the saturate tool is not built next to the module")
    out = tmp_path / "cli.json"
    subprocess.run([tool, "search", "--model", "mlp", "--device", "cpu", "--memory-budget", "256MiB", "--json",
                    str(out)], check=True, capture_output=True, timeout=600)
    cli = json.loads(out.read_text())
    py = json.loads(search_loop("mlp", 48 * MiB).to_json())
    # the command line's own step has a precision, checkpointing, fast paths and a breakdown of
    # its recommended batch; a user's step sets the first three itself (saturate.memory_breakdown
    # gives the fourth)
    assert set(cli) - set(py) <= {"precision", "checkpointing", "fast_paths", "memory_breakdown"}, set(cli) - set(py)
    cli_trial = set().union(*(set(t) for t in cli["trials"]))
    py_trial = set().union(*(set(t) for t in py["trials"]))
    # what the command line's observers add (the monitor: saturate.search(monitor=True); the
    # breakdown: saturate.memory_breakdown)
    observers = {"phases_ms", "utilization", "bottleneck", "monitor_overhead", "memory_breakdown"}
    assert cli_trial - py_trial <= observers, cli_trial - py_trial


def test_the_search_leaves_the_weights_and_optimizer_as_they_were():
    model, opt, step = LOOPS["two_input"]()
    step(8)  # the user trained a step before searching: weights moved, optimizer state exists
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state_before = len(opt.state)
    r = saturate.search(step, device="cpu", memory_budget=96 * MiB)
    assert r.max_batch > 0
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert len(opt.state) == state_before


def test_the_budget_of_a_search_does_not_outlive_it():
    model, opt, step = LOOPS["mlp"]()
    saturate.search(step, device="cpu", memory_budget=48 * MiB)
    torch.empty(64 * MiB, dtype=torch.uint8)  # over the search's budget: allowed again
    with saturate.cpu_memory_budget("100MiB"):
        saturate.search(step, device="cpu", memory_budget=48 * MiB)
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(101 * MiB, dtype=torch.uint8)  # the enclosing budget is back


def test_an_error_that_is_not_out_of_memory_stops_the_search_with_its_message():
    model, opt, step = LOOPS["mlp"]()

    def broken(batch_size):
        if batch_size > 16:
            raise ValueError(f"shape mismatch at {batch_size}")
        step(batch_size)

    with pytest.warns(RuntimeWarning, match="shape mismatch"):
        r = saturate.search(broken, device="cpu", memory_budget=48 * MiB)
    assert "shape mismatch" in r.error
    assert any(t.status == "error" for t in r.trials)


def test_bad_arguments_name_the_value_and_what_is_allowed():
    model, opt, step = LOOPS["mlp"]()
    with pytest.raises(ValueError, match="memory_budget"):
        saturate.search(step, device="cpu")  # CPU without a budget
    with pytest.raises(ValueError, match="lots"):
        saturate.search(step, device="cpu", memory_budget="lots")
    with pytest.raises(ValueError, match="target_memory"):
        saturate.search(step, device="cpu", memory_budget="48MiB", target_memory=1.5)
    with pytest.raises(ValueError, match="strategy: unknown value .guess.*fit.*power.*binsearch"):
        saturate.search(step, device="cpu", memory_budget="48MiB", strategy="guess")
    with pytest.raises(ValueError, match="max_batch"):
        saturate.search(step, device="cpu", memory_budget="48MiB", max_batch=0)
    with pytest.raises(ValueError, match="strategy='divisors' tries the divisors of max_batch: give max_batch="):
        saturate.search(step, device="cpu", memory_budget="48MiB", strategy="divisors")
    with pytest.raises(ValueError, match="start_batch=0: give a positive int"):
        saturate.search(step, device="cpu", memory_budget="48MiB", strategy="divisors", max_batch=96, start_batch=0)
    with pytest.raises(TypeError, match="callable"):
        saturate.search(42, device="cpu", memory_budget="48MiB")
    # device=None (the default) is where the step runs: its model's device, the CPU here, where a
    # search needs a budget (issue 44: the default was cuda, unlike memory_breakdown's and --device auto)
    with pytest.raises(ValueError, match="a CPU search needs a budget"):
        saturate.search(step)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="(?i)cuda|gpu"):
            saturate.search(step, device="cuda")


def test_torchs_spelling_of_the_cpu_device_is_the_cpu():
    # str(TrainingArguments.device) under torchrun is "cpu:0": it was an unknown device
    model, opt, step = LOOPS["mlp"]()
    r = saturate.search(step, device="cpu:0", memory_budget=48 * MiB, max_batch=64)
    assert not r.error and r.max_batch == 64, str(r)


def test_min_batch_that_does_not_fit_is_reported():
    r = search_loop("mlp", 48 * MiB, max_batch=None, min_batch=100000, strategy="power")
    assert r.max_batch < 100000
    assert "min_batch" in r.error


@pytest.mark.parametrize("name,budget", [("two_input", 96 * MiB), ("mlp", 48 * MiB)])
def test_the_flops_per_sample_equal_pytorchs_own_flop_counter(name, budget):
    from torch.utils.flop_counter import FlopCounterMode
    r = search_loop(name, budget)
    assert not r.error, r.error
    c = r.compute  # typed (saturate.Compute); the bf16 case below reads it by the JSON's keys
    assert c.flops_method == "counted"
    # the same step, counted by PyTorch's FlopCounterMode (forward and backward, from Python)
    model, opt, step = LOOPS[name]()
    batch = 16
    with FlopCounterMode(display=False) as counter:
        step(batch)
    expected = counter.get_total_flops() / batch
    assert expected > 0
    assert c.flops_per_sample == pytest.approx(expected, rel=1e-9)
    # the rate at the reported batch, from independent parts: PyTorch's count a sample times the
    # samples/s the trial at that batch measured (the trials' own record), then its share of the peak
    (at,) = [t for t in r.trials if t.batch == c.batch and t.status == "ok"]
    assert c.achieved_flops_per_s == pytest.approx(expected * at.samples_per_s, rel=1e-9)
    assert c.peak_flops_per_s > 0
    assert c.mfu == pytest.approx(expected * at.samples_per_s / c.peak_flops_per_s, rel=1e-9)
    assert c.peak_method.startswith("measured: fp32 GEMM")
    # the typed summary is what `--json` writes: every key of the JSON's compute, the same value
    written = r.data["compute"]
    for key, value in written.items():
        assert c[key] == value, key


def test_a_step_under_bf16_autocast_has_its_mfu_against_a_bf16_peak():
    # issue 27: the Python search measured an fp32 GEMM peak whatever the step multiplied in; a
    # bf16 step's MFU was against a peak of other arithmetic (on a GPU ~15x apart)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)

    def step(batch_size):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(torch.randn(batch_size, 256))
        out.float().square().mean().backward()
        opt.step()
        opt.zero_grad()

    r = saturate.search(step, device="cpu", memory_budget=32 * MiB, max_batch=256)
    assert not r.error, r.error
    c = r.compute
    assert c["peak_method"].startswith("measured: bf16 GEMM"), c["peak_method"]
    if c.get("mfu") is not None:
        assert 0 < c["mfu"] <= 1 and c["mfu"] == pytest.approx(c["achieved_flops_per_s"] / c["peak_flops_per_s"],
                                                                 rel=1e-9)


def _mlp_step(keep):
    """A step of a small MLP; `keep(batch, out)` is what the step holds on to between calls."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(m.parameters())

    def step(batch_size):
        out = m(torch.randn(batch_size, 256))
        out.square().mean().backward()
        opt.step()
        opt.zero_grad()
        keep(batch_size, out.detach())
    return step


def test_a_step_that_keeps_its_outputs_is_warned_that_the_max_holds_for_a_few_steps_only():
    # issue 43: a step appending every output to a list got max 8923 "exact" and no word of the growth
    kept = []
    step = _mlp_step(lambda b, out: kept.append(out))
    with pytest.warns(RuntimeWarning, match="keeps memory alive"):
        r = saturate.search(step, device="cpu", memory_budget="64MiB")
    growth = r.data["memory_growth"]
    # what the list holds: every output of every step the search ran, as the tensors say
    assert 0 < growth["retained_bytes"] <= sum(t.numel() * t.element_size() for t in kept)
    at = growth["at_batch"]
    assert at in {t.shape[0] for t in kept}
    assert growth["bytes_per_step"] == at * 10 * 4  # one float32 output of (batch, 10) per step
    assert "keeps memory alive" in str(r)


@pytest.mark.parametrize("holds", ["nothing", "a buffer sized to the largest batch"])
def test_a_step_that_keeps_nothing_or_a_cache_that_stops_growing_is_not_warned(holds):
    cache = {}

    def keep(batch, out):
        if holds != "nothing" and cache.get("buffer", torch.empty(0)).shape[0] < batch:
            cache["buffer"] = torch.empty(batch, 512)  # grows to the largest batch, then stays

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = saturate.search(_mlp_step(keep), device="cpu", memory_budget="64MiB")
    assert "memory_growth" not in r.data and r.max_batch > 0, str(r)


@pytest.mark.parametrize("call,named", [
    (lambda s: saturate.search(s, device="cpu", memory_budget=2**70), "memory_budget.*too large"),
    (lambda s: saturate.search(s, device="cpu", memory_budget="48MiB", max_batch=2**70), "max_batch=1180591620717411303424"),
    (lambda s: saturate.search(s, device="cpu", memory_budget="48MiB", warmup_steps=2**40), "warmup_steps=1099511627776"),
    (lambda s: saturate.memory_breakdown(s, 2**64, device="cpu", memory_budget="48MiB"), "18446744073709551616"),
    (lambda s: saturate.cpu_memory_budget(2**80).__enter__(), "too large"),
])
def test_a_number_the_core_cannot_hold_is_a_value_error_naming_it(call, named):
    # issue 43: memory_budget=2**70 raised pybind11's raw "incompatible function arguments" TypeError
    model, opt, step = LOOPS["mlp"]()
    with pytest.raises(ValueError, match=named):
        call(step)
