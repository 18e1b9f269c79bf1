"""An out-of-memory in the user's Python step is a result: memory goes back to its baseline."""
import gc

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import saturate

MiB = 1 << 20


def make_loop(keep_errors=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.Adam(model.parameters())

    def step(batch_size):
        x = torch.randn(batch_size, 256)
        y = torch.randint(0, 10, (batch_size,))
        try:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
        except torch.OutOfMemoryError as e:
            if keep_errors is not None:
                keep_errors.append(e)  # code that keeps the exception (a logger, a retry helper)
            raise RuntimeError("the step failed") from e  # and wraps it

    return model, opt, step


def test_a_hundred_out_of_memory_trials_leave_memory_at_its_baseline():
    kept = []
    model, opt, step = make_loop(kept)
    gc.collect()
    baseline = saturate._memory.cpu_allocated_bytes()
    with saturate.cpu_memory_budget("32MiB"):
        # batches that fail in making the batch, in the forward, in the backward
        sizes = [200000, 4000, 1800]
        for i in range(100):
            with pytest.raises(torch.OutOfMemoryError):
                saturate.memory_breakdown(step, sizes[i % len(sizes)], model=model, optimizer=opt)
            assert saturate._memory.cpu_allocated_bytes() == baseline, i
            assert all(p.grad is None for p in model.parameters()), i
            assert len(opt.state) == 0, i
        # and the step still runs, from the same baseline
        b = saturate.memory_breakdown(step, 16, model=model, optimizer=opt)
        assert b.peak_allocated_bytes > baseline
    assert saturate._memory.cpu_allocated_bytes() == baseline
    # the user's code kept every exception raised inside its try (not those making the batch):
    # saturate cleared their frames, so memory came back all the same
    assert len(kept) == sum(1 for i in range(100) if sizes[i % len(sizes)] != 200000)


def test_without_clearing_the_kept_exceptions_would_hold_memory():
    # the control: what the kept exceptions would hold if saturate did not clear their frames
    kept = []
    model, opt, step = make_loop(kept)
    gc.collect()
    baseline = saturate._memory.cpu_allocated_bytes()
    with saturate.cpu_memory_budget("32MiB"):
        try:
            step(2000)  # fails with the forward's activations alive
        except RuntimeError:
            pass
    held = saturate._memory.cpu_allocated_bytes() - baseline
    assert held > MiB, held  # the kept exception's frames hold the activations
    saturate.release_exception(kept[0])
    gc.collect()
    model.zero_grad(set_to_none=True)
    assert saturate._memory.cpu_allocated_bytes() == baseline


def test_keyboard_interrupt_in_the_step_stops_the_search_and_is_raised():
    model, opt, step = make_loop()
    calls = []

    def interrupted(n):
        calls.append(n)
        if len(calls) == 3:
            raise KeyboardInterrupt
        step(n)

    with pytest.raises(KeyboardInterrupt):
        saturate.search(interrupted, device="cpu", memory_budget="32MiB")
    assert len(calls) == 3


def test_oom_words_of_every_allocator_are_recognised():
    assert saturate.is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert saturate.is_out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"))
    assert saturate.is_out_of_memory(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)"))
    assert saturate.is_out_of_memory(MemoryError())
    assert not saturate.is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not saturate.is_out_of_memory(ValueError("out of memory"))  # not a runtime failure


def test_the_cpu_budget_is_an_out_of_memory_every_tool_recognises():
    from lightning.pytorch.utilities.memory import is_oom_error  # installed by scripts/setup.sh
    from accelerate.utils.memory import should_reduce_batch_size

    with saturate.cpu_memory_budget("1MiB"):
        with pytest.raises(torch.OutOfMemoryError) as info:
            torch.empty(2 * MiB, dtype=torch.uint8)
    assert is_oom_error(info.value)
    assert should_reduce_batch_size(info.value)


def test_oom_guard_refuses_a_non_finite_norm_or_weight_before_the_model_turns_nan():
    # issue 43: max_grad_norm=nan turned clipping silently off; a NaN weight made every parameter NaN
    import math
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = lambda b: model(b).pow(2).mean()  # noqa: E731
    for norm in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="max_grad_norm"):
            saturate.OomGuard(loss, opt, max_grad_norm=norm)
    before = [p.detach().clone() for p in model.parameters()]
    for bad in (float("nan"), float("inf")):
        guard = saturate.OomGuard(loss, opt, weight=lambda b, bad=bad: bad)
        with pytest.raises(ValueError, match="weight"):
            guard.step(torch.randn(8, 4))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # no step taken
    assert all(math.isfinite(float(p.sum())) for p in model.parameters())
