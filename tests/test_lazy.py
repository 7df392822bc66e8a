"""Lazily exported names (psychoalign/lazy.py): resolved from their module on first read, an
unknown name is an AttributeError naming the package, and importing the package does not load
the heavy module."""

from __future__ import annotations

import subprocess
import sys

import pytest

from psychoalign.lazy import lazy_exports


def test_a_listed_name_comes_from_its_module_and_an_unknown_one_is_an_attribute_error() -> None:
    getattr_ = lazy_exports("psychoalign.negotiation", {"Negotiator": ".engine"})
    from psychoalign.negotiation.engine import Negotiator

    assert getattr_("Negotiator") is Negotiator
    with pytest.raises(AttributeError, match=r"'psychoalign\.negotiation' has no attribute 'Nope'"):
        getattr_("Nope")


def test_importing_the_packages_loads_neither_the_engine_nor_sqlalchemy() -> None:
    code = (
        "import sys, psychoalign, psychoalign.negotiation, psychoalign.traces, psychoalign.web; "
        "print(sorted(m for m in ('psychoalign.negotiation.engine', 'sqlalchemy', 'fastapi') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
