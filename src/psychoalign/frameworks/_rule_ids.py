"""Rule ids as models write them (a part of :mod:`.model`): an id folded to its words and
numbers (:func:`rule_tokens`), what a written id names (:class:`RuleMatch`), and a misspelling's
closeness (:data:`FUZZY_CUTOFF`)."""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

from ..textio import skeleton
from ._rules import Layer, Rule


def rule_tokens(rule_id: str) -> tuple[str, ...]:
    """A rule id as the words and numbers it is made of, ignoring case, width, punctuation,
    separators and look-alike letters: ``U1-mass-harm``, ``u1_mass_harm``, ``U1 mass harm``,
    ``[U1-m\u0430ss-harm]`` (Cyrillic a) all give ``("u1", "mass", "harm")``."""
    return tuple(re.findall(r"[a-z0-9]+", skeleton(rule_id).casefold()))


class RuleMatch(NamedTuple):
    """What a rule id written by a model names in a framework (:meth:`.model.Framework.resolve`).

    ``rule``/``layer`` are None when it names no rule. ``placeable`` is False when the id
    cannot be a spelling of any id of this framework at all: it holds letters of another script
    that do not imitate Latin ones (framework ids are ASCII), so a gate cannot tell which layer it
    meant and must treat it as universal."""

    rule: Rule | None
    layer: Layer | None
    placeable: bool


#: How close (difflib ratio of the folded ids) a misspelt id must be to count as a rule's.
FUZZY_CUTOFF = 0.85


def _close(joined: str, target: str) -> bool:
    """Whether some stretch of ``joined`` (a folded id, words around it included) spells
    ``target`` with a typo: difflib ratio >= :data:`FUZZY_CUTOFF`."""
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(target)
    n = len(target)
    for size in (n, n - 1, n + 1):
        for i in range(max(len(joined) - size, 0) + 1):
            matcher.set_seq1(joined[i : i + size])
            if (
                matcher.real_quick_ratio() >= FUZZY_CUTOFF
                and matcher.quick_ratio() >= FUZZY_CUTOFF
                and matcher.ratio() >= FUZZY_CUTOFF
            ):
                return True
    return False
