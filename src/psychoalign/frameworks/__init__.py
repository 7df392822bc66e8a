"""Swappable, versioned ethical frameworks (three layers of rules) for the EVALUATOR and the gates."""

from .doses import Patient, read_patient
from .loader import FrameworkError, builtin_names, load_framework, parse_framework
from .model import Framework, FrameworkStamp, Layer

__all__ = [
    "Framework",
    "FrameworkError",
    "FrameworkStamp",
    "Layer",
    "Patient",
    "builtin_names",
    "load_framework",
    "parse_framework",
    "read_patient",
]
