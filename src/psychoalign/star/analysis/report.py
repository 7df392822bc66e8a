"""`psychoalign star analyze`: every analysis over every dataset, as JSON (every number) and HTML."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ...textio import INVISIBLE, visible_marker
from .agreement import MIN_ALPHA_ITEMS
from .data import RatingData
from .intersections import intersectional_section
from .items import item_table, write_item_csv
from .pvalues import P_FLOOR_NOTE, p_text, p_value
from .stats import (
    agreement_section,
    arbitration_section,
    coverage_section,
    expert_section,
    expert_vs_crowd,
    groups_section,
    ingroup_section,
)

METHODS = {
    "data": (
        "Every rating read is either kept or dropped with its reason (missing, not a number, not on the scale, "
        "repeated or conflicting ratings by one rater for one item, dialogue not submitted). Rows that repeat an "
        "item id are merged into one item, so no breakdown counts a rating twice."
    ),
    "agreement": (
        "Krippendorff's alpha from the coincidence matrix at every level the scale supports (nominal always; "
        "ordinal and interval on ordered scales of 3+ points, interval on labelled scales with equal spacing) and "
        "nominal on the binarised view, with 95% percentile bootstrap intervals over items. Default level: ordinal "
        "on ordered scales, nominal otherwise. Breakdowns per item attribute and within each rater group. Per-item "
        "disagreement is D_o(item)/D_e = 1 - alpha_item at the default level. Caveat: alpha assumes raters are "
        "exchangeable within an item."
    ),
    "expert": (
        "Per item, the crowd's plurality label (ties: left out) against the experts' label: exact agreement, "
        "Cohen's kappa, and alpha between the two, on the full scale and on the binarised view."
    ),
    "groups": (
        "For every rater attribute (all of its groups): raw rates and mean scale positions per group "
        "(description); logistic regression (binarised view) and proportional-odds regression (ordered scales) "
        "on the group with standard errors clustered by rater and by item (two-way, Cameron-Gelbach-Miller), "
        "tested with a joint Wald F test on G-1 degrees of freedom (G = fewer clusters); odds ratios against the "
        "largest group; and the rater-level view (Welch t-test or one-way ANOVA on per-rater means). Fewer than "
        "10 raters: no test. Then the intersections of two attributes (e.g. gender x race), each combination a "
        "group: one with fewer than 10 ratings or 5 raters, or perfectly separated, is described, not tested. "
        "Groups whose ratings do not overlap (one set of groups at or below a scale point, the rest at or above "
        "it) are described, not tested: the fitted odds ratio would be infinite. " + P_FLOOR_NOTE
    ),
    "arbitration": (
        "How often two annotations were two or more steps apart, and whose rating the arbitrator's was closer to: "
        "each side as a share of the dialogues arbitrated with its Wilson 95% interval, clustered by arbitrator "
        "(one arbitrator's decisions are not independent: the interval rests on the effective n; no interval on "
        "fewer than 10 dialogues, on fewer than 10 arbitrators when one decided several, or without arbitrator ids)."
    ),
    "ingroup": (
        "STAR: rate of broken ratings by in- vs out-group annotators, overall and per rule (Holm-adjusted), tested "
        "with logistic and proportional-odds regressions clustered by annotator and dialogue, plus a paired "
        "t-test on per-annotator means; attack success by red-teamer status and by target group (odds ratios, "
        "joint Wald test as the ANOVA view) with one row per dialogue, clustered by red teamer. Raw proportions "
        "are description; the two-proportion z-test is not used (it treats ratings as independent)."
    ),
    "intersectional": (
        "Logistic regression of rule-broken on target race + gender + race x gender, per rule and pooled (rule as "
        "covariate); the interaction is tested with a joint Wald F test using SEs clustered by annotator and "
        "dialogue; odds ratios with 95% intervals."
    ),
    "coverage": (
        "Dialogues per rule and per target group against even quotas over the groups seen: chi-square goodness of fit "
        "(scipy), or an exact multinomial test (seeded Monte Carlo) when fewer than 5 dialogues are expected per group."
    ),
    "h1": (
        "When the dialogues targeted PsychoAlign, each target turn stores its negotiation's tension T; per dialogue "
        "the mean T is set against per-item disagreement 1 - alpha_item (binarised view where one exists): "
        "Spearman's rho with a 95% percentile bootstrap CI, a two-sided permutation p-value, and T bins "
        "(low < 0.3 <= medium <= 0.5 < high). Method: docs/boundary.md."
    ),
    "embedding": (
        "Equal-size seeded samples per dataset, embedded (all-MiniLM-L6-v2 offline by default), projected to 2-D "
        "with UMAP, clustered with Ward agglomerative clustering on the projection. Concentration: entropy of "
        "each dataset over clusters (normalised by log K; 1 = spread evenly) and its largest-cluster share. "
        "Top terms: largest TF-IDF lift of the cluster over all dialogues."
    ),
}


def _expert_pairs(datasets: Sequence[RatingData], n_boot: int, seed: int) -> dict[str, Any]:
    """Expert-only datasets (every rater an expert) against crowd datasets of the same family and
    scale that share items: DICES-350 crowd vs expert, for example."""
    out: dict[str, Any] = {}
    for expert in datasets:
        if expert.expert is None or expert.annotations.empty or expert.annotations["rater_id"].isna().any():
            continue
        attr, value = expert.expert
        if attr not in expert.raters.columns:
            continue
        if not (expert.raters[attr].astype(str).str.casefold() == value.casefold()).all():
            continue
        for crowd in datasets:
            if crowd is expert or crowd.family != expert.family or crowd.scale != expert.scale:
                continue
            shared = set(crowd.annotations["item_id"]) & set(expert.annotations["item_id"])
            if not shared:
                continue
            out[f"{crowd.name} vs {expert.name}"] = expert_vs_crowd(
                crowd.annotations, expert.annotations, crowd, n_boot=n_boot, seed=seed
            )
    return out


def _h1_section(data: RatingData, *, n_boot: int, seed: int) -> dict[str, Any]:
    """ρ(T, 1 − α_item) when the items carry PsychoAlign's tension (docs/boundary.md)."""
    from .h1 import h1_section

    return h1_section(data, n_boot=n_boot, n_perm=max(1000, n_boot), seed=seed)


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("psychoalign")
    except PackageNotFoundError:
        return "unknown"


