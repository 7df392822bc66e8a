"""Reports for boundary profiling, test–retest and H1: figures (matplotlib, PNG) and one HTML page
plus the JSON every number of the page comes from.

The HTML is a static file: every string from a corpus, a dataset or a model is escaped, images are
embedded as data URIs, and a Content-Security-Policy allows nothing but those images and the one
stylesheet (pinned by its hash), so a hostile request text cannot run script in a reader's browser.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import math
from pathlib import Path
from typing import Any

from ....star.analysis.pvalues import p_text, p_value

__all__ = ["render_boundary_html", "render_h1_html", "write_report"]

STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}"
    "th{background:#f4f4f4}.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".warn{background:#fff3cd;padding:.5em;border:1px solid #e0c060}.muted{color:#666}img{max-width:100%}"
    "code{font-size:90%}"
)


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
    return f"default-src 'none'; img-src data:; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bar_chart(report: dict[str, Any]) -> str:
    """Figure 4: mean T per domain with 95 % bootstrap CIs, highest first (PNG, base64)."""
    plt = _plt()
    order = [d for d in report["domain_order"] if report["per_domain"][d]["mean"] is not None]
    means = [report["per_domain"][d]["mean"] for d in order]
    low = [
        m - (report["per_domain"][d]["ci_low"] if report["per_domain"][d]["ci_low"] is not None else m)
        for d, m in zip(order, means, strict=True)
    ]
    high = [
        (report["per_domain"][d]["ci_high"] if report["per_domain"][d]["ci_high"] is not None else m) - m
        for d, m in zip(order, means, strict=True)
    ]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(order)), 4.0))
    ax.bar(range(len(order)), means, yerr=[low, high], capsize=3, color="#4c72b0")
    ax.set_xticks(range(len(order)), order, rotation=40, ha="right")
    ax.set_ylabel(f"mean T ({report['definition']})")
    ax.set_title("Mean tension by domain (95% bootstrap CI)")
    ax.set_ylim(0, max([1e-3, *(m + h for m, h in zip(means, high, strict=True))]) * 1.1)
    return _png(fig)


def heat_map(report: dict[str, Any]) -> str:
    """Figure 3: mean T per domain × category; darker = more contested; n in each cell."""
    plt = _plt()
    heat = report["heatmap"]
    rows = [[math.nan if v is None else v for v in row] for row in heat["mean"]]
    vmax = max([0.05, *(v for r in rows for v in r if not math.isnan(v))])
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(heat["categories"]), 0.9 + 0.45 * len(heat["domains"])))
    image = ax.imshow(rows, cmap="Reds", vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(heat["categories"])), heat["categories"], rotation=30, ha="right")
    ax.set_yticks(range(len(heat["domains"])), heat["domains"])
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            n = heat["n"][i][j]
            if n:
                color = "white" if v > 0.6 * vmax else "black"
                ax.text(j, i, f"{v:.2f}\nn={n}", ha="center", va="center", fontsize=7, color=color)
    fig.colorbar(image, ax=ax, label=f"mean T ({report['definition']})")
    ax.set_title("Tension by domain and category")
    return _png(fig)


def scatter_plot(report: dict[str, Any]) -> str:
    """H1: T against 1 − α_item, one point per item, with the bin cuts."""
    plt = _plt()
    pts = [p for p in report["points"] if p["tension"] is not None and p["disagreement"] is not None]
    fig, ax = plt.subplots(figsize=(6.0, 4.5))
    colors = ["#c44e52" if (p["share_unsafe"] or 0) > 0.5 else "#4c72b0" for p in pts]
    ax.scatter([p["tension"] for p in pts], [p["disagreement"] for p in pts], s=12, alpha=0.6, c=colors)
    for b in report["bins"][:-1]:
        ax.axvline(b["high"], color="#999", lw=0.8, ls="--")
    s = report["spearman"]
    rho = "n/a" if s["rho"] is None else f"{s['rho']:.3f}"
    ax.set_title(f"T vs human disagreement: Spearman rho = {rho} (n = {s['n']})")
    ax.set_xlabel(f"T ({report['definition']})")
    ax.set_ylabel("disagreement 1 - alpha_item")
    ax.set_xlim(-0.02, 1.02)
    return _png(fig)


def _f(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) < 1e-3 and v != 0 else f"{v:.{digits}f}"
    return str(v)


def _ci(d: dict[str, Any], key: str = "mean") -> str:
    if d.get(key) is None:
        return "–"
    if d.get("ci_low") is None:
        return _f(d[key]) + (
            " (all equal)" if d.get("sd") == 0 else f" (no interval: {d['note']})" if d.get("note") else ""
        )
    return f"{_f(d[key])} [{_f(d['ci_low'])}, {_f(d['ci_high'])}]"


def _table(header: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class='num'>{html.escape(c)}</td>" if i >= numeric_from else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _page(title: str, parts: list[str]) -> str:
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{_csp()}\">"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>" + "".join(parts) + "</body></html>"
    )


def _kw(kw: dict[str, Any]) -> str:
    if not kw.get("computable", True):
        return f"not computable: {kw.get('reason')}"
    return (
        f"H = {_f(kw['h'])}, df = {kw['df']}, {p_text(kw['p'], missing='–')}, ε² = {_f(kw['epsilon2'])}"
        + (f" (≈ {_f(kw['epsilon2_null'])} with no effect)" if kw.get("epsilon2_null") else "")
        + f", η²_H = {_f(kw['eta2_h'])} (n = {kw['n']}, {kw['groups']} groups)"
        + (f"; p by {kw['p_method']}" if str(kw.get("p_method", "")).startswith("permutation") else "")
    )


def _icc_cell(entry: dict[str, Any], key: str) -> str:
    if not entry.get("computable"):
        return "–"
    ci = entry.get(f"{key}_ci")
    value = entry.get(key)
    return f"{_f(value)} [{_f(ci[0])}, {_f(ci[1])}]" if ci else _f(value)


def render_boundary_html(report: dict[str, Any]) -> str:
    corpus = report.get("corpus", {})
    counts = report["counts"]
    parts = [
        "<h1>Alignment boundary profile</h1>",
        f"<p>Corpus <b>{html.escape(str(corpus.get('name', '?')))}</b>: {counts['items']} requests, "
        f"{counts['completed']} negotiated, {counts['failed']} failed (never counted as T = 0). "
        f"Tension definition: <code>{html.escape(report['definition'])}</code>. "
        f"Runs per request: {report.get('runs', 1)}.</p>",
    ]
    if report.get("models"):
        parts.append(
            "<p class='muted'>Models: "
            + html.escape(", ".join(f"{k} = {v}" for k, v in report["models"].items()))
            + "</p>"
        )
    parts.append(f"<p>Overall mean T: {html.escape(_ci(report['overall']))}</p>")
    parts.append("<h2>Mean tension by domain (Figure 4)</h2>")
    parts.append(f"<img alt='bar chart' src='data:image/png;base64,{bar_chart(report)}'>")
    rows = [
        [d, _ci(report["per_domain"][d]), str(report["per_domain"][d]["n"]), str(report["per_domain"][d]["failed"])]
        for d in report["domain_order"]
    ]
    parts.append(_table(["domain", "mean T [95% CI]", "n", "failed"], rows))
    parts.append(f"<p>Kruskal–Wallis across domains (H2): {html.escape(_kw(report['kruskal_domains']))}</p>")
    parts.append(f"<p>Kruskal–Wallis across categories: {html.escape(_kw(report['kruskal_categories']))}</p>")
    parts.append("<h2>Domain × category (Figure 3)</h2>")
    parts.append(f"<img alt='heat map' src='data:image/png;base64,{heat_map(report)}'>")
    cat_rows = [[c, _ci(v), str(v["n"])] for c, v in sorted(report["per_category"].items())]
    parts.append(_table(["category", "mean T [95% CI]", "n"], cat_rows))
    retest = report.get("retest")
    if retest is not None:
        parts.append("<h2>Test–retest reliability</h2>")
        if retest.get("warning"):
            parts.append(f"<p class='warn'>{html.escape(retest['warning'])}</p>")
        entry = retest["definitions"][report["definition"]]
        parts.append(
            f"<p>{retest['runs']} runs. Overall ICC(2,1) = {html.escape(_icc_cell(entry['overall'], 'icc2'))}; "
            f"ICC(3,1) = {html.escape(_icc_cell(entry['overall'], 'icc3'))}.</p>"
        )
        rows = [
            [dom, _icc_cell(v, "icc2"), _icc_cell(v, "icc3"), str(v.get("n_targets", "–"))]
            for dom, v in entry["per_domain"].items()
        ]
        parts.append(_table(["domain", "ICC(2,1) [95% CI]", "ICC(3,1) [95% CI]", "requests"], rows))
    parts.append("<h2>Which tension definition?</h2>")
    def_rows = []
    for name, d in report["definitions"].items():
        kw = d["kruskal_domains"]
        icc_text = "–"
        if retest is not None:
            icc_text = _icc_cell(retest["definitions"][name]["overall"], "icc2")
        def_rows.append([name, _f(d["mean"]), _f(kw.get("epsilon2")) if kw.get("computable") else "–", icc_text])
    parts.append(_table(["definition", "mean T", "ε² across domains", "ICC(2,1) [95% CI]"], def_rows))
    parts.append(
        "<p class='muted'>Higher ε² separates domains more; higher ICC is more stable across reruns. "
        "Human disagreement (H1) is the third criterion: <code>psychoalign experiment run h1</code>.</p>"
    )
    parts.append("<h2>Highest-tension requests</h2>")
    top_rows = [
        [t["id"], t["domain"], t["category"], _f(t["tension"]), t["state"] or "–", t["trace_id"] or "–", t["request"]]
        for t in report["top_items"]
    ]
    parts.append(_table(["id", "domain", "category", "T", "state", "trace id", "request"], top_rows, numeric_from=3))
    parts.append("<p class='muted'>Show a trace with <code>psychoalign traces show TRACE_ID</code>.</p>")
    if counts["failures"]:
        parts.append("<h2>Failed negotiations</h2>")
        parts.append(
            _table(
                ["id", "trace id", "error"],
                [[f["id"], f["trace_id"] or "–", f["error"] or "–"] for f in counts["failures"]],
                numeric_from=9,
            )
        )
    return _page("PsychoAlign boundary profile", parts)


def render_h1_html(report: dict[str, Any]) -> str:
    ds = report.get("dataset", {})
    counts = report["counts"]
    s = report["spearman"]
    parts = [
        "<h1>H1: tension vs human disagreement</h1>",
        f"<p>Dataset <b>{html.escape(str(ds.get('name', '?')))}</b> ({html.escape(str(ds.get('format', '?')))}): "
        f"{counts['items']} items, {counts['ratings']} ratings; {counts['with_tension']} with a tension, "
        f"{counts['failed']} failed negotiations.</p>",
        f"<p class='muted'>Mapping: {html.escape(str(ds.get('mapping', '')))}.</p>",
        f"<p class='muted'>Disagreement: {html.escape(report['disagreement']['headline'])}.</p>",
        "<h2>Spearman's ρ(T, 1 − α_item)</h2>",
        f"<p><b>ρ = {_f(s['rho'])}</b>, 95% bootstrap CI [{_f(s['ci_low'])}, {_f(s['ci_high'])}], "
        f"{p_text(s['p_permutation'], 'permutation p', '–')} ({s['n_perm']} permutations), n = {s['n']}; "
        f"definition <code>{html.escape(report['definition'])}</code>.</p>",
        f"<img alt='scatter plot' src='data:image/png;base64,{scatter_plot(report)}'>",
        "<h2>By tension bin</h2>",
    ]
    rows = [
        [b["name"], f"{_f(b['low'], 2)}–{_f(b['high'], 2)}", str(b["n"]), _ci(b["outcome"]), _f(b["outcome_median"])]
        for b in report["bins"]
    ]
    parts.append(_table(["bin", "T range", "items", "mean disagreement [95% CI]", "median"], rows))
    if report.get("bins_kruskal"):
        parts.append(f"<p>Kruskal–Wallis across bins: {html.escape(_kw(report['bins_kruskal']))}</p>")
    parts.append("<h2>Reverse check: does T predict the majority label?</h2>")
    rev = report["reverse_check"]
    auc = rev["auc_t_for_majority_unsafe"]
    if auc.get("computable"):
        parts.append(
            f"<p>AUC of T for a majority-unsafe item = {_f(auc['auc'])} "
            + (
                f"[{_f(auc['ci_low'])}, {_f(auc['ci_high'])}] "
                if auc.get("ci_low") is not None
                else f"(no interval: {html.escape(str(auc.get('ci_note')))}) "
            )
            + f"({p_text(auc['p_mannwhitney'], 'Mann–Whitney p', '–')}; "
            f"{auc['n_unsafe']} unsafe, {auc['n_safe']} safe). "
            "0.5 = T carries no information about the label.</p>"
        )
    else:
        parts.append(f"<p>AUC not computable: {html.escape(str(auc.get('reason')))}</p>")
    within = rev["rho_within_majority"]
    parts.append(
        _table(
            ["stratum", "ρ(T, disagreement) [95% CI]", "n"],
            [[k, _ci(v, "rho"), str(v["n"])] for k, v in within.items()],
        )
    )
    parts.append("<h2>Which tension definition?</h2>")
    parts.append(
        _table(
            ["definition", "ρ [95% CI]", "permutation p"],
            [[k, _ci(v, "rho"), p_value(v["p_permutation"], "–")] for k, v in report["definitions"].items()],
        )
    )
    return _page("PsychoAlign H1", parts)


def write_report(out: Path, report: dict[str, Any], html_text: str) -> tuple[Path, Path]:
    """Write ``out/results.json`` and ``out/report.html``; returns both paths. The command line
    writes into a temporary folder that becomes ``--out DIR`` whole (cli.common.out_folder)."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / "results.json", out / "report.html"
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    html_path.write_text(html_text, encoding="utf-8")
    return json_path, html_path
