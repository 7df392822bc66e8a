"""API keys of the ``/v1`` faces: SHA-256 digests at rest, bearer tokens on the wire.

Policy (secure by default, docs/serve.md): a deployment with ``api_keys`` accepts only those keys;
a deployment with none is *keyless* and answers loopback clients only — with the per-start local
token when the server has one (``serve.local_token``, as Jupyter does: other local processes and
pages cannot guess it). ``psychoalign serve`` refuses a non-loopback bind while any deployment is
keyless.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Mapping

from ..config import DeploymentSettings
from .errors import APIError

__all__ = ["hash_key", "is_loopback", "new_key"]

KEY_PREFIX = "pa-"
LOCAL_TOKEN_HINT = (
    "no token: send 'Authorization: Bearer <token>' with the local token `psychoalign serve` printed "
    "at start (PSYCHOALIGN_TOKEN)"
)


def hash_key(key: str) -> str:
    """The SHA-256 hex digest stored in ``deployments.<name>.api_keys``."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_id(digest: str) -> str:
    """A short, non-reversible label for a key (stored on traces, shown in logs)."""
    return digest[:12]


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host in {"127.0.0.1", "::1", "localhost", "testclient"}:  # the common cases, without parsing
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_bearer(header: str | None) -> str | None:
    """The token of ``Authorization: Bearer <token>``; None when absent; 401 when malformed.

    ``Bearer`` with nothing after it (a script's ``Bearer $KEY`` with the variable unset) carries
    no credential, as no header: loopback clients of a keyless deployment get in, others are told
    that no key was sent."""
    if not header or not header.strip():
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() == "bearer" and not token.strip():
        return None
    if scheme.lower() != "bearer" or not token.strip():
        raise APIError(
            401,
            "malformed Authorization header: send 'Authorization: Bearer <API key>'",
            type="invalid_request_error",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},  # every 401 names the scheme (RFC 9110 §15.5.2)
        )
    return token.strip()


class KeyCheck:
    """Decides which deployments a caller may use."""

    def __init__(self, deployments: Mapping[str, DeploymentSettings], *, local_token: str | None = None) -> None:
        self._digests = {name: tuple(d.lower() for d in dep.api_keys) for name, dep in deployments.items()}
        self.local_token = local_token

    def local_ok(self, token: str | None, client_host: str | None) -> bool:
        """May this caller use the keyless deployments: loopback, with the local token if there is one."""
        if not is_loopback(client_host):
            return False
        if self.local_token is None:
            return True
        return token is not None and hmac.compare_digest(token.encode(), self.local_token.encode())

    def keyless(self) -> list[str]:
        return [name for name, digests in self._digests.items() if not digests]

    def allowed(self, token: str | None, client_host: str | None) -> dict[str, str]:
        """Deployment name -> key id (``"loopback"`` for keyless access) the caller may use."""
        out: dict[str, str] = {}
        digest = hash_key(token) if token is not None else None
        for name, digests in self._digests.items():
            if digests:
                if digest is not None and any(hmac.compare_digest(digest, d) for d in digests):
                    out[name] = key_id(digest)
            elif self.local_ok(token, client_host):
                out[name] = "loopback"
        return out

    def authorise(self, deployment: str, token: str | None, client_host: str | None) -> str:
        """The key id for ``deployment``, or a 401 in the OpenAI shape."""
        key = self.allowed(token, client_host).get(deployment)
        if key is not None:
            return key
        if self._digests.get(deployment):
            if token is None:
                message = "no API key: send 'Authorization: Bearer <API key>' (keys are set per deployment)"
            else:
                message = f"invalid API key for model '{deployment}'"
        elif self.local_token is not None and is_loopback(client_host):
            message = LOCAL_TOKEN_HINT if token is None else "invalid local token"
        else:
            message = (
                f"model '{deployment}' has no API keys configured and answers loopback clients only: "
                f"add deployments.{deployment}.api_keys"
            )
        raise APIError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
