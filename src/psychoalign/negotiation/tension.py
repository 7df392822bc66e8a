"""Tension T = |u_D - u_V| / max(u_D, u_V) and the five system states."""

from __future__ import annotations

from ..traces.model import SystemState

__all__ = ["SystemState"]


def tension(u_d: float, u_v: float) -> float:
    """Paper eq. (2); 0 when both are 0. Inputs are clamped to [0, 1], so T is in [0, 1]."""
    u_d = min(max(u_d, 0.0), 1.0)
    u_v = min(max(u_v, 0.0), 1.0)
    top = max(u_d, u_v)
    return 0.0 if top == 0.0 else abs(u_d - u_v) / top


def classify_state(
    *, final_tension: float, u_d: float, u_v: float, round_tensions: list[float], converged: bool, threshold: float
) -> SystemState:
    """First match wins: deadlock; then the dominance states; then the two equilibria."""
    if not converged:
        return SystemState.DEADLOCK
    if final_tension >= threshold:
        return SystemState.DRIVE_DOMINANT if u_d > u_v else SystemState.EVALUATOR_DOMINANT
    if any(t >= threshold for t in round_tensions):
        return SystemState.NEGOTIATED_EQUILIBRIUM
    return SystemState.HEALTHY_EQUILIBRIUM
