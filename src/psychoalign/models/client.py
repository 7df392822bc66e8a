"""ChatModel: the one interface every agent, baseline, judge and persona calls.

It wraps a :class:`Backend` with the policy that must be identical everywhere: input checks,
timeouts, bounded retries with exponential backoff and jitter, the response cache, JSON Schema
validation with bounded re-asks, and token/cost accounting.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import (
    EndpointError,
    InputError,
    ModelTimeoutError,
    SchemaValidationError,
    TransientBackendError,
)
from .base import Backend
from .cache import ResponseCache, cache_key
from .schema import ReplyMismatchError, describe_validation_error, extract_json, schema_for, validate_reply
from .spec import ModelSpec
from .types import ChatRequest, ChatResult, Completion, Message, Usage

T = TypeVar("T", bound=BaseModel)
Messages = str | Sequence[Message | dict[str, str]]


def _to_messages(messages: Messages, system: str | None) -> tuple[Message, ...]:
    if isinstance(messages, str):
        out = [Message(role="user", content=messages)]
    else:
        out = [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]
    if system is not None:
        out.insert(0, Message(role="system", content=system))
    return tuple(out)


class ChatModel:
    """Call policy around one backend. Cheap to share; safe for concurrent use."""

    def __init__(
        self,
        spec: ModelSpec,
        backend: Backend,
        *,
        cache: ResponseCache | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.spec = spec
        self.backend = backend
        self.cache = cache
        self._rng = rng or random.Random()
        self.usage = Usage()
        self.cost_usd = 0.0
        self.calls = 0

    @property
    def label(self) -> str:
        return f"{self.backend.name}:{self.backend.model_name}"

    @property
    def rates_numbers(self) -> bool:
        """Whether to ask this model for numbers (ratings) in structured replies: see
        :attr:`Backend.rates_numbers`."""
        return self.backend.rates_numbers

    # -- public API -------------------------------------------------------------------------
    async def chat(
        self,
        messages: Messages,
        *,
        output: type[BaseModel] | dict[str, Any] | None = None,
        system: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        schema_name: str = "reply",
        seed: int | None = None,
        inputs: Mapping[str, str] | None = None,
    ) -> ChatResult:
        """Complete ``messages``; with ``output`` the reply must satisfy its JSON Schema.

        ``output`` may be a pydantic model class (``result.data`` is then an instance of it)
        or a JSON Schema dict (``result.data`` is the parsed JSON). ``seed`` overrides the spec's
        seed (to draw several different samples); ``inputs`` is the structured task behind the
        prompt, read by backends that judge inputs rather than prompts. Raises
        :class:`SchemaValidationError` when no reply fits after ``spec.schema_retries`` re-asks.
        """
        msgs = _to_messages(messages, system)
        self._check_input(msgs)
        schema = schema_for(output) if output is not None else None
        base = ChatRequest(
            messages=msgs,
            json_schema=schema,
            schema_name=schema_name,
            temperature=self.spec.temperature if temperature is None else temperature,
            max_tokens=max_tokens or self.spec.max_tokens,
            seed=self.spec.seed if seed is None else seed,
            inputs=dict(inputs) if inputs is not None else None,
        )
        started = time.perf_counter()
        usage: Usage | None = None  # summed over the schema tries
        attempts = 0
        last_text = ""
        last_problem: ReplyMismatchError | None = None
        for schema_try in range(self.spec.schema_retries + 1):
            # A deterministic model re-asked the same question answers the same way: vary the seed.
            request = (
                base
                if schema_try == 0
                else base.model_copy(
                    update={"seed": (base.seed or 0) + schema_try, "temperature": max(base.temperature, 0.7)}
                )
            )
            completion, cached, n = await self._complete_with_retries(request)
            attempts += n
            usage = completion.usage if usage is None else usage + completion.usage
            last_text = completion.text
            if schema is None:
                return await self._finish(request, completion, None, usage, started, attempts, cached)
            try:
                # A pydantic output type enforces every constraint its schema states, in Rust:
                # the (slower) generic JSON Schema validator is only needed for schema dicts.
                data: Any = (
                    output.model_validate(extract_json(completion.text))
                    if isinstance(output, type)
                    else validate_reply(completion.text, schema)
                )
            except ValidationError as exc:
                last_problem = describe_validation_error(exc, schema)
                continue
            except ReplyMismatchError as exc:
                last_problem = exc
                continue
            except ValueError as exc:  # what else a parser raised (an integer over Python's digit limit)
                last_problem = ReplyMismatchError("not usable JSON", detail=f"{type(exc).__name__}: {exc}")
                continue
            return await self._finish(request, completion, data, usage, started, attempts, cached)
        # The message names the schema path and the failure class; the validator's own message
        # quotes the reply (a DRIVE draft, an EVALUATOR's words) and goes to the internal detail.
        tries = self.spec.schema_retries + 1
        where = f" at {last_problem.where}" if last_problem and last_problem.where else ""
        problem = last_problem.problem if last_problem else "no reply"
        raise SchemaValidationError(
            f"{self.label}: reply did not match the '{schema_name}' schema{where}: {problem}; "
            f"gave up after {tries} {'try' if tries == 1 else 'tries'}",
            hint="use a stronger model, or raise schema_retries",
            last_reply=last_text,
            detail=last_problem.detail if last_problem else None,
        )

    async def structured(self, messages: Messages, output: type[T], **kwargs: Any) -> tuple[T, ChatResult]:
        """Typed convenience: ``obj, result = await model.structured(msgs, MyModel)``."""
        result = await self.chat(messages, output=output, **kwargs)
        assert isinstance(result.data, output)
        return result.data, result

    async def aclose(self) -> None:
        await self.backend.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        # the backend's HTTP session closes even when a call failed (else "Unclosed client session")
        await self.aclose()

    # -- internals --------------------------------------------------------------------------
    def _check_input(self, msgs: tuple[Message, ...]) -> None:
        if not msgs or not any(m.content.strip() for m in msgs if m.role == "user"):
            raise InputError("the prompt is empty", hint="pass a non-empty prompt")
        total = sum(len(m.content) for m in msgs)
        if total > self.spec.max_prompt_chars:
            raise InputError(
                f"the prompt is {total} characters, over the limit of {self.spec.max_prompt_chars}",
                hint="shorten it or raise max_prompt_chars in the model spec",
            )

    async def _complete_with_retries(self, request: ChatRequest) -> tuple[Completion, bool, int]:
        key = cache_key(self.spec, request, self.backend) if self.cache is not None else ""
        if self.cache is not None:
            hit = await self.cache.get(key)
            if hit is not None:
                return hit, True, 0
        last_error = ""
        last_detail: str | None = None
        for attempt in range(self.spec.max_retries + 1):
            try:
                async with asyncio.timeout(self.spec.timeout_s):
                    completion = await self.backend.complete(request)
                return completion, False, attempt + 1
            except TimeoutError:
                last_error = f"timed out after {self.spec.timeout_s:g} s"
                if attempt == self.spec.max_retries:
                    raise ModelTimeoutError(
                        f"{self.label}: {last_error} on {attempt + 1} attempt(s)",
                        hint="raise timeout_s or use a faster model",
                    ) from None
                delay = self._backoff(attempt, None)
            except EndpointError as exc:  # permanent (a 4xx, a reply that is not a completion)
                if exc.message.startswith(f"{self.label}: "):
                    raise
                # the same class (a rejected request stays one), with the model's label in front
                raise type(exc)(f"{self.label}: {exc.message}", hint=exc.hint, detail=exc.detail) from exc
            except TransientBackendError as exc:
                last_error, last_detail = str(exc), exc.detail
                if attempt == self.spec.max_retries:
                    break
                delay = self._backoff(attempt, exc.retry_after)
            await asyncio.sleep(delay)
        attempts = self.spec.max_retries + 1
        raise EndpointError(
            f"{self.label}: {last_error} (gave up after {attempts} {'attempt' if attempts == 1 else 'attempts'})",
            hint=(
                "the endpoint is limiting your request rate: wait and try again, send fewer requests at once, "
                "or raise max_retries"
                if last_error.endswith("HTTP 429")
                else "check that the endpoint is up and reachable, or raise max_retries"
            ),
            detail=last_detail,
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Full-jitter exponential backoff, bounded; a server's Retry-After wins if larger."""
        cap = min(self.spec.backoff_max_s, self.spec.backoff_base_s * (2**attempt))
        delay = self._rng.uniform(0, cap)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.spec.backoff_max_s))
        return delay

    async def _finish(
        self,
        request: ChatRequest,
        completion: Completion,
        data: Any,
        usage: Usage,
        started: float,
        attempts: int,
        cached: bool,
    ) -> ChatResult:
        if self.cache is not None and not cached:
            await self.cache.put(cache_key(self.spec, request, self.backend), completion)
        cost = (
            0.0
            if cached
            else (
                usage.prompt_tokens * self.spec.input_cost_per_mtok
                + usage.completion_tokens * self.spec.output_cost_per_mtok
            )
            / 1e6
        )
        self.usage = self.usage + usage
        self.cost_usd += cost
        self.calls += 1
        return ChatResult(
            text=completion.text,
            data=data,
            usage=usage,
            latency_s=time.perf_counter() - started,
            backend=self.backend.name,
            model=completion.model or self.backend.model_name,
            attempts=attempts,
            cached=cached,
            cost_usd=cost,
            finish_reason=completion.finish_reason,
        )
