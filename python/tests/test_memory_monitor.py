"""saturate.memory_breakdown and saturate.monitor on plain-Python loops."""
import time

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import saturate
from loops import LOOPS

MiB = 1 << 20


def test_the_breakdown_splits_the_peak_into_parts_that_add_up():
    model, opt, step = LOOPS["two_input"]()
    b = saturate.memory_breakdown(step, 64, model=model, optimizer=opt, memory_budget="256MiB")
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    assert b.parameters_bytes == params
    parts = (b.parameters_bytes + b.gradients_bytes + b.optimizer_state_bytes + b.inputs_bytes +
             b.activations_bytes + b.workspace_bytes + b.other_bytes)
    assert parts == b.peak_allocated_bytes
    # AdamW keeps two moments per parameter (and a step count each); gradients are the
    # parameters' size, alive at the peak or not
    assert 2 * params <= b.optimizer_state_bytes <= 2 * params + 4096
    assert b.activations_bytes > 0
    assert "parameters" in b.table
    assert b.to_json().startswith("{")


def test_the_model_is_found_in_the_steps_closure():
    model, opt, step = LOOPS["two_input"]()
    found = saturate.memory_breakdown(step, 32, memory_budget="256MiB")
    given = saturate.memory_breakdown(step, 32, model=model, optimizer=opt, memory_budget="256MiB")
    assert found.parameters_bytes == given.parameters_bytes > 0


def test_a_batch_that_does_not_fit_raises_out_of_memory():
    model, opt, step = LOOPS["mlp"]()
    with pytest.raises(torch.OutOfMemoryError, match="batch 100000"):
        saturate.memory_breakdown(step, 100000, memory_budget="32MiB")


class SlowData(torch.utils.data.Dataset):
    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.randn(64), i % 10


def run_monitored(sleep_s, width, batch=8, batches=12):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(SlowData(batch * batches, sleep_s), batch_size=batch)
    with saturate.monitor(device="cpu", sample_hz=0) as mon:
        for x, y in mon.loop(loader):
            with saturate.phase("forward"):
                loss = F.cross_entropy(model(x), y)
            with saturate.phase("backward"):
                loss.backward()
            with saturate.phase("optimizer"):
                opt.step()
                opt.zero_grad()
    return mon.report


def test_a_loop_waiting_for_its_loader_is_data_bound():
    r = run_monitored(sleep_s=0.01, width=32)  # 80 ms of loading a step (8 sleeps), far less compute
    assert r.steps == 12 and r.timed_steps == 11
    assert r.verdict == "data-bound", str(r)
    # the wait is mostly the loader's sleeps, and most of the step. Not "10x the
    # compute": this VM runs a step's small ops 20-60x slower just after an 80 ms sleep (its vCPU woken:
    # forward 0.15 ms after none, 3-11 ms after one, measured), 13 ms of forward and backward, seen
    compute = r.phases_ms["forward"] + r.phases_ms["backward"] + r.phases_ms["optimizer"]
    # (75.8-80 ms measured: not all of the first sample's sleep falls inside the timed wait)
    assert r.phases_ms["data_wait"] >= 0.75 * 8 * 10.0, r.phases_ms
    assert r.phases_ms["data_wait"] > 2 * compute, r.phases_ms


def test_a_loop_with_heavy_compute_and_instant_data_is_not_data_bound():
    r = run_monitored(sleep_s=0.0, width=2048, batch=256, batches=5)
    assert r.verdict not in ("data-bound", ""), str(r)
    for phase in ("forward", "backward", "optimizer"):
        assert r.phases_ms[phase] > 0, phase
    assert "bottleneck" in str(r)


def test_steps_can_be_marked_by_hand_and_unknown_phases_are_refused():
    with saturate.monitor(device="cpu", sample_hz=0, warmup_steps=0) as mon:
        for _ in range(3):
            with mon.step():
                with saturate.phase("forward"):
                    torch.randn(256, 256) @ torch.randn(256, 256)
    assert mon.report.steps == 3 and mon.report.timed_steps == 3
    assert mon.report.phases_ms["forward"] > 0
    with pytest.raises(ValueError, match="data_wait, h2d, forward"):
        saturate.phase("thinking")


