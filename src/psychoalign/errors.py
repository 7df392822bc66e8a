"""Errors users see. Each carries a one-line message and, where we know it, the fix.

The CLI prints ``message`` (and ``hint``) on one line and exits non-zero; tracebacks
only appear with ``--debug``.

``message`` names the failure class only ("model endpoint returned HTTP 500", "timed out after
120 s", "connection refused"). What a provider or peer said back (its error body: internal host
names, request ids, echoes of the prompt, sometimes key prefixes) goes in ``detail``, passed
through :func:`redact` (bearer tokens and key-shaped strings removed, one line, bounded). It is
never part of ``str(exc)``: it reaches the trace's internal ``error_detail`` and is shown only
with ``--show-internal`` or ``--debug``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "BackendUnavailableError",
    "ConfigError",
    "EndpointError",
    "InputError",
    "ModelError",
    "ModelTimeoutError",
    "PsychoAlignError",
    "RequestRejectedError",
    "SchemaValidationError",
    "TransientBackendError",
    "endpoint_error",
    "public_message",
    "redact",
    "redact_url",
]

#: Longest internal detail kept (characters, after redaction).
DETAIL_CHARS = 500
_REDACTED = "[redacted]"
#: ``user:password@`` in a URL, with or without a scheme (``postgresql://u:pw@h/db``,
#: ``pg//u:pw@h``, ``u:pw@h:5432/db``): it starts the text, follows a space, quote, bracket, ``=``,
#: ``,``, ``;`` or ``/`` (or a ``scheme:`` and slashes, which stay), and runs to the last ``@`` of
#: the word (a password may hold ``@``, ``:`` or ``/``), so the host stays and nothing of the
#: password does. A ``:`` before ``//`` ends a scheme, not a user name: ``scheme://user@host``
#: has no password, and a URL already redacted stays as it is. A STAR target label
#: (``psychoalign:<framework>@<version>#<digest>``, ``model:<backend>:<model>@<digest>``, the digest
#: 12 hex digits ending the word) is a name the user must read and type, not a credential, and
#: so is ``psychoalign:<framework>=<label>`` (``star analyze --attach-legacy``).
_TARGET_LABEL = (
    r"[(<\[]?(?:(?:psychoalign:[\w.-]+=)?psychoalign:[\w.-]+@[^\s#@/'\"`=]+#[0-9a-f]{12}"
    r"|model:[^\s:@'\"`]+:[^\s@'\"`]+@[0-9a-f]{12})(?=$|[\s'\"`),;\]]|\.(?:$|\s))"
)
_URL_USERINFO = re.compile(
    r"(?i)(?<![^\s'\"`(<\[=,;/])(?!" + _TARGET_LABEL + r")"
    r"(?P<lead>(?:[a-z][a-z0-9+.-]*:)?/*)[^\s/@:='\"`]*:(?!//)[^\s'\"`]*@"
)
#: The value of a query parameter whose name says it is a credential (``?token=``, ``&api_key=``,
#: ``&sig=``, ``X-Amz-Signature=``, ``X-Goog-Credential=``, ``access_token=``, ``password=``): the
#: name stays (it tells a reader what was there), the value goes. Other parameters stay as they are.
_URL_QUERY_SECRET = re.compile(
    r"(?i)(?P<name>[?&;][^\s=&#;'\"`]*(?:token|key|sig|secret|pass|pwd|auth|credential|session)"
    r"[^\s=&#;'\"`]*=)[^\s&#;'\"`]*[^\s&#;'\"`:,.)>]"  # not the punctuation after the URL
)
_SECRETS = [
    # Authorization: Bearer <token> / Basic <credentials>
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}"), r"\1 " + _REDACTED),
    # OpenAI / Anthropic style keys (sk-..., sk-proj-..., sk-ant-...), Google API keys, GitHub/HF tokens
    (re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_-]{4,}"), r"\1-" + _REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{10,}"), _REDACTED),
    (re.compile(r"\b(gh[pousr]|hf|xox[abp])_[A-Za-z0-9_-]{8,}"), r"\1_" + _REDACTED),
    # key=value / "key": "value" for credential-looking names
    (
        re.compile(
            r"(?i)((?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|authorization)"
            r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',;}&]+"
        ),
        r"\1" + _REDACTED,
    ),
]


def redact_url(text: str) -> str:
    """``text`` with the ``user:password`` of every URL in it replaced by ``[redacted]``, whatever
    the URL's shape (scheme or none, odd or valid), and the value of every query parameter named
    like a credential (``?token=``, ``&sig=``, ``&api_key=`` …); nothing else changes. The one way
    a URL that may carry credentials (a store URL, an endpoint behind basic auth, a mirror behind
    a signed link) reaches a message, a log line or printed configuration."""
    text = _URL_USERINFO.sub(r"\g<lead>" + _REDACTED + "@", text)
    return _URL_QUERY_SECRET.sub(r"\g<name>" + _REDACTED, text)


def redact(text: str | None, limit: int = DETAIL_CHARS) -> str:
    """``text`` on one line with anything that looks like a credential replaced by
    ``[redacted]``, then cut to ``limit`` characters (redaction first, so no cut can expose part
    of a key the pattern would have matched whole)."""
    if not text:
        return ""
    out = redact_url(" ".join(str(text).split()))
    for pattern, replacement in _SECRETS:
        out = pattern.sub(replacement, out)
    return out if len(out) <= limit else out[: limit - 1] + "…"


class PsychoAlignError(Exception):
    """Base class for every error PsychoAlign raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        #: Internal: what the provider or peer said (redacted, bounded); never in ``str(self)``.
        self.detail = redact(detail) or None
        #: The agent role whose call failed, set by the message bus (``drive``, ``evaluator`` …).
        self.agent: str | None = None

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


