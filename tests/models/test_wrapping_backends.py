"""A backend that wraps another (metering, timing, replaced prompts) passes
``Backend.reset_prompt_cache`` on to the backend it wraps: otherwise a measurement that resets the
prompt cache through the wrapper resets nothing and times a call that skipped its prompt prefix."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest
from bench.negotiation import DepthMeteredBackend
from bench.overhead import Timed

from psychoalign.experiments.harness.metering import CallMeter, MeteredBackend
from psychoalign.experiments.harness.systems import _GenericPrompts
from psychoalign.frameworks import load_framework
from psychoalign.models import Backend, ChatRequest, Completion, ModelSpec

ROOT = Path(__file__).resolve().parents[2]


class _Keeps(Backend):
    """Counts the resets it is told of."""

    name: ClassVar[str] = "keeps"

    def __init__(self) -> None:
        super().__init__(ModelSpec(backend="scripted"))
        self.resets = 0

    async def complete(self, request: ChatRequest) -> Completion:
        raise AssertionError("not called")

    def reset_prompt_cache(self) -> None:
        self.resets += 1


WRAPPERS: dict[str, Callable[[Backend], Backend]] = {
    "MeteredBackend": lambda inner: MeteredBackend(inner, CallMeter()),
    "_GenericPrompts": lambda inner: _GenericPrompts(inner, load_framework("general")),
    "DepthMeteredBackend": DepthMeteredBackend,
    "Timed": lambda inner: Timed(inner, [], "drive"),
}


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_the_reset_reaches_the_wrapped_backend(name: str) -> None:
    inner = _Keeps()
    WRAPPERS[name](inner).reset_prompt_cache()
    assert inner.resets == 1


def _wrapping_backends() -> set[str]:
    """Classes in src/ and bench/ that derive from a Backend class and keep another as ``self.inner``."""
    found: set[str] = set()
    for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if not any(b.endswith("Backend") for b in bases):
                continue
            if "self.inner" in ast.unparse(node):
                found.add(node.name)
    return found


def test_every_wrapping_backend_is_checked_here() -> None:
    """A new wrapper is added to WRAPPERS above, with its pass-through."""
    assert _wrapping_backends() == set(WRAPPERS)
