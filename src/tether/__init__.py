"""tether: durable state for AI agents.

Each scope's state is one append-only, content-addressed causal graph; the
conversation, variables, memory and execution status are projections of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.canonical import canonical_json
from .core.errors import (
    SNAPSHOT_CODES,
    Conflict,
    InvalidNode,
    InvalidRequest,
    InvalidSnapshot,
    NotFound,
    Overloaded,
    RunPruned,
    StoreError,
    TetherError,
)
from .core.graph import (
    DEFAULT_LIMITS,
    KINDS,
    AgentState,
    CausalNode,
    Limits,
    node_id,
)
from .core.telemetry import telemetry
from .core.vocab import BUILTIN_NODE_TYPES, NodeType, Vocabulary
from .store import Head, Store, open_store
from .store.txn import Transaction, transact

if TYPE_CHECKING:
    from .client import Client, ClientError, SyncClient
    from .models import Model, OpenAIModel, ScriptedModel
    from .runtime import (
        Agent,
        AgentError,
        ApprovalError,
        ChatHistoryNode,
        ConditionError,
        CredentialProvider,
        Edge,
        LLMNode,
        LoopNode,
        MemoryTools,
        PendingApproval,
        RunError,
        RunSuspendedError,
        Spec,
        SpecError,
        StepLimitError,
        StepResult,
        TemplateError,
        Tool,
        ToolDefinitionError,
        ToolNode,
        ToolState,
        VarNode,
        VarSetNode,
        tool,
    )

# Imported on first use (PEP 562): the runtime (jinja2, yaml), the model clients and
# the HTTP client (httpx, rich) take ~150 ms to import, which a program that only
# stores state never needs; ``import tether.store.sqlite`` stays light.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("Client", "ClientError", "SyncClient"), ".client"),
    **dict.fromkeys(("Model", "OpenAIModel", "ScriptedModel"), ".models"),
    **dict.fromkeys(
        (
            "Agent",
            "AgentError",
            "ApprovalError",
            "ChatHistoryNode",
            "ConditionError",
            "CredentialProvider",
            "Edge",
            "LLMNode",
            "LoopNode",
            "MemoryTools",
            "PendingApproval",
            "RunError",
            "RunSuspendedError",
            "Spec",
            "SpecError",
            "StepLimitError",
            "StepResult",
            "TemplateError",
            "Tool",
            "ToolDefinitionError",
            "ToolNode",
            "ToolState",
            "VarNode",
            "VarSetNode",
            "tool",
        ),
        ".runtime",
    ),
}

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_NODE_TYPES",
    "DEFAULT_LIMITS",
    "KINDS",
    "SNAPSHOT_CODES",
    "Agent",
    "AgentError",
    "AgentState",
    "ApprovalError",
    "CausalNode",
    "ChatHistoryNode",
    "Client",
    "ClientError",
    "ConditionError",
    "Conflict",
    "CredentialProvider",
    "Edge",
    "Head",
    "InvalidNode",
    "InvalidRequest",
    "InvalidSnapshot",
    "LLMNode",
    "Limits",
    "LoopNode",
    "MemoryTools",
    "Model",
    "NodeType",
    "NotFound",
    "OpenAIModel",
    "Overloaded",
    "PendingApproval",
    "RunError",
    "RunPruned",
    "RunSuspendedError",
    "ScriptedModel",
    "Spec",
    "SpecError",
    "StepLimitError",
    "StepResult",
    "Store",
    "StoreError",
    "SyncClient",
    "TemplateError",
    "TetherError",
    "Tool",
    "ToolDefinitionError",
    "ToolNode",
    "ToolState",
    "Transaction",
    "VarNode",
    "VarSetNode",
    "Vocabulary",
    "__version__",
    "canonical_json",
    "node_id",
    "open_store",
    "telemetry",
    "tool",
    "transact",
]

for _name in __all__:
    if _name in _LAZY:
        continue
    _obj = globals()[_name]
    if hasattr(_obj, "__module__") and isinstance(_obj, type):
        _obj.__module__ = "tether"


# Subpackages reachable as ``tether.projections`` etc. after a bare ``import tether``, as
# they were when this module imported the runtime (and with it these) eagerly.
_SUBMODULES = frozenset(
    {
        "adapters",
        "cli",
        "client",
        "control",
        "core",
        "crypto",
        "models",
        "projections",
        "runtime",
        "server",
        "store",
    }
)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    obj = getattr(importlib.import_module(module, __name__), name)
    if isinstance(obj, type):
        obj.__module__ = "tether"
    globals()[name] = obj
    return obj


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
