"""Prompts are package data files (``*.txt`` / ``*.yaml`` beside this module), loaded by name."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from ..yamlio import parse_yaml


@functools.cache
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.txt``."""
    return (resources.files(__package__) / f"{name}.txt").read_text(encoding="utf-8")


@functools.cache
def _load_yaml(name: str) -> Any:
    text = (resources.files(__package__) / f"{name}.yaml").read_text(encoding="utf-8")
    return parse_yaml(text, f"psychoalign/prompts/{name}.yaml")


def load_prompt_yaml(name: str) -> Any:
    """Parsed ``prompts/<name>.yaml``, parsed once per process. Shared: callers must not mutate it."""
    return _load_yaml(name)


def defense_template(name: str, **values: str) -> str:
    """The fixed text ``name`` of ``prompts/defense_templates.yaml`` with ``values`` filled in."""
    return str(load_prompt_yaml("defense_templates")[name]).format(**values).strip()
