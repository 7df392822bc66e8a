"""JSON Schema helpers: one flat schema for every provider, and strict validation of replies."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import jsonschema
from pydantic import BaseModel

__all__ = ["extract_json", "inline_refs", "schema_for", "validate_reply"]


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with local ``$ref``s to ``$defs`` inlined and ``$defs`` removed.

    Grammar compilers and some providers reject ``$ref``; pydantic emits them for nested models.
    Recursive schemas are refused (no backend can constrain them reliably).
    """
    defs = schema.get("$defs", {})

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.split("/")[-1]
                if name in seen:
                    raise ValueError(f"recursive schema at $defs/{name} is not supported")
                target = walk(copy.deepcopy(defs[name]), (*seen, name))
                rest = {k: walk(v, seen) for k, v in node.items() if k != "$ref"}
                return {**target, **rest}
            return {k: walk(v, seen) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        return node

    out = walk(schema, ())
    assert isinstance(out, dict)
    return out


def _strictify(node: Any) -> Any:
    """Close every object (``additionalProperties: false``) and drop titles: strict mode needs it."""
    if isinstance(node, dict):
        out = {k: _strictify(v) for k, v in node.items() if k != "title"}
        if out.get("type") == "object" and "properties" in out:
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(node, list):
        return [_strictify(v) for v in node]
    return node


def schema_for(output: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    """A flat, closed JSON Schema for a pydantic model or a schema dict (cached per model class)."""
    if isinstance(output, type):
        return _schema_for_model(output)
    return _flatten(json.dumps(output, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _schema_for_model(model: type[BaseModel]) -> dict[str, Any]:
    return _flatten(json.dumps(model.model_json_schema(), sort_keys=True))


@functools.lru_cache(maxsize=256)
def _flatten(raw_json: str) -> dict[str, Any]:
    flat = _strictify(inline_refs(json.loads(raw_json)))
    assert isinstance(flat, dict)
    jsonschema.Draft202012Validator.check_schema(flat)
    return flat


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(schema_json))


def extract_json(text: str) -> Any:
    """Parse the first JSON value in ``text`` (tolerating code fences and leading prose)."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(stripped):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(stripped[i:])
                return value
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON value found in the reply")


def validate_reply(text: str, schema: dict[str, Any]) -> Any:
    """Parse ``text`` and validate it against ``schema``; raise ValueError naming the first problem."""
    value = extract_json(text)
    validator = _validator(json.dumps(schema, sort_keys=True))
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise ValueError(f"at {where}: {error.message}")
    return value
