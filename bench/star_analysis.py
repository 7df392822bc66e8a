"""STAR analysis benchmark. Run: python bench/star_analysis.py [--quick] [--no-embed] [--only NAME]

1. Krippendorff's alpha over 100,000 ratings (target < 2 s), and with a 1,000-resample bootstrap.
2. Rater-clustered group comparisons on 100,000 ratings from 500 raters (target < 30 s): the
   logistic model (binarised view) and the proportional-odds model (5-point scale), each with
   two-way rater x item cluster-robust standard errors, through the report's own code path.
3. The false-positive rate of those comparisons with no true group effect, rater leniency SD 1 and
   item effects SD 1 (logit scale), in the STAR in-/out-group design and the rater-attribute design,
   with Wilson 95 % intervals, beside the two-proportion z-test on the same data.
4. Tiny groups: the same null simulation (rater-attribute design) with one group of only K = 1, 2, 3
   or 5 raters beside two balanced groups; groups under 5 raters are described, not tested, and each
   group term is tested on its own raters' df; the rate must stay at the nominal 5 %.
5. The full report over four datasets of 4,000 dialogues each (16,000 dialogues): synthetic STAR
   exports with two annotators per dialogue, every analysis including the embedding map when its
   dependencies are installed (target < 10 minutes, peak memory < 4 GB).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# bench/ holds a2a.py, named like the a2a-sdk package that the tests' imports reach: take bench/ off
# the path so `import a2a` finds the SDK (as bench/a2a.py does).
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))
from tests.star.analysis.test_analysis import synthetic_star  # noqa: E402

from bench._util import Target, add_doc_flag, captured, peak_rss_mb, publish  # noqa: E402
from psychoalign.star.analysis import alpha, analyze, bootstrap_alpha, false_positive_rate, load, write_report  # noqa: E402
from psychoalign.star.analysis.simulate import simulate  # noqa: E402
from psychoalign.star.analysis.stats import compare_binary, compare_ordinal  # noqa: E402


def bench_alpha() -> list[Target]:
    rng = np.random.default_rng(0)
    counts = rng.multinomial(4, [0.3, 0.2, 0.2, 0.3], size=25_000).astype(float)  # 25,000 items x 4 ratings
    t = time.perf_counter()
    a = alpha(counts, "ordinal")
    alpha_s = time.perf_counter() - t
    t = time.perf_counter()
    bootstrap_alpha(counts, "ordinal", n_boot=1000)
    boot_s = time.perf_counter() - t
    print("Krippendorff's alpha (ordinal)")
    print(f"  100,000 ratings               {alpha_s:.3f} s   (target < 2 s), alpha = {a:.3f}")
    print(f"  with 1,000 bootstrap resamples {boot_s:.2f} s")
    return [Target("Krippendorff's alpha over 100,000 ratings", f"{alpha_s:.3f} s", "< 2 s", alpha_s < 2)]


def bench_models() -> list[Target]:
    rng = np.random.default_rng(1)
    binary = simulate(rng, "attribute", n_items=20_000, n_raters=500, per_item=5)
    likert = simulate(rng, "attribute", n_items=20_000, n_raters=500, per_item=5, points=5)
    print(f"rater-clustered comparisons, {len(binary):,} ratings from {binary['rater_id'].nunique()} raters")
    t = time.perf_counter()
    res = compare_binary(binary, "attr", binary["y"].to_numpy())
    logit_s = time.perf_counter() - t
    t = time.perf_counter()
    ordinal = compare_ordinal(likert, "attr", likert["y"].to_numpy())
    ordinal_s = time.perf_counter() - t
    p_logit, p_ord = res["model"]["joint_test"]["p_value"], ordinal["model"]["joint_test"]["p_value"]
    print(f"  logistic, two-way clustered   {logit_s:.2f} s   (target < 30 s), p = {p_logit:.3f}")
    print(f"  proportional odds, clustered  {ordinal_s:.2f} s   (target < 30 s), p = {p_ord:.3f}")
    print(f"  both                          {logit_s + ordinal_s:.2f} s")
    return [
        Target("logistic model, 100,000 ratings, two-way clustered", f"{logit_s:.2f} s", "< 30 s", logit_s < 30),
        Target("proportional-odds model, 100,000 ratings, clustered", f"{ordinal_s:.2f} s", "< 30 s", ordinal_s < 30),
    ]


def bench_false_positives(reps: int) -> list[Target]:
    print(f"false-positive rate at alpha = 0.05, no true effect, rater SD 1, item SD 1, {reps} datasets per design")
    targets = []
    for design in ("star", "attribute"):
        t = time.perf_counter()
        r = false_positive_rate(design, reps=reps, seed=2026, n_items=400, n_raters=40)
        low, high = r["ci95"]
        print(
            f"  {design:<10} clustered model {100 * r['rejection_rate']:.1f} %"
            f" (95 % CI {100 * low:.1f}-{100 * high:.1f}),"
            f" two-proportion z-test {100 * r['naive_ztest_rate']:.1f} %   [{time.perf_counter() - t:.0f} s]"
        )
        targets.append(
            Target(
                f"false-positive rate at 0.05, {design} design",
                f"{100 * r['rejection_rate']:.1f} % (95 % CI {100 * low:.1f}-{100 * high:.1f})",
                "95 % CI contains 5 %",
                low <= 0.05 <= high,
            )
        )
    return targets


def bench_tiny_groups(reps: int) -> list[Target]:
    print(f"false-positive rate at alpha = 0.05, one tiny group (K raters) beside two balanced ones, {reps} datasets")
    targets = []
    for k in (1, 2, 3, 5):
        t = time.perf_counter()
        r = false_positive_rate("attribute", reps=reps, seed=2026, n_items=400, n_raters=40, per_item=3, rare=k)
        low, high = r["ci95"]
        rare = (
            f", tiny group's own term {100 * r['rare_rejection_rate']:.1f} % ({r['rare_tested']} tested)"
            if r["rare_tested"]
            else ", tiny group described, not tested"
        )
        print(
            f"  K = {k}  joint test {100 * r['rejection_rate']:.1f} % (95 % CI {100 * low:.1f}-{100 * high:.1f})"
            f"{rare}   [{time.perf_counter() - t:.0f} s]"
        )
        targets.append(
            Target(
                f"false-positive rate at 0.05, a group of {k} rater{'s' if k > 1 else ''}",
                f"{100 * r['rejection_rate']:.1f} % (95 % CI {100 * low:.1f}-{100 * high:.1f})",
                "95 % CI contains 5 %",
                low <= 0.05 <= high,
            )
        )
    return targets


def bench_report(per: int, embed: bool) -> list[Target]:
    with tempfile.TemporaryDirectory() as tmp:
        datasets = []
        for i in range(4):
            path = Path(tmp) / f"campaign{i}.jsonl"
            rows = synthetic_star(np.random.default_rng(i), per, in_effect=0.05 * i)
            for r in rows:  # distinct text per dataset so the embedding map has something to separate
                r["turns"] = [
                    {
                        "role": "red_teamer",
                        "text": f"campaign {i} attack on {r['target_group']} about topic {j}",
                        "tension": None,
                    }
                    for j in range(2)
                ]
            path.write_text("\n".join(json.dumps(r) for r in rows))
            datasets.append(load(path))
        t = time.perf_counter()
        report = analyze(datasets, n_boot=1000, seed=0, embed=embed)
        write_report(report, datasets, Path(tmp) / "out")
        report_s = time.perf_counter() - t
    embedded = report.get("embedding", {}).get("computable", False)
    print(f"full report, 4 datasets x {per:,} dialogues ({4 * per:,}), embedding map {'on' if embedded else 'off'}")
    print(f"  wall time                     {report_s:.1f} s   (target < 600 s)")
    rss = peak_rss_mb()
    print(f"  peak RSS                      {rss:.0f} MB   (target < 4096 MB)")
    return [
        Target(f"full report over {4 * per:,} dialogues", f"{report_s:.1f} s", "< 600 s", report_s < 600),
        Target("full report, peak RSS", f"{rss:.0f} MB", "< 4096 MB", rss < 4096),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="400 dialogues per dataset, 200 simulated datasets")
    parser.add_argument("--no-embed", action="store_true", help="skip the embedding map")
    parser.add_argument(
        "--only", choices=["alpha", "models", "false-positives", "tiny-groups", "report"], help="one part only"
    )
    parser.add_argument("--reps", type=int, default=None, help="simulated datasets per design (default 1000)")
    add_doc_flag(parser)
    args = parser.parse_args()
    reps = args.reps or (200 if args.quick else 1000)
    parts = {
        "alpha": bench_alpha,
        "models": bench_models,
        "false-positives": lambda: bench_false_positives(reps),
        "tiny-groups": lambda: bench_tiny_groups(reps),
        "report": lambda: bench_report(400 if args.quick else 4000, not args.no_embed),
    }
    targets: list[Target] = []
    with captured() as out:
        for name, fn in parts.items():
            if args.only in (None, name):
                targets += fn()
    if not args.no_doc:
        publish(
            "star-analysis",
            "STAR analysis — `bench/star_analysis.py`",
            out.getvalue(),
            targets,
            quick=args.quick,
            note="Synthetic data throughout. The models are the report's own rater-clustered comparisons "
            "(logistic on the binarised view, proportional odds on a 5-point scale, two-way rater x item "
            "cluster-robust errors). The false-positive rate is measured on simulated datasets with no "
            "group effect (rater SD 1, item SD 1), beside the two-proportion z-test on the same data. The "
            "full report covers four synthetic STAR exports; the embedding map runs unless `--no-embed`.",
        )


if __name__ == "__main__":
    main()
