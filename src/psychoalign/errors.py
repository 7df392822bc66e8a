"""Errors users see. Each carries a one-line message and, where we know it, the fix.

The CLI prints ``message`` (and ``hint``) on one line and exits non-zero; tracebacks
only appear with ``--debug``.
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailableError",
    "ConfigError",
    "EndpointError",
    "InputError",
    "ModelError",
    "ModelTimeoutError",
    "PsychoAlignError",
    "SchemaValidationError",
    "TransientBackendError",
]


class PsychoAlignError(Exception):
    """Base class for every error PsychoAlign raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(PsychoAlignError):
    """The configuration (file, environment or flags) is invalid."""

    exit_code = 2


class InputError(PsychoAlignError):
    """User input (a prompt, a request, a file) is unusable as given."""

    exit_code = 2


class ModelError(PsychoAlignError):
    """A model call failed for good (after any bounded retries)."""


class BackendUnavailableError(ModelError):
    """The backend cannot run here (missing package, missing model file, missing key)."""


class EndpointError(ModelError):
    """The endpoint answered with a non-retryable error or could not be reached."""


class ModelTimeoutError(ModelError):
    """A model call exceeded its timeout on every attempt."""


class SchemaValidationError(ModelError):
    """The model's reply did not satisfy the requested JSON Schema after bounded retries."""

    def __init__(self, message: str, *, hint: str | None = None, last_reply: str = "") -> None:
        super().__init__(message, hint=hint)
        self.last_reply = last_reply


class TransientBackendError(Exception):
    """Raised by a backend for one attempt that may succeed if retried (429, 5xx, connection).

    Internal: the retry loop in :class:`psychoalign.models.ChatModel` consumes it and turns
    exhaustion into :class:`EndpointError`.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
