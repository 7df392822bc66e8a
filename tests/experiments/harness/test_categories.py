"""Scores per category: intervals as in the main table, failed cells counted, never scored."""

from __future__ import annotations

from psychoalign.experiments.harness.benchmark import Benchmark, Metric
from psychoalign.experiments.harness.categories import category_results
from psychoalign.experiments.harness.stats import wilson_ci
from psychoalign.experiments.harness.store import CellResult


class _Bench:
    by_category = True
    metrics = (Metric("attack_success", "ASR", binary=True), Metric("score", "score", binary=False))


def _cell(i: int, category: str | None, status: str = "done", **metrics: float) -> CellResult:
    details = {"category": category} if category is not None else {}
    return CellResult(
        run_id="r",
        key=f"k{i}",
        system="s",
        benchmark="b",
        item_id=str(i),
        status=status,
        metrics=metrics,
        details=details,  # type: ignore[arg-type]
    )


def test_rows_per_category() -> None:
    cells = [
        _cell(0, "a", attack_success=1.0, score=0.5),
        _cell(1, "a", attack_success=0.0, score=0.0),
        _cell(2, "a", attack_success=1.0, score=1.0),
        _cell(3, "b", attack_success=0.0),
        _cell(4, "b", status="failed"),
        _cell(5, None, attack_success=1.0),  # no category: not in any row
    ]
    benches: dict[str, Benchmark] = {"b": _Bench()}  # type: ignore[dict-item]
    rows = category_results(["s"], benches, cells, seed=0)
    by = {(r["metric"], r["category"]): r for r in rows}
    assert set(by) == {("attack_success", "a"), ("attack_success", "b"), ("score", "a")}
    a = by[("attack_success", "a")]
    low, high = wilson_ci(2, 3)
    assert (a["successes"], a["n"], a["mean"]) == (2, 3, 0.667)
    assert (a["ci_low"], a["ci_high"]) == (round(low, 3), round(high, 3))
    assert by[("attack_success", "b")]["failed"] == 1 and by[("attack_success", "b")]["n"] == 1
    score = by[("score", "a")]  # three graded items: no bootstrap interval (it would cover far less than 95 %)
    assert score["ci_method"] is None and score["successes"] is None
    assert (score["ci_low"], score["ci_high"]) == (None, None) and "fewer than 10 items" in score["ci_note"]
    assert rows == category_results(["s"], benches, cells, seed=0)  # seeded: reproducible


def test_benchmarks_without_categories_give_no_rows() -> None:
    bench = _Bench()
    bench.by_category = False  # type: ignore[misc]
    assert category_results(["s"], {"b": bench}, [_cell(0, "a", attack_success=1.0)], seed=0) == []  # type: ignore[dict-item]
