"""Errors of the OpenAI-compatible API, in OpenAI's error shape.

Body: ``{"error": {"message", "type", "param", "code"}}``. ``message`` is one line naming what
was wrong, where (``param``, e.g. ``messages[2].role``) and the fix; it never carries a traceback,
SQL, or model text.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse


class APIError(Exception):
    """An error returned to an API client (``status`` is the HTTP status)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}


def error_body(exc: APIError) -> dict[str, Any]:
    return {"error": {"message": exc.message, "type": exc.type, "param": exc.param, "code": exc.code}}


def error_response(exc: APIError) -> JSONResponse:
    return JSONResponse(error_body(exc), status_code=exc.status, headers=exc.headers)
