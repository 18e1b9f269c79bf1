"""Every call into the C++ core passes here: a Python number the core's C++ type cannot hold (an int
past 64 bits, or past 32 bits where the core takes an int) becomes a ValueError naming the keyword,
its value and the range, instead of pybind11's raw "incompatible function arguments" TypeError.

The public functions check their own keywords' meaning (a positive batch, a fraction below 1) and
sizes go through the core's one size grammar (_budget.to_bytes); this is the net under all of them,
for every keyword of every call, present and future.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable, List

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)


def _too_large(name: str, value: Any) -> str:
    """Why `value` cannot reach C++, or '' when it can (or is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return ""
    for low, high, bits in (INT64 + (64,), INT32 + (32,)):
        if not low <= value <= high:
            return (f"{name}={value} is outside {low}..{high}, what saturate's core takes there ({bits}-bit); "
                    f"give a smaller value")
    return ""


def _explained(function: str, error: TypeError, args: tuple, kwargs: dict) -> Exception:
    named: List[str] = [_too_large(k, v) for k, v in kwargs.items()]
    named += [_too_large(f"argument {i + 1}", v) for i, v in enumerate(args)]
    # a 64-bit misfit is the cause for certain; a 32-bit one only when no 64-bit one is there
    wide = [n for n in named if "(64-bit)" in n]
    reasons = wide or [n for n in named if n]
    if not reasons:
        return error
    return ValueError(f"saturate ({function}): " + "; ".join(reasons))


def _guarded(function: Callable) -> Callable:
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except TypeError as e:
            if "incompatible function arguments" not in str(e):
                raise
            raise _explained(function.__name__, e, args, kwargs) from None
    return call


def guard(module: types.ModuleType) -> None:
    """Wraps each function of the extension `module` in place (once)."""
    if getattr(module, "_saturate_guarded", False):
        return
    for name in dir(module):
        value = getattr(module, name)
        if callable(value) and not isinstance(value, type) and not name.startswith("__"):
            setattr(module, name, _guarded(value))
    module._saturate_guarded = True
