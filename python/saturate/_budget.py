"""Memory sizes as the command line takes them: 512MiB, 2GiB, 1.5GB, bytes, or a fraction."""
from __future__ import annotations

from typing import Optional, Union

from . import _saturate as _C

Size = Union[int, float, str, None]


def to_bytes(size: Size, device: str, name: str = "memory_budget") -> int:
    """Bytes for `size` on `device` (0 for None). A float in (0, 1) is a fraction of the device."""
    if size is None:
        return 0
    if isinstance(size, bool):
        raise ValueError(f"{name}={size!r}: give bytes (int), a size like '512MiB', or a fraction like 0.9")
    if isinstance(size, int):
        if size <= 0:
            raise ValueError(f"{name}={size}: a budget must be positive (bytes), e.g. 512 * 2**20 or '512MiB'")
        return int(_C.parse_memory_size(str(size), name)[0])  # the command line's grammar and range
    text = repr(size) if isinstance(size, float) else str(size)
    value, fraction = _C.parse_memory_size(text, name)
    if fraction > 0:
        return int(fraction * _C.device_capacity(device))
    return int(value)


def current_cpu_budget() -> Optional[int]:
    b = _C.cpu_counters()["budget_bytes"]
    return b or None
