"""STAR: steerable, sociotechnical red teaming (policy, parameterised instructions, coverage)."""

from .instructions import CoverageReport, Instruction, coverage, generate_instructions
from .parameters import ParameterSpace, load_parameters
from .policy import Policy, PolicyError, load_policy

__all__ = [
    "CoverageReport",
    "Instruction",
    "ParameterSpace",
    "Policy",
    "PolicyError",
    "coverage",
    "generate_instructions",
    "load_parameters",
    "load_policy",
]
