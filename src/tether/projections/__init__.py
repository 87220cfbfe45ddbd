"""Memory: projections of the causal graph (SPEC §2-3).

* conversation views per LLM node with the buffer / window / summary / tokens
  policies (``load_conversation``), compaction and its undo (``compact``,
  ``undo_compaction``);
* typed, scoped variables (``Variables``, ``VarDecl``, ``coerce``);
* semantic memory (``semantic_memory``, ``remember``, ``forget``) and the model's own
  key-value memory (``AgentMemory``); recall by meaning over both (``recall``,
  ``reindex``; ``tether.projections.recall_index``);
* execution views of seed 000 (``execution_view``, ``list_runs``).

The node shapes these read and write are docs/graph-encoding.md.
"""

from __future__ import annotations

from .agent_memory import TOOL_OPS, AgentMemory, MemoryEdit, MemoryVersion
from .coercion import TYPES, coerce, read_value, to_csv_text
from .compaction import (
    STRATEGIES,
    CompactionResult,
    UndoResult,
    compact,
    extractive_summary,
    undo_compaction,
)
from .conversation import ConversationView, conversation_view, load_conversation
from .errors import InvalidArguments, NothingToUndo, UnknownVariable, UnstorableValue
from .execution import (
    ExecutorState,
    ExecutorStatus,
    NodeActorState,
    RunInfo,
    build_execution,
    execution_view,
    list_runs,
)
from .policies import Buffer, Policy, Summary, Tokens, Window, policy_from_dict
from .projection import SUMMARY_INTRO, SummaryContent, Unit, project, summary_key, system_key
from .recall_index import Recollection, recall, reindex
from .semantic import RESERVED_TYPES, forget, remember, semantic_memory
from .tokens import (
    EstimateCounter,
    TiktokenCounter,
    TokenCounter,
    default_counter,
    message_tokens,
    messages_tokens,
)
from .variables import VAR_SCOPES, VarDecl, Variables, VarVersion, WriteResult

__all__ = [
    "RESERVED_TYPES",
    "STRATEGIES",
    "SUMMARY_INTRO",
    "TOOL_OPS",
    "TYPES",
    "VAR_SCOPES",
    "AgentMemory",
    "Buffer",
    "CompactionResult",
    "ConversationView",
    "EstimateCounter",
    "ExecutorState",
    "ExecutorStatus",
    "InvalidArguments",
    "MemoryEdit",
    "MemoryVersion",
    "NodeActorState",
    "NothingToUndo",
    "Policy",
    "Recollection",
    "RunInfo",
    "Summary",
    "SummaryContent",
    "TiktokenCounter",
    "TokenCounter",
    "Tokens",
    "UndoResult",
    "Unit",
    "UnknownVariable",
    "UnstorableValue",
    "VarDecl",
    "VarVersion",
    "Variables",
    "Window",
    "WriteResult",
    "build_execution",
    "coerce",
    "compact",
    "conversation_view",
    "default_counter",
    "execution_view",
    "extractive_summary",
    "forget",
    "list_runs",
    "load_conversation",
    "message_tokens",
    "messages_tokens",
    "policy_from_dict",
    "project",
    "read_value",
    "recall",
    "reindex",
    "remember",
    "semantic_memory",
    "summary_key",
    "system_key",
    "to_csv_text",
    "undo_compaction",
]
