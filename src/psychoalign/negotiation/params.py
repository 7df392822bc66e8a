"""Negotiation parameters from config files and flags, validated with errors that name the fix.

The parameters themselves (:class:`~psychoalign.traces.model.NegotiationParams`, paper §4
defaults; exact semantics in docs/negotiation.md) are stored on every trace, so they are defined
with the trace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError
from ..traces.model import NegotiationParams

__all__ = ["FLAGS", "PAPER_PROTOCOL", "NegotiationParams", "negotiation_source", "parse_params"]


#: The settings under which the studies rerun the paper's protocol: the DRIVE always proposes (no
#: request decided before drafting), and only the EVALUATOR's classification selects the defense
#: (no crisis screen of the negotiation's own beside it). docs/negotiation.md.
PAPER_PROTOCOL: dict[str, Any] = {"decide_on_request": False, "crisis_screen": False}

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
