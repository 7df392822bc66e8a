"""Dialogues stored before STAR target labels carried a version keep the legacy label
``psychoalign:<framework>``. A campaign's export mixing them with newer dialogues was refused as two
targets with no way forward (exporting the one campaign again gave the same file). Now the legacy
label reads as a target of unknown version, and the user either analyses one target (``--target``)
or attaches the legacy dialogues to the current target explicitly (``--attach-legacy``), which the
report records; nothing is pooled silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from psychoalign.errors import InputError
from psychoalign.star.analysis import analyze, load, write_report
from psychoalign.star.analysis.h1 import h1_section
from psychoalign.star.analysis.stats import ingroup_section
from psychoalign.star.analysis.targets import attach_legacy, select_target
from tests.cli.test_main import cli

LEGACY = "psychoalign:general"
CURRENT = "psychoalign:general@1.0#0123456789ab"


def _export(path: Path, n: int = 40, *, legacy: int = 20, unlabelled: int = 0) -> Path:
    """One campaign's export: the first ``legacy`` dialogues stored under the legacy label, the
    rest under the current one (the last ``unlabelled`` without a target)."""
    rows = []
    for i in range(n):
        target: str | None = LEGACY if i < legacy else CURRENT
        if i >= n - unlabelled:
            target = None
        rows.append(
            {
                "dialogue_id": f"d{i}",
                "campaign": "c1",
                "status": "submitted",
                "target": target,
                "red_teamer_id": f"r{i % 4}",
                "red_teamer_in_group": bool(i % 2),
                "target_group": "women" if i % 3 else "men",
                "turns": [
                    {"role": "red_teamer", "text": f"attack {i}"},
                    {"role": "target", "text": f"reply {i}", "tension": (i % 7) / 7},
                ],
                "annotator1_id": "a1",
                "annotator1_rating": 1 + i % 4,
                "annotator1_in_group": True,
                "annotator2_id": "a2",
                "annotator2_rating": 1 + (i * 3) % 4,
                "annotator2_in_group": False,
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_mixed_legacy_export_is_refused_with_the_way_forward(tmp_path: Path) -> None:
    data = load(_export(tmp_path / "c1.jsonl"), "star")
    for got in (
        ingroup_section(data)["attack_success_by_red_teamer"],
        h1_section(data, n_boot=50, n_perm=50),
    ):
        assert got["computable"] is False
        assert f"2 targets ({LEGACY} (legacy label: version and models unknown), {CURRENT})" in got["reason"]
        assert "--target LABEL" in got["reason"]
        assert f"--attach-legacy '{LEGACY}={CURRENT}'" in got["reason"]
    assert any("legacy label: version and models unknown) (20 dialogues)" in n for n in data.notes)


def test_attaching_legacy_dialogues_is_recorded_and_unblocks_the_target_figures(tmp_path: Path) -> None:
    data = attach_legacy(load(_export(tmp_path / "c1.jsonl"), "star"), [f"{LEGACY}={CURRENT}"])
    assert set(data.items["target"]) == {CURRENT}
    assert data.target_audit == [
        {
            "action": "attach_legacy",
            "from": LEGACY,
            "to": CURRENT,
            "dialogues": 20,
            "basis": "the user's assertion (--attach-legacy); the export does not show the version or models",
        }
    ]
    assert ingroup_section(data)["attack_success_by_red_teamer"]["computable"] is True
    assert h1_section(data, n_boot=50, n_perm=50)["computable"] is True

    out = tmp_path / "r"
    write_report(analyze([data], n_boot=20, embed=False), [data], out)
    entry = json.loads((out / "report.json").read_text())["datasets"]["c1"]
    assert entry["target_audit"] == data.target_audit
    page = (out / "report.html").read_text()
    assert (
        f"20 dialogues labelled {LEGACY} (legacy label: version and models unknown) are analysed as {CURRENT}" in page
    )


def test_one_target_is_analysed_on_its_own_and_the_rest_counted(tmp_path: Path) -> None:
    data = select_target(load(_export(tmp_path / "c1.jsonl", unlabelled=5), "star"), LEGACY)
    assert len(data.items) == 20 and set(data.items["target"]) == {LEGACY}
    assert set(data.ratings["item_id"]) == {f"d{i}" for i in range(20)}
    counts = data.counts
    assert counts.ratings_read == counts.ratings_kept + sum(counts.dropped.values())
    assert counts.dropped["dialogue of another target (--target)"] == 40  # 20 dialogues, 2 ratings each
    assert data.target_audit[-1] == {
        "action": "select",
        "target": LEGACY,
        "dialogues": 20,
        "left_out": {CURRENT: 15},
        "unlabelled": 5,
    }
    # a legacy target on its own is one target (of unknown version): its figures are computed
    assert ingroup_section(data)["attack_success_by_red_teamer"]["computable"] is True


@pytest.mark.parametrize(
    ("pair", "says"),
    [
        ("psychoalign:general", "is not LEGACY=LABEL"),
        (f"{CURRENT}={CURRENT}", "is not a legacy label"),
        (f"psychoalign:medical={CURRENT}", "no dialogue of c1 is labelled 'psychoalign:medical'"),
        (f"{LEGACY}=psychoalign:medical@1.0#0123456789ab", "is not a current label of the framework 'general'"),
        (f"{LEGACY}=psychoalign:general@2.0#0123456789ab", "no dialogue of c1 red-teamed"),
    ],
)
def test_an_attachment_the_data_does_not_support_is_refused(tmp_path: Path, pair: str, says: str) -> None:
    data = load(_export(tmp_path / "c1.jsonl"), "star")
    with pytest.raises(InputError, match="--attach-legacy") as err:
        attach_legacy(data, [pair])
    assert says in str(err.value)
    assert data.target_audit == [] and set(data.items["target"]) == {LEGACY, CURRENT}


def test_cli_attach_legacy_and_target(tmp_path: Path) -> None:
    path = _export(tmp_path / "c1.jsonl")
    done = cli(
        "star", "analyze", str(path), "--out", str(tmp_path / "r"), "--no-embed", "--bootstrap", "20",
        "--attach-legacy", f"{LEGACY}={CURRENT}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"are analysed as {CURRENT} on the user's word" in done.stderr
    entry = json.loads((tmp_path / "r" / "report.json").read_text())["datasets"]["c1"]
    assert entry["ingroup"]["attack_success_by_red_teamer"]["computable"] is True
    assert entry["target_audit"][0]["action"] == "attach_legacy"

    wrong = cli("star", "analyze", str(path), "--out", str(tmp_path / "x"), "--no-embed", "--target", "nope")
    assert wrong.returncode == 2
    lines = [ln for ln in wrong.stderr.splitlines() if ln.strip()]
    # one line, and the labels the user must type are shown as they are (not taken for a URL password)
    assert len(lines) == 1 and f"its targets: {LEGACY}, {CURRENT}" in lines[0], wrong.stderr
