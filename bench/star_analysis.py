"""STAR analysis benchmark. Run: .venv/bin/python bench/star_analysis.py [--quick]

1. Krippendorff's alpha over 100,000 ratings (target < 2 s), and with a 1,000-resample bootstrap.
2. The full report over four datasets of 4,000 dialogues each (16,000 dialogues): synthetic STAR
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.test_star_analysis import synthetic_star

from _util import peak_rss_mb
from psychoalign.star.analysis import alpha, analyze, bootstrap_alpha, load, write_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="400 dialogues per dataset")
    parser.add_argument("--no-embed", action="store_true", help="skip the embedding map")
    args = parser.parse_args()
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
    per = 400 if args.quick else 4000
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
        report = analyze(datasets, n_boot=1000, seed=0, embed=not args.no_embed)
        write_report(report, datasets, Path(tmp) / "out")
        report_s = time.perf_counter() - t
    embedded = report.get("embedding", {}).get("computable", False)
    print(f"full report, 4 datasets x {per:,} dialogues ({4 * per:,}), embedding map {'on' if embedded else 'off'}")
    print(f"  wall time                     {report_s:.1f} s   (target < 600 s)")
    print(f"  peak RSS                      {peak_rss_mb():.0f} MB   (target < 4096 MB)")


if __name__ == "__main__":
    main()
