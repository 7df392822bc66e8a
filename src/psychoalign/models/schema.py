"""JSON Schema helpers: one flat schema for every provider, and strict validation of replies."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Sequence
from typing import Any

import jsonschema
from pydantic import BaseModel, ValidationError

from ..jsonguard import JSONLimitError, check_json


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


# -- why a reply did not fit, said without quoting it ------------------------------------------------
# Validator messages quote the offending value ("'<text>' is not of type 'number'", "('<key>' was
# unexpected)", a validator's own "Value error, …"), and a reply is model output: a DRIVE's draft,
# an EVALUATOR's words. What users are told is built only from the schema's side — the path
# through the schema's own property names and the failure class — never from the validator's
# message; the message itself is kept as internal detail.


class ReplyMismatchError(ValueError):
    """A reply that holds no JSON value or does not fit its schema.

    ``str(exc)`` is ``where: problem`` (or ``problem`` alone), safe to show a user: ``where`` is the
    path through the schema's own property names (``proposals[0].utility``; a key the reply made up
    is ``?``), ``problem`` the failure class with the schema's limits ("expected a number",
    "at most 4000 characters"). ``detail`` is the validator's full message, which can quote the
    reply: internal (``PsychoAlignError.detail``)."""

    def __init__(self, problem: str, *, where: str = "", detail: str = "") -> None:
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where
        self.problem = problem
        self.detail = detail


@functools.lru_cache(maxsize=256)
def _property_names(schema_json: str) -> frozenset[str]:
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                names.update(k for k in props if isinstance(k, str))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(schema_json))
    return frozenset(names)


def _schema_path(path: Iterable[Any], names: frozenset[str]) -> str:
    """``proposals[0].utility``: indices in brackets, keys only when the schema names them (a key
    the reply invented is model text: ``?``)."""
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            name = part if isinstance(part, str) and part in names else "?"
            out += f".{name}" if out else name
    return out or "(root)"


_TYPE_WORDS = {
    "number": "a number",
    "integer": "an integer",
    "string": "a string",
    "object": "an object",
    "array": "a list",
    "boolean": "true or false",
    "null": "null",
}

# pydantic error type -> what to say; ``{name}`` fields come from the error's ctx, and only the
# schema-side keys below are ever read from it (ctx can also hold input, e.g. a union tag).
_PYDANTIC_PROBLEMS: dict[str, str] = {
    "missing": "required field missing",
    "extra_forbidden": "unexpected field",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "int_parsing_size": "integer out of range",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected a string",
    "string_unicode": "expected a valid string",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "set_type": "expected a list",
    "iterable_type": "expected a list",
    "string_too_long": "text too long (at most {max_length} characters)",
    "string_too_short": "text too short (at least {min_length} characters)",
    "too_long": "too many items (at most {max_length})",
    "too_short": "too few items (at least {min_length})",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "enum": "not one of the allowed values ({expected})",
    "literal_error": "not one of the allowed values ({expected})",
    "string_pattern_mismatch": "does not match the required pattern",
    "none_required": "expected null",
}
_SCHEMA_SIDE_CTX = ("max_length", "min_length", "gt", "ge", "lt", "le", "expected")


def _pydantic_problem(error: Any) -> str:
    kind = str(error.get("type", ""))
    template = _PYDANTIC_PROBLEMS.get(kind)
    if template is None:
        return f"invalid value ({kind or 'unknown error'})"
    ctx = error.get("ctx") or {}
    values = {k: str(ctx.get(k, "?"))[:120] for k in _SCHEMA_SIDE_CTX}
    return template.format(**values)


def describe_validation_error(exc: ValidationError, schema: dict[str, Any]) -> ReplyMismatchError:
    """The first problem of a pydantic validation of a reply against ``schema``, as a
    :class:`ReplyMismatchError`: safe text from the error's type and the schema, pydantic's own message
    and the offending input (a repr, bounded) as detail."""
    errors = exc.errors()
    if not errors:
        return ReplyMismatchError("did not validate", detail=str(exc).splitlines()[0] if str(exc) else "")
    first = errors[0]
    loc: Sequence[Any] = first.get("loc", ())
    if first.get("type") == "extra_forbidden" and loc:
        loc = loc[:-1]  # the last element is the key the reply added: model text
    raw = "/".join(str(p) for p in first.get("loc", ())) or "(root)"
    value = repr(first.get("input"))[:300]
    return ReplyMismatchError(
        _pydantic_problem(first),
        where=_schema_path(loc, _property_names(json.dumps(schema, sort_keys=True))),
        detail=f"at {raw}: {first.get('msg', '')} [type={first.get('type')}, input={value}]",
    )


def _jsonschema_problem(error: jsonschema.ValidationError) -> str:
    keyword = str(error.validator)
    expected = error.validator_value  # from the schema, never from the reply
    if keyword == "type":
        kinds = expected if isinstance(expected, list) else [expected]
        return "expected " + " or ".join(_TYPE_WORDS.get(str(k), str(k)) for k in kinds)
    if keyword == "required":
        given = error.instance if isinstance(error.instance, dict) else {}
        missing = [str(n) for n in (expected if isinstance(expected, list) else []) if n not in given]
        return f"missing required field '{missing[0]}'" if missing else "a required field is missing"
    limits = {
        "maxLength": "text too long (at most {} characters)",
        "minLength": "text too short (at least {} characters)",
        "maxItems": "too many items (at most {})",
        "minItems": "too few items (at least {})",
        "maxProperties": "too many fields (at most {})",
        "minProperties": "too few fields (at least {})",
        "minimum": "must be at least {}",
        "maximum": "must be at most {}",
        "exclusiveMinimum": "must be greater than {}",
        "exclusiveMaximum": "must be less than {}",
        "multipleOf": "must be a multiple of {}",
    }
    if keyword in limits:
        return limits[keyword].format(str(expected)[:40])
    fixed = {
        "additionalProperties": "unexpected field",
        "unevaluatedProperties": "unexpected field",
        "propertyNames": "unexpected field name",
        "enum": "not one of the allowed values",
        "const": "not the required value",
        "pattern": "does not match the required pattern",
        "format": "does not match the required format",
        "anyOf": "matches none of the allowed shapes",
        "oneOf": "matches none (or more than one) of the allowed shapes",
        "uniqueItems": "items are not unique",
        "not": "matches a shape the schema forbids",
    }
    return fixed.get(keyword, f"fails the schema's '{keyword}' rule")


def extract_json(text: str) -> Any:
    """Parse the first JSON value in ``text`` (tolerating code fences and leading prose)."""
    stripped = text.strip()
    try:  # before any parse: the parser recurses per level and refuses huge integers with ValueError
        check_json(stripped)
    except JSONLimitError as exc:
        raise ReplyMismatchError(
            f"not usable JSON ({exc.problem})", detail=f"the reply began: {stripped[:200]!r}"
        ) from None
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
    raise ReplyMismatchError("no JSON value found in the reply", detail=f"the reply began: {stripped[:200]!r}")


def validate_reply(text: str, schema: dict[str, Any]) -> Any:
    """Parse ``text`` and validate it against ``schema``; raise :class:`ReplyMismatchError` naming the
    first problem (safe to show) with the validator's message as its detail."""
    value = extract_json(text)
    schema_json = json.dumps(schema, sort_keys=True)
    error = jsonschema.exceptions.best_match(_validator(schema_json).iter_errors(value))
    if error is not None:
        raw = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise ReplyMismatchError(
            _jsonschema_problem(error),
            where=_schema_path(error.absolute_path, _property_names(schema_json)),
            detail=f"at {raw}: {error.message} [validator={error.validator}, input={repr(error.instance)[:300]}]",
        )
    return value