def test_a_search_with_the_monitor_explains_each_fitting_trial():
    model, opt, step = LOOPS["two_input"]()  # marks forward, backward and optimizer
    r = saturate.search(step, device="cpu", memory_budget=96 * MiB, monitor=True)
    assert r.max_batch_exact, str(r)
    ok = [t for t in r.trials if t.status == "ok" and t.data.get("phases_ms")]
    assert ok, [t.data.keys() for t in r.trials]
    for t in ok:
        for phase in ("forward", "backward", "optimizer"):
            assert t.data["phases_ms"][phase] > 0, (t.batch, t.data["phases_ms"])
        assert t.data["bottleneck"]["verdict"], t.data["bottleneck"]
    assert "phases_ms" in r.to_json()


def test_the_report_gives_every_causes_share_of_the_step():
    r = run_monitored(sleep_s=0.01, width=32)
    assert set(r.shares) == {"data", "communication", "launch", "arithmetic", "other"}, r.shares
    assert r.shares["data"] > 0.5, r.shares
    assert r.between == [] or r.verdict == "borderline", r


CHURN_LOOP = r'''
import json, torch, torch.nn as nn, torch.nn.functional as F
import saturate
torch.set_num_threads(1)
torch.manual_seed(0)
m = nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                  nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
x, y = torch.randn(128 * 20, 1, 28, 28), torch.randint(10, (128 * 20,))
with saturate.monitor(device="cpu", sample_hz=0) as mon:
    for i in mon.loop(range(20)):
        with saturate.phase("forward"):
            loss = F.cross_entropy(m(x[i * 128:(i + 1) * 128]), y[i * 128:(i + 1) * 128])
        with saturate.phase("backward"):
            loss.backward()
        with saturate.phase("optimizer"):
            opt.step()
            opt.zero_grad()
print(json.dumps(mon.report.data["bottleneck"]))
'''


def _churn_run(malloc_env):
    import json, os, subprocess, sys
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(malloc_env)
    out = subprocess.run([sys.executable, "-c", CHURN_LOOP], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_python_loop_whose_malloc_gives_memory_back_every_step_is_told_so_and_one_that_keeps_it_is_not():
    # glibc trims the heap top of this loop every step (docs/train.md: 3700-18000 faults per step)
    churn = _churn_run({})
    assert churn["evidence"]["page_faults_per_step"] >= 1000, churn["evidence"]
    assert "MALLOC_MMAP_THRESHOLD_" in churn["fix"], churn["fix"]
    kept = _churn_run({"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "1073741824"})
    assert kept["evidence"]["page_faults_per_step"] < 1000, kept["evidence"]
    assert "MALLOC_MMAP_THRESHOLD_" not in kept["fix"], kept["fix"]


def test_a_step_that_marks_no_phases_is_split_into_gradients_optimizer_state_and_activations():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256))
    opt = torch.optim.Adam(model.parameters())

    def step(batch_size):  # no saturate.phase anywhere
        loss = model(torch.randn(batch_size, 256)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    params = sum(p.numel() * p.element_size() for p in model.parameters())
    auto = saturate.memory_breakdown(step, 64, memory_budget="256MiB")
    # Adam's peak is in its step: every gradient and both moments live, the forward's saved
    # tensors counted at the end of the forward
    assert auto.peak_phase == "optimizer"
    assert auto.gradients_bytes == params
    assert 2 * params <= auto.optimizer_state_bytes <= 2 * params + 4096
    assert auto.data["breakdown"]["saved_for_backward_bytes"] > 0
    # the step's own marks only: nothing to tell the parts apart, all of it one workspace
    marked = saturate.memory_breakdown(step, 64, memory_budget="256MiB", phases="marked")
    assert marked.gradients_bytes == marked.optimizer_state_bytes == 0
    assert marked.peak_allocated_bytes == auto.peak_allocated_bytes
    with pytest.raises(ValueError, match="phases="):
        saturate.memory_breakdown(step, 64, memory_budget="256MiB", phases="none")
