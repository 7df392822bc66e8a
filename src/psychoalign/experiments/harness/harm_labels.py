"""The labelled answers the harm judge is picked and measured on.

* :func:`load_harm_labelled` (:data:`HARM_SOURCES`): XSTest v2 completions with the human label
  full compliance and HarmBench's compliant answers, minus everything the embedded classifier was
  trained or validated on. On an endpoint, ``harm: auto`` picks its prompt on a seeded sample of
  these (:data:`PICK_N` rows, :func:`pick_rows`).
* :func:`load_jbb_harm_rows` (:data:`JBB_HARM_SOURCE`): JailbreakBench's human-labelled jailbreak
  responses, the ones the rule refusal judge does not call refused (the answers a harm judge is
  asked about); positive = jailbroken by the annotators' majority. Nothing here was fitted,
  tuned or picked on them: every harm judge's agreement in a run is measured on these when the
  data folder has them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...datasets import DATA_HINT
from ...errors import InputError
from ...judges.harm_pick import LabelledHarm
from ...judges.jailbreak_eval import REL as JBB_FILE
from ...judges.jailbreak_eval import load_jbb_judge_set
from ...models.refusal_rules import classify_refusal
from ...textio import csv_reader, read_jsonl_objects

__all__ = [
    "FILES",
    "HARM_SOURCES",
    "JBB_HARM_SOURCE",
    "completion_rows",
    "load_harm_labelled",
    "load_jbb_harm_rows",
    "pick_rows",
    "source_files",
]

FILES = ("xstest/xstest_v2_completions_llama2orig.csv", "xstest/xstest_v2_completions_mistralinstruct.csv")
#: Rows the prompt of ``harm: auto`` is picked on (each candidate judges all of them once).
PICK_N = 60
JBB_HARM_SOURCE = (
    "JailbreakBench judge-comparison responses (3 human labels each, majority vote; positive: jailbroken) that the "
    "rule refusal judge does not call refused: held out from every harm judge's training, threshold and pick"
)


def completion_rows(data_dir: Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    """Every row of the XSTest v2 completion files (:data:`FILES`), in order: the file (relative to
    the data folder), where the row is (``path:line``, for errors) and the row. A missing file is
    an error naming it."""
    for rel in FILES:
        path = data_dir / rel
        if not path.is_file():
            raise InputError(f"calibration file {path} is missing", hint=DATA_HINT)
        for i, row in enumerate(csv_reader(path, what="calibration file"), start=2):
            yield rel, f"{path}:{i}", row


HARM_SOURCES = (
    "XSTest v2 completions with the human label full compliance (Llama-2 and Mistral-Instruct): harmful when "
    "the prompt is one of XSTest's unsafe ones, harmless when it is a safe look-alike; HarmBench compliant "
    "answers of the many-shot file: harmful. Items in the embedded classifier's training or validation data "
    "are left out."
)


SHOTS = "many_shot_jailbreaking/many_shot_examples_filtered.jsonl"


def source_files(data_dir: Path) -> list[str]:
    """Every data-folder file :func:`load_harm_labelled` (hence :func:`pick_rows`) reads, relative
    to ``data_dir``: the labelled files, and the corpus whose training texts it leaves out."""
    from ...models.safety_corpus import corpus_files

    return sorted({*FILES, SHOTS, *corpus_files(data_dir)})


def load_harm_labelled(data_dir: Path) -> list[dict[str, Any]]:
    """Labelled non-refusals for the harm judge (:data:`HARM_SOURCES`), minus every text the
    embedded classifier was trained or tuned on (its corpus, ``models/safety_corpus.py``), so the
    classifier tier is measured out of sample. The harm judge only ever sees non-refusals, so
    refusals are not part of the set. AdvBench ``target`` strings ("Sure, here is …") are not
    used: they carry no content, so a judge of real uplift is right to call them harmless."""
    from ...models.safety_corpus import load_corpus

    seen = {ex.text.strip() for ex in load_corpus(data_dir) if ex.split in ("train", "val")}
    rows: list[dict[str, Any]] = []
    for rel, _, row in completion_rows(data_dir):
        if not (row.get("final_label") or "").startswith("1_") or row["completion"].strip() in seen:
            continue
        unsafe = (row.get("type") or "").startswith("contrast")
        rows.append(
            {
                "id": f"{rel}:{row['id']}",
                "source": f"xstest-{'unsafe' if unsafe else 'safe'}-compliance",
                "goal": row["prompt"],
                "response": row["completion"],
                "harmful": unsafe,
            }
        )
    shots = data_dir / SHOTS
    if not shots.is_file():
        raise InputError(f"calibration file {shots} is missing", hint=DATA_HINT)
    for n, shot in read_jsonl_objects(shots, what="calibration file"):
        answer = str(shot.get("assistant", "")).strip()
        if answer and answer not in seen:
            rows.append(
                {
                    "id": f"{shots.name}:{n}",
                    "source": "harmbench-compliance",
                    "goal": str(shot.get("user", "")),
                    "response": answer,
                    "harmful": True,
                }
            )
    return rows


def load_jbb_harm_rows(data_dir: Path) -> list[dict[str, Any]] | None:
    """JailbreakBench's labelled responses a harm judge would be asked about (see the module doc),
    or None when the data folder lacks the file."""
    if not (data_dir / JBB_FILE).is_file():
        return None
    return [
        {
            "id": f"jbb:{item.index}",
            "source": "jailbreakbench",
            "goal": item.goal,
            "response": item.response,
            "harmful": item.human,
        }
        for item in load_jbb_judge_set(data_dir)
        if not classify_refusal(item.response).refused
    ]


def pick_rows(data_dir: Path, seed: int) -> list[LabelledHarm]:
    """The seeded sample of :func:`load_harm_labelled` that ``harm: auto`` picks its prompt on."""
    rows = load_harm_labelled(data_dir)
    sample = random.Random(f"{seed}:harm-pick").sample(rows, min(PICK_N, len(rows)))
    return [LabelledHarm(goal=r["goal"], response=r["response"], harmful=r["harmful"]) for r in sample]
