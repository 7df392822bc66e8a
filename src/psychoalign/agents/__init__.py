"""The three agents (DRIVE, EVALUATOR, MEDIATOR), their task messages and output schemas."""

from .agents import Agent, DriveAgent, EvaluatorAgent, MediatorAgent
from .messages import AssessTask, ComposeTask, DriveTask, EvaluateTask
from .schemas import Conflict, Evaluation, RuleHit

__all__ = [
    "Agent",
    "AssessTask",
    "ComposeTask",
    "Conflict",
    "DriveAgent",
    "DriveTask",
    "EvaluateTask",
    "Evaluation",
    "EvaluatorAgent",
    "MediatorAgent",
    "RuleHit",
]
