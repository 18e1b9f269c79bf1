"""saturate.leak_check on plain-Python loops under a CPU budget: a loop that keeps its outputs is
found and the line that keeps them is named; a loop that keeps only numbers is clean."""
import inspect

import torch
import torch.nn as nn
import torch.nn.functional as F

import saturate

MiB = 1 << 20


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(128, 256)
        self.fc2 = nn.Linear(256, 64)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def make_loop(keep_outputs):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []

    def step(batch_size):
        x = torch.randn(batch_size, 128)
        y = torch.randint(0, 64, (batch_size,))
        if keep_outputs:
            kept.append(model(x))  # the leak: every step's logits stay in the list
            loss = F.cross_entropy(kept[-1], y)
        else:
            loss = F.cross_entropy(model(x), y)
            kept.append(loss.item())  # a number: nothing stays on the allocator
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, step, kept


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_loop_that_keeps_its_outputs_leaks_and_the_line_that_keeps_them_is_named():
    model, step, kept = make_loop(keep_outputs=True)
    r = saturate.leak_check(step, 32, device="cpu", memory_budget=64 * MiB, steps=20)
    assert r.detected, str(r)
    logits_bytes = 32 * 64 * 4
    assert 0.9 * logits_bytes <= r.bytes_per_step <= 1.5 * logits_bytes, (r.bytes_per_step, logits_bytes)
    assert r.sites, r.data
    top = r.sites[0].site
    assert top.startswith(f"test_leak.py:{line_of(make_loop, 'kept.append(model(x))')} (step)"), top
    assert top.endswith(f"test_leak.py:{line_of(Net.forward, 'return self.fc2')} (forward)"), top
    assert abs(r.sites[0].bytes_per_step - logits_bytes) <= 0.1 * logits_bytes, r.sites
    assert "Python source lines" in r.data["leak"]["sites_method"]
    assert "leak" in str(r).lower()


def test_a_loop_that_keeps_only_numbers_is_clean():
    model, step, kept = make_loop(keep_outputs=False)
    r = saturate.leak_check(step, 32, device="cpu", memory_budget=64 * MiB, steps=20)
    assert not r.detected, str(r)
    assert len(kept) == 20  # the user's loop ran every step
    assert all(s.bytes_per_step < 1024 for s in r.sites), r.sites


def test_an_out_of_memory_ends_the_check_and_is_reported():
    model, step, kept = make_loop(keep_outputs=True)
    r = saturate.leak_check(step, 4096, device="cpu", memory_budget=24 * MiB, steps=200, site_steps=0)
    assert r.oom_step >= 0, r.data
    assert r.oom_step < 200
    assert "budget" in r.error.lower() or "memory" in r.error.lower(), r.error


def test_growth_outside_tensors_is_reported_beside_a_flat_tensor_verdict():
    # issue 44: a loop whose process grew 755 MiB during the check got "none", and nothing said
    # that only tensor bytes are watched. Here each step keeps 36 MiB of plain Python bytes (above
    # glibc's largest mmap threshold, so each is fresh resident pages, not reused heap).
    model, step, kept = make_loop(keep_outputs=False)
    blobs = []

    def step_keeping_bytes(batch_size):
        step(batch_size)
        blobs.append(b"\x01" * (36 * MiB))  # written pages: resident, but no tensor

    r = saturate.leak_check(step_keeping_bytes, 32, device="cpu", memory_budget=64 * MiB, steps=8, site_steps=0)
    assert not r.detected, str(r)
    assert r.host_growth_bytes is not None and r.data["leak"]["host_growth_steps"] == 8 - 3, r.data["leak"]
    assert r.host_growth_bytes >= 0.9 * 5 * 36 * MiB, r.host_growth_bytes
    assert "watched: tensor bytes after each step" in str(r), str(r)
    assert "while tensors stayed flat" in str(r), str(r)
