"""Deterministic replies for tests and simulations: from a list, a function, or a YAML/JSON file."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..errors import ConfigError, ModelError
from ..textio import read_text
from ..yamlio import line_of, parse_yaml_node
from .base import Backend
from .spec import ModelSpec
from .types import ChatRequest, Completion, Usage

Reply = str | dict[str, Any] | list[Any]
ScriptFn = Callable[[ChatRequest], Reply | Awaitable[Reply]]


def _render(reply: Reply) -> str:
    return reply if isinstance(reply, str) else json.dumps(reply)


def _kind(value: object) -> str:
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


def _check_reply(reply: object, where: str) -> None:
    """A reply is a string, or a mapping or list (sent as JSON); an empty one is a mistake."""
    if reply is None:
        raise ConfigError(f"{where} is empty", hint="write the reply text after the colon (or '' for an empty reply)")
    if not isinstance(reply, str | dict | list | int | float):
        raise ConfigError(f"{where} must be a string, a mapping or a list, not {_kind(reply)}")


class ScriptedBackend(Backend):
    """Replies in order from ``replies`` (cycling when ``cycle``), or computed by ``fn``.

    A script file is YAML or JSON: either a list of replies, or
    ``{"rules": [{"match": REGEX, "reply": ...}], "default": ...}`` where the first rule whose
    regex matches the last user message wins. Token usage is counted as whitespace-separated words.
    ``latency_s`` simulates a slow model; ``fail_first`` raises the given exceptions first.
    """

    name: ClassVar[str] = "scripted"
    default_model: ClassVar[str] = "script"

    def __init__(
        self,
        spec: ModelSpec | None = None,
        *,
        replies: Sequence[Reply] | None = None,
        fn: ScriptFn | None = None,
        cycle: bool = False,
        latency_s: float = 0.0,
        fail_first: Sequence[BaseException] = (),
    ) -> None:
        super().__init__(spec or ModelSpec(backend="scripted"))
        self._rules: list[tuple[re.Pattern[str], Reply]] = []
        self._default: Reply | None = None
        if replies is None and fn is None:
            if self.spec.script is None:
                raise ConfigError("the scripted backend needs replies, a function, or a script file")
            replies = self._load(Path(self.spec.script))
        self._replies = list(replies or [])
        self._fn = fn
        self._cycle = cycle
        self._latency = latency_s
        self._failures = list(fail_first)
        self._index = 0
        self.requests: list[ChatRequest] = []
        self._word_counts: dict[str, int] = {}

    def _load(self, path: Path) -> list[Reply]:
        """The replies of a script file, or (a ``rules`` mapping) its rules and default. Every
        mistake is one :class:`ConfigError` naming the file, the line and the fix."""
        # one line naming the file and the fix (the OS error's repr said "[Errno 2] …" and no fix)
        text = read_text(path, what="script file", error=ConfigError)
        node, data = parse_yaml_node(text, str(path), error=ConfigError)

        def at(*loc: str | int) -> str:
            return f"{path}:{line_of(node, loc)}" if node is not None else str(path)

        shape = "a list of replies, or a mapping with 'rules' (a list of {match: REGEX, reply: …}) and 'default'"
        if isinstance(data, list):
            for i, reply in enumerate(data):
                _check_reply(reply, f"{at(i)}: reply {i + 1}")
            return data
        # a mapping with only 'default' answers every call the same (the documented "else default")
        if not isinstance(data, dict) or not ("rules" in data or "default" in data):
            raise ConfigError(f"script file {path} must hold a list of replies or a 'rules' mapping", hint=shape)
        if unknown := sorted(str(k) for k in data if k not in ("rules", "default")):
            raise ConfigError(f"{at(unknown[0])}: unknown key '{unknown[0]}' in a script file", hint=shape)
        rules = data.get("rules", [])
        if not isinstance(rules, list):
            raise ConfigError(
                f"{at('rules')}: 'rules' must be a list, not {_kind(rules)}",
                hint="write each rule as a list item: '- match: REGEX' with 'reply: …' under it",
            )
        for i, rule in enumerate(rules):
            where = f"{at('rules', i)}: rule {i + 1}"
            if not isinstance(rule, dict):
                raise ConfigError(f"{where} must be a mapping, not {_kind(rule)}", hint="give it 'match' and 'reply'")
            if unknown := sorted(str(k) for k in rule if k not in ("match", "reply")):
                raise ConfigError(f"{where}: unknown key '{unknown[0]}'", hint="a rule has 'match' and 'reply' only")
            for key in ("match", "reply"):
                if key not in rule:
                    raise ConfigError(f"{where} has no '{key}'", hint="give every rule 'match: REGEX' and 'reply: …'")
            pattern = rule["match"]
            if not isinstance(pattern, str):
                raise ConfigError(
                    f"{at('rules', i, 'match')}: rule {i + 1}: 'match' must be a string, not {_kind(pattern)}",
                    hint='quote it: match: "…"',
                )
            try:
                compiled = re.compile(pattern, re.I)
            except re.error as exc:
                raise ConfigError(
                    f"{at('rules', i, 'match')}: rule {i + 1}: 'match' is not a valid regular expression ({exc})",
                    hint="fix the pattern; escape characters meant literally, e.g. \\( or \\?",
                ) from None
            _check_reply(rule["reply"], f"{at('rules', i, 'reply')}: rule {i + 1}: 'reply'")
            self._rules.append((compiled, rule["reply"]))
        if "default" in data:
            _check_reply(data["default"], f"{at('default')}: 'default'")
        self._default = data.get("default")
        self._cycle = True
        return []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        if self._latency:
            await asyncio.sleep(self._latency)
        if self._failures:
            raise self._failures.pop(0)
        reply = await self._next(request)
        text = _render(reply)
        prompt_words = sum(self._words(m.content) for m in request.messages)
        return Completion(
            text=text,
            usage=Usage(prompt_tokens=prompt_words, completion_tokens=len(text.split())),
            model=self.model_name,
            finish_reason="stop",
        )

    def _words(self, text: str) -> int:
        """Whitespace-separated words of ``text``, remembered for the texts seen last: the
        system prompt and the few-shot turns (for the EVALUATOR the whole framework) are the same
        at every call, and splitting them was most of a scripted call's CPU."""
        count = self._word_counts.get(text)
        if count is None:
            if len(self._word_counts) >= 256:
                self._word_counts.clear()
            count = self._word_counts[text] = len(text.split())
        return count

    async def _next(self, request: ChatRequest) -> Reply:
        if self._fn is not None:
            out = self._fn(request)
            return await out if inspect.isawaitable(out) else out
        if self._rules or self._default is not None:
            last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
            for pattern, reply in self._rules:
                if pattern.search(last):
                    return reply
            if self._default is None:
                raise ModelError("scripted model: no rule matched and no default reply")
            return self._default
        if not self._replies:
            raise ModelError("scripted model: no replies configured")
        if self._index >= len(self._replies):
            if not self._cycle:
                where = f"script {self.spec.script}" if self.spec.script else "scripted model"
                raise ModelError(
                    f"{where}: ran out of replies after {len(self._replies)} (a list is given once, in order)",
                    hint="add replies, or write 'rules: []' with a 'default:' reply to answer any number of calls",
                )
            self._index = 0
        reply = self._replies[self._index]
        self._index += 1
        return reply
