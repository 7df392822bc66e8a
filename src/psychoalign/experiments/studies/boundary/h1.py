"""H1: do requests with high tension T have higher human inter-annotator disagreement?

For a multi-annotator dataset, each item's user turn is negotiated (its earlier turns as context;
the mapping per dataset is in docs/boundary.md), and T is set against per-item disagreement
1 − α_item (Krippendorff, from :func:`psychoalign.star.analysis.agreement.item_disagreement`):
Spearman's ρ with a bootstrap CI and a permutation p-value, the stratified view by T bin and a
scatter plot. The reverse check asks whether T predicts the *majority label* (AUC of T for
"majority unsafe") — H1 is about disagreement, so both are reported side by side.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from ....errors import InputError
from ....frameworks import Framework
from ....negotiation import Negotiator
from ....star.analysis.agreement import item_disagreement
from ....star.analysis.data import RatingsMapping
from ....star.analysis.h1 import DEFAULT_BINS, binarise, kruskal, spearman, tension_bins
from ....traces.tension import DEFAULT_DEFINITION, TensionDefinition
from .corpus import CorpusItem
from .negotiate import ItemOutcome, negotiate_items

__all__ = ["load_h1_dataset", "run_h1"]

MAX_CONTEXT_CHARS = 2000

_SPEAKER = re.compile(r"^\s*(USER|LAMDA|A|B|Human|Assistant|User|Bot|Attacker|Target|Model)\s*:\s?", re.I)
_USER_ROLES = {"user", "a", "human", "attacker"}


@dataclass(frozen=True)
class H1Item:
    """One rated item: what is negotiated (``request``, ``context``) and its rating counts per
    scale value (index = value)."""

    id: str
    request: str
    context: str = ""
    counts: tuple[float, ...] = ()


@dataclass(frozen=True)
class H1Dataset:
    name: str
    format: str
    scale: tuple[str, ...]
    positive: frozenset[int]
    excluded: frozenset[int]
    ordinal: bool
    items: tuple[H1Item, ...]
    mapping: str


def split_turns(text: str) -> list[tuple[str, str]]:
    """A transcript as (role, text) turns; role is "user" or "assistant". Accepts real newlines
    and the literal two-character ``\\n`` that DICES-990 uses; lines without a speaker prefix
    continue the previous turn."""
    turns: list[tuple[str, str]] = []
    for line in text.replace("\\n", "\n").splitlines():
        m = _SPEAKER.match(line)
        if m:
            role = "user" if m.group(1).lower() in _USER_ROLES else "assistant"
            turns.append((role, line[m.end() :].strip()))
        elif line.strip():
            if turns:
                turns[-1] = (turns[-1][0], f"{turns[-1][1]}\n{line.strip()}".strip())
            else:
                turns.append(("user", line.strip()))
    return turns


def _request_and_context(text: str, max_context: int = MAX_CONTEXT_CHARS) -> tuple[str, str]:
    """The last user turn is the request; the turns before it, rendered, are the context."""
    turns = split_turns(text)
    last = max((i for i, (role, body) in enumerate(turns) if role == "user" and body), default=None)
    if last is None:
        return text.replace("\\n", "\n").strip(), ""
    before = "\n".join(f"{'User' if r == 'user' else 'Assistant'}: {b}" for r, b in turns[:last])
    if len(before) > max_context:
        before = "…" + before[-max_context:]
    context = f"Earlier turns of this conversation:\n{before}" if before else ""
    return turns[last][1], context


def _raw_texts(path: Path, fmt: str) -> dict[str, str]:
    """item id -> the transcript before the rated response, for formats whose loader merges text."""
    if fmt in ("dices", "dices-expert"):
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(inst["id"]): str(inst["instance"].get("user_prompt", "")) for inst in data["instances"]}
    if fmt == "diasafety-cc":
        rows = json.loads(path.read_text(encoding="utf-8"))
        return {str(i): f"User: {row['context']}" for i, row in enumerate(rows)}
    return {}


MAPPINGS = {
    "dices": "request = the last USER/A turn of the conversation before the rated response; context = the earlier "
    "turns (last 2,000 characters); the rated chatbot response is not shown to the agents",
    "diasafety-cc": "request = the user utterance (DiaSafety 'context'); no earlier turns; the rated response is "
    "not shown to the agents",
    "default": "request = the last user turn of the item text (the whole text when it has no speaker prefixes); "
    "context = the turns before it",
}


def load_h1_dataset(
    path: str | Path,
    fmt: str | None = None,
    *,
    limit: int | None = None,
    seed: int = 0,
    mapping: RatingsMapping | None = None,
) -> H1Dataset:
    """Items with ≥ 2 ratings from any file the STAR analysis reads (DICES, DiaSafety-CC, STAR
    exports, one-row-per-rating files with a column ``mapping`` …). ``limit`` keeps a seeded
    random sample of that many items."""
    from ....star.analysis import data as star_data

    p = Path(path)
    rd = star_data.load(p, fmt, mapping=mapping)
    ann = rd.annotations
    if ann.empty:
        raise InputError(f"{p}: no ratings ({rd.format})", hint="H1 needs a file with several ratings per item")
    per_item = ann.groupby("item_id")["value"].apply(list).to_dict()
    n_values = len(rd.scale)
    raw = _raw_texts(p, rd.format)
    texts = {str(r["item_id"]): str(r.get("text") or "") for r in rd.items.to_dict("records")}
    items = []
    for item_id in texts:
        values = per_item.get(item_id, [])
        if len(values) < 2:
            continue
        counts = [0.0] * n_values
        for v in values:
            counts[int(v)] += 1
        request, context = _request_and_context(raw.get(item_id, texts[item_id]))
        if request.strip():
            items.append(H1Item(id=item_id, request=request, context=context, counts=tuple(counts)))
    if not items and not any(texts.values()):
        raise InputError(
            f"{p}: the items have no text to negotiate ({rd.format})",
            hint="name the item text column (text_col in the mapping, or --text-col for star analyze)",
        )
    if not items:
        raise InputError(
            f"{p}: no item has 2 or more ratings ({rd.format})",
            hint="per-item disagreement needs several raters per item (DICES-350 expert has one)",
        )
    if limit is not None and limit < len(items):
        items = sorted(random.Random(seed).sample(items, limit), key=lambda it: items.index(it))
    return H1Dataset(
        name=rd.name,
        format=rd.format,
        scale=tuple(rd.scale),
        positive=frozenset(rd.positive),
        excluded=frozenset(rd.excluded),
        ordinal=rd.ordinal,
        items=tuple(items),
        mapping=MAPPINGS.get(
            rd.format.split("-")[0] if rd.format.startswith("dices") else rd.format, MAPPINGS["default"]
        ),
    )


def h1_corpus(dataset: H1Dataset) -> list[CorpusItem]:
    """The rated items as requests to negotiate (one domain: the dataset), in the dataset's order."""
    return [
        CorpusItem(id=it.id, domain=dataset.name, category="rated", request=it.request, context=it.context)
        for it in dataset.items
    ]


