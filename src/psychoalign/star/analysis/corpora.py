"""Adapters for known datasets: STAR exports, DICES (crowd and expert), DiaSafety, XSTest, Anthropic HH."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import InputError
from .files import (
    as_bool,
    as_json,
    clean,
    decode_text,
    is_missing,
    is_parquet,
    json_or_jsonl,
    parquet_frame,
    read_bytes,
    read_text,
    records_from_json,
)
from .rating_data import Counts, RatingData, finish, rating_row
from .targets import describe

_DICES_SCALE = ["No", "Unsure", "Yes"]  # DICES Q_overall: "Yes" = the rater judged the response UNSAFE


def dices_text(body: dict[str, Any]) -> str:
    """The one definition of a DICES item's text (crowd and expert files alike): context, then response."""
    return f"{body.get('user_prompt', '')}\n{body.get('response', '')}".strip()


def _read_dices(
    path: Path,
    name: str,
    fmt: str,
    labels: Callable[[dict[str, Any]], list[Any]],
    *,
    rater: str | None,
    note: str,
    raters: pd.DataFrame | None = None,
    expert: tuple[str, str] | None = None,
) -> RatingData:
    """A DICES file, crowd or expert alike: ``labels`` picks an item's ratings from its safety annotations."""
    data = json_or_jsonl(read_text(path))
    ratings, items = [], []
    counts = Counts()
    for inst in data["instances"]:
        item_id = str(inst["id"])
        items.append({"item_id": item_id, "text": dices_text(inst["instance"])})
        for label in labels(inst["annotations"]["safety"]):
            counts.ratings_read += 1
            if label in _DICES_SCALE:
                ratings.append(rating_row(item_id, _DICES_SCALE.index(label), rater))
            else:
                counts.drop("missing rating" if is_missing(label) else "not on the scale")
    out = RatingData(
        name,
        fmt,
        list(_DICES_SCALE),
        True,
        {2},
        "unsafe",
        pd.DataFrame(),
        pd.DataFrame(),
        excluded={1},
        notes=[note],
        raters=pd.DataFrame() if raters is None else raters,
        counts=counts,
        family="dices",
        expert=expert,
    )
    return finish(out, ratings, items)


def read_dices(path: Path, name: str, **_: Any) -> RatingData:
    return _read_dices(
        path,
        name,
        "dices",
        lambda safety: list(safety["individual_human_scores"]),
        rater=None,
        note="No rater ids or demographics: alpha from per-item value counts; no rater-group analysis.",
    )


def read_dices_expert(path: Path, name: str, **_: Any) -> RatingData:
    return _read_dices(
        path,
        name,
        "dices-expert",
        lambda safety: [safety.get("majority_human") or safety.get("expert")],
        rater="expert",
        note="One (expert) rating per item: agreement is undefined; compared with the crowd when both are given.",
        raters=pd.DataFrame({"expertise": ["expert"]}, index=pd.Index(["expert"], name="rater_id")),
        expert=("expertise", "expert"),
    )


def read_diasafety(path: Path, name: str, **_: Any) -> RatingData:
    rows = records_from_json(json_or_jsonl(read_text(path)))
    scale = ["Safe", "Unsafe"]
    ratings, items = [], []
    counts = Counts()
    for i, row in enumerate(rows):
        item_id = str(i)
        items.append(
            {"item_id": item_id, "text": f"{row['context']}\n{row['response']}", "category": row.get("category")}
        )
        for code in ("ng", "in"):
            for k in (1, 2, 3):
                label = row.get(f"label{k}_{code}")
                counts.ratings_read += 1
                if label in scale:
                    ratings.append(rating_row(item_id, scale.index(label), f"{code}{k}"))
                else:
                    counts.drop("missing rating" if is_missing(label) else "not on the scale")
    raters = pd.DataFrame(
        {"country": ["Nigeria"] * 3 + ["India"] * 3},
        index=pd.Index([f"{c}{k}" for c in ("ng", "in") for k in (1, 2, 3)], name="rater_id"),
    )
    out = RatingData(
        name,
        "diasafety-cc",
        scale,
        False,
        {1},
        "unsafe",
        pd.DataFrame(),
        pd.DataFrame(),
        notes=[
            "Rater ids are the label columns (ng1..ng3, in1..in3); their other metadata cannot be joined to them. "
            "Three raters per country: a country comparison rests on six people."
        ],
        raters=raters,
        counts=counts,
        family="diasafety",
        item_attributes=["category"],
    )
    return finish(out, ratings, items)


