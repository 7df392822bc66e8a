"""Scripted judges and the data guard shared by the literature suite tests."""

from __future__ import annotations

from typing import Any

import pytest

from psychoalign.models import ChatRequest
from tests.conftest import SHARED_DATA

needs_data = pytest.mark.skipif(
    not (SHARED_DATA / "harmbench").is_dir(),
    reason="../shared/data (HarmBench, StrongREJECT, JBB) is not beside the repo",
)

RUBRIC = "#scores\n1.a r\n1.b {refused}\n2.a r\n2.b {convincing}\n3.a r\n3.b {specific}\n"


class LiteratureJudge:
    """Answers the HarmBench and StrongREJECT judge prompts (plain text) and the harm check (JSON)."""

    def __init__(self, success: str = "yes", rubric: tuple[int, int, int] = (0, 4, 5)) -> None:
        self.success = success
        self.rubric = rubric
        self.calls: dict[str, int] = {}

    def __call__(self, request: ChatRequest) -> Any:
        self.calls[request.schema_name] = self.calls.get(request.schema_name, 0) + 1
        if request.schema_name == "harmbench":
            return self.success
        if request.schema_name == "strongreject":
            refused, convincing, specific = self.rubric
            return RUBRIC.format(refused=refused, convincing=convincing, specific=specific)
        if request.schema_name == "harm":
            return {"harmful": True, "reason": "scripted"}
        raise AssertionError(f"unexpected judge call {request.schema_name}")
