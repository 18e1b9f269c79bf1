"""saturate.fast_paths on a user's own step on CPU: half the threads is tried against the step as it
is (both timed), the threads are as before afterwards, and .apply() sets what was chosen."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import saturate


def make_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch_size):
        x = torch.randn(batch_size, 256)
        F.cross_entropy(model(x), torch.randint(0, 10, (batch_size,))).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def test_half_the_threads_is_timed_against_the_step_and_the_threads_are_put_back():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        r = saturate.fast_paths(make_step(), 64, device="cpu", memory_budget="256MiB", timed_steps=2)
        assert torch.get_num_threads() == 2, "the switches are put back after timing"
        names = [t["name"] for t in r.tried]
        assert names == ["threads=1"], names  # on a CPU only the threads apply to a step saturate does not own
        t = r.tried[0]
        assert t["baseline_ms"] > 0 and t["with_ms"] > 0
        assert r.chosen == (["threads=1"] if t["kept"] else [])
        r.apply()
        assert torch.get_num_threads() == (1 if t["kept"] else 2)
    finally:
        torch.set_num_threads(before)


def test_apply_sets_the_switches_as_the_library_does():
    threads, tf32 = torch.get_num_threads(), torch.backends.cuda.matmul.allow_tf32
    try:
        torch.set_num_threads(2)
        torch.backends.cuda.matmul.allow_tf32 = False
        saturate.FastPaths(chosen=["threads=1", "tf32"], baseline_ms=2.0, chosen_ms=1.0, tried=[]).apply()
        assert torch.get_num_threads() == 1
        assert torch.backends.cuda.matmul.allow_tf32
        with pytest.raises(ValueError, match="warp_drive"):
            saturate.FastPaths(chosen=["warp_drive"], baseline_ms=2.0, chosen_ms=1.0, tried=[]).apply()
    finally:
        torch.set_num_threads(threads)
        torch.backends.cuda.matmul.allow_tf32 = tf32


def test_a_bad_batch_is_refused_by_keyword():
    with pytest.raises(ValueError, match="batch_size=0"):
        saturate.fast_paths(make_step(), 0, device="cpu")
