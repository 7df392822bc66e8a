"""STAR: steerable, sociotechnical red teaming (policy, parameterised instructions, coverage)."""

from .instructions import Instruction, coverage, generate_instructions
from .parameters import load_parameters
from .policy import Policy, PolicyError, load_policy

__all__ = [
    "Instruction",
    "Policy",
    "PolicyError",
    "coverage",
    "generate_instructions",
    "load_parameters",
    "load_policy",
]
