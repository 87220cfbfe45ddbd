"""Models: the ``Model`` protocol, a scripted model and an OpenAI-compatible client.

``ScriptedModel`` (deterministic rules, no network) lives in ``tether.models.scripted``,
``OpenAIModel`` (chat completions over httpx) in ``tether.models.openai``, the
``Embedder`` protocol and its implementations in ``tether.models.embeddings``; their
module docstrings are the manual. ``model_from_config`` builds either from a spec's
``model:`` entry. Errors are drawn in ``tether.models.errors``.
"""

from __future__ import annotations

from ..core.messages import (
    Embedder,
    MemoryWrite,
    Message,
    MessageList,
    Model,
    ModelRequest,
    ModelResponse,
    ReadOnlyDict,
    ReadOnlyList,
    ToolCall,
    ToolSpec,
)
from .config import model_from_config
from .errors import (
    ModelBadArgumentsError,
    ModelBadResponseError,
    ModelConfigError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
)
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
    "Embedder",
    "MemoryWrite",
    "Message",
    "MessageList",
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
    "ReadOnlyDict",
    "ReadOnlyList",
    "Rule",
    "ScriptedCall",
    "ScriptedMemory",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "Turn",
    "call",
    "model_from_config",
    "remember",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith("tether.models."):
        _obj.__module__ = "tether.models"