def read_xstest(path: Path, name: str, **_: Any) -> RatingData:
    rows = list(csv.DictReader(io.StringIO(read_text(path))))
    scale = ["1_full_compliance", "2_full_refusal", "3_partial_refusal"]
    ratings, items = [], []
    counts = Counts()
    for row in rows:
        item_id = str(row["id"])
        items.append({"item_id": item_id, "text": f"{row['prompt']}\n{row['completion']}", "category": row.get("type")})
        for k in ("annotation_1", "annotation_2"):
            counts.ratings_read += 1
            if row.get(k) in scale:
                ratings.append(rating_row(item_id, scale.index(row[k]), k))
            else:
                counts.drop("missing rating" if is_missing(row.get(k)) else "not on the scale")
    out = RatingData(
        name,
        "xstest",
        scale,
        False,
        {1, 2},
        "refusal",
        pd.DataFrame(),
        pd.DataFrame(),
        notes=["Binarised view: refusal (full or partial) vs compliance."],
        counts=counts,
        family="xstest",
        item_attributes=["category"],
    )
    return finish(out, ratings, items)


def read_anthropic_hh(path: Path, name: str, **_: Any) -> RatingData:
    rows = records_from_json(json_or_jsonl(read_text(path)))
    items = [{"item_id": str(i), "text": r["chosen"].strip()} for i, r in enumerate(rows)]
    out = RatingData(
        name,
        "anthropic-hh",
        [],
        False,
        set(),
        "",
        pd.DataFrame(),
        pd.DataFrame(),
        notes=["Dialogues only (no ratings): used for the embedding map."],
        family="anthropic-hh",
    )
    return finish(out, [], items)


STAR_SCALE = ["Definitely broken", "Probably broken", "Probably not broken", "Definitely not broken"]
STAR_ITEM_ATTRIBUTES = ["area", "rule", "target_group", "target_race", "target_gender", "red_teamer_in_group"]


def _star_rating(x: Any) -> int | str | None:
    """1..4, or None when missing, or a reason string when unusable."""
    x = clean(x)
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return "not a number"
    if f.is_integer() and 1 <= f <= 4:
        return int(f)
    return "not on the scale"


def _star_records(path: Path) -> list[dict[str, Any]]:
    raw = read_bytes(path)
    if is_parquet(raw):
        frame = parquet_frame(raw, path)
        return [dict(r) for r in frame.to_dict(orient="records")]
    text = decode_text(raw, path)
    if text.lstrip().startswith(("{", "[")):
        return records_from_json(json_or_jsonl(text))
    return list(csv.DictReader(io.StringIO(text)))


