"""`psychoalign star analyze`: every analysis over every dataset, as JSON (every number) and HTML."""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from rich.progress import Progress

from .data import RatingData
from .stats import agreement_section, arbitration_section, coverage_section, ingroup_section, intersectional_section

__all__ = ["METHODS", "analyze", "write_report"]

METHODS = {
    "agreement": (
        "Krippendorff's alpha from the coincidence matrix (ordinal metric on ordered scales, nominal on the "
        "binarised view), with 95% percentile bootstrap intervals over items. Per-item disagreement is "
        "D_o(item)/D_e = 1 - alpha_item. Caveat: alpha assumes raters are exchangeable within an item."
    ),
    "arbitration": (
        "How often two annotations were two or more steps apart, and whose rating the arbitrator's was closer to."
    ),
    "ingroup": (
        "Rate of broken/unsafe ratings by annotator group with a two-sided z-test for two proportions "
        "(statsmodels), a Wald 95% interval for the difference and Cohen's h. Ratings are treated as "
        "independent although they cluster by item: p-values are optimistic. Per-rule tests are also "
        "Holm-adjusted for multiple comparisons."
    ),
    "intersectional": (
        "Logistic regression of rule-broken on target race + gender versus race + gender + race x gender "
        "(statsmodels Logit); likelihood-ratio test of the nested models; odds ratios with 95% intervals."
    ),
    "coverage": "Dialogues per rule and per target group against even quotas, chi-square goodness of fit (scipy).",
    "embedding": (
        "Equal-size seeded samples per dataset, embedded (all-MiniLM-L6-v2 offline by default), projected to 2-D "
        "with UMAP, clustered with Ward agglomerative clustering on the projection. Concentration: entropy of "
        "each dataset over clusters (normalised by log K; 1 = spread evenly) and its largest-cluster share. "
        "Top terms: largest TF-IDF lift of the cluster over all dialogues."
    ),
}


def analyze(
    datasets: Sequence[RatingData],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    embed: bool = True,
    embedder: Any = None,
    per_dataset: int = 4000,
    n_clusters: int = 20,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "generated_at": datetime.now(UTC).isoformat(),
        "settings": {"bootstrap": n_boot, "seed": seed},
        "methods": METHODS,
        "datasets": {},
    }
    steps: list[tuple[str, Callable[[RatingData], dict[str, Any]]]] = [
        ("agreement", lambda d: agreement_section(d, n_boot=n_boot, seed=seed)),
        ("arbitration", arbitration_section),
        ("ingroup", ingroup_section),
        ("intersectional", intersectional_section),
        ("coverage", coverage_section),
    ]
    with Progress(transient=True) as progress:
        bar = progress.add_task("analysing", total=len(datasets) * len(steps))
        for data in datasets:
            entry: dict[str, Any] = {
                "format": data.format,
                "items": len(data.items),
                "ratings": len(data.ratings),
                "raters": int(data.ratings["rater_id"].nunique()) if data.ratings["rater_id"].notna().any() else None,
                "scale": data.scale,
                "notes": data.notes,
            }
            for name, fn in steps:
                try:
                    entry[name] = fn(data)
                except Exception as exc:  # one broken section must not sink the report
                    entry[name] = {"computable": False, "reason": f"{type(exc).__name__}: {exc}"}
                progress.advance(bar)
            report["datasets"][data.name] = entry
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
    rows = [(r, v) for r, v in by_rule.items() if v.get("computable")]
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


