"""The runtime: agents, specs, tools and the executor (SPEC §4).

``Agent`` runs turns of a ``Spec`` (LLM, tool and variable nodes with conditional
edges, in Python or YAML) over a store's causal graph; ``tool`` turns a function
into a tool with a JSON schema; ``StepResult`` is what a turn returns. How runs
map onto graph nodes is docs/graph-encoding.md.
"""

from __future__ import annotations

from ..projections.runs import PendingApproval, RunError, RunStatus, StepResult
from .agent import Agent
from .agent_memory_tools import MemoryTools
from .credentials import CredentialError, CredentialProvider
from .errors import (
    AgentError,
    ApprovalError,
    ConditionError,
    RunSuspendedError,
    SpecError,
    StepLimitError,
    TemplateError,
    ToolDefinitionError,
)
from .spec import ChatHistoryNode, Edge, LLMNode, LoopNode, Spec, ToolNode, VarNode, VarSetNode
from .templates import Condition, Template
from .tool_state import SyncToolState, ToolState
from .tools import Tool, tool

__all__ = [
    "Agent",
    "AgentError",
    "ApprovalError",
    "ChatHistoryNode",
    "Condition",
    "ConditionError",
    "CredentialError",
    "CredentialProvider",
    "Edge",
    "LLMNode",
    "LoopNode",
    "MemoryTools",
    "PendingApproval",
    "RunError",
    "RunStatus",
    "RunSuspendedError",
    "Spec",
    "SpecError",
    "StepLimitError",
    "StepResult",
    "SyncToolState",
    "Template",
    "TemplateError",
    "Tool",
    "ToolDefinitionError",
    "ToolNode",
    "ToolState",
    "VarNode",
    "VarSetNode",
    "tool",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith("tether.runtime."):
        _obj.__module__ = "tether.runtime"