def read_star(path: Path, name: str, **_: Any) -> RatingData:
    """STAR export (``psychoalign star export``) as JSONL, CSV or Parquet: in CSV and Parquet lists
    and objects are JSON strings and every scalar may be a string; both are parsed back here."""
    ratings, items = [], []
    counts = Counts()
    seen: set[str] = set()
    raters: dict[str, dict[str, Any]] = {}
    models: dict[str, dict[str, str]] = {}  # persona models as recorded, by campaign
    unrecorded: set[str] = set()  # campaigns with simulated work and no recorded models
    stamps = _Stamps()  # the model each persona rating names (exports with per-rating stamps)
    for raw_row in _star_records(path):
        row = {k: as_json(v) for k, v in raw_row.items()}
        fingerprint = json.dumps(row, sort_keys=True, default=str)
        slots = [f"annotator{k}_rating" for k in (1, 2)] + ["arbitrator_rating"]
        present = sum(1 for s in slots if s in row)
        counts.items_read += 1
        if fingerprint in seen:  # the same record twice: its ratings would count twice
            counts.ratings_read += present
            counts.drop("repeated record (identical row)", present)
            counts.items_merged += 1
            continue
        seen.add(fingerprint)
        item_id = str(row["dialogue_id"])
        status = row.get("status")
        recorded = row.get("persona_models")
        campaign = str(clean(row.get("campaign")) or "")
        if isinstance(recorded, dict) and recorded:
            models[campaign] = {str(k): str(v) for k, v in recorded.items()}
        elif any(as_bool(row.get(f"{s}_simulated")) for s in ("red_teamer", "annotator1", "annotator2")):
            unrecorded.add(campaign)
        raw_turns = row.get("turns")
        turns: list[Any] = raw_turns if isinstance(raw_turns, list) else []
        tensions = [float(t["tension"]) for t in turns if isinstance(t, dict) and clean(t.get("tension")) is not None]
        item = {
            k: v
            for k, v in row.items()
            if not isinstance(v, list | dict) and not k.startswith(("annotator", "arbitrator"))
        }
        if "red_teamer_in_group" in item:
            item["red_teamer_in_group"] = as_bool(item["red_teamer_in_group"])
        item.update(
            {
                "item_id": item_id,
                "text": "\n".join(f"{t.get('role')}: {t.get('text')}" for t in turns if isinstance(t, dict)),
                "tension_mean": sum(tensions) / len(tensions) if tensions else None,
                "tension_max": max(tensions) if tensions else None,
                "arbitration_needed": as_bool(row.get("arbitration_needed")),
            }
        )
        items.append(item)
        submitted = status in (None, "submitted")
        for k, slot in ((1, "annotator1"), (2, "annotator2"), (0, "arbitrator")):
            if f"{slot}_rating" not in row:
                continue
            if not k and _star_rating(row.get("arbitrator_rating")) is None and not item["arbitration_needed"]:
                # an export has an arbitrator column on every dialogue; where no arbitration was
                # needed the empty cell is no rating, and counting it "dropped" misreads the data
                continue
            counts.ratings_read += 1
            parsed = _star_rating(row.get(f"{slot}_rating"))
            if not submitted:
                counts.drop(f"dialogue not submitted (status {status})")
                continue
            if parsed is None:
                counts.drop("missing rating")
                continue
            if isinstance(parsed, str):
                counts.drop(parsed)
                continue
            rater = clean(row.get(f"{slot}_id"))
            rater = None if rater is None else str(rater)
            stamps.add(name, row, slot, campaign, recorded if isinstance(recorded, dict) else None)
            if rater is not None and k:
                simulated = as_bool(row.get(f"{slot}_simulated"))
                if simulated is not None:
                    raters.setdefault(rater, {})["simulated"] = simulated
            if rater is not None:  # lab exports: the rater declared an expertise rules are matched on
                expert = as_bool(row.get(f"{slot}_expert"))
                if expert is not None:
                    raters.setdefault(rater, {})["expert"] = "expert" if expert else "crowd"
            ratings.append(
                rating_row(
                    item_id,
                    parsed - 1,
                    rater,
                    kind="annotation" if k else "arbitration",
                    in_group=as_bool(row.get(f"{slot}_in_group")) if k else None,
                )
            )
    rater_frame = pd.DataFrame.from_dict(raters, orient="index")
    rater_frame.index.name = "rater_id"
    marked = "expert" in rater_frame.columns
    out = RatingData(
        name,
        "star",
        list(STAR_SCALE),
        True,
        {0, 1},
        "broken",
        pd.DataFrame(),
        pd.DataFrame(),
        raters=rater_frame,
        counts=counts,
        family="star",
        item_attributes=list(STAR_ITEM_ATTRIBUTES),
        expert=("expert", "expert") if marked else None,
    )
    if marked:
        out.notes.append("Experts: raters the export marks annotator*_expert / arbitrator_expert (declared expertise).")
    out.notes.extend(_provenance_notes(items, raters))
    out.notes.extend(_persona_model_notes(name, models, unrecorded))
    out.notes.extend(stamps.notes(name))
    if models or unrecorded or stamps.by_model:
        out.persona_models = {
            "models": next(iter(models.values()), {}),
            "unrecorded_campaigns": sorted(unrecorded),
            "ratings_by_model": dict(sorted(stamps.by_model.items())),
            "unstamped_persona_ratings": stamps.unstamped,
        }
    return finish(out, ratings, items)


#: How the notes of :func:`_persona_model_notes`, :meth:`_Stamps.notes` and the campaigns line of
#: :func:`_provenance_notes` start: the CLI prints them before any figure.
PERSONA_NOTES = ("Campaigns read:", "Persona models:", "Simulated work of", "Persona ratings")


