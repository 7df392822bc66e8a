"""How a p-value is written for a reader (reports, the terminal).

Below :data:`P_FLOOR` a p-value is shown as ``< 1e-06``, not as its digits: at that size it says
only "far beyond any threshold", and its exact value rests on the tails of an approximation
(normal, chi-square, F) that no finite sample pins down, so ``p = 2.7e-42`` reads as a precision
the data do not have. A p of exactly 0 (an asymptotic formula's underflow) is shown the same way:
no finite sample gives p = 0. The JSON reports keep the computed value.
"""

from __future__ import annotations

import math

__all__ = ["P_FLOOR", "P_FLOOR_NOTE", "p_text", "p_value"]

#: The smallest p-value written out; anything smaller is "< 1e-06".
P_FLOOR = 1e-6
#: One sentence for a report's methods: why small p-values are shown as a bound.
P_FLOOR_NOTE = (
    f"p-values below {P_FLOOR:.0e} are shown as < {P_FLOOR:.0e}: their digits rest on the far tail of an "
    "approximation, not on the data (the JSON keeps the computed value)."
)


def p_value(p: float | None, missing: str = "—") -> str:
    """The value alone, for a table cell: ``0.023``, ``0.00041``, ``< 1e-06``; ``missing`` for None/NaN."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return missing
    p = float(p)
    if p < P_FLOOR:
        return f"< {P_FLOOR:.0e}"
    return f"{p:.2g}" if p < 1e-3 else f"{p:.3f}"


def p_text(p: float | None, name: str = "p", missing: str = "—") -> str:
    """The phrase for running text: ``p = 0.023`` or ``p < 1e-06`` (``name`` for e.g. "permutation p")."""
    shown = p_value(p, missing)
    return f"{name} {shown}" if shown.startswith("<") else f"{name} = {shown}"