@contextmanager
def needs_package(what: str, *, hint: str) -> Iterator[None]:
    """For the imports of an optional package: an ImportError in the block becomes the one-line
    :class:`BackendUnavailableError` "``what`` is not installed", with ``hint`` saying how to install it."""
    try:
        yield
    except ImportError as exc:
        raise BackendUnavailableError(f"{what} is not installed", hint=hint) from exc


class EndpointError(ModelError):
    """The endpoint answered with a non-retryable error or could not be reached."""


class RequestRejectedError(EndpointError):
    """The endpoint answered and refused this request as malformed or too large (HTTP 400, 413,
    422): the request's content or format failed, not the endpoint. A caller choosing between
    prompts may drop the one refused; every other caller treats it as an :class:`EndpointError`."""


#: The HTTP statuses of :class:`RequestRejectedError`.
REJECTED_STATUSES = frozenset({400, 413, 422})


def endpoint_error(status: int, message: str, *, hint: str | None, detail: str | None) -> EndpointError:
    """The permanent error for an HTTP error ``status`` a backend does not retry: a
    :class:`RequestRejectedError` for one of :data:`REJECTED_STATUSES`, else an :class:`EndpointError`."""
    kind = RequestRejectedError if status in REJECTED_STATUSES else EndpointError
    return kind(message, hint=hint, detail=detail)


class ModelTimeoutError(ModelError):
    """A model call exceeded its timeout on every attempt."""


class SchemaValidationError(ModelError):
    """The model's reply did not satisfy the requested JSON Schema after bounded retries."""

    def __init__(
        self, message: str, *, hint: str | None = None, last_reply: str = "", detail: str | None = None
    ) -> None:
        super().__init__(message, hint=hint, detail=detail)
        self.last_reply = last_reply


#: A model call that got no reply to read: the endpoint refused it, was unreachable or too slow
#: (the reply, not its content, failed). Callers that treat an unusable reply as a result (a
#: judge's verdict counted wrong, a candidate dropped) re-raise these: a later run, once the
#: endpoint answers, must not inherit an outage as a measurement.
NO_REPLY_ERRORS: tuple[type[ModelError], ...] = (EndpointError, ModelTimeoutError, BackendUnavailableError)


class TransientBackendError(Exception):
    """Raised by a backend for one attempt that may succeed if retried (429, 5xx, connection).

    Internal: the retry loop in :class:`psychoalign.models.ChatModel` consumes it and turns
    exhaustion into :class:`EndpointError`.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.detail = redact(detail) or None


def public_message(exc: BaseException) -> str:
    """What a user may be told about ``exc``: our own message for a PsychoAlign error (prefixed
    with the agent role whose call failed), otherwise only the exception's class (a bug's text can
    carry anything)."""
    if isinstance(exc, PsychoAlignError):
        text = str(exc)
        return f"{exc.agent}: {text}" if exc.agent and not text.startswith(f"{exc.agent}:") else text
    return f"internal error ({type(exc).__name__})"
