from __future__ import annotations

import pytest

from psychoalign.frameworks import load_framework
from psychoalign.negotiation.gates import Layer1Enforcer


@pytest.fixture(scope="module")
def layer1() -> Layer1Enforcer:
    """The general framework's layer-1 gate, for a request that asks nothing in particular."""
    return Layer1Enforcer(load_framework("general"), "a question")
