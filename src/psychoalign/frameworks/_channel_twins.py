"""A false claim's and a known hazard's two halves in a framework file (a part of :mod:`.model`):
each rule's regex and the safe channel that corrects or warns of it, checked against each other,
each error located at the line of the half that is there."""

from __future__ import annotations

from ..yamlio import LocatedError
from ._rules import Rule, SafeChannel


def _excerpt(regex: str) -> str:
    """The start of a regex, quoted, for an error line."""
    return repr(regex if len(regex) <= 40 else regex[:40] + "…")


def check_twins(
    ordered: tuple[Rule, ...], channels: tuple[SafeChannel, ...], where: dict[str, tuple[str, int]]
) -> None:
    """A false claim or a known hazard is written twice: as a regex in its rule's check (what
    fires the rule) and as the ``premise`` or ``hazard`` of the safe channel that corrects or
    warns of it (what the user reads). Each half without its twin fails silently at run time
    (a claim fires a refusal that corrects nothing, a hazard fires no warning), so both
    directions are checked here, each error on the line of the half that is there."""
    rules = {r.id: r for r in ordered}
    for rule in ordered:
        at: tuple[str | int, ...] = where[rule.id]
        if rule.check is not None and rule.check.hazards:
            raise LocatedError(
                f"rule {rule.id!r} lists hazards under `check`, where they would veto every draft that names one",
                (*at, "check", "hazards"),
                hint="move them to `request_check.hazards`: a known hazard only adds its warning beside the answer",
            )
        request = rule.request_check
        if request is not None and request.hazards:
            other = [
                name
                for name, held in (
                    ("check", rule.check),
                    ("request_check.patterns", request.patterns),
                    ("request_check.all_of", request.all_of),
                    ("request_check.premises", request.premises),
                    ("request_check.doses", request.doses),
                    ("semantic_check", rule.semantic_check),
                )
                if held
            ]
            if other:
                raise LocatedError(
                    f"rule {rule.id!r} lists hazards and also {', '.join(other)}: a hazard rule never blocks,"
                    " so its other checks would decide nothing",
                    (*at, "request_check"),
                    hint="move the other checks to a rule of their own",
                )
    for j, channel in enumerate(channels):
        at = ("safe_channels", j)
        for rule_id in channel.rules:
            if rule_id not in rules:
                raise LocatedError(
                    f"safe channel {channel.id!r} names rule {rule_id!r}, which this framework does not have",
                    (*at, "rules"),
                    hint="name one of the framework's rule ids in its `rules`",
                )
        if channel.premise and channel.hazard:
            raise LocatedError(
                f"safe channel {channel.id!r} sets both `premise` and `hazard`",
                at,
                hint="one channel per false claim or hazard: split it into two channels",
            )
        if channel.premise:
            claims = {
                claim
                for rule_id in channel.rules
                for check in (rules[rule_id].check, rules[rule_id].request_check)
                if check is not None
                for claim in check.premises
            }
            if channel.premise not in claims:
                raise LocatedError(
                    f"safe channel {channel.id!r} corrects a premise that none of its rules' checks lists",
                    (*at, "premise"),
                    hint="name the rule in its `rules` and copy the regex into that rule's `premises`"
                    " (a YAML anchor here and an alias there keeps the two the same)",
                )
            if not channel.message.strip():
                raise LocatedError(
                    f"safe channel {channel.id!r} corrects a false claim but has no `message`:"
                    " a request stating the claim would get a refusal that corrects nothing",
                    (*at, "premise"),
                    hint="add the correction as its `message` (`{channel}` marks where its `text` goes);"
                    " a localised copy translates both",
                )
        if channel.hazard:
            hazards = {
                hazard
                for rule_id in channel.rules
                if rules[rule_id].request_check is not None
                for hazard in rules[rule_id].request_check.hazards  # type: ignore[union-attr]
            }
            if channel.hazard not in hazards:
                raise LocatedError(
                    f"safe channel {channel.id!r} warns of a hazard that none of its rules' request checks lists",
                    (*at, "hazard"),
                    hint="name the rule in its `rules` and copy the regex into that rule's"
                    " `request_check.hazards` (a YAML anchor here and an alias there keeps the two the same)",
                )
    for rule in ordered:
        at = where[rule.id]
        request = rule.request_check
        for k, hazard in enumerate(request.hazards if request is not None else ()):
            if not any(c.hazard == hazard and rule.id in c.rules for c in channels):
                raise LocatedError(
                    f"rule {rule.id!r} lists a hazard (#{k + 1}, {_excerpt(hazard)}) that no safe channel warns of",
                    (*at, "request_check", "hazards"),  # the list's line: an alias item is the anchor's
                    hint=f"add a safe channel with `hazard:` set to the same regex, `rules: [{rule.id}]`"
                    " and the one-sentence warning as its `text` (a YAML anchor there and an alias here)",
                )
        for name, check in (("check", rule.check), ("request_check", request)):
            for k, claim in enumerate(check.premises if check is not None else ()):
                if not any(c.premise == claim and rule.id in c.rules for c in channels):
                    raise LocatedError(
                        f"rule {rule.id!r} lists a false claim (#{k + 1}, {_excerpt(claim)})"
                        " that no safe channel corrects",
                        (*at, name, "premises"),
                        hint=f"add a safe channel with `premise:` set to the same regex, `rules: [{rule.id}]`,"
                        " the correction as its `message` and where to check as its `text`"
                        " (a YAML anchor there and an alias here)",
                    )