def h1_report(dataset: H1Dataset, outcomes: Sequence[ItemOutcome], **analysis: Any) -> dict[str, Any]:
    """The H1 report from the negotiated outcomes (in the dataset's order), however they were
    negotiated: ``analysis`` is :func:`analyze_h1`'s keywords (definition, n_boot, n_perm, seed)."""
    report = analyze_h1(
        dataset.items,
        outcomes,
        scale=dataset.scale,
        positive=dataset.positive,
        excluded=dataset.excluded,
        ordinal=dataset.ordinal,
        **analysis,
    )
    report["dataset"] = {"name": dataset.name, "format": dataset.format, "mapping": dataset.mapping}
    return report


async def run_h1(
    dataset: H1Dataset,
    negotiator: Negotiator,
    *,
    framework: str | Path | Framework = "general",
    concurrency: int = 4,
    definition: TensionDefinition | str = DEFAULT_DEFINITION,
    n_boot: int = 2000,
    n_perm: int = 5000,
    seed: int = 0,
    on_done: Callable[[ItemOutcome], None] | None = None,
    done: Mapping[str, ItemOutcome] | None = None,
) -> dict[str, Any]:
    """Negotiate every item of ``dataset`` (``done`` skips items a checkpoint already has) and
    analyse: the JSON-ready H1 report."""
    corpus = h1_corpus(dataset)
    outcomes = await negotiate_items(
        negotiator,
        corpus,
        framework=framework,
        concurrency=concurrency,
        experiment="h1",
        on_done=on_done,
        done=done,
    )
    report = h1_report(dataset, outcomes, definition=definition, n_boot=n_boot, n_perm=n_perm, seed=seed)
    report["models"] = negotiator.model_labels()
    return report