def analyze(
    datasets: Sequence[RatingData],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    embed: bool = True,
    embedder: Any = None,
    per_dataset: int = 4000,
    n_clusters: int = 20,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Every section for each dataset, then the cross-dataset ones. ``progress(done, total)`` is
    told after each section (the caller draws it, if anywhere: this runs in the lab's workers too)."""
    report: dict[str, Any] = {
        "generated_at": datetime.now(UTC).isoformat(),
        "settings": {"bootstrap": n_boot, "seed": seed},
        "package": {"name": "psychoalign", "version": _package_version()},
        "methods": METHODS,
        "datasets": {},
    }
    steps: list[tuple[str, Callable[[RatingData], dict[str, Any]]]] = [
        ("agreement", lambda d: agreement_section(d, n_boot=n_boot, seed=seed)),
        ("expert", lambda d: expert_section(d, n_boot=n_boot, seed=seed)),
        ("groups", groups_section),
        ("arbitration", arbitration_section),
        ("ingroup", ingroup_section),
        ("intersectional", intersectional_section),
        ("coverage", coverage_section),
        ("h1", lambda d: _h1_section(d, n_boot=n_boot, seed=seed)),
    ]
    total, done = len(datasets) * len(steps), 0
    for data in datasets:
        entry: dict[str, Any] = {
            "format": data.format,
            # the file (name, size, SHA-256) the numbers came from; null for data built in memory
            "source": data.source,
            "counts": data.counts.as_dict(),
            "items": len(data.items),
            "ratings": len(data.ratings),
            "raters": int(data.ratings["rater_id"].nunique()) if data.ratings["rater_id"].notna().any() else None,
            "scale": data.scale,
            "ordered": data.ordinal,
            "default_level": data.default_level,
            "binarised": (
                {
                    "positive": [data.scale[i] for i in sorted(data.positive)],
                    "left_out": [data.scale[i] for i in sorted(data.excluded)],
                    "label": data.positive_label,
                }
                if data.binary
                else None
            ),
            "rater_attributes": data.rater_attributes(),
            "notes": data.notes,
            # --target / --attach-legacy: what the user chose about the targets, on what basis
            "target_audit": data.target_audit,
            # STAR: which persona models wrote the simulated attacks, ratings and refusal flags
            "persona_models": data.persona_models,
        }
        for name, fn in steps:
            try:
                entry[name] = fn(data)
            except Exception as exc:  # one broken section must not sink the report
                entry[name] = {"computable": False, "reason": f"{type(exc).__name__}: {exc}"}
            done += 1
            if progress is not None:
                progress(done, total)
        report["datasets"][data.name] = entry
    pairs = _expert_pairs(datasets, n_boot, seed)
    report["expert_vs_crowd"] = pairs or {"computable": False, "reason": "no expert dataset shares items with a crowd"}
    if embed:
        from .embedding import embedding_section

        try:
            report["embedding"] = embedding_section(
                datasets, per_dataset=per_dataset, n_clusters=n_clusters, seed=seed, embedder=embedder
            )
        except Exception as exc:  # missing model or dependencies: the rest of the report stands
            report["embedding"] = {"computable": False, "reason": f"{type(exc).__name__}: {exc}"}
    else:
        report["embedding"] = {"computable": False, "reason": "skipped (--no-embed)"}
    return report


#: The report's technical names in plain words; the name and what it means go in a tooltip.
TERMS = {
    "alpha": (
        "agreement",
        "Krippendorff's alpha: 1 = the raters agree perfectly, 0 = no better than chance, "
        "below 0 = they disagree more than chance would",
    ),
    "nominal": ("any difference counts", "nominal alpha: two different ratings disagree, however close they are"),
    "ordinal": (
        "steps on the scale count",
        "ordinal alpha: a disagreement weighs more the more scale points lie between the two ratings",
    ),
    "interval": (
        "distance on the scale counts",
        "interval alpha: a disagreement weighs the squared distance between the two ratings",
    ),
    "item_disagreement": (
        "disagreement per dialogue",
        "D_o(item)/D_e = 1 - alpha_item: the raters' disagreement on one item over the disagreement "
        "expected by chance (0 = they agree, about 1 = chance level)",
    ),
    "odds_ratio": (
        "odds ratio",
        "how many times higher the odds of the outcome are than in the reference group (1 = same)",
    ),
    "p": ("p", "p-value: how often a difference at least this large would appear by chance alone"),
    "ci": ("95% interval", "95% confidence interval: the range the value is likely to lie in"),
}


#: Hidden characters (bidi overrides and isolates, zero-width ones) that data may hold: shown as
#: ``⟨U+202E⟩`` markers, so a group, rule or file name cannot reorder or hide the text around it.
_INVISIBLE = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(INVISIBLE)) + "]")


