"""Shared by the studies' tests (and their commands' tests): the synthetic world's size and the
defense-accuracy items with scripted agents that play them."""

from __future__ import annotations

import re
from typing import Any

from psychoalign.experiments.studies.defense_accuracy import (
    DefenseItem,
    load_items,
)
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from tests.scenario import APPROVE

#: Items of the synthetic world the boundary tests negotiate (the ``planted`` fixture).
N_ITEMS = 80

ITEMS = load_items()


def _field(request: ChatRequest, name: str) -> str:
    m = re.search(rf"^{name}: (.*)$", request.messages[-1].content, re.M)
    return m.group(1).strip() if m else ""


def defense_models(items: list[DefenseItem], evaluator_gives_classification: bool) -> dict[str, ChatModel]:
    by_request = {it.request: it for it in items}

    def drive(request: ChatRequest) -> dict[str, Any]:
        item = by_request[_field(request, "Request")]
        return {"proposals": [{"text": item.classification.draft, "utility": 0.9}]}

    def evaluator(request: ChatRequest) -> dict[str, Any]:
        item = by_request[_field(request, "Request")]
        if evaluator_gives_classification and _field(request, "Proposed answer") == item.classification.draft:
            return item.classification.evaluation().model_dump(mode="json")
        return APPROVE  # the dual gate's check of new text; or an evaluator that approves everything

    def mediator(request: ChatRequest) -> dict[str, Any]:
        if request.schema_name == "assessment":
            return {"assessments": [{"proposal": 1, "feasibility": 0.8}]}
        return {"response": "A composed answer."}

    out = {}
    for role, fn in (("drive", drive), ("evaluator", evaluator), ("mediator", mediator)):
        spec = ModelSpec(backend="scripted", model=role, schema_retries=0, max_retries=0)
        out[role] = ChatModel(spec, ScriptedBackend(spec, fn=fn))
    return out
