"""The STAR store's pure decisions (``rules.py``)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from psychoalign.star.store import arbitration_needed


@settings(max_examples=40, deadline=None)
@given(a=st.integers(1, 4), b=st.integers(1, 4))
def test_arbitration_iff_two_steps_apart(a: int, b: int) -> None:
    assert arbitration_needed(a, b) == (abs(a - b) >= 2)
