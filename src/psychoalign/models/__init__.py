"""LLM backends behind one async interface.

>>> model = build_model(ModelSpec(backend="local"))
>>> result = await model.chat("Say hi", output=MyPydanticModel)   # result.data is a MyPydanticModel
"""

from .base import Backend
from .cache import ResponseCache
from .client import ChatModel
from .registry import backend_class, build_model, resolved_label
from .scripted import ScriptedBackend
from .spec import BACKENDS, ModelSpec
from .types import ChatRequest, ChatResult, Completion, Message, Usage

__all__ = [
    "BACKENDS",
    "Backend",
    "ChatModel",
    "ChatRequest",
    "ChatResult",
    "Completion",
    "Message",
    "ModelSpec",
    "ResponseCache",
    "ScriptedBackend",
    "Usage",
    "backend_class",
    "build_model",
    "resolved_label",
]
