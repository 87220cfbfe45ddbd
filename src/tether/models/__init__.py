"""Models: the ``Model`` protocol, a scripted model and an OpenAI-compatible client.

from tether.models import ScriptedModel, Rule, call, remember, OpenAIModel
"""

from __future__ import annotations

from ._errors import (
    ModelBadArgumentsError,
    ModelBadResponseError,
    ModelConfigError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
)
from ._types import MemoryWrite, Message, Model, ModelRequest, ModelResponse, ToolCall, ToolSpec
from .openai import MEMORY_TOOL, OpenAIModel
from .scripted import (
    DEFAULT_ANSWER,
    Rule,
    ScriptedCall,
    ScriptedMemory,
    ScriptedModel,
    Turn,
    call,
    remember,
)

__all__ = [
    "DEFAULT_ANSWER",
    "MEMORY_TOOL",
    "MemoryWrite",
    "Message",
    "Model",
    "ModelBadArgumentsError",
    "ModelBadResponseError",
    "ModelConfigError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelRequest",
    "ModelResponse",
    "ModelTimeoutError",
    "OpenAIModel",
    "Rule",
    "ScriptedCall",
    "ScriptedMemory",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "Turn",
    "call",
    "remember",
]
