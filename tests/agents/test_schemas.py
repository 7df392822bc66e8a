"""Verdict parsing: the read form's table gives what the spelled-out rule gives, for any text."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from psychoalign.agents.schemas import Verdict, parse_verdict


def _rule(value: Any) -> Verdict:
    """The rule as docs state it: NFKC, case-folded, letters and digits only, words joined by
    ``_`` and upper-cased; a verdict's value or an alias, else VETOED (fail closed)."""
    words = "_".join(re.findall(r"[a-z0-9]+", unicodedata.normalize("NFKC", str(value)).casefold())).upper()
    aliases = {"APPROVE": Verdict.APPROVED, "CONDITIONALLY_APPROVED": Verdict.CONDITIONAL, "VETO": Verdict.VETOED}
    return next((v for v in Verdict if v.value == words), aliases.get(words, Verdict.VETOED))


SPELLINGS = [
    "APPROVED", "approved", " Approved ", "Approve", "ＡＰＰＲＯＶＥＤ", "CONDITIONAL", "Conditional",
    "conditionally approved", "CONDITIONALLY_APPROVED", "VETO", "vetoed", "VETO D", "APPROVED.",
    "conditional-approved", "looks fine", "", None, 3, Verdict.CONDITIONAL,
]  # fmt: skip


def test_known_spellings_read_as_the_rule_says() -> None:
    for value in SPELLINGS:
        assert parse_verdict(value) is _rule(value), value


@given(st.one_of(st.text(max_size=30), st.sampled_from(["APPROVED", "VETOED", "CONDITIONAL", "APPROVE", "VETO"])))
def test_any_text_reads_as_the_rule_says(value: str) -> None:
    assert parse_verdict(value) is _rule(value)