def _esc(value: object, *, quote: bool = True) -> str:
    """Text for the report: every hidden character shown as its marker, then HTML-escaped."""
    return html.escape(_INVISIBLE.sub(lambda m: visible_marker(m.group()), str(value)), quote=quote)


def _iso(value: object) -> str:
    """A value from the data inside running text: escaped and direction-isolated (an Arabic or
    Hebrew group name cannot reorder the words and figures beside it)."""
    return f"<bdi dir='auto'>{_esc(value)}</bdi>"


class _Html(str):
    """A table cell that is markup already (escaped where it holds data)."""


def _term(key: str) -> _Html:
    """``key`` in plain words, with its technical name and meaning as the tooltip."""
    if key.startswith("nominal_"):
        label = key.removeprefix("nominal_").replace("_", " ")
        plain, tip = f"{label} or not", f"{key}: nominal alpha on the ratings reduced to two values ({label} or not)"
    else:
        plain, tip = TERMS.get(key, (key, key))
        tip = f"{key}: {tip}" if not tip.startswith(key) else tip
    return _Html(f"<span class='term' title='{_esc(tip, quote=True)}'>{_esc(plain)}</span>")


def _method(text: str) -> str:
    """A section's method, folded: the result reads first, the method is one click away."""
    return f"<details class='method'><summary>How this is computed</summary><p>{_esc(text)}</p></details>"


