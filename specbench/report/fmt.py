"""Numbers as text, shared by the report, its plots, compare and history. `—` stands for an undefined value."""

from __future__ import annotations

import math
from typing import Any

from specbench.shared.schema import NATURAL_OUTPUT

UNDEFINED = "—"
NOT_MEASURED = "n/m"  # a cell above its variant's max_concurrency: not measured by design, never a failure


def caps_note(caps: dict[str, int]) -> str:
    """Explains NOT_MEASURED once: which variants serve at most how many requests at once ("" when none)."""
    if not caps:
        return ""
    which = ", ".join(f"{v} {n}" for v, n in caps.items())
    return (f"{NOT_MEASURED} = not measured: the variant's server runs at most max_concurrency requests at once "
            f"({which}), so the points above it were not measured for it (not a failure).")


def num(x: Any) -> float:
    """Any cell value as a float; NaN when missing, empty or not a number."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def fmt(x: Any, digits: int = 2) -> str:
    v = num(x)
    return UNDEFINED if math.isnan(v) else f"{v:.{digits}f}"


def fmt_interval(value: Any, low: Any, high: Any, digits: int = 2) -> str:
    """`1.42 [1.31, 1.55]`; the bare value when the interval is undefined; `—` when the value is."""
    v, lo, hi = num(value), num(low), num(high)
    if math.isnan(v):
        return UNDEFINED
    if math.isnan(lo) or math.isnan(hi):
        return f"{v:.{digits}f}"
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def fmt_len(x: Any) -> str:
    """A length or concurrency as an integer; `-` when undefined (as in point ids)."""
    v = num(x)
    return "-" if math.isnan(v) else str(int(v))


def fmt_output_len(x: Any) -> str:
    """An output length as printed everywhere: `natural` for records.NATURAL_OUTPUT (each request its
    prompt's reference answer length), else as fmt_len."""
    return "natural" if num(x) == NATURAL_OUTPUT else fmt_len(x)


def fmt_temp(x: Any) -> str:
    """A temperature in its shortest form: `0`, `0.7`."""
    return f"{num(x):g}"


def fmt_span(lo: float, hi: float) -> str:
    """`1.10–1.35`, or one number when the ends agree to two decimals."""
    return fmt(lo) if abs(hi - lo) < 0.005 else f"{fmt(lo)}–{fmt(hi)}"



def fmt_pct(x: Any, digits: int = 1) -> str:
    """A fraction as a percentage ("4.2%"); UNDEFINED when missing."""
    v = num(x)
    return UNDEFINED if math.isnan(v) else f"{100 * v:.{digits}f}%"
