"""The ``[lab]`` section: the STAR lab pages' sessions, cookies and login throttling (docs/star-platform.md).

Free of web imports so :mod:`psychoalign.config` can hold it without loading FastAPI.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LabSettings"]


class LabSettings(BaseModel):
    """Session, cookie and throttling policy of the lab pages. The defaults are the secure ones."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    secure_cookies: Literal["auto", "always", "never"] = Field(
        "auto", description="auto: Secure cookies when the request arrived over TLS (https, or a trusted proxy)."
    )
    session_hours: float = Field(12.0, gt=0, description="Absolute session lifetime.")
    idle_minutes: float = Field(120.0, gt=0, description="A session unused this long ends.")
    login_window_minutes: float = Field(15.0, gt=0, description="Sliding window of the login throttle.")
    login_max_per_user: int = Field(5, ge=1, description="Failed logins per username per window.")
    login_max_per_address: int = Field(30, ge=1, description="Failed logins per client address per window.")
    invite_days: float = Field(7.0, gt=0, description="How long an invite link works (once).")
    pause_hours: float = Field(
        24.0, gt=0, description="How long a paused task stays reserved for its participant before it goes back."
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