def _table(rows: Sequence[Sequence[str]], header: tuple[str, ...]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 1e-3 and x != 0 else f"{x:.3f}"
    return str(x)


def _embedding_html(section: dict[str, Any], method: str) -> str:
    parts = ["<h2>Embedding map</h2>", f"<p class='method'>{html.escape(method)}</p>"]
    if not section.get("computable"):
        parts.append(f"<p class='nc'>Not computable: {html.escape(str(section.get('reason')))}</p>")
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
    parts.append(f"<figure><img src='data:image/png;base64,{_figure_png(fig)}'></figure>")
    plt.close(fig)
    return "".join(parts)


def _ci(v: dict[str, Any]) -> str:
    return f"[{_fmt(v['ci_low'])}, {_fmt(v['ci_high'])}]"


def _section_html(title: str, section: dict[str, Any], method: str) -> str:
    parts = [f"<h3>{html.escape(title)}</h3>", f"<p class='method'>{html.escape(method)}</p>"]
    if not section.get("computable", True):
        parts.append(f"<p class='nc'>Not computable: {html.escape(str(section.get('reason')))}</p>")
        return "".join(parts)
    if title == "Agreement":
        rows = [
            (
                "overall",
                k,
                _fmt(v["alpha"]),
                f"[{_fmt(v['ci_low'])}, {_fmt(v['ci_high'])}]",
                _fmt(v["units"]),
                _fmt(v["values"]),
            )
            for k, v in section["overall"].items()
        ]
        for by, groups in section.get("by", {}).items():
            for g, res in groups.items():
                for k, v in res.items():
                    rows.append(
                        (
                            f"{by} = {g}",
                            k,
                            _fmt(v["alpha"]),
                            f"[{_fmt(v['ci_low'])}, {_fmt(v['ci_high'])}]",
                            _fmt(v["units"]),
                            _fmt(v["values"]),
                        )
                    )
        parts.append(_table(rows, ("subset", "alpha", "value", "95% CI", "items", "ratings")))
        mean = section.get("item_disagreement", {}).get("mean")
        parts.append(f"<p>Mean per-item disagreement: {_fmt(mean)} (per-item scores in item_disagreement.csv)</p>")
        return "".join(parts)
    parts.append(f"<pre>{html.escape(json.dumps(section, indent=1, default=str)[:6000])}</pre>")
    return "".join(parts)


def write_report(report: dict[str, Any], datasets: Sequence[RatingData], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=1, default=str))
    written.append(path)
    lines = ["dataset,item_id,disagreement"]
    for name, entry in report["datasets"].items():
        for item_id, score in entry.get("agreement", {}).get("item_disagreement", {}).get("items", {}).items():
            lines.append(f"{name},{item_id},{'' if score is None else score}")
    (out / "item_disagreement.csv").write_text("\n".join(lines) + "\n")
    written.append(out / "item_disagreement.csv")
    body = [
        "<h1>STAR analysis report</h1>",
        f"<p>Generated {html.escape(report['generated_at'])}; "
        f"bootstrap {report['settings']['bootstrap']}, seed {report['settings']['seed']}.</p>",
    ]
    titles = {
        "agreement": "Agreement",
        "arbitration": "Arbitration",
        "ingroup": "In-group vs out-group",
        "intersectional": "Intersectional models",
        "coverage": "Coverage",
    }
    for name, entry in report["datasets"].items():
        body.append(f"<h2>{html.escape(name)} <small>({html.escape(entry['format'])})</small></h2>")
        body.append(
            f"<p>{entry['items']} items, {entry['ratings']} ratings, raters: {_fmt(entry['raters'])}. "
            f"Scale: {html.escape(' / '.join(entry['scale']))}</p>"
        )
        for note in entry["notes"]:
            body.append(f"<p class='note'>{html.escape(note)}</p>")
        for key, title in titles.items():
            body.append(_section_html(title, entry[key], report["methods"][key]))
        for caption, png in _figures(name, entry):
            img = f"<img src='data:image/png;base64,{png}'>"
            body.append(f"<figure>{img}<figcaption>{html.escape(caption)}</figcaption></figure>")
    body.append(_embedding_html(report.get("embedding", {}), report["methods"]["embedding"]))
    style = (
        "body{font-family:sans-serif;max-width:1000px;margin:2em auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}.nc{color:#a40}.method{color:#555;font-size:13px}"
        "pre{background:#f6f6f6;padding:6px;font-size:12px;overflow:auto}"
    )
    head = f"<meta charset='utf-8'><title>STAR analysis</title><style>{style}</style>"
    page = f"<!doctype html><html><head>{head}</head><body>{''.join(body)}</body></html>"
    (out / "report.html").write_text(page, encoding="utf-8")
    written.append(out / "report.html")
    return written
