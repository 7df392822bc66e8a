"""The three agents (DRIVE, EVALUATOR, MEDIATOR), their task messages and output schemas."""

from .agents import Agent, DriveAgent, EvaluatorAgent, MediatorAgent
from .messages import AgentReply, AssessTask, ComposeTask, DriveTask, EvaluateTask
from .schemas import Conflict, DriveOutput, Evaluation, MediatorAssessment, MediatorCompose, Proposal, RuleHit, Verdict

__all__ = [
    "Agent",
    "AgentReply",
    "AssessTask",
    "ComposeTask",
    "Conflict",
    "DriveAgent",
    "DriveOutput",
    "DriveTask",
    "EvaluateTask",
    "Evaluation",
    "EvaluatorAgent",
    "MediatorAgent",
    "MediatorAssessment",
    "MediatorCompose",
    "Proposal",
    "RuleHit",
    "Verdict",
]