def _figure_png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def _figures(name: str, entry: dict[str, Any]) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    cov = entry.get("coverage", {})
    if cov.get("computable") and "target_group" in cov:
        counts = cov["target_group"]["counts"]
        fig, ax = plt.subplots(figsize=(7, 3))
        ax.bar(range(len(counts)), list(counts.values()))
        ax.set_xticks(range(len(counts)), list(counts), rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("dialogues")
        ax.set_title(f"{name}: attacks per target group")
        out.append(("Coverage by target group", _figure_png(fig)))
        plt.close(fig)
    ing = entry.get("ingroup", {})
    by_rule = ing.get("annotators_by_rule", {}) if ing.get("computable") else {}
    rows = []
    for rule, views in by_rule.items():
        groups: dict[str, Any] = next((v.get("groups", {}) for k, v in views.items() if k.startswith("binary_")), {})
        if "out-group" in groups and "in-group" in groups:
            rows.append((rule, groups))
    if rows:
        fig, ax = plt.subplots(figsize=(7, 3))
        xs = np.arange(len(rows))
        ax.bar(xs - 0.2, [v["out-group"]["rate"] for _, v in rows], 0.4, label="out-group")
        ax.bar(xs + 0.2, [v["in-group"]["rate"] for _, v in rows], 0.4, label="in-group")
        ax.set_xticks(xs, [r for r, _ in rows], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("share rated broken")
        ax.legend()
        ax.set_title(f"{name}: in-group vs out-group annotators")
        out.append(("In-group vs out-group", _figure_png(fig)))
        plt.close(fig)
    return out


def _cell(value: str) -> str:
    return value if isinstance(value, _Html) else _esc(value)


def _table(rows: Sequence[Sequence[str]], header: tuple[str, ...]) -> str:
    head = "".join(f"<th>{_cell(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    # a wide table scrolls in its own box, which the keyboard can reach (not the page: phones)
    box = "<div class='scroll' tabindex='0' role='region' aria-label='table'>"
    return f"{box}<table><tr>{head}</tr>{body}</table></div>"


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 1e-3 and x != 0 else f"{x:.3f}"
    return str(x)


def _p_rel(p: float | None) -> str:
    """ "= 0.023" or "< 1e-06", after a name already written (see :mod:`.pvalues`)."""
    shown = p_value(p)
    return shown if shown.startswith("<") else f"= {shown}"


def _df(x: float) -> str:
    """Denominator df: whole (G - 1) or Bell-McCaffrey's fractional df, to one decimal."""
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _embedding_html(section: dict[str, Any], method: str) -> str:
    parts = ["<h2>Embedding map</h2>", _method(method)]
    if not section.get("computable"):
        parts.append(f"<p class='nc'>Not computable: {_esc(str(section.get('reason')))}</p>")
        return "".join(parts)
    names = list(section["concentration"])
    rows = [
        (c, *(str(section["cluster_by_dataset"][c][n]) for n in names), ", ".join(section["top_terms"].get(c, [])))
        for c in section["cluster_by_dataset"]
    ]
    parts.append(_table(rows, ("cluster", *names, "top terms")))
    conc = [
        (n, _fmt(v["normalised_entropy"]), _fmt(v["largest_cluster_share"]), str(v["clusters_used"]))
        for n, v in section["concentration"].items()
    ]
    parts.append(_table(conc, ("dataset", "normalised entropy", "largest cluster share", "clusters used")))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = section["points"]
    fig, ax = plt.subplots(figsize=(6, 5))
    for n in names:
        idx = [i for i, s in enumerate(pts["dataset"]) if s == n]
        ax.scatter([pts["x"][i] for i in idx], [pts["y"][i] for i in idx], s=3, label=n, alpha=0.6)
    ax.legend(markerscale=4, fontsize=8)
    ax.set_title("UMAP of dialogue embeddings")
    alt = "Scatter plot: the UMAP map of dialogue embeddings, one colour per dataset"
    parts.append(f"<figure><img src='data:image/png;base64,{_figure_png(fig)}' alt='{alt}'></figure>")
    plt.close(fig)
    return "".join(parts)


def _ci(v: dict[str, Any]) -> str:
    if (v.get("units") or 0) < MIN_ALPHA_ITEMS:
        return f"none: fewer than {MIN_ALPHA_ITEMS} items"
    if v.get("no_spread"):
        return "none: every resample gave the same alpha (see the warning)"
    return f"[{_fmt(v['ci_low'])}, {_fmt(v['ci_high'])}]"


def _alpha_rows(label: str, res: dict[str, Any]) -> list[tuple[str, ...]]:
    return [
        (label, _term(k), v.get("reason") or _fmt(v["alpha"]), _ci(v), _fmt(v["units"]), _fmt(v["values"]))
        for k, v in res.items()
        if isinstance(v, dict) and "alpha" in v
    ]


def _small_sample(section: dict[str, Any]) -> str:
    """The warning for agreement on fewer than :data:`MIN_ALPHA_ITEMS` items (empty otherwise)."""
    units = max((v.get("units") or 0 for v in section["overall"].values() if isinstance(v, dict)), default=0)
    if units >= MIN_ALPHA_ITEMS:
        return ""
    return (
        f"<p class='warn' role='note'><strong>Small sample:</strong> only {units} item{'s' if units != 1 else ''} "
        f"{'were' if units != 1 else 'was'} rated more than once. Agreement on so few items can swing widely "
        f"with the next rating, so no interval is shown below {MIN_ALPHA_ITEMS} items."
        + (" On one item alpha is 0 (or undefined) by construction, so none is shown." if units == 1 else "")
        + "</p>"
    )


def _share_ci(section: dict[str, Any]) -> str:
    """The share with its Wilson interval, or without one and why (reports written before it had
    one: the share alone)."""
    ci = section.get("trigger_rate_ci95")
    share = f"{section['trigger_rate']:.0%}"
    if section.get("trigger_rate_note"):
        return f"{share}, no interval: {section['trigger_rate_note']}"
    return f"{share} [95% CI {ci[0]:.0%}, {ci[1]:.0%}]" if ci else share


#: The sides an arbitrator can take, as the report and ``star analyze`` name them.
SIDES = (
    ("annotator1", "closer to the first annotator"),
    ("annotator2", "closer to the second annotator"),
    ("between", "as close to both"),
)


def sided_share(shares: dict[str, Any] | None, side: str) -> str:
    """One "sided with" share: "60% of 20 arbitrated [95% CI 39%, 78%]" (with the effective n when
    the interval is clustered by arbitrator), or without the interval and why; empty when there is
    no share (none arbitrated, an older report)."""
    entry = (shares or {}).get(side)
    if not isinstance(entry, dict):
        return ""
    assert shares is not None
    text = f"{entry['share']:.0%} of {shares['n']} arbitrated"
    ci = entry.get("ci95")
    if ci:
        clustered = f"; clustered by arbitrator, effective n {entry['n_eff']:.1f}" if entry.get("n_eff") else ""
        return f"{text} [95% CI {ci[0]:.0%}, {ci[1]:.0%}{clustered}]"
    why = shares.get("no_interval") or f"fewer than {shares['min_n']}"
    if why.startswith("fewer than"):
        return f"{text}, no interval: {why}"
    return f"{text}, no interval"  # the warning beside it says why


def sided_summary(section: dict[str, Any]) -> str | None:
    """The arbitration verdicts in one line (``star analyze`` prints it), or None when the
    section has no "sided with" shares."""
    shares = section.get("arbitrator_sided_with_shares")
    if not isinstance(shares, dict):
        return None
    if shares.get("reason"):
        return f"arbitrator sided with: {shares['reason']}"
    parts = [f"{words} {shares[side]['count']} ({sided_share(shares, side)})" for side, words in SIDES]
    warning = f"; {shares['warning']}" if shares.get("warning") else ""
    who = f" ({shares['arbitrators']} arbitrators)" if shares.get("arbitrators", 0) > 1 else ""
    return f"arbitrator sided with{who}: " + "; ".join(parts) + warning


def _arbitration_html(section: dict[str, Any]) -> str:
    sided = section.get("arbitrator_sided_with", {})
    shares = section.get("arbitrator_sided_with_shares")
    rows = [
        ("dialogues rated by two annotators", str(section["dialogues_with_two_annotations"]), ""),
        ("of those, two or more steps apart (arbitration needed)", str(section["arbitration_triggered"]), ""),
        ("share needing arbitration", _share_ci(section), ""),
        *(
            (f"arbitrator's rating {words}", str(sided.get(side, 0)), sided_share(shares, side))
            for side, words in SIDES
        ),
        ("not arbitrated yet", str(sided.get("missing", 0)), ""),
    ]
    warning = (shares or {}).get("warning")
    title = "Small sample" if (shares or {}).get("n", 0) < (shares or {}).get("min_n", 0) else "No interval"
    note = f"<p class='warn' role='note'><strong>{title}:</strong> {_esc(warning)}</p>" if warning else ""
    return note + _table(rows, ("", "dialogues", "share of the arbitrated (Wilson 95% CI)"))


def _coverage_html(section: dict[str, Any]) -> str:
    parts = []
    for column, title in (("rule", "rule"), ("target_group", "target group")):
        if column not in section:
            continue
        entry = section[column]
        parts.append(_table([(k, str(v)) for k, v in entry["counts"].items()], (title, "dialogues")))
        test = str(entry.get("test") or "chi-square goodness of fit")
        parts.append(
            f"<p>Spread over the {entry.get('groups', len(entry['counts']))} {_esc(title)}s seen: "
            f"{_esc(test)}, against an even spread "
            f"({_fmt(entry.get('expected_per_group'))} dialogues expected per {_esc(title)}), "
            f"{_term('p')} {_p_rel(entry['p_value'])} (a small p: the spread is uneven). "
            f"A {_esc(title)} with no dialogue is not in the export and not counted.</p>"
        )
    cells = section.get("cells")
    if cells:
        parts.append(
            f"<p>{cells['observed']} cells of the plan have dialogues, {cells['min']} to {cells['max']} each.</p>"
        )
    return "".join(parts)


def _comparison_html(title: str, comp: dict[str, Any]) -> str:
    """One group comparison: description per group, then the clustered model and the rater-level view."""
    parts = [f"<h4>{_esc(title)}</h4>"]
    if not comp.get("computable", True):
        return parts[0] + f"<p class='nc'>Not computable: {_esc(str(comp.get('reason')))}</p>"
    model = comp.get("model", {})
    terms = model.get("terms", {}) if model.get("computable", True) else {}
    rows = []
    for level, desc in comp.get("groups", {}).items():
        value = desc.get("rate", desc.get("mean_rating"))
        term = next((t for name, t in terms.items() if name.split("=", 1)[-1] == level), None)
        rows.append(
            (
                level,
                _fmt(value),
                _fmt(desc["n_ratings"]),
                _fmt(desc["n_raters"]),
                "reference" if level == comp.get("reference") else _fmt(term["odds_ratio"]) if term else "—",
                f"[{_fmt(term['ci95'][0])}, {_fmt(term['ci95'][1])}]" if term else "",
                p_value(term["p_value"]) if term else "",
            )
        )
    what = "rate" if any("rate" in d for d in comp.get("groups", {}).values()) else "mean rating"
    parts.append(_table(rows, ("group", what, "ratings", "raters", _term("odds_ratio"), _term("ci"), _term("p"))))
    tested = comp.get("tested_groups") or {}
    per_group = ", ".join(f"{_iso(lv)}: {_fmt(v['raters'])}" for lv, v in tested.items())
    if model.get("computable", True) and "joint_test" in model:
        jt = model["joint_test"]
        clusters = ", ".join(f"{v} {k}s" for k, v in model.get("clusters", {}).items())
        holm = f", {p_text(comp['p_value_holm'], 'Holm-adjusted p')}" if "p_value_holm" in comp else ""
        test = (
            f"joint Wald F = {_fmt(jt['statistic'])} on {jt['df'][0]} and {_df(jt['df'][1])} df"
            if jt.get("statistic") is not None
            else _esc(str(jt.get("test", "joint test")))
        )
        parts.append(
            f"<p>{_esc(model['model'])}, clustered ({_esc(clusters)}): {test}, "
            f"{p_text(jt['p_value'])}{holm}" + (f"; raters per tested group: {per_group}" if per_group else "") + "</p>"
        )
    elif model:
        parts.append(f"<p class='nc'>No test: {_esc(str(model.get('reason')))}</p>")
    rl = comp.get("rater_level", {})
    if rl.get("computable"):
        parts.append(f"<p>{_esc(rl['test'])}: statistic {_fmt(rl['statistic'])}, {p_text(rl['p_value'])}</p>")
    return "".join(parts) + _untested_html(comp)


def _intersection_fit_html(fit: dict[str, Any]) -> str:
    """One intersectional model: its tests and terms, then every race × gender cell with its
    raters and whether it was tested (the tiny-group rule), and the cells it left out and why."""
    parts: list[str] = []
    if not fit.get("computable", True):
        parts.append(f"<p class='nc'>Not computable: {_esc(str(fit.get('reason')))}</p>")
    else:
        it, me = fit["interaction_test"], fit["main_effects_test"]
        clusters = ", ".join(f"{v} {k}s" for k, v in fit.get("clusters", {}).items())
        inter = (
            f"Wald F = {_fmt(it['statistic'])} on {it['df'][0]} and {_df(it['df'][1])} df, {p_text(it['p_value'])}"
            if it.get("computable", True)
            else f"not tested ({_esc(str(it.get('reason')))})"
        )
        parts.append(
            f"<p>race × gender interaction: {inter}; race and gender (no interaction): F = {_fmt(me['statistic'])}, "
            f"{p_text(me['p_value'])}; clustered ({_esc(clusters)}); reference "
            f"{_iso(fit['reference'])}</p>"
        )
        rows = [
            (name, _fmt(t["odds_ratio"]), f"[{_fmt(t['ci95'][0])}, {_fmt(t['ci95'][1])}]", p_value(t["p_value"]))
            for name, t in fit["terms"].items()
        ]
        parts.append(_table(rows, ("term", _term("odds_ratio"), _term("ci"), _term("p"))))
    cells = fit.get("cells") or {}
    if cells:
        cell_rows = [
            (
                c,
                _fmt(e["rate"]),
                _fmt(e["n_ratings"]),
                _fmt(e["n_raters"]),
                e["status"] + (f": {e['why']}" if "why" in e else ""),
            )
            for c, e in cells.items()
        ]
        parts.append(_table(cell_rows, ("cell", "rate broken", "ratings", "raters", "in the model")))
    return "".join(parts) + _untested_html(fit)


def _untested_html(model: dict[str, Any]) -> str:
    """The groups or cells a comparison or intersectional model describes but does not test:
    too small, or perfectly separated (each with why)."""
    parts = []
    if model.get("not_tested"):
        parts.append(f"<p class='note'>Not tested ({_esc(model['not_tested'])})</p>")
    for level, why in (model.get("separation") or {}).items():
        parts.append(f"<p class='note'>{_iso(level)}: {_esc(why)}</p>")
    return "".join(parts)


def _kappa_cell(v: dict[str, Any]) -> str:
    if v.get("cohens_kappa") is None:
        return str(v.get("cohens_kappa_reason") or "—")
    kappa, ci = _fmt(v["cohens_kappa"]), v.get("cohens_kappa_ci")
    if ci:
        return f"{kappa} [{_fmt(ci[0])}, {_fmt(ci[1])}]"
    return f"{kappa} none: fewer than {MIN_ALPHA_ITEMS} items" if v["items"] < MIN_ALPHA_ITEMS else kappa


def _expert_html(section: dict[str, Any]) -> str:
    rows = []
    warnings = []
    for view, v in section.items():
        if isinstance(v, dict) and v.get("computable") is False:
            # a view with no figure still says why, instead of an empty table
            warnings.append(f"{view}: not computable: {v.get('reason')}")
            continue
        if not isinstance(v, dict) or "agreement" not in v:
            continue
        rows.append(
            (
                view,
                _fmt(v["items"]),
                _fmt(v["items_without_majority"]),
                _fmt(v.get("items_without_expert_majority", 0)),
                _fmt(v["agreement"]),
                _kappa_cell(v),
                f"{v['alpha'].get('reason') or _fmt(v['alpha']['alpha'])} {_ci(v['alpha'])} ({v['alpha_level']})",
            )
        )
        if v.get("warning"):
            warnings.append(f"{view}: {v['warning']}")
    who = f"<p>Experts: {_esc(str(section['experts']))}</p>" if "experts" in section else ""
    warn = "".join(
        f"<p class='nc'>{_esc(w)}</p>"
        if ": not computable: " in w
        else f"<p class='warn' role='note'><strong>Small sample:</strong> {_esc(w)}</p>"
        for w in warnings
    )
    head = (
        "view",
        "items",
        "items without a crowd majority",
        "items the experts split on",
        "agreement",
        "Cohen's kappa [95% CI]",
        "alpha [95% CI]",
    )
    return who + warn + _table(rows, head)


def _views_html(prefix: str, views: dict[str, Any]) -> str:
    return "".join(
        _comparison_html(f"{prefix} — {view}", comp) for view, comp in views.items() if isinstance(comp, dict)
    )


def _agreement_html(section: dict[str, Any]) -> str:
    rows = _alpha_rows("all ratings", section["overall"])
    for by, groups in section.get("by", {}).items():
        for g, res in groups.items():
            rows.extend(_alpha_rows(f"{by.replace('_', ' ')}: {g}", res))
    disagreement = section.get("item_disagreement", {})
    mean = disagreement.get("mean")
    mean_text = _fmt(mean) if mean is not None or not disagreement.get("reason") else _esc(str(disagreement["reason"]))
    flat = [v for v in section["overall"].values() if isinstance(v, dict)]
    flat += [v for groups in section.get("by", {}).values() for res in groups.values() for v in res.values()]
    no_spread = [v for v in flat if isinstance(v, dict) and v.get("no_spread") and v.get("warning")]
    spread_warn = (
        f"<p class='warn' role='note'><strong>No interval:</strong> {_esc(str(no_spread[0]['warning']))}"
        + (f" ({len(no_spread)} rows below)" if len(no_spread) > 1 else "")
        + "</p>"
        if no_spread
        else ""
    )
    return (
        _small_sample(section)
        + spread_warn
        + _table(rows, ("ratings of", "disagreement counted as", _term("alpha"), _term("ci"), "items", "ratings"))
        + f"<p>Mean {_term('item_disagreement')}: {mean_text} (per item: item_disagreement.csv, which "
        "<code>psychoalign star analyze</code> writes beside the report)</p>"
    )


def _intersectional_html(section: dict[str, Any]) -> str:
    parts = [f"<p>{_esc(section['method'])}; {section['n_ratings']} ratings.</p>"]
    fits = {"pooled": section.get("pooled", {}), **{f"rule {r}": v for r, v in section.get("by_rule", {}).items()}}
    for label, fit in fits.items():
        parts.append(f"<h4>{_esc(label)}</h4>")
        if not fit.get("computable", True):
            parts.append(f"<p class='nc'>Not computable: {_esc(str(fit.get('reason')))}</p>")
            continue
        parts.append(_intersection_fit_html(fit))
    return "".join(parts)


def _h1_html(section: dict[str, Any]) -> str:
    r = section["spearman"]
    rows = [(b["name"], str(b["n"]), _fmt(b["outcome"]["mean"])) for b in section["bins"]]
    return (
        f"<p>Spearman rho({_esc(section['tension'])}, disagreement) = {_fmt(r['rho'])} "
        f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}], {p_text(r['p_permutation'], 'permutation p')}, "
        f"n = {r['n']}. Disagreement: {_esc(section['disagreement'])}.</p>"
        + _table(rows, ("tension bin", "items", "mean disagreement"))
    )


def _groups_html(section: dict[str, Any]) -> str:
    parts = [_views_html(attr, views) for attr, views in section.get("attributes", {}).items()]
    for attrs, views in section.get("intersections", {}).items():
        parts.append(_views_html(f"intersection {attrs}", views))
    if section.get("intersections_note"):
        parts.append(f"<p class='note'>{_esc(section['intersections_note'])}</p>")
    if section.get("multiple_comparisons"):
        parts.append(f"<p class='note'>Multiple comparisons: {_esc(section['multiple_comparisons'])}.</p>")
    return "".join(parts)


def _ingroup_html(section: dict[str, Any]) -> str:
    parts = [_views_html("annotators, all rules", section.get("annotators_overall", {}))]
    for rule, views in section.get("annotators_by_rule", {}).items():
        parts.append(_views_html(f"annotators, rule {rule}", views))
    for name in ("attack_success_by_red_teamer", "attack_success_by_target_group"):
        if name in section:
            parts.append(_comparison_html(name.replace("_", " "), section[name]))
    return "".join(parts)


def _raw_html(section: dict[str, Any]) -> str:
    """A section the report has no layout for: its JSON, cut to 8000 characters."""
    return f"<pre tabindex='0'>{_esc(json.dumps(section, indent=1, default=str)[:8000])}</pre>"


#: How each analysis section is drawn (by its key in the analysis).
_SECTION_HTML: dict[str, Callable[[dict[str, Any]], str]] = {
    "agreement": _agreement_html,
    "arbitration": _arbitration_html,
    "coverage": _coverage_html,
    "intersectional": _intersectional_html,
    "expert": _expert_html,
    "h1": _h1_html,
    "groups": _groups_html,
    "ingroup": _ingroup_html,
}


def _section_html(key: str, title: str, section: dict[str, Any], method: str) -> str:
    head = f"<h3>{_esc(title)}</h3>" + _method(method)
    if not section.get("computable", True):
        return head + f"<p class='nc'>Not computable: {_esc(str(section.get('reason')))}</p>"
    return head + _SECTION_HTML.get(key, _raw_html)(section)


def _counts_html(name: str, entry: dict[str, Any]) -> list[str]:
    c = entry["counts"]
    dropped = c["ratings"]["dropped"]
    reasons = "; ".join(f"{n} {r}" for r, n in dropped.items()) or "none"
    return [
        _esc(name),
        str(c["ratings"]["read"]),
        str(c["ratings"]["kept"]),
        str(sum(dropped.values())),
        reasons,
        f"{c['items']['kept']} ({c['items']['duplicate_rows_merged']} duplicate rows merged)",
    ]


def _nav(back: tuple[str, str], label: str) -> str:
    return f"<nav aria-label='{label}'><a href='{_esc(back[0], quote=True)}'>← {_esc(back[1])}</a></nav>"


def write_report(
    report: dict[str, Any], datasets: Sequence[RatingData], out: Path, *, back: tuple[str, str] | None = None
) -> list[Path]:
    """report.json (every number), item_disagreement.csv (every per-item field) and report.html.
    ``back`` is a link (address, words) the page opens and ends with, e.g. to the lab's campaign."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    written.append(path)
    written.append(write_item_csv((item_table(d) for d in datasets), out / "item_disagreement.csv"))
    body = [
        "<h1>STAR analysis report</h1>",
        f"<p>Generated {_esc(report['generated_at'])}; "
        f"bootstrap {report['settings']['bootstrap']}, seed {report['settings']['seed']}.</p>",
        "<h2>Data read</h2>",
        _method(report["methods"]["data"]),
        _table(
            [_counts_html(n, e) for n, e in report["datasets"].items()],
            ("dataset", "ratings read", "kept", "dropped", "dropped because", "items"),
        ),
    ]
    titles = {
        "agreement": "Do the annotators agree?",
        "expert": "Experts vs crowd",
        "groups": "Do groups of raters rate differently?",
        "arbitration": "Arbitration: how often two annotators were far apart",
        "ingroup": "Annotators from the targeted group vs others",
        "intersectional": "Race × gender of the targeted group",
        "coverage": "Coverage: dialogues per rule and target group",
        "h1": "H1: tension vs disagreement",
    }
    for name, entry in report["datasets"].items():
        body.append(f"<h2>{_esc(name)} <small>({_esc(entry['format'])})</small></h2>")
        body.append(
            f"<p>{entry['items']} items, {entry['ratings']} ratings, raters: {_fmt(entry['raters'])}. "
            f"Scale: {_esc(' / '.join(entry['scale']))} "
            f"({'ordered' if entry['ordered'] else 'unordered'}; default alpha level {entry['default_level']})</p>"
        )
        if source := entry.get("source"):
            body.append(
                f"<p class='note'>From {_esc(str(source['file']))} ({source['bytes']} bytes, "
                f"SHA-256 {_esc(str(source['sha256'])[:12])}…; the full hash is in report.json).</p>"
            )
        for note in entry["notes"]:
            body.append(f"<p class='note'>{_esc(note)}</p>")
        for key, title in titles.items():
            body.append(_section_html(key, title, entry[key], report["methods"][key]))
        for caption, png in _figures(name, entry):
            img = f"<img src='data:image/png;base64,{png}' alt='{_esc(caption, quote=True)}'>"
            body.append(f"<figure>{img}<figcaption>{_esc(caption)}</figcaption></figure>")
    pairs = report.get("expert_vs_crowd", {})
    body.append("<h2>Experts vs crowd across datasets</h2>")
    body.append(_method(report["methods"]["expert"]))
    if pairs.get("computable") is False:
        body.append(f"<p class='nc'>Not computable: {_esc(str(pairs.get('reason')))}</p>")
    else:
        for pair, section in pairs.items():
            body.append(f"<h4>{_esc(pair)}</h4>{_expert_html(section)}")
    body.append(_embedding_html(report.get("embedding", {}), report["methods"]["embedding"]))
    style = (
        "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 .5em}table{border-collapse:collapse}"
        "img{max-width:100%;height:auto}.scroll{overflow-x:auto}p,h2,h4{overflow-wrap:anywhere}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}.nc{color:#a40}.method{color:#555;font-size:13px}"
        "pre{background:#f6f6f6;padding:6px;font-size:12px;overflow:auto}"
        ".term{border-bottom:1px dotted #555;cursor:help}.warn{background:#fff4e0;padding:4px 8px}"
        "nav{margin:.5em 0}"
    )
    head = (
        "<meta charset='utf-8'><meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>STAR analysis</title><style>{style}</style>"
    )
    # lang, a main landmark and alt text on every figure: a screen reader can read the report
    top, end = (_nav(back, "back"), _nav(back, "back (end of report)")) if back else ("", "")
    page = (
        f"<!doctype html><html lang='en'><head>{head}</head><body>{top}<main>{''.join(body)}</main>{end}</body></html>"
    )
    (out / "report.html").write_text(page, encoding="utf-8")
    written.append(out / "report.html")
    return written
