"""Swappable, versioned ethical frameworks (three layers of rules) for the EVALUATOR and the gates."""

from .loader import FrameworkError, builtin_names, load_framework, parse_framework
from .model import Check, Framework, FrameworkStamp, Layer, Rule

__all__ = [
    "Check",
    "Framework",
    "FrameworkError",
    "FrameworkStamp",
    "Layer",
    "Rule",
    "builtin_names",
    "load_framework",
    "parse_framework",
]