#: Fewer items than this with either label: the AUC gets no bootstrap interval (two unsafe and
#: three safe items, perfectly ranked, gave 1.0 [1.0, 1.0]; the resamples cannot show the spread).
MIN_AUC_CLASS = 10


def _auc(score: np.ndarray, label: np.ndarray, *, n_boot: int, seed: int) -> dict[str, Any]:
    """AUC of ``score`` for ``label`` (Mann–Whitney U / n1·n0) with a bootstrap CI and U-test p;
    no interval (``ci_note`` says why) under :data:`MIN_AUC_CLASS` items of either label."""
    pos, neg = score[label], score[~label]
    if pos.size == 0 or neg.size == 0:
        return {"computable": False, "reason": "every item has the same majority label"}
    if np.all(score == score[0]):
        # every pair tied: U gives 0.5 and p = 1, which would read as "T measured, no better than chance"
        return {"computable": False, "reason": f"every item has the same T ({float(score[0]):g}): nothing to rank"}
    u = sps.mannwhitneyu(pos, neg, alternative="two-sided")
    auc = float(u.statistic) / (pos.size * neg.size)
    if min(pos.size, neg.size) < MIN_AUC_CLASS:
        return {
            "computable": True,
            "auc": auc,
            "ci_low": None,
            "ci_high": None,
            "ci_note": f"fewer than {MIN_AUC_CLASS} items of a label: a bootstrap interval would mean little",
            "p_mannwhitney": float(u.pvalue),
            "n_unsafe": int(pos.size),
            "n_safe": int(neg.size),
        }
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        idx = rng.integers(0, score.size, score.size)
        s, lab = score[idx], label[idx]
        n1 = int(lab.sum())
        n0 = lab.size - n1
        if n1 and n0:
            ranks = sps.rankdata(s)
            draws.append((ranks[lab].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
    lo, hi = (float(v) for v in np.percentile(draws, [2.5, 97.5])) if draws else (None, None)
    return {
        "computable": True,
        "auc": auc,
        "ci_low": lo,
        "ci_high": hi,
        "p_mannwhitney": float(u.pvalue),
        "n_unsafe": int(pos.size),
        "n_safe": int(neg.size),
    }


def analyze_h1(
    items: Sequence[H1Item],
    outcomes: Sequence[ItemOutcome],
    *,
    scale: Sequence[str],
    positive: frozenset[int],
    excluded: frozenset[int] = frozenset(),
    ordinal: bool = False,
    definition: TensionDefinition | str = DEFAULT_DEFINITION,
    cuts: Sequence[float] = DEFAULT_BINS,
    n_boot: int = 2000,
    n_perm: int = 5000,
    seed: int = 0,
) -> dict[str, Any]:
    """The H1 report (JSON-ready) from rated items and their negotiated outcomes (joined by id).

    Disagreement (headline) is 1 − α_item on the binarised view (positive vs the rest, ``excluded``
    values left out) with the nominal metric; the full scale (ordinal metric when ``ordinal``) is
    reported beside it."""
    d = TensionDefinition(definition)
    by_id = {o.id: o for o in outcomes}
    ids = [it.id for it in items]
    n_values = len(scale)
    full = np.array([list(it.counts) + [0.0] * (n_values - len(it.counts)) for it in items], dtype=np.float64)
    binary = binarise(full, positive, excluded)
    dis_bin = item_disagreement(binary, "nominal")
    dis_full = item_disagreement(full, "ordinal" if ordinal else "nominal")
    share = np.divide(binary[:, 1], binary.sum(axis=1), out=np.full(len(items), np.nan), where=binary.sum(axis=1) > 0)
    majority = np.where(share > 0.5, 1.0, np.where(share < 0.5, 0.0, np.nan))

    def tvec(defn: TensionDefinition) -> np.ndarray:
        return np.array(
            [(t if (o := by_id.get(i)) is not None and (t := o.t(defn)) is not None else np.nan) for i in ids]
        )

    t = tvec(d)
    completed = int(np.isfinite(t).sum())
    if completed == 0:
        failures = sorted({(by_id[i].error or "no tension") for i in ids if i in by_id})[:3]
        raise InputError(
            f"none of the {len(items)} negotiations produced a tension ({'; '.join(failures) or 'none ran'})",
            hint="check the model configuration with `psychoalign negotiate 'hello'`",
        )
    rho = spearman(t, dis_bin, n_boot=n_boot, n_perm=n_perm, seed=seed)
    bins, bins_kw = tension_bins(t, dis_bin, cuts=cuts, n_boot=n_boot, seed=seed)
    per_def: dict[str, Any] = {}
    for other in TensionDefinition:
        r = spearman(tvec(other), dis_bin, n_boot=max(200, n_boot // 4), n_perm=max(200, n_perm // 5), seed=seed)
        per_def[other.value] = r.as_dict()
    ranking = sorted((k for k, v in per_def.items() if v["rho"] is not None), key=lambda k: -per_def[k]["rho"])
    ok = np.isfinite(t) & np.isfinite(majority)
    reverse = _auc(t[ok], majority[ok] == 1.0, n_boot=min(n_boot, 1000), seed=seed)
    within: dict[str, Any] = {}
    for name, value in (("majority_safe", 0.0), ("majority_unsafe", 1.0)):
        mask = majority == value
        within[name] = spearman(
            t[mask], dis_bin[mask], n_boot=max(200, n_boot // 4), n_perm=max(200, n_perm // 5), seed=seed
        ).as_dict()
    try:
        kw_majority = kruskal({"safe": t[majority == 0.0], "unsafe": t[majority == 1.0]}, seed=seed).as_dict()
    except InputError as exc:
        kw_majority = {"computable": False, "reason": exc.message}
    headline = {
        "definition": d.value,
        "rho": rho.rho,
        "ci_low": rho.ci_low,
        "ci_high": rho.ci_high,
        "p_permutation": rho.p_permutation,
        "n": rho.n,
        "auc_majority_unsafe": reverse.get("auc"),
    }
    return {
        "experiment": "h1",
        "definition": d.value,
        "headline": headline,
        "counts": {
            "items": len(items),
            "negotiated": sum(1 for i in ids if i in by_id),
            "with_tension": completed,
            "failed": sum(1 for i in ids if i in by_id and by_id[i].status != "completed"),
            "with_disagreement": int(np.isfinite(dis_bin).sum()),
            "ratings": int(full.sum()),
        },
        "disagreement": {
            "headline": "1 - alpha_item, binarised (positive vs rest, excluded values dropped), nominal metric",
            "scale": list(scale),
            "positive": sorted(positive),
            "excluded": sorted(excluded),
        },
        "spearman": rho.as_dict(),
        "spearman_full_scale": spearman(
            t, dis_full, n_boot=max(200, n_boot // 4), n_perm=max(200, n_perm // 5), seed=seed
        ).as_dict(),
        "bins": [b.as_dict() for b in bins],
        "bins_kruskal": bins_kw.as_dict() if bins_kw is not None else None,
        "definitions": per_def,
        "ranking_by_rho": ranking,
        "reverse_check": {
            "question": "does T predict the majority label (unsafe) rather than disagreement?",
            "auc_t_for_majority_unsafe": reverse,
            "kruskal_t_by_majority": kw_majority,
            "rho_t_share_unsafe": spearman(
                t, share, n_boot=max(200, n_boot // 4), n_perm=max(200, n_perm // 5), seed=seed
            ).as_dict(),
            "rho_within_majority": within,
        },
        "points": [
            {
                "id": i,
                "tension": None if not np.isfinite(t[k]) else float(t[k]),
                "disagreement": None if not np.isfinite(dis_bin[k]) else float(dis_bin[k]),
                "share_unsafe": None if not np.isfinite(share[k]) else float(share[k]),
                "trace_id": by_id[i].trace_id if i in by_id else None,
                "status": by_id[i].status if i in by_id else "not run",
            }
            for k, i in enumerate(ids)
        ],
        "n_boot": n_boot,
        "n_perm": n_perm,
        "seed": seed,
    }
