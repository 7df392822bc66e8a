"""Judges shared by STAR and the experiments: one implementation of each judgement.

>>> judge = RuleRefusalJudge()
>>> judge.classify("I’m sorry, but I can’t help with that.").label
<RefusalLabel.REFUSAL: 'refusal'>
"""

from .refusal import (
    AwareRefusalJudge,
    CascadeRefusalJudge,
    ModelRefusalJudge,
    RefusalJudge,
    RefusalLabel,
    RefusalVerdict,
    RuleRefusalJudge,
    build_refusal_judge,
    is_refusal,
)

__all__ = [
    "AwareRefusalJudge",
    "CascadeRefusalJudge",
    "ModelRefusalJudge",
    "RefusalJudge",
    "RefusalLabel",
    "RefusalVerdict",
    "RuleRefusalJudge",
    "build_refusal_judge",
    "is_refusal",
]
