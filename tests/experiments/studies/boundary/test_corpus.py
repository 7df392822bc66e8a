"""Boundary corpora: the built-in one, CSV ids, and one-line errors naming the file and item."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from psychoalign.errors import InputError
from psychoalign.experiments.studies.boundary.corpus import load_corpus


def test_builtin_corpus_has_ten_domains_of_twenty_and_four_categories() -> None:
    corpus = load_corpus("boundary")
    per_domain = Counter(i.domain for i in corpus.items)
    assert len(per_domain) >= 10 and min(per_domain.values()) >= 20
    assert {"medical", "legal", "creative_writing", "content_moderation", "competing_values", "dual_use"} <= set(
        per_domain
    )
    assert set(corpus.categories()) == {"benign", "borderline", "contested", "harmful"}
    assert len({i.id for i in corpus.items}) == len(corpus.items)
    assert corpus.licence and corpus.source
    assert len(corpus.subset(3).items) == 3 * len(per_domain)


@pytest.mark.parametrize(
    ("text", "suffix", "message"),
    [
        ("items: [{domain: a, category: b}]", ".yaml", "item 1 .*request"),
        ("- {domain: a, category: b, request: x, colour: red}", ".yaml", "item 1"),
        (
            "- {id: x, domain: a, category: b, request: r}\n- {id: x, domain: a, category: b, request: s}",
            ".yaml",
            "duplicate id",
        ),
        ("items: [", ".yaml", "invalid YAML"),
        ('{"domain": "a"}\nnot json', ".jsonl", r":2: not JSON"),
        ("[]", ".json", "no items"),
        ("request,domain,category\n   ,a,b\n", ".csv", "blank"),
    ],
)
def test_bad_corpora_give_one_line_errors_with_file_and_item(
    tmp_path: Path, text: str, suffix: str, message: str
) -> None:
    path = tmp_path / f"c{suffix}"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        load_corpus(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    with pytest.raises(InputError, match="does not exist"):
        load_corpus(tmp_path / "missing.yaml")


def test_csv_corpus_gets_default_ids(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("request,domain,category\nHow do I boil an egg?,cooking,benign\nAnd pasta?,cooking,benign\n")
    corpus = load_corpus(path)
    assert [i.id for i in corpus.items] == ["cooking-001", "cooking-002"] and corpus.name == "c"
