"""STAR's file helpers: a CSV cell a spreadsheet would run as a formula is neutralised."""

from __future__ import annotations

import pytest

from psychoalign.star.files import spreadsheet_safe


@pytest.mark.parametrize("sign", ["=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20"])
def test_a_cell_starting_with_a_formula_sign_gets_an_apostrophe(sign: str) -> None:
    """The full-width forms (U+FF1D ＝, U+FF0B ＋, U+FF0D －, U+FF20 ＠) as their ASCII forms."""
    assert spreadsheet_safe(f'{sign}HYPERLINK("http://x","y")') == f'\'{sign}HYPERLINK("http://x","y")'
    assert spreadsheet_safe(f"a{sign}1") == f"a{sign}1"  # only at the start


def test_numbers_and_other_values_pass_unchanged() -> None:
    assert spreadsheet_safe(-1.5) == -1.5 and spreadsheet_safe(3) == 3 and spreadsheet_safe(None) is None
    assert spreadsheet_safe("plain text") == "plain text" and spreadsheet_safe("") == ""
