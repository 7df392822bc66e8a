"""STAR analyses: data in (any rating file), agreement, group comparisons under rater effects,
expert vs crowd, arbitration, in-/out-group, intersectional models, coverage, per-item table, report."""

from .agreement import alpha, bootstrap_alpha, item_disagreement
from .data import RatingData, attach_raters, load, load_mapping, mapping_from
from .items import item_table
from .report import analyze, write_report
from .simulate import false_positive_rate

__all__ = [
    "RatingData",
    "alpha",
    "analyze",
    "attach_raters",
    "bootstrap_alpha",
    "false_positive_rate",
    "item_disagreement",
    "item_table",
    "load",
    "load_mapping",
    "mapping_from",
    "write_report",
]
