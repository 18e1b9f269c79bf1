"""saturate.cpu_memory_budget: a CPU run behaves like a GPU of that size."""
import pytest
import torch

import saturate

MiB = 1 << 20


def test_an_allocation_past_the_budget_is_an_out_of_memory_and_one_within_is_not():
    base = saturate._memory.cpu_allocated_bytes()
    with saturate.cpu_memory_budget(base + 8 * MiB) as budget:
        assert budget == base + 8 * MiB
        a = torch.empty(7 * MiB, dtype=torch.uint8)
        with pytest.raises(torch.OutOfMemoryError, match="CPU budget exceeded"):
            torch.empty(2 * MiB, dtype=torch.uint8)
        del a
        b = torch.empty(7 * MiB, dtype=torch.uint8)  # freed bytes count again
        del b


def test_sizes_are_read_as_the_command_line_reads_them():
    with saturate.cpu_memory_budget("512MiB") as b:
        assert b == 512 * MiB
    with saturate.cpu_memory_budget("1.5GB") as b:
        assert b == 1_500_000_000
    with saturate.cpu_memory_budget(123456789) as b:
        assert b == 123456789


def test_the_previous_budget_is_back_after_the_block():
    with saturate.cpu_memory_budget("64MiB"):
        with saturate.cpu_memory_budget("16MiB"):
            with pytest.raises(torch.OutOfMemoryError):
                torch.empty(20 * MiB, dtype=torch.uint8)
        x = torch.empty(20 * MiB, dtype=torch.uint8)  # 64 MiB again
        del x
    y = torch.empty(80 * MiB, dtype=torch.uint8)  # no budget
    del y


def test_bad_sizes_name_the_value_and_what_is_allowed():
    for bad in ("lots", "-5MiB", 0, -1, None, True):
        with pytest.raises(ValueError) as info:
            with saturate.cpu_memory_budget(bad):
                pass
        assert str(bad) in str(info.value) or "None" in str(info.value), str(info.value)


def test_a_nested_budget_cannot_raise_the_one_around_it():
    # issue 43: cpu_memory_budget("64MiB") around ("1GiB") let 200 MiB through
    with saturate.cpu_memory_budget("64MiB") as outer:
        with saturate.cpu_memory_budget("1GiB") as inner:
            assert inner == outer == 64 * 2**20
            with pytest.raises(torch.OutOfMemoryError):
                torch.empty(200 * 2**20, dtype=torch.uint8)
            small = torch.empty(1 << 20, dtype=torch.uint8)  # a smaller inner one still holds
            del small
        with saturate.cpu_memory_budget("16MiB") as smaller:
            assert smaller == 16 * 2**20
            with pytest.raises(torch.OutOfMemoryError):
                torch.empty(32 * 2**20, dtype=torch.uint8)
        torch.empty(32 * 2**20, dtype=torch.uint8)  # the outer one is back


def _fresh_python(code: str) -> str:
    import os
    import subprocess
    import sys
    env = dict(os.environ)
    env.pop("SATURATE_CPU_ALLOCATOR", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_import_saturate_leaves_the_processs_own_cpu_allocator_in_charge_and_a_budget_gives_it_back_after():
    # in a fresh process: a tensor made after the import is not seen by saturate's allocator (its
    # counters do not move), within a budget block or a search one is, and after them again not
    out = _fresh_python("""
import torch, saturate
C = saturate._saturate
def counted(n):
    before = C.cpu_counters()["allocated_bytes"]
    t = torch.empty(n, dtype=torch.uint8)
    return C.cpu_counters()["allocated_bytes"] - before
print(C.cpu_allocator_in_charge(), counted(64 << 20))
with saturate.cpu_memory_budget("1GiB"):
    print(C.cpu_allocator_in_charge(), counted(64 << 20))
model = torch.nn.Linear(64, 64)
saturate.search(lambda b: model(torch.randn(b, 64)).sum().backward(), device="cpu", memory_budget="64MiB", max_batch=8)
print(C.cpu_allocator_in_charge(), counted(64 << 20))
saturate._budget.to_bytes(0.5, "cpu")  # a fraction of the CPU's memory: its capacity read, nothing measured
print(C.cpu_allocator_in_charge(), counted(64 << 20))
""")
    assert out.split() == ["False", "0", "True", str(64 << 20), "False", "0", "False", "0"], out


def test_a_model_built_before_the_budget_counts_against_it_and_its_free_gives_the_bytes_back():
    out = _fresh_python("""
import torch, saturate
MiB = 1 << 20
weights = torch.ones(100 * MiB // 4)         # built before any budget (the default allocator's)
view = weights[10:]                          # a view: the same storage, counted once
with saturate.cpu_memory_budget("150MiB"):
    try:
        torch.empty(60 * MiB, dtype=torch.uint8)
        print("fits")
    except torch.OutOfMemoryError:
        print("oom")
    del weights, view                        # its free is seen: 100 MiB back
    x = torch.empty(60 * MiB, dtype=torch.uint8)
    print("fits")
""")
    assert out.split() == ["oom", "fits"], out


def test_saturate_cpu_allocator_import_counts_from_the_import_and_a_wrong_value_names_both_allowed():
    out = _fresh_python("""
import os
os.environ["SATURATE_CPU_ALLOCATOR"] = "import"
import torch, saturate
C = saturate._saturate
before = C.cpu_counters()["allocated_bytes"]
t = torch.empty(64 << 20, dtype=torch.uint8)
print(C.cpu_allocator_in_charge(), C.cpu_counters()["allocated_bytes"] - before)
""")
    assert out.split() == ["True", str(64 << 20)], out
    import os
    import subprocess
    import sys
    bad = subprocess.run([sys.executable, "-c", "import saturate"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "SATURATE_CPU_ALLOCATOR": "always"})
    assert bad.returncode != 0 and "SATURATE_CPU_ALLOCATOR='always'" in bad.stderr and "'import'" in bad.stderr
