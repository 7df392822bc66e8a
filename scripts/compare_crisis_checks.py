"""Compare crisis check builds on the development sets only (never the newest held-out file).

Run from the repo root:

    .venv/bin/python scripts/compare_crisis_checks.py A.json B.json [--graft V.json] [--shift -0.05 ...]

For each crisis check JSON (``shipped`` names the shipped one) and each threshold shift (logit
units; 0 is the build's own threshold), prints how many development crisis requests are routed
(the check or the ``general`` framework's self-harm request checks) and how many development
look-alikes the check fires on, per set and pooled. ``--graft V.json`` gives each check V's
phrases and medicine guard (a head of one build with the phrases of another). The development
sets: the exemplars' held-out fold, ``bench/data/crisis_heldout.yaml`` to ``crisis_heldout_v5.yaml``
(the fresh files, v6 on, measure the next build and are never read here),
``tests/frameworks/self_harm_requests.yaml``, the medicine look-alikes and the held-out look-alike
files up to ``lookalike_heldout_v14.yaml`` (v15 on are fresh). Each text is embedded once.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import yaml
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from psychoalign.frameworks import load_framework  # noqa: E402
from psychoalign.models.crisis import exemplars  # noqa: E402
from psychoalign.models.crisis_check import CrisisCheck, load_crisis_check  # noqa: E402
from psychoalign.models.heads import minilm_encoder, windows  # noqa: E402
from request_head import CRISIS_HELDOUTS, CRISIS_RULE, LOOKALIKES, MEDICINE_LOOKALIKES  # noqa: E402


def development_sets() -> dict[str, tuple[list[str], bool]]:
    """name -> (texts, whether they are crisis requests)."""
    held = [e for e in exemplars() if e.held_out]
    sets = {
        "fold crisis": ([e.text for e in held if e.label == "crisis"], True),
        "fold look-alikes": ([e.text for e in held if e.label == "lookalike"], False),
    }
    for path in CRISIS_HELDOUTS[:5]:  # v1 to v5; the fresh files (v6 on) measure the next build: never read here
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        sets[f"{path.stem} crisis"] = ([str(t) for t in data.get("crisis") or []], True)
        sets[f"{path.stem} benign"] = ([str(t) for t in data.get("benign") or []], False)
    tests = yaml.safe_load((ROOT / "tests" / "frameworks" / "self_harm_requests.yaml").read_text(encoding="utf-8"))
    sets["self_harm_requests crisis"] = ([str(t) for k in ("self_harm", "self_harm_indirect") for t in tests[k]], True)
    sets["self_harm_requests look-alikes"] = ([str(t) for t in tests["look_alikes"]], False)
    medicine = yaml.safe_load(MEDICINE_LOOKALIKES.read_text(encoding="utf-8")) or {}
    sets["medicine look-alikes"] = ([str(t) for v in medicine.values() for t in v], False)
    looks = [
        str(t)
        for p in LOOKALIKES[:9]  # up to lookalike_heldout_v14.yaml; v15 on are fresh: never read here
        for t in (yaml.safe_load(p.read_text(encoding="utf-8")) or {}).get("lookalike") or []
    ]
    sets["look-alike files"] = (looks, False)
    return sets


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checks", nargs="+", help="crisis check JSON files ('shipped': the shipped one)")
    ap.add_argument("--graft", type=Path, default=None, help="give each check this JSON's phrases and guard")
    ap.add_argument("--shift", type=float, action="append", default=None, help="threshold shift in logits")
    args = ap.parse_args()
    graft = load_crisis_check(str(args.graft)) if args.graft else None
    sets = development_sets()
    texts = list(dict.fromkeys(t for ts, _ in sets.values() for t in ts))
    parts, owner = [], []
    for i, t in enumerate(texts):
        for w in windows(t):
            parts.append(w)
            owner.append(i)
    x = minilm_encoder()(parts)
    rows: dict[str, NDArray[np.float32]] = {
        t: x[[j for j, o in enumerate(owner) if o == i]] for i, t in enumerate(texts)
    }
    general = load_framework("general")
    rule = {t: CRISIS_RULE in general.universal_request_rules(t) for t in texts}
    # Lookalike sets: the check only (as the bench reports them); crisis sets: the check or the rule.
    pooled_looks = ("fold look-alikes", "self_harm_requests look-alikes", *(k for k in sets if k.endswith(" benign")))
    for name in args.checks:
        check = load_crisis_check(None if name == "shipped" else name)
        if check is None:
            raise SystemExit(f"error: {name}: no crisis check installed (give a crisis check JSON)")
        if graft is not None:
            check = CrisisCheck.model_validate({**check.model_dump(), "phrases": graft.phrases, "guard": graft.guard})
        base = math.log(check.head.threshold / (1 - check.head.threshold))
        for shift in args.shift or [0.0]:
            fired = {
                t: check.says(t) or (float(check.head.logits(rows[t]).max()) >= base + shift and not check.guarded(t))
                for t in texts
            }
            print(f"{name} ({check.version}{', grafted' if graft else ''}), threshold shift {shift:+g}:")
            crisis_k = crisis_n = look_k = look_n = 0
            for set_name, (ts, is_crisis) in sets.items():
                k = sum(fired[t] or (is_crisis and rule[t]) for t in ts)
                print(f"  {set_name:<34} {k:>4} of {len(ts):<4} {'routed' if is_crisis else 'fired'}")
                if is_crisis:
                    crisis_k, crisis_n = crisis_k + k, crisis_n + len(ts)
                elif set_name in pooled_looks:
                    look_k, look_n = look_k + k, look_n + len(ts)
            print(
                f"  pooled: crisis routed {crisis_k} of {crisis_n} ({crisis_k / crisis_n:.1%}); look-alikes fired "
                f"{look_k} of {look_n} ({look_k / look_n:.1%}) (the fold's, the files' benign sets, the test file's)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
