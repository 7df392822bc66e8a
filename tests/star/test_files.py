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


@pytest.mark.parametrize(
    "text",
    [
        " =cmd|' /C calc'!A0",
        "  +SUM(1,1)",
        "\n-2+3",
        "\x0b@SUM(A1)",
        "\u00a0=1+1",
        "\u3000\uff1d1",
        "\u200b=1",
        "\ufeff-x",
    ],
)
def test_a_formula_behind_whitespace_control_or_format_characters_is_neutralised_too(text: str) -> None:
    """A spreadsheet trims leading blanks and shows no control or format character, so " =cmd"
    runs as "=cmd" does (OWASP CSV injection): each such cell gets the apostrophe as well."""
    assert spreadsheet_safe(text) == "'" + text


def test_a_number_written_as_text_and_plain_text_after_blanks_stay_as_they_are() -> None:
    for text in ("-1.5", " -2", "+3e5", "  plain", "\u200bword", "a =b", "   "):
        assert spreadsheet_safe(text) == text, text


def test_every_csv_writer_uses_the_one_check() -> None:
    """Each module that writes CSV neutralises with :func:`psychoalign.textio.spreadsheet_safe`
    (the experiment export, the STAR item table, the lab's exports, `star export`), so a cell
    that starts with a blank before a formula sign is made inert in all of them."""
    import csv
    import io

    from psychoalign.experiments.harness.export import cell_records, write_cells
    from psychoalign.experiments.harness.store import CellResult
    from psychoalign.star.analysis.items import neutralise
    from psychoalign.web.star.lead import tabular

    assert neutralise(" =HYPERLINK(1)") == "' =HYPERLINK(1)" and neutralise(-0.5) == "-0.5"
    cell = CellResult(
        run_id="r", key="k", system="s", benchmark="b", item_id=" =HYPERLINK(1)", status="failed", error="\t-x"
    )
    row = next(csv.DictReader(io.StringIO(write_cells(cell_records([cell]), "csv"))))
    assert row["item_id"] == "' =HYPERLINK(1)" and row["error"] == "'\t-x"

    text = tabular([{"a": " =1+1", "b": -3, "c": "\n@x", "d": "plain"}], "csv").decode()
    assert next(csv.DictReader(io.StringIO(text))) == {"a": "' =1+1", "b": "-3", "c": "'\n@x", "d": "plain"}
