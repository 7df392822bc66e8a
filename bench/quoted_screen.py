"""The embedded classifier's request screen on moderator asks about quoted posts.

Run from the repository root (seconds; no evaluation data needed):

    python bench/quoted_screen.py

For every ask x post of ``bench/data/moderation_asks.yaml`` it screens the request as a
negotiation does before any draft (the embedded classifier, the engine's fixed screen proposal)
under ``content-moderation`` (``quoted_material: analysed``: the request head judges the ask with
the post masked) and under ``general`` (the whole request), and prints how many the screen lets
through to a draft (no universal rule, ceiling at or above 60). It also prints how many of the
file's harmful asks hidden inside quotes pass the masked screen: those get drafts, each judged in
full by the response head and the universal rules. Aggregates only, never the items.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from psychoalign.frameworks import Framework, load_framework
from psychoalign.models.classifier import VETO_BELOW, SafetyClassifier, load_classifier
from psychoalign.negotiation.engine import SCREEN_PROPOSAL

DATA = Path(__file__).parent / "data" / "moderation_asks.yaml"


def passes(clf: SafetyClassifier, fw: Framework, request: str) -> bool:
    """The screen lets ``request`` through to a draft under ``fw``."""
    if fw.universal_request_rules(request):
        return False
    e = clf.evaluate(request, SCREEN_PROPOSAL, fw)
    universal = any(h["layer"] == "universal" for h in e["rule_hits"])
    return not universal and e["ceiling"] >= VETO_BELOW


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    clf = load_classifier()
    frameworks = [load_framework("content-moderation"), load_framework("general")]
    for kind in ("plain", "names_harm"):
        requests = [a.format(post=p) for a in data["asks"][kind] for p in data["posts"]]
        counts = ", ".join(f"{fw.name} {sum(passes(clf, fw, r) for r in requests)}" for fw in frameworks)
        print(f"moderator asks ({kind}), {len(requests)} requests, let through to a draft: {counts}")
    hidden = data["hidden"]
    counts = ", ".join(f"{fw.name} {sum(passes(clf, fw, r) for r in hidden)}" for fw in frameworks)
    print(f"harmful asks inside quotes, {len(hidden)} requests, let through to a draft: {counts}")


if __name__ == "__main__":
    main()
