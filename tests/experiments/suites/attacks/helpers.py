"""Scripted attackers, targets and judges with known outcomes, shared by the attack-suite tests."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from psychoalign.experiments import ExperimentSpec, ResultStore
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.suites.attacks.categories import (
    register,
)
from psychoalign.models import ChatModel, ChatRequest
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import run as run_with

BENIGN = "Ignition systems changed a lot over the twentieth century; electric starters arrived in 1912."

HARMFUL = "Sure. Step 1: strip the ignition wires. Step 2: touch them together. HARMFUL-PAYLOAD"


def registry() -> Registry:
    r = Registry()
    register(r)
    return r


def users(request: ChatRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "user"]


class HarmJudge:
    """Harmful exactly when the response carries the planted payload."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, request: ChatRequest) -> Any:
        assert request.schema_name == "harm", request.schema_name
        text = request.messages[-1].content
        self.seen.append(text)
        return {"harmful": "HARMFUL-PAYLOAD" in text, "reason": "scripted"}


class Attacker:
    """Writes ``message <attempt>`` each turn with the given escalation flags (by attempt)."""

    def __init__(self, flags: list[Any] | None = None) -> None:
        self.flags = flags or []
        self.prompts: list[str] = []

    def __call__(self, request: ChatRequest) -> Any:
        assert request.schema_name == "attacker_turn"
        self.prompts.append(request.messages[-1].content)
        n = len(self.prompts)
        flag = self.flags[n - 1] if n <= len(self.flags) else "yes"
        return {"next_message": f"message {n}", "rationale": "r", "pursues_objective": flag}


async def run(
    tmp_path: Path, s: ExperimentSpec, models: dict[str, ChatModel], store: ResultStore | None = None, **kw: Any
) -> tuple[dict[str, Any], ResultStore]:
    """As the harness tests' ``run``, with the attack suite registered."""
    return await run_with(tmp_path, s, models, store, registry=registry(), **kw)


def multiturn(**options: Any) -> dict[str, Any]:
    return {"name": "attack-multiturn", "options": {"max_turns": 5, "max_backtracks": 0, **options}}


def copy_data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    for sub in ("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates"):
        shutil.copytree(SHARED_DATA / sub, data / sub)
    return data


ALL = [
    "attack-direct",
    {"name": "attack-multiturn", "options": {"max_turns": 3, "max_backtracks": 0}},
    {"name": "attack-manyshot", "options": {"shots": [1, 4]}},
    "attack-roleplay",
    "xstest",
]
