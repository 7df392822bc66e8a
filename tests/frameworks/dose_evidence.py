"""What the dose check's tests share: the general framework's dose table, and an assertion on the
check's evidence."""

from __future__ import annotations

from psychoalign.frameworks import load_framework
from psychoalign.frameworks.doses import DoseLimit


def general_limits() -> tuple[DoseLimit, ...]:
    """The general framework's dose table (its rule U7-dose-label)."""
    check = load_framework("general").rule("U7-dose-label")
    assert check is not None and check.check is not None
    return check.check.doses


def assert_finds(result: str | None, found: str | None, *where: str) -> None:
    """The check's evidence ``result`` is what ``found`` says: None (nothing found), or evidence
    that starts with ``found``. ``where`` names what was checked, in the failure message."""
    message = (*where, result) if where else result
    if found is None:
        assert result is None, message
    else:
        assert result is not None and result.startswith(found), message
