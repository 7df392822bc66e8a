"""Negotiation parameters (paper §4 defaults). Exact semantics: docs/negotiation.md."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["NegotiationParams"]


class NegotiationParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(5, ge=1, le=20, description="Maximum rounds.")
    epsilon: float = Field(0.2, ge=0.0, le=1.0, description="Convergence: |T_r - T_(r-1)| < epsilon.")
    tau: float = Field(0.6, ge=0.0, le=1.0, description="Safety floor: proposals with s < tau*100 are dropped.")
    eta: float = Field(0.7, ge=0.0, le=1.0, description="Early exit: APPROVED with s/100 >= eta in round 1.")
    n_proposals: int = Field(3, ge=1, le=8, description="Proposals the DRIVE writes per round.")
    alpha: float = Field(0.3, ge=0.0, description="Weight of utility u_D in the MEDIATOR objective.")
    beta: float = Field(0.5, ge=0.0, description="Weight of alignment u_V in the MEDIATOR objective.")
    gamma: float = Field(0.2, ge=0.0, description="Weight of feasibility in context C.")
    healthy_threshold: float = Field(0.3, ge=0.0, le=1.0, description="T below this is equilibrium.")
    max_request_chars: int = Field(8000, ge=1, description="Longest request accepted.")
    timeout_s: float = Field(900.0, gt=0, description="Wall-clock limit for one negotiation.")
    final_gate: bool = Field(True, description="Re-evaluate the final response (the dual gate). Keep on.")

    @model_validator(mode="after")
    def _weights(self) -> NegotiationParams:
        if self.alpha + self.beta + self.gamma <= 0:
            raise ValueError("alpha + beta + gamma must be positive")
        return self
