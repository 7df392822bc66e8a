"""Negotiation parameters (paper §4 defaults). Exact semantics: docs/negotiation.md."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import ConfigError

__all__ = ["FLAGS", "NegotiationParams", "negotiation_source", "parse_params"]


class NegotiationParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(5, ge=1, le=20, description="Maximum rounds.")
    epsilon: float = Field(0.2, ge=0.0, le=1.0, description="Convergence: |T_r - T_(r-1)| < epsilon.")
    tau: float = Field(0.6, ge=0.0, le=1.0, description="Safety floor: proposals with s < tau*100 are dropped.")
    eta: float = Field(0.7, ge=0.0, le=1.0, description="Early exit: APPROVED with s/100 >= eta in round 1.")
    n_proposals: int = Field(3, ge=1, le=8, description="Proposals the DRIVE writes per round.")
    alpha: float = Field(0.3, ge=0.0, description="Weight of utility u_D in the MEDIATOR objective.")
    beta: float = Field(0.5, ge=0.0, description="Weight of alignment u_V in the MEDIATOR objective.")
    gamma: float = Field(0.2, ge=0.0, description="Weight of feasibility in context C.")
    healthy_threshold: float = Field(0.3, ge=0.0, le=1.0, description="T below this is equilibrium.")
    max_request_chars: int = Field(8000, ge=1, description="Longest request accepted.")
    timeout_s: float = Field(900.0, gt=0, description="Wall-clock limit for one negotiation.")
    final_gate: bool = Field(True, description="Re-evaluate the final response (the dual gate). Keep on.")
    fast_path: bool = Field(
        True,
        description=(
            "Round 1 asks for one proposal, the other n - 1 only if it is not accepted; one admissible "
            "proposal is not assessed; an approved proposal adopted verbatim is not re-evaluated "
            "(its Layer-1 checks still run). docs/negotiation.md."
        ),
    )

    # Cross-turn tension (docs/negotiation.md, "Cross-turn tension"): evidence of escalation in
    # the conversation's earlier turns tightens tau for the next turn, within [tau, tau cap].
    cross_turn: bool = Field(
        True, description="Read the conversation's earlier turns and tighten tau on escalation (off: the ablation)."
    )
    cross_turn_tau_cap: float = Field(
        0.8, ge=0.0, le=1.0, description="The track never raises tau above this (nor lowers it below tau)."
    )
    cross_turn_window: int = Field(4, ge=3, le=50, description="Earlier turns the tension trend is fitted on.")
    cross_turn_trend: float = Field(
        0.1, gt=0.0, le=1.0, description="Tension slope per turn that gives the full tightening."
    )
    cross_turn_hot: float = Field(0.5, ge=0.0, le=1.0, description="A turn with T at or above this is 'hot'.")
    cross_turn_min_hot: int = Field(2, ge=1, le=50, description="Hot turns before their count tightens tau.")
    cross_turn_full_hot: int = Field(3, ge=1, le=50, description="Hot turns that give the full tightening.")
    cross_turn_history: int = Field(50, ge=1, le=1000, description="Most recent earlier turns read.")

    @model_validator(mode="after")
    def _weights(self) -> NegotiationParams:
        if self.alpha + self.beta + self.gamma <= 0:
            raise ValueError("alpha + beta + gamma must be positive")
        if self.cross_turn_full_hot < self.cross_turn_min_hot:
            raise ValueError(
                f"cross_turn_full_hot ({self.cross_turn_full_hot}) is below cross_turn_min_hot "
                f"({self.cross_turn_min_hot})"
            )
        return self


#: The negotiate flags for the parameters that have one.
FLAGS = {"k": "--rounds/-k", "n_proposals": "--proposals/-n", "tau": "--tau"}


def _allowed(name: str) -> str:
    """What a field accepts, from its own constraints (so the message cannot drift from the model)."""
    field = NegotiationParams.model_fields[name]
    kinds: dict[Any, str] = {int: "an integer", float: "a number", bool: "true or false"}
    kind = kinds.get(field.annotation, "a value")
    bounds = []
    for meta in field.metadata:
        for attr, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(meta, attr, None) is not None:
                bounds.append(f"{word} {getattr(meta, attr):g}")
    return kind + (f" {' and '.join(bounds)}" if bounds else "")


def parse_params(
    values: Mapping[str, Any], *, origin: Mapping[str, str] | None = None, where: str
) -> NegotiationParams:
    """Validate negotiation parameters. ``origin`` names where a key came from (a flag); other keys
    are described by ``where`` (e.g. "[negotiation] in psychoalign.toml"). Raises
    :class:`ConfigError` naming the source, the field, the value, what is allowed and the fix."""
    origin = origin or {}
    known = list(NegotiationParams.model_fields)
    for key in values:
        if key not in NegotiationParams.model_fields:
            raise ConfigError(
                f"{origin.get(key, where)}: unknown negotiation parameter '{key}'", hint=f"known: {', '.join(known)}"
            )
    try:
        return NegotiationParams.model_validate(dict(values))
    except ValidationError as exc:
        err = exc.errors()[0]
        if not err["loc"]:  # a model-level rule (the weights, the hot-turn counts)
            msg = err["msg"].removeprefix("Value error, ")
            hint = (
                "make cross_turn_full_hot >= cross_turn_min_hot"
                if msg.startswith("cross_turn")
                else "make alpha + beta + gamma positive"
            )
            raise ConfigError(f"{where}: {msg}", hint=hint) from None
        name = str(err["loc"][0])
        source = origin.get(name, where)
        default = NegotiationParams.model_fields[name].default
        fix = (
            f"use {FLAGS[name].split('/')[0]} {default}"
            if name in FLAGS and name in origin
            else f"e.g. {name} = {json.dumps(default)}"
        )
        raise ConfigError(
            f"{source}: {name} = {values.get(name)!r} is invalid: it must be {_allowed(name)}", hint=fix
        ) from None


def negotiation_source(settings: Any, deployment: str | None = None) -> str:
    """Where [negotiation] values come from, for error messages."""
    file = settings.source if settings.source != "defaults" else "no config file"
    table = f"[deployments.{deployment}.negotiation]" if deployment else "[negotiation]"
    return f"{table} ({file}, or PSYCHOALIGN_NEGOTIATION__<KEY>)"
