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
