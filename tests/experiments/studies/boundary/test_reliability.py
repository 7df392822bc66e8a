"""ICC(2,1) and ICC(3,1) checked against pingouin on data with rater and item effects."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psychoalign.errors import InputError
from psychoalign.experiments.studies.boundary.reliability import icc

pg = pytest.importorskip("pingouin")


def _ratings(rng: np.random.Generator, n: int, k: int, item_sd: float, run_sd: float, noise_sd: float) -> np.ndarray:
    """Targets x runs with item effects, run (rater) offsets, noise and a tension-like [0, 1] squash."""
    item = rng.normal(0, item_sd, size=(n, 1))
    run = rng.normal(0, run_sd, size=(1, k))
    raw = 0.4 + item + run + rng.normal(0, noise_sd, size=(n, k))
    return np.asarray(np.clip(raw, 0.0, 1.0))


@pytest.fixture(autouse=True)
def _unrounded_pingouin(monkeypatch: pytest.MonkeyPatch) -> None:
    """pingouin rounds its CI column to 2 decimals by default: compare at full precision."""
    monkeypatch.delitem(pg.options, "round.column.CI95", raising=False)


def _pingouin(x: np.ndarray) -> pd.DataFrame:
    """pingouin's table indexed ICC2 / ICC3 (0.7 names them ICC(A,1) / ICC(C,1))."""
    n, k = x.shape
    long = pd.DataFrame(
        [{"item": i, "run": j, "t": x[i, j]} for i in range(n) for j in range(k) if not np.isnan(x[i, j])]
    )
    out = pg.intraclass_corr(long, targets="item", raters="run", ratings="t", nan_policy="omit")
    names = {"ICC(A,1)": "ICC2", "ICC(C,1)": "ICC3", "ICC2": "ICC2", "ICC3": "ICC3"}
    out = out[out["Type"].isin(names)].assign(Type=lambda f: f["Type"].map(names)).set_index("Type")
    return out.rename(columns={"CI95%": "CI95"})


@pytest.mark.parametrize(
    ("n", "k", "item_sd", "run_sd", "noise_sd", "seed"),
    [
        (30, 2, 0.2, 0.0, 0.05, 1),
        (60, 3, 0.15, 0.05, 0.1, 2),  # a run that shifts every T: ICC(2,1) < ICC(3,1)
        (12, 5, 0.05, 0.02, 0.2, 3),  # mostly noise
        (200, 4, 0.3, 0.1, 0.02, 4),
    ],
)
def test_icc_equals_pingouin(n: int, k: int, item_sd: float, run_sd: float, noise_sd: float, seed: int) -> None:
    x = _ratings(np.random.default_rng(seed), n, k, item_sd, run_sd, noise_sd)
    ours = icc(x)
    ref = _pingouin(x)
    assert ours.icc2 == pytest.approx(ref.loc["ICC2", "ICC"], abs=1e-9)
    assert ours.icc3 == pytest.approx(ref.loc["ICC3", "ICC"], abs=1e-9)
    for name, ci in (("ICC2", ours.icc2_ci), ("ICC3", ours.icc3_ci)):
        assert ci is not None
        lo, hi = ref.loc[name, "CI95"]
        assert ci[0] == pytest.approx(lo, abs=1e-9)
        assert ci[1] == pytest.approx(hi, abs=1e-9)
        assert ci[0] <= (ours.icc2 if name == "ICC2" else ours.icc3) <= ci[1]  # type: ignore[operator]
    assert ours.n_targets == n and ours.n_runs == k


def test_icc_drops_incomplete_targets_like_pingouin() -> None:
    x = _ratings(np.random.default_rng(7), 40, 3, 0.2, 0.05, 0.05)
    x[[3, 17, 29], [0, 2, 1]] = np.nan
    ours = icc(x)
    ref = _pingouin(x)
    assert ours.dropped_targets == 3 and ours.n_targets == 37
    assert ours.icc2 == pytest.approx(ref.loc["ICC2", "ICC"], abs=1e-9)
    assert ours.icc3 == pytest.approx(ref.loc["ICC3", "ICC"], abs=1e-9)


def test_icc_of_identical_runs_is_one_and_of_constant_data_undefined() -> None:
    col = np.linspace(0.0, 0.9, 10)
    same = icc(np.column_stack([col, col]))
    assert same.icc2 == pytest.approx(1.0) and same.icc3 == pytest.approx(1.0)
    flat = icc(np.full((5, 2), 0.2))
    assert flat.icc2 is None and flat.icc3 is None and flat.icc2_ci is None


def test_icc_bad_shapes_give_one_line_errors() -> None:
    with pytest.raises(InputError, match="at least 2 runs"):
        icc(np.zeros((5, 1)))
    with pytest.raises(InputError, match="at least 2 requests"):
        icc(np.array([[0.1, 0.2], [np.nan, 0.3]]))
