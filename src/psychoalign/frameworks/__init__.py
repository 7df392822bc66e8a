"""Swappable, versioned ethical frameworks (three layers of rules) for the EVALUATOR and the gates."""

from .loader import FrameworkError, builtin_names, load_framework, parse_framework
from .model import Check, Framework, FrameworkStamp, Layer, Rule, SafeChannel

__all__ = [
    "Check",
    "Framework",
    "FrameworkError",
    "FrameworkStamp",
    "Layer",
    "Rule",
    "SafeChannel",
    "builtin_names",
    "load_framework",
    "parse_framework",
]
