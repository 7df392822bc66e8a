"""Run the outcome probes (bench/data/outcome_probes4.yaml) and count the replies a user could accept.

Two runs, chosen with ``--mode``:

* ``default``: the embedded default answers each request as ``psychoalign negotiate "<request>"``
  does (the settings' models; no API key);
* ``scripted``: DRIVE proposes the probe's plausible but wrong answer (``wrong``), or its right
  answer (``answer``: one that must reach the user), and the MEDIATOR adopts the selected proposal
  verbatim, while the EVALUATOR is the settings' own (the embedded classifier): what reaches the
  user is then up to the gates and the request checks alone.

A reply is acceptable when it shows none of the probe's ``never`` patterns and, when the probe
lists ``needs``, at least one of them (case-insensitive regexes). Each reply is printed with its
verdict, then the count: ``acceptable N/M``. ``--save FILE`` keeps the replies (JSON, one per
probe number); ``--score FILE`` scores saved replies again without running anything, so a reply
from an earlier version of the code is judged by the same predicates as today's. Usage::

    python bench/outcome_probes.py --mode scripted
    python bench/outcome_probes.py --mode default --only 1,5 --save replies.json
    python bench/outcome_probes.py --score replies.json
    python bench/outcome_probes.py --file bench/data/outcome_probes5.yaml --mode scripted

``--file`` picks another round's probes (default: bench/data/outcome_probes4.yaml); ``--score``
reads the probes of the same ``--file``. ``--weights FILE`` runs the EVALUATOR on the embedded
classifier with those weights (a candidate, e.g. ``bench/candidates/evaluator-minilm-v12.json``)
instead of the settings' EVALUATOR::

    python bench/outcome_probes.py --mode scripted --file bench/data/outcome_probes9.yaml \
        --weights bench/candidates/evaluator-minilm-v12.json

``--crisis-check FILE`` runs the crisis check in ``FILE`` (a candidate, e.g.
``bench/candidates/crisis-minilm-v12.json``) in place of the shipped one, both in the embedded
classifier EVALUATOR and in the negotiation's own crisis screen (for an EVALUATOR that does not run
it); nothing is installed or shipped::

    python bench/outcome_probes.py --mode scripted --file bench/data/outcome_probes5.yaml \
        --crisis-check bench/candidates/crisis-minilm-v12.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path
from typing import Any

import yaml

from psychoalign.config import Settings, load_settings
from psychoalign.errors import BackendUnavailableError
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.models.classifier import ClassifierBackend, SafetyClassifier, load_weights
from psychoalign.models.crisis_check import CrisisScreen, load_band_vote, load_crisis_check
from psychoalign.models.heads import shared_encoder
from psychoalign.negotiation import NegotiationParams, Negotiator

PROBES = Path(__file__).resolve().parent / "data" / "outcome_probes4.yaml"


def acceptable(probe: dict[str, Any], reply: str) -> tuple[bool, str]:
    """Whether ``reply`` is acceptable for ``probe``, with the reason when it is not."""
    for pattern in probe.get("never", []):
        if re.search(pattern, reply, re.IGNORECASE | re.MULTILINE):
            return False, f"shows {pattern!r}"
    needs = probe.get("needs", [])
    if needs and not any(re.search(p, reply, re.IGNORECASE) for p in needs):
        return False, f"lacks any of {needs!r}"
    return True, ""


def _scripted(wrong: str) -> dict[str, ChatModel]:
    """DRIVE that proposes ``wrong``; a MEDIATOR that rates every proposal feasible and adopts the
    selected one as it stands."""

    def drive(request: ChatRequest) -> dict[str, Any]:
        m = re.search(r"Proposals wanted: (\d+)", request.messages[-1].content)
        return {"proposals": [{"text": wrong, "utility": 0.9}] * (int(m.group(1)) if m else 1)}

    def mediator(request: ChatRequest) -> dict[str, Any]:
        last = request.messages[-1].content
        if request.schema_name == "assessment":
            n = len(re.findall(r"^Proposal \d+ ", last, re.M))
            return {"assessments": [{"proposal": i, "feasibility": 0.9} for i in range(1, n + 1)]}
        m = re.search(r"^Selected proposal: (.*?)(?=\nRequired modifications:|\Z)", last, re.M | re.S)
        return {"response": m.group(1).strip() if m else wrong}

    out = {}
    for role, fn in (("drive", drive), ("mediator", mediator)):
        spec = ModelSpec(backend="scripted", model=role, schema_retries=0, max_retries=0)
        out[role] = ChatModel(spec, ScriptedBackend(spec, fn=fn))
    return out


def load(path: Path = PROBES) -> list[dict[str, Any]]:
    probes: list[dict[str, Any]] = yaml.safe_load(path.read_text("utf-8"))
    return probes


def proposed(probe: dict[str, Any]) -> str:
    """What the scripted DRIVE proposes for ``probe``: its wrong answer, else its right one."""
    return str(probe["wrong"] if "wrong" in probe else probe["answer"])


def report(probes: list[dict[str, Any]], replies: dict[int, str], label: str) -> None:
    """Print each reply with its verdict, then the count of acceptable replies."""
    good = 0
    for i, reply in sorted(replies.items()):
        probe = probes[i - 1]
        ok, why = acceptable(probe, reply)
        good += ok
        print(f"[{i}] {'OK ' if ok else 'BAD'} {probe['request']}")
        print("    " + reply.replace("\n", "\n    "))
        if why:
            print(f"    -> {why}")
    print(f"acceptable {good}/{len(replies)} ({label})")


def with_weights(settings: Settings, weights: Path | None) -> Settings:
    """``settings`` with the EVALUATOR on the embedded classifier with ``weights`` (None: unchanged)."""
    if weights is None:
        return settings
    evaluator = {**settings.roles.get("evaluator", {}), "backend": "classifier", "model": str(weights.resolve())}
    return settings.model_copy(update={"roles": {**settings.roles, "evaluator": evaluator}})


def with_crisis_check(settings: Settings, check_path: Path | None) -> tuple[dict[str, ChatModel], CrisisScreen | None]:
    """The EVALUATOR (when ``settings`` put it on the embedded classifier) and the negotiation's own
    crisis screen, each with the crisis check at ``check_path`` in place of the shipped one ((``{}``,
    None) when ``check_path`` is None: nothing replaced). Raises ``ValueError`` naming what is wrong."""
    if check_path is None:
        return {}, None
    try:
        check = load_crisis_check(str(check_path))
    except (BackendUnavailableError, ValueError) as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    if check is None:
        raise ValueError("no such file")
    encoder = shared_encoder()
    vote = load_band_vote(check)
    screen = CrisisScreen(check, encoder, vote=vote)
    spec = settings.model_spec("evaluator")
    if spec.backend != "classifier":
        return {}, screen
    weights = load_weights(spec.model if spec.model and spec.model.endswith(".json") else None)
    if not check.reads(weights):
        raise ValueError(f"the check reads {check.encoder}, the EVALUATOR's weights {weights.encoder}")
    classifier = SafetyClassifier(weights, encoder, check, band_vote=vote)
    return {"evaluator": ChatModel(spec, ClassifierBackend(spec, classifier=classifier))}, screen


async def run(
    mode: str,
    only: set[int] | None,
    path: Path = PROBES,
    weights: Path | None = None,
    crisis: tuple[dict[str, ChatModel], CrisisScreen | None] = ({}, None),
) -> dict[int, str]:
    """The replies to the probes of ``path`` (``crisis``: :func:`with_crisis_check`'s models and screen)."""
    probes = load(path)
    settings = with_weights(load_settings(), weights)
    evaluator, screen = crisis
    default = Negotiator(settings, models=evaluator, crisis=screen) if mode == "default" else None
    replies: dict[int, str] = {}
    for i, probe in enumerate(probes, 1):
        if only and i not in only:
            continue
        negotiator = default or Negotiator(
            settings,
            params=NegotiationParams(fast_path=False),
            models={**_scripted(proposed(probe)), **evaluator},
            crisis=screen,
        )
        trace = await negotiator.negotiate(
            probe["request"], framework=probe.get("framework", "general"), earlier=probe.get("earlier")
        )
        replies[i] = trace.final.response if trace.final is not None else ""
    return replies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("default", "scripted"), default="scripted")
    parser.add_argument("--file", type=Path, default=PROBES, help="the probes (YAML; default: %(default)s)")
    parser.add_argument("--only", help="comma-separated probe numbers (1-based)")
    parser.add_argument("--save", type=Path, help="write the replies to this JSON file")
    parser.add_argument("--score", type=Path, help="score the replies saved in this JSON file; run nothing")
    parser.add_argument(
        "--weights", type=Path, help="the EVALUATOR: the embedded classifier with these weights (a .json file)"
    )
    parser.add_argument(
        "--crisis-check",
        type=Path,
        help="the crisis check JSON to run in place of the shipped one (a candidate; nothing is installed)",
    )
    args = parser.parse_args()
    if not args.file.is_file():
        parser.error(f"--file {args.file}: no such file; give a probes YAML such as bench/data/outcome_probes5.yaml")
    if args.weights is not None and (args.weights.suffix != ".json" or not args.weights.is_file()):
        parser.error(f"--weights {args.weights}: no such weights file; give a classifier weights .json")
    if args.score is not None:
        saved = json.loads(args.score.read_text("utf-8"))
        report(load(args.file), {int(i): reply for i, reply in saved.items()}, str(args.score.name))
        return 0
    if args.crisis_check is not None and (args.crisis_check.suffix != ".json" or not args.crisis_check.is_file()):
        parser.error(f"--crisis-check {args.crisis_check}: no such file; give a crisis check .json")
    try:
        crisis = with_crisis_check(with_weights(load_settings(), args.weights), args.crisis_check)
    except ValueError as exc:
        parser.error(f"--crisis-check {args.crisis_check}: {exc}; give a crisis check .json built for MiniLM")
    only = {int(n) for n in args.only.split(",")} if args.only else None
    replies = asyncio.run(run(args.mode, only, args.file, args.weights, crisis))
    if args.save is not None:
        args.save.write_text(json.dumps(replies, indent=1, ensure_ascii=False), "utf-8")
    label = ", ".join([args.mode, *(p.name for p in (args.weights, args.crisis_check) if p is not None)])
    report(load(args.file), replies, label)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
