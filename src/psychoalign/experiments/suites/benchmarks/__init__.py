"""The built-in benchmarks, one module each; :data:`BENCHMARKS` names them for the registry."""

from __future__ import annotations

from ...harness.benchmark import Benchmark
from .advbench import AdvBench
from .dilemmas import Dilemmas
from .harmbench import HarmBench
from .hhh import HHH
from .jbb import JailbreakBench
from .mtbench import MTBench
from .realtoxicity import RealToxicity
from .strongreject import StrongReject
from .xstest import XSTest

__all__ = ["BENCHMARKS"]

BENCHMARKS: dict[str, type[Benchmark]] = {
    cls.name: cls
    for cls in (HHH, AdvBench, MTBench, RealToxicity, XSTest, Dilemmas, HarmBench, StrongReject, JailbreakBench)
}
