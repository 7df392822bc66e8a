"""negotiation/progressive.py: windows and their look-ahead; a window is handed on only after the
EVALUATOR judged the text up to its end plus the look-ahead; a veto cuts the stream and the
trace's response is exactly what was released plus the refusal; a failure after a release keeps
the released text in the record."""

from __future__ import annotations

from typing import Any

import pytest

from psychoalign.negotiation.progressive import WindowStream, windows
from psychoalign.traces import TraceStatus
from tests.scenario import APPROVE, World, evaluation, proposals

TEXT = "Boil the egg for nine minutes. Cool it in cold water. Peel it under the tap. Eat it warm."


def test_windows_cover_the_text_with_their_lookahead() -> None:
    assert windows(10, 4, 3) == [(0, 4, 7), (4, 8, 10), (8, 10, 10)]
    assert windows(0, 4, 3) == []
    with pytest.raises(ValueError):
        WindowStream(0, 3, lambda _: None)  # type: ignore[arg-type,return-value]


def _world(judge: Any) -> tuple[World, list[str]]:
    judged: list[str] = []

    def logging_judge(text: str) -> dict[str, Any]:
        judged.append(text)
        return dict(judge(text))

    return World([proposals((TEXT, 0.9))], judge=logging_judge), judged


async def test_each_window_waits_for_its_lookahead_to_be_judged() -> None:
    world, judged = _world(lambda _: APPROVE)
    released: list[tuple[str, list[str]]] = []

    async def release(piece: str) -> None:
        released.append((piece, list(judged)))

    stream = WindowStream(20, 10, release)
    trace = await world.negotiator().negotiate("How do I boil an egg?", stream=stream)
    assert "".join(p for p, _ in released) == TEXT == trace.response
    for (piece, judged_then), (start, end, checked) in zip(released, windows(len(TEXT), 20, 10), strict=True):
        assert piece == TEXT[start:end]
        assert TEXT[:checked].strip() in judged_then  # judged before it went out
    assert trace.metadata["stream"] == {
        "window": 20,
        "lookahead": 10,
        "windows": 5,
        "released_chars": len(TEXT),
        "cut": False,
    }
    assert trace.final is not None and trace.final.composed_by == "adopted"


async def test_a_veto_cuts_the_stream_before_the_vetoed_window() -> None:
    def judge(text: str) -> dict[str, Any]:
        return evaluation(5, "VETOED", hits=[("U1-mass-harm", "universal")]) if "Peel" in text else APPROVE

    world, _ = _world(judge)
    pieces: list[str] = []

    async def release(piece: str) -> None:
        pieces.append(piece)

    trace = await world.negotiator().negotiate("How do I boil an egg?", stream=WindowStream(20, 10, release))
    sent = "".join(pieces)
    # Windows [0, 20) and [20, 40) passed with their look-ahead; [40, 60) was checked up to 70,
    # which holds "Peel" (at 54): neither it nor anything after it went out.
    assert sent == TEXT[:40]
    assert trace.final is not None and trace.final.fallback and trace.final.composed_by == "fallback"
    assert trace.response.startswith(sent + "\n\n") and "U1-mass-harm" in trace.response
    assert trace.metadata["stream"]["cut"] is True and trace.metadata["stream"]["released_chars"] == len(sent)


async def test_a_failure_after_a_release_keeps_what_was_sent() -> None:
    def judge(text: str) -> dict[str, Any]:
        if "Peel" in text:
            raise RuntimeError("evaluator crashed")
        return APPROVE

    world, _ = _world(judge)
    pieces: list[str] = []

    async def release(piece: str) -> None:
        pieces.append(piece)

    trace = await world.negotiator().negotiate("How do I boil an egg?", stream=WindowStream(20, 10, release))
    assert trace.status is TraceStatus.FAILED
    assert pieces and trace.response.startswith("".join(pieces) + "\n\n")
    assert trace.metadata["stream"]["cut"] is True
