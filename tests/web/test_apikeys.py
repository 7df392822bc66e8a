"""API keys of /v1: the Authorization header and who may use which deployment."""

from __future__ import annotations

import pytest

from psychoalign.config import DeploymentSettings
from psychoalign.web.apikeys import KeyCheck, hash_key, parse_bearer
from psychoalign.web.errors import APIError


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", "bearer   "])
def test_a_bearer_without_a_token_carries_no_credential(header: str | None) -> None:
    """`-H "Authorization: Bearer $PSYCHOALIGN_KEY"` with the variable unset sends "Bearer "."""
    assert parse_bearer(header) is None


@pytest.mark.parametrize("header", ["Basic dXNlcjpwdw==", "Token abc", "abc"])
def test_another_scheme_is_malformed(header: str) -> None:
    with pytest.raises(APIError, match="malformed Authorization header") as caught:
        parse_bearer(header)
    # A 401 names the scheme it wants (RFC 9110 §11.6.1), as the other 401s of /v1 do.
    assert caught.value.status == 401 and caught.value.headers == {"WWW-Authenticate": "Bearer"}


def test_an_empty_bearer_reaches_a_keyless_deployment_from_loopback_only() -> None:
    keyed = DeploymentSettings(api_keys=[hash_key("pa-secret")])
    check = KeyCheck({"open": DeploymentSettings(), "keyed": keyed})
    token = parse_bearer("Bearer ")
    assert check.authorise("open", token, "127.0.0.1") == "loopback"
    with pytest.raises(APIError, match="no API key"):
        check.authorise("keyed", token, "127.0.0.1")
    with pytest.raises(APIError, match="answers loopback clients only"):
        check.authorise("open", token, "203.0.113.9")
    assert parse_bearer("Bearer pa-secret") == "pa-secret"
