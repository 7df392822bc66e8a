"""Swappable, versioned ethical frameworks (three layers of rules) for the EVALUATOR and the gates."""

from .loader import FrameworkError, builtin_names, load_framework, parse_framework
from .model import Framework, FrameworkStamp, Layer

__all__ = [
    "Framework",
    "FrameworkError",
    "FrameworkStamp",
    "Layer",
    "builtin_names",
    "load_framework",
    "parse_framework",
]
