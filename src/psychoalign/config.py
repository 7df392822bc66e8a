"""Configuration: one pydantic model, four layers, one precedence.

Precedence, lowest to highest (a later layer overrides keys of an earlier one, key by key):

1. built-in defaults (this module);
2. the config file: ``--config FILE``, else ``$PSYCHOALIGN_CONFIG``, else ``./psychoalign.toml``
   or ``./psychoalign.yaml`` if present (TOML or YAML);
3. environment variables ``PSYCHOALIGN_<SECTION>__<KEY>`` (``__`` nests, case-insensitive), e.g.
   ``PSYCHOALIGN_DEFAULTS__BACKEND=openai`` or ``PSYCHOALIGN_ROLES__DRIVE__MODEL=gpt-4o``;
   API keys come from the providers' usual variables (``OPENAI_API_KEY`` …) or ``api_key_env``;
4. command-line flags.

Per-role model specs live under ``[roles.<role>]`` and inherit every key they do not set from
``[defaults]``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from .errors import ConfigError, PsychoAlignError, redact_url
from .models.spec import ModelSpec, backend_of
from .textio import read_text
from .tomlio import parse_toml
from .yamlio import MAX_YAML_CHARS, parse_yaml

__all__ = [
    "DEFAULT_DEPLOYMENT",
    "DeploymentSettings",
    "LabSettings",
    "ServeSettings",
    "Settings",
    "deep_merge",
    "load_settings",
]

ENV_PREFIX = "PSYCHOALIGN_"
#: Roles the product uses; any other name is accepted too (e.g. a custom baseline).
KNOWN_ROLES = ("drive", "evaluator", "mediator", "chat", "judge", "attacker", "annotator", "target")
DEFAULT_FILES = ("psychoalign.toml", "psychoalign.yaml", "psychoalign.yml")
#: Process switches that share the prefix but are not settings (PSYCHOALIGN_DEBUG=1 is --debug;
#: PSYCHOALIGN_DATA_DIR locates the evaluation data, psychoalign.datasets; PSYCHOALIGN_REQUIRE_DATA=1
#: makes the test suite fail instead of skip when that data is missing, as CI runs it). The client
#: credentials the docs have users export (PSYCHOALIGN_TOKEN from the serve banner, a key in
#: PSYCHOALIGN_KEY / PSYCHOALIGN_API_KEY) are not settings either: read as ones, every command in
#: the shell that ran the banner's `export` line failed with "invalid configuration at token".
RESERVED_ENV = frozenset(
    ENV_PREFIX + name for name in ("CONFIG", "DEBUG", "DATA_DIR", "REQUIRE_DATA", "TOKEN", "KEY", "API_KEY")
)
#: Roles whose embedded default is not the local LLM (used only when no backend is configured).
EMBEDDED_ROLE_BACKENDS = {"evaluator": "classifier"}


def _default_home() -> str:
    return str(Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "psychoalign")


class A2ASettings(BaseModel):
    """Where the agents live when they run as A2A services (see docs/a2a.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    urls: dict[str, str] = Field(default_factory=dict, description="role -> base URL of its A2A service.")
    tokens: dict[str, SecretStr] = Field(default_factory=dict, description="identity -> bearer token.")
    timeout_s: float = Field(300.0, gt=0, description="Per A2A call (LLM calls are slow).")
    retries: int = Field(2, ge=0, le=10, description="Retries when an agent cannot be reached.")
    max_body_bytes: int = Field(
        2_000_000, ge=1024, description="Largest request body an A2A service (role or system agent) accepts."
    )

    def token(self, identity: str) -> str | None:
        secret = self.tokens.get(identity)
        return secret.get_secret_value() if secret is not None else None

    def plain_tokens(self) -> dict[str, str]:
        return {name: secret.get_secret_value() for name, secret in self.tokens.items()}

    @property
    def remote(self) -> bool:
        """The agents are remote: ``urls`` names a service for DRIVE, EVALUATOR and MEDIATOR."""
        return all(role in self.urls for role in ("drive", "evaluator", "mediator"))


DEFAULT_DEPLOYMENT = "psychoalign"


class DeploymentSettings(BaseModel):
    """One deployment profile: what a client of the served system (OpenAI-compatible ``/v1``,
    the A2A system agent) gets when it names this profile (as ``model`` on ``/v1``).

    The deployment, never the client, decides the framework: a client may pick only a framework
    listed here (by name; paths sent by clients are never read). See docs/configuration.md.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    framework: str = Field("general", description="Framework used when the client names none.")
    allowed_frameworks: list[str] = Field(
        default_factory=list, description="Other framework names a client may select (default: none)."
    )
    negotiation: dict[str, Any] = Field(
        default_factory=dict, description="Overrides of [negotiation] for this profile."
    )
    roles: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Overrides of [roles.<role>].")
    api_keys: list[str] = Field(
        default_factory=list, description="SHA-256 hex digests of the API keys accepted for this profile."
    )
    description: str = ""

    @field_validator("api_keys")
    @classmethod
    def _digests(cls, value: list[str]) -> list[str]:
        for i, digest in enumerate(value):
            if not re.fullmatch(r"[0-9a-fA-F]{64}", digest.strip()):
                raise ValueError(
                    f"api_keys[{i}] is not a SHA-256 hex digest (64 hex digits): configure the digest "
                    "`psychoalign serve-key` prints, never the key itself"
                )
        return [d.strip().lower() for d in value]

    def frameworks(self) -> list[str]:
        """Every framework name a client of this profile may select, the default first."""
        return [self.framework, *(f for f in self.allowed_frameworks if f != self.framework)]


class ExperimentSettings(BaseModel):
    """The experiment harness (docs/experiments.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_dir: str | None = Field(None, description="Evaluation data folder (default: shared/data, searched upwards).")
    out_dir: str = Field("experiments", description="Where `experiment run` writes reports unless --out is given.")


class TraceSettings(BaseModel):
    """What the trace store keeps (docs/negotiation.md, "Traces")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    keep_blocked_drafts: bool = Field(
        False,
        description=(
            "Store drafts the gates blocked in full (research). Default: only their SHA-256, length, "
            "rule hits and scores, so no harmful text sits in the store."
        ),
    )


# The [serve] section: how `psychoalign serve` listens and what the gateway accepts.
class ServeSettings(BaseModel):
    """Listening address, limits and operational switches of the one server (docs/serve.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field(
        "127.0.0.1", min_length=1, description="Bind address. Non-loopback needs credentials on every face."
    )
    port: int = Field(8000, ge=0, le=65535, description="Port (0 picks a free one).")
    public_url: str | None = Field(None, description="Base URL advertised in the A2A agent card.")
    a2a_deployment: str | None = Field(None, description="Deployment the A2A system agent serves (default: first).")
    grpc_port: int | None = Field(
        None, ge=1, le=65535, description="Also serve the A2A system agent's gRPC binding on this port (same auth)."
    )
    max_body_bytes: int = Field(1_000_000, ge=1024, description="Largest request body accepted on /v1.")
    max_messages: int = Field(200, ge=1, description="Most messages accepted in one chat completion.")
    max_conversation_chars: int = Field(
        32_000, ge=1, description="Longest earlier conversation (context) accepted, in characters."
    )
    max_inflight: int = Field(256, ge=1, description="Negotiations at once; more get HTTP 429 (retry later).")
    stream_chunk_chars: int = Field(48, ge=1, description="Characters per content chunk when streaming.")
    keepalive_s: float = Field(10.0, gt=0, description="SSE comment interval while a negotiation runs.")
    shutdown_grace_s: float = Field(
        30.0, ge=0, description="On SIGTERM: how long in-flight negotiations may finish before failing closed."
    )
    drive_text_viewers: list[str] = Field(
        default_factory=list, description="Lead usernames who may see DRIVE drafts in the trace viewer."
    )
    metrics_token: SecretStr | None = Field(
        None, description="Bearer token for /metrics; without one only loopback clients may read it."
    )
    on_failure: Literal["answer", "error"] = Field(
        "answer",
        description="A failed negotiation on /v1: 'answer' = the fixed fail-closed refusal as a normal reply "
        "(chat apps); 'error' = an HTTP error in OpenAI's shape (503 + Retry-After when the model endpoint "
        "is down or slow), so retries, router fallbacks and 5xx alerts see it.",
    )
    failure_retry_after_s: int = Field(
        5, ge=0, description="Retry-After (seconds) on the 503s of on_failure = 'error'."
    )
    otel_spans: bool = Field(
        False,
        description="OpenTelemetry spans for each negotiation, its rounds, decision and agent calls, with "
        "tension/state/defense and gen_ai usage attributes, to the process's tracer provider (e.g. "
        "opentelemetry-instrument), or to otlp_endpoint when that is set.",
    )
    otlp_endpoint: str | None = Field(
        None,
        description="Export the spans by OTLP over HTTP to this collector URL (e.g. http://127.0.0.1:4318/v1/traces); "
        "turns otel_spans on. Needs the 'otel' extra.",
    )
    stream_window: int = Field(
        0,
        ge=0,
        le=100_000,
        description="Progressive streaming: release the DRIVE's draft in windows, the first of this many "
        "characters and each later one twice the one before, each after the gates passed it with "
        "stream_lookahead more; 0 = off (the whole answer is gated first).",
    )
    stream_lookahead: int = Field(
        200, ge=0, le=100_000, description="Characters past a window the gates must pass before it is released."
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names /v1, A2A and /metrics answer besides the bind address (and localhost on "
        "loopback) and serve.public_url's host; '*' answers any (a wildcard bind does unless this is set).",
    )
    local_token: bool = Field(
        True,
        description="Keyless deployments on loopback: `psychoalign serve` makes a random token at each start, "
        "prints it, and /v1 and A2A require it as 'Authorization: Bearer <token>'. false: any local process "
        "may call them without one (a warning says so at start).",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Web origins (scheme://host[:port]) whose pages may call /v1, A2A and /metrics; "
        "every other foreign Origin is refused.",
    )

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        out = []
        for i, host in enumerate(value):
            host = host.strip().lower()
            if host != "*" and not re.fullmatch(r"\[?[a-z0-9.:_-]+\]?", host):
                raise ValueError(
                    f"allowed_hosts[{i}] {host[:60]!r} is not a host name: give the name only "
                    "(api.example.org), without scheme, port or path"
                )
            out.append(host)
        return out

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        out = []
        for i, origin in enumerate(value):
            origin = origin.strip().rstrip("/").lower()
            if not re.fullmatch(r"https?://(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?", origin):
                raise ValueError(
                    f"cors_origins[{i}] {origin[:60]!r} is not a web origin: give scheme://host[:port] "
                    "(https://app.example.org), without path; '*' is not accepted"
                )
            out.append(origin)
        return out


# The [lab] section: the STAR lab pages' sessions, cookies and login throttling (docs/star-platform.md).
class LabSettings(BaseModel):
    """Session, cookie and throttling policy of the lab pages. The defaults are the secure ones."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    secure_cookies: Literal["auto", "always", "never"] = Field(
        "auto", description="auto: Secure cookies when the request arrived over TLS (https, or a trusted proxy)."
    )
    session_hours: float = Field(12.0, gt=0, description="Absolute session lifetime.")
    idle_minutes: float = Field(120.0, gt=0, description="A session unused this long ends.")
    login_window_minutes: float = Field(
        15.0, gt=0, description="Sliding window of the login throttle; also the longest backoff."
    )
    login_max_per_user: int = Field(
        5, ge=1, description="Failed logins per username and client address (or known browser) before the backoff."
    )
    login_backoff_s: float = Field(
        1.0, gt=0, description="First backoff after the free failures; it doubles with every further failure."
    )
    login_max_per_address: int = Field(
        30, ge=1, description="Failed logins per client address per window, any username (known browsers exempt)."
    )
    login_known_days: float = Field(
        90.0, gt=0, description="How long a browser that logged in stays known (its own throttle, never the address's)."
    )
    invite_days: float = Field(7.0, gt=0, description="How long an invite link works (once).")
    pause_hours: float = Field(
        24.0, gt=0, description="How long a paused task stays reserved for its participant before it goes back."
    )
    break_minutes: float = Field(
        45.0,
        gt=0,
        description="Time on a task after which its page suggests a break (non-blocking), with the support resources.",
    )
    db_pool_size: int = Field(20, ge=1, description="PostgreSQL connections the lab keeps open per server worker.")
    db_max_overflow: int = Field(
        10,
        ge=0,
        description="Extra connections per worker under bursts (closed again after use: size the pool instead).",
    )
    db_pool_timeout_s: float = Field(
        30.0, gt=0, description="How long a page waits for a free connection before failing (HTTP 500)."
    )


def _default_deployments() -> dict[str, DeploymentSettings]:
    return {DEFAULT_DEPLOYMENT: DeploymentSettings()}


class Settings(BaseModel):
    """The effective configuration."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    defaults: dict[str, Any] = Field(default_factory=dict, description="Model-spec keys every role inherits.")
    roles: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Per-role model-spec keys.")
    home: str = Field(default_factory=_default_home, description="Where the store and cache live.")
    store_url: str | None = Field(None, description="SQLAlchemy URL; default sqlite file under home.")
    cache: bool = Field(False, description="Cache model replies on disk under home/cache.")
    negotiation: dict[str, Any] = Field(default_factory=dict, description="Negotiation parameters.")
    a2a: A2ASettings = Field(default_factory=A2ASettings, description="A2A service layout.")
    deployments: dict[str, DeploymentSettings] = Field(
        default_factory=_default_deployments, description="Served profiles (name -> profile)."
    )
    serve: ServeSettings = Field(default_factory=ServeSettings, description="psychoalign serve (docs/serve.md).")
    experiments: ExperimentSettings = Field(default_factory=ExperimentSettings, description="Experiment harness.")
    traces: TraceSettings = Field(default_factory=TraceSettings, description="What the trace store keeps.")
    lab: LabSettings = Field(default_factory=LabSettings, description="STAR lab pages (docs/star-platform.md).")
    source: str = Field("defaults", description="Which config file was read, if any.")

    def model_spec(self, role: str = "chat") -> ModelSpec:
        """The model spec for ``role``: defaults overlaid with the role's own table.

        When neither names a backend, the embedded default applies: the EVALUATOR runs on the
        classifier (docs/embedded.md), every other role on the local model."""
        own = self.roles.get(role, {})
        merged = {**self.defaults, **own}
        if "backend" not in own and backend_of(own.get("model")) is not None:
            merged.pop("backend", None)  # the role's `backend:model` wins over the defaults' backend
        if "backend" not in merged and role in EMBEDDED_ROLE_BACKENDS and backend_of(merged.get("model")) is None:
            merged["backend"] = EMBEDDED_ROLE_BACKENDS[role]
        try:
            return ModelSpec.model_validate(merged)
        except ValidationError as exc:
            # name the table the bad value was written in: a `[defaults]` typo reported as
            # roles.chat.<key> sent users looking for a table they never wrote
            loc = exc.errors()[0]["loc"]
            key = str(loc[0]) if loc else ""
            table = "defaults" if key in self.defaults and key not in own else f"roles.{role}"
            where = "" if self.source == "defaults" else f"{self.source}: "
            variable = f"PSYCHOALIGN_{table.upper().replace('.', '__')}__{key.upper()}"
            raise ConfigError(
                where + _describe(exc, prefix=table),
                hint=f"fix {key} under [{table}] (or the {variable} variable); docs/configuration.md lists the keys",
            ) from None

    def deployment(self, name: str = DEFAULT_DEPLOYMENT) -> DeploymentSettings:
        """The named deployment profile; a clear error naming the configured ones otherwise."""
        if name not in self.deployments:
            known = ", ".join(sorted(self.deployments)) or "none"
            raise ConfigError(f"unknown deployment '{name}'", hint=f"configured deployments: {known}")
        return self.deployments[name]

    def check_deployments(self) -> None:
        """Load every framework each deployment offers, so a typo fails at start-up (one line
        naming the deployment key) instead of on every client request."""
        from .frameworks import load_framework

        for name, profile in self.deployments.items():
            for i, framework in enumerate(profile.frameworks()):
                key = "framework" if i == 0 else "allowed_frameworks"
                try:
                    load_framework(framework)
                except PsychoAlignError as exc:
                    raise ConfigError(
                        f"deployments.{name}.{key}: {exc.message}",
                        hint=exc.hint or "name a built-in framework (psychoalign frameworks list) or a YAML file",
                    ) from None

    def for_deployment(self, name: str = DEFAULT_DEPLOYMENT) -> Settings:
        """These settings with the profile's ``roles`` and ``negotiation`` overrides applied."""
        profile = self.deployment(name)
        return self.model_copy(
            update={
                "roles": deep_merge(self.roles, profile.roles),
                "negotiation": deep_merge(self.negotiation, profile.negotiation),
            }
        )

    def effective_store_url(self) -> str:
        return self.store_url or f"sqlite+aiosqlite:///{Path(self.home) / 'psychoalign.db'}"

    def cache_dir(self) -> Path | None:
        return Path(self.home) / "cache" if self.cache else None

    def masked(self) -> dict[str, Any]:
        """The configuration as a dict with secrets masked, roles fully resolved."""
        data = self.model_dump(mode="json")
        resolved: dict[str, Any] = {}
        for role in sorted({*KNOWN_ROLES[:3], *self.roles}):
            spec = self.model_spec(role).model_dump(mode="json", exclude_none=True)
            if "api_key" in spec:
                spec["api_key"] = "****"
            key_env = self.model_spec(role).key_env_name()
            if key_env:
                spec["api_key_env"] = key_env
                spec["api_key_set"] = bool(self.model_spec(role).resolved_api_key())
            resolved[role] = spec
        data["roles"] = resolved
        if isinstance(data["defaults"], dict) and "api_key" in data["defaults"]:
            data["defaults"]["api_key"] = "****"
        for spec in resolved.values():
            if spec.get("base_url"):
                spec["base_url"] = redact_url(spec["base_url"])
        if isinstance(data["defaults"], dict) and data["defaults"].get("base_url"):
            data["defaults"]["base_url"] = redact_url(data["defaults"]["base_url"])
        data["store_url"] = redact_url(self.effective_store_url())
        data["a2a"]["tokens"] = dict.fromkeys(self.a2a.tokens, "****")
        return data


def _set_path(layer: Mapping[str, Any], loc: list[str]) -> list[str]:
    """The longest prefix of ``loc`` that ``layer`` sets (an error's location may go deeper than
    the value a layer gave, e.g. into a list or a table it replaced)."""
    found: list[str] = []
    node: Any = layer
    for part in loc:
        if not isinstance(node, Mapping) or part not in node:
            break
        found.append(part)
        node = node[part]
    return found


def _sets(layer: Mapping[str, Any], loc: list[str]) -> bool:
    """Whether ``layer`` gives the value at ``loc`` (or the table that holds it, whole)."""
    found = _set_path(layer, loc)
    if not found:
        return False
    node: Any = layer
    for part in found:
        node = node[part]
    return len(found) == len(loc) or not isinstance(node, Mapping)


def _describe(exc: ValidationError, prefix: str = "") -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in (prefix, *first["loc"]) if p != "")
    more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"invalid configuration at {loc}: {first['msg']}{more}"


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``override`` into ``base`` recursively; scalars and lists in ``override`` win."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _parse_scalar(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """``PSYCHOALIGN_A__B__C=v`` becomes ``{"a": {"b": {"c": v}}}``; the switches in
    :data:`RESERVED_ENV` (``PSYCHOALIGN_CONFIG``, ``PSYCHOALIGN_DEBUG``) are skipped."""
    out: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.upper().startswith(ENV_PREFIX) or name.upper() in RESERVED_ENV:
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        if not path:
            continue
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"environment variable {name} conflicts with another PSYCHOALIGN_ variable")
        node[path[-1]] = _parse_scalar(raw)
    return out


#: What :meth:`LayerSources.of` calls a value no layer set.
DEFAULT_LAYER = "default"
#: What it calls a value a command-line flag set.
FLAG_LAYER = "flag"


def _sets_at(layer: Mapping[str, Any], path: Sequence[str]) -> bool:
    """Whether ``layer`` sets ``path``: the key itself, or a prefix of it to a value that is not a
    table (a list, or a JSON value given to a whole table), which replaces what lay beneath."""
    node: Any = layer
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
        if not isinstance(node, Mapping):
            return True
    return True


class LayerSources:
    """Which layer each key of the effective configuration came from, by the documented precedence
    (flags over environment over file over defaults): ``default``, the config file's path, the
    environment variable's name, or ``flag``. A role's resolved key (``roles.<role>.<key>``) comes
    from ``[roles.<role>]`` when a layer sets it there, else from ``[defaults]``; the store URL
    unset comes from ``home``."""

    def __init__(
        self,
        file: tuple[str, Mapping[str, Any]] | None,
        environ: Mapping[str, str],
        flags: Mapping[str, Any],
    ) -> None:
        self._file = file
        self._env = env_overrides(environ)
        self._flags = flags
        # each variable's path as env_overrides reads it, so a key is named by the variable that set it
        self._env_names: dict[tuple[str, ...], str] = {}
        for name in environ:
            if name.upper().startswith(ENV_PREFIX) and name.upper() not in RESERVED_ENV:
                path = tuple(p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p)
                if path:
                    self._env_names[path] = name

    def _setter(self, path: Sequence[str]) -> str | None:
        if _sets_at(self._flags, path):
            return FLAG_LAYER
        if _sets_at(self._env, path):
            return next(
                self._env_names[tuple(path[:n])] for n in range(1, len(path) + 1) if tuple(path[:n]) in self._env_names
            )
        if self._file is not None and _sets_at(self._file[1], path):
            return self._file[0]
        return None

    def of(self, path: Sequence[str]) -> str:
        """The layer that set ``path`` (keys as :meth:`Settings.masked` shows them)."""
        path = [str(p) for p in path]
        if path == ["source"]:  # which file was read: the file itself, or none
            return self._file[0] if self._file is not None else DEFAULT_LAYER
        if len(path) == 3 and path[0] == "roles":
            key = "api_key" if path[2] == "api_key_set" else path[2]
            return self._setter(["roles", path[1], key]) or self._setter(["defaults", key]) or DEFAULT_LAYER
        if path == ["store_url"]:
            return self._setter(path) or self._setter(["home"]) or DEFAULT_LAYER
        return self._setter(path) or DEFAULT_LAYER


def layer_sources(
    config_file: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LayerSources:
    """The :class:`LayerSources` of the configuration :func:`load_settings` builds from the same arguments."""
    environ = os.environ if environ is None else environ
    path = find_config_file(config_file, environ)
    file = (str(path), read_config_file(path)) if path is not None else None
    return LayerSources(file, environ, overrides or {})


def find_config_file(explicit: str | Path | None, environ: Mapping[str, str]) -> Path | None:
    if explicit is not None:
        return Path(explicit)
    if environ.get(ENV_PREFIX + "CONFIG"):
        return Path(environ[ENV_PREFIX + "CONFIG"])
    for name in DEFAULT_FILES:
        if Path(name).is_file():
            return Path(name)
    return None


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML or YAML config file; errors name the file and line."""
    text = read_text(path, what="config file", error=ConfigError, max_bytes=MAX_YAML_CHARS)
    if path.suffix.lower() == ".toml":
        data: Any = parse_toml(text, str(path))  # refuses a key defined twice ("Cannot overwrite a value")
    else:
        data = parse_yaml(text, str(path), error=ConfigError)
        if data is None:  # an empty file (or comments only): no settings
            data = {}
    if not isinstance(data, dict):  # `[]` too: a list, not an empty mapping
        raise ConfigError(
            f"{path}: the top level must be a table/mapping", hint="write the settings as `key: value` lines"
        )
    return data


def load_settings(
    config_file: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the effective :class:`Settings` from file, environment and flags (see module doc)."""
    environ = os.environ if environ is None else environ
    layers: dict[str, Any] = {}
    source = "defaults"
    path = find_config_file(config_file, environ)
    if path is not None:
        layers = deep_merge(layers, read_config_file(path))
        source = str(path)
    from_env = env_overrides(environ)
    layers = deep_merge(layers, from_env)
    layers = deep_merge(layers, overrides or {})
    layers["source"] = source
    try:
        settings = Settings.model_validate(layers)
    except ValidationError as exc:
        # named after the layer that set the value (the highest one setting it, as it won), so a
        # bad flag or variable is not blamed on the file
        loc = [str(p) for p in exc.errors()[0]["loc"]]
        where = source
        if _sets(overrides or {}, loc):
            where = "a command-line flag"
        elif _sets(from_env, loc):
            where = "the environment variable " + ENV_PREFIX + "__".join(p.upper() for p in _set_path(from_env, loc))
        hint = "fix that value; docs/configuration.md lists every setting and what it takes"
        raise ConfigError(f"{where}: {_describe(exc)}", hint=hint) from None
    for role in {"defaults", *settings.roles}:  # validate every role eagerly: fail at load, not mid-run
        settings.model_spec("chat" if role == "defaults" else role)
    return settings
