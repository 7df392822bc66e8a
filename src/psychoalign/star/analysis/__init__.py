"""STAR analyses: agreement, arbitration, in-/out-group, intersectional models, coverage, report."""

from .agreement import alpha, bootstrap_alpha, item_disagreement
from .data import FORMATS, RatingData, detect, load
from .report import analyze, write_report

__all__ = [
    "FORMATS",
    "RatingData",
    "alpha",
    "analyze",
    "bootstrap_alpha",
    "detect",
    "item_disagreement",
    "load",
    "write_report",
]