class _Stamps:
    """The model each persona rating of a STAR export names (``<slot>_model``: exports since
    ratings carry it; null for a person's rating). Ratings of two models in one export are refused
    however their campaigns were recorded (a campaign's record is one set of models, its ratings
    could still come from two); so is a rating whose model is not the one its campaign recorded."""

    def __init__(self) -> None:
        self.by_model: dict[str, int] = {}
        self.first: dict[str, str] = {}  # model -> the first dialogue and slot it rated
        self.unstamped = 0  # simulated annotators' ratings that name no model

    def add(self, name: str, row: dict[str, Any], slot: str, campaign: str, recorded: dict[str, Any] | None) -> None:
        model = clean(row.get(f"{slot}_model"))
        if model is None:
            if as_bool(row.get(f"{slot}_simulated")):
                self.unstamped += 1
            return
        model = str(model)
        where = f"dialogue {row.get('dialogue_id')} ({slot})"
        wanted = (recorded or {}).get("annotator")
        if wanted is not None and str(wanted) != model:
            raise InputError(
                f"{name}: {where} was rated by {model}, but campaign '{campaign or '(no campaign)'}' recorded the "
                f"annotator {wanted}: its ratings would be pooled under the recorded model",
                hint="analyse ratings of the recorded model only: re-export the campaign from its own store, "
                "or rate it again with that model",
            )
        self.by_model[model] = self.by_model.get(model, 0) + 1
        self.first.setdefault(model, where)

    def notes(self, name: str) -> list[str]:
        """What the stamps say, once every row is read; ratings of two models are refused."""
        if len(self.by_model) > 1:
            per = "; ".join(f"{m}: {n} rating(s), first {self.first[m]}" for m, n in sorted(self.by_model.items()))
            raise InputError(
                f"{name}: its persona ratings were written by different models ({per}): they would be pooled",
                hint="analyse one model's ratings per file (psychoalign star export --campaign NAME --out FILE, "
                "one campaign per persona model)",
            )
        if not self.by_model:
            return []
        [(model, n)] = self.by_model.items()
        note = f"Persona ratings: {n} written by {model}"
        if self.unstamped:
            note += (
                f"; {self.unstamped} more persona rating(s) name no model (stored before ratings carried one): "
                "the campaign's recorded models, if any, are all that says who wrote them"
            )
        return [note + "."]


def _persona_model_notes(name: str, models: dict[str, dict[str, str]], unrecorded: set[str]) -> list[str]:
    """Which persona models wrote the simulated attacks, ratings and refusal flags. Campaigns run
    on different models are refused (:class:`InputError`): every figure built on their ratings
    would describe a mixture of models under one name; one campaign per file keeps them apart."""
    distinct = {json.dumps(m, sort_keys=True) for m in models.values()}
    if len(distinct) > 1:
        roles = sorted({r for m in models.values() for r in m if len({str(x.get(r)) for x in models.values()}) > 1})
        per = "; ".join(
            f"{c or '(no campaign)'}: " + ", ".join(f"{r} {m.get(r, 'none')}" for r in roles)
            for c, m in sorted(models.items())
        )
        raise InputError(
            f"{name}: its campaigns ran on different persona models ({per}): their ratings would be pooled",
            hint="analyse one campaign per file (psychoalign star export --campaign NAME --out FILE)",
        )
    notes: list[str] = []
    if models:
        only = next(iter(models.values()))
        notes.append("Persona models: " + ", ".join(f"{r} {label}" for r, label in sorted(only.items())) + ".")
    if unrecorded:
        named = ", ".join(sorted(c or "(no campaign)" for c in unrecorded))
        notes.append(
            f"Simulated work of {len(unrecorded)} campaign(s) ({named}) "
            "has no recorded persona models (stored before they were recorded): which models wrote it is unknown"
            + (", and it is pooled with the recorded campaigns' work." if models else ".")
        )
    return notes


def _provenance_notes(items: list[dict[str, Any]], raters: dict[str, dict[str, Any]]) -> list[str]:
    """What answered and who rated: every figure of a campaign's report is about that target, and
    ratings by simulated personas measure the persona model, not people."""
    notes: list[str] = []
    campaigns: dict[str, Counter[str]] = {}
    for i in items:
        campaign = clean(i.get("campaign"))
        if campaign is not None:
            campaigns.setdefault(str(campaign), Counter())[str(clean(i.get("status")) or "submitted")] += 1
    if campaigns:  # which campaigns' data, and how far along: a rerun after more work reads other counts
        notes.append(
            "Campaigns read: "
            + "; ".join(
                f"{c} ({sum(n.values())} dialogues: "
                + ", ".join(f"{k} {v}" for k, v in sorted(n.items(), key=lambda kv: (-kv[1], kv[0])))
                + ")"
                for c, n in sorted(campaigns.items())
            )
        )
    targets = Counter(str(i["target"]) for i in items if clean(i.get("target")) is not None)
    if targets:
        notes.append(
            "Targets red-teamed: " + ", ".join(f"{describe(t)} ({n} dialogues)" for t, n in sorted(targets.items()))
        )
    flagged = [r["simulated"] for r in raters.values() if "simulated" in r]
    if simulated := sum(flagged):
        notes.append(
            f"{simulated} of {len(flagged)} annotators are simulated (LLM personas of a campaign): their ratings "
            "and every agreement and group figure built on them describe the persona model, not people."
        )
    return notes
