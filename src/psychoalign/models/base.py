"""The backend contract. Backends are thin adapters: one attempt per call, nothing else."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import ClassVar

from ..errors import BackendUnavailableError, EndpointError, TransientBackendError, endpoint_error, needs_package
from .spec import BackendName, ModelSpec
from .types import ChatRequest, Completion


class Backend(ABC):
    """An adapter from :class:`ChatRequest` to one provider.

    Contract:

    * :meth:`complete` makes exactly **one** attempt. It must not retry, cache or validate:
      :class:`~psychoalign.models.ChatModel` does that uniformly for every backend.
    * When ``request.json_schema`` is set, the backend asks the provider for output that
      satisfies the schema through the provider's native mechanism (grammar, response_format,
      forced tool call), returning the JSON text.
    * A failure that may pass on retry (HTTP 429, 5xx, connection reset) raises
      :class:`~psychoalign.errors.TransientBackendError`; a permanent one (bad key, unknown model)
      raises :class:`~psychoalign.errors.EndpointError` or
      :class:`~psychoalign.errors.BackendUnavailableError`.
    * It must be safe to call concurrently from one event loop.
    """

    name: ClassVar[str]
    default_model: ClassVar[str] = ""
    #: Whether callers should ask this backend for self-ratings (numbers) in structured replies.
    #: False for the embedded models: a 135M-270M model's numbers echo its prompt's examples, and
    #: decoding them under a grammar is slow. Agents then ask for plain text (docs/embedded.md).
    rates_numbers: ClassVar[bool] = True
    #: It judges a request before any draft exists, at no model-token cost, and says the highest
    #: score any answer could get (``Evaluation.ceiling``): the engine screens requests with it
    #: (``negotiation.decide_on_request``). LLM evaluators do not: a screen would be one more call.
    judges_requests: ClassVar[bool] = False
    #: Its reply depends on the request's inputs alone (no sampling, no state): the same inputs
    #: always give the same evaluation, so a text it has judged is not sent to it again
    #: (the engine's final gate on a draft adopted verbatim; docs/negotiation.md, "The fast path").
    deterministic: ClassVar[bool] = False

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    @property
    def model_name(self) -> str:
        return self.spec.model or self.default_model

    def required_api_key(self) -> str:
        """The spec's API key, for a hosted backend that cannot run without one; a one-line error
        naming the variable to set when there is none."""
        key = self.spec.resolved_api_key()
        if key is None:
            raise BackendUnavailableError(
                f"no API key for the {self.name} backend: ${self.spec.key_env_name()} is not set",
                hint=f"export {self.spec.key_env_name()}=...",
            )
        return key

    @abstractmethod
    async def complete(self, request: ChatRequest) -> Completion:
        """Make one attempt at ``request``."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release connections. Idempotent."""

    def load_identity(self) -> dict[str, object]:
        """What this backend loads that changes its replies and that neither the spec's name nor
        the request says: the response cache keys on it and a run's model identity records it
        (an in-process model's file content and load parameters). Empty for backends that load
        nothing; settings that cannot change a reply (threads) stay out, so they keep the cache."""
        return {}

    def preload(self) -> None:  # noqa: B027 - optional hook, most backends load nothing
        """Load now, in the calling thread, what the first :meth:`complete` would load (weights,
        an inference session), so a process can do it beside its other start-up work
        (:func:`~psychoalign.models.registry.preload`). Loads are shared per process, so the
        first call then finds them ready. A failure here is raised again by that first call."""

    def reset_prompt_cache(self) -> None:  # noqa: B027 - optional hook, most backends keep no prompt
        """Make the next call evaluate its whole prompt: forget any prompt prefix this backend kept
        from an earlier call to skip re-evaluating it. Nothing else changes (the loaded model,
        settings, caches of replies). A no-op for backends that keep no prompt between calls."""

    @classmethod
    def availability(cls, spec: ModelSpec | None = None) -> tuple[bool, str]:
        """Whether this backend can be used here, and why not."""
        return True, "ready"


@dataclass(frozen=True)
class Sdk:
    """A provider's official SDK: its name as users know it, the module to import, and the
    ``psychoalign`` extra that installs it."""

    name: str
    module: str
    extra: str


class SdkBackend(Backend):
    """A hosted provider through its official SDK (an optional extra) and an API key. A subclass
    imports the SDK inside :meth:`needs_sdk`, so that a missing one is a one-line error naming the
    extra, and turns the provider's HTTP error statuses into ours with :meth:`http_error`."""

    name: ClassVar[BackendName]
    sdk: ClassVar[Sdk]
    #: Statuses below 500 that may pass on retry.
    retry_statuses: ClassVar[frozenset[int]] = frozenset({408, 429})

    @classmethod
    def install_hint(cls) -> str:
        return f"pip install 'psychoalign[{cls.sdk.extra}]'"

    @classmethod
    def needs_sdk(cls) -> AbstractContextManager[None]:
        return needs_package(f"the {cls.sdk.name} SDK", hint=cls.install_hint())

    @classmethod
    def http_error(cls, status: int, detail: str) -> TransientBackendError | EndpointError:
        """The error to raise for an HTTP error status: transient (retried) for a retry status or a
        5xx, else permanent, with a hint. ``detail`` holds the provider's text (internal only)."""
        message = f"model endpoint returned HTTP {status}"
        if status in cls.retry_statuses or status >= 500:
            return TransientBackendError(message, detail=detail)
        hint = "check the API key" if status in (401, 403) else "check the model name"
        return endpoint_error(status, message, hint=hint, detail=detail)

    @classmethod
    def availability(cls, spec: ModelSpec | None = None) -> tuple[bool, str]:
        spec = spec or ModelSpec(backend=cls.name)
        try:
            importlib.import_module(cls.sdk.module)
        except ImportError:
            return False, cls.install_hint()
        if spec.resolved_api_key() is None:
            return False, f"set ${spec.key_env_name()}"
        return True, f"${spec.key_env_name()} set"
