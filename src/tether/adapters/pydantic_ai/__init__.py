"""Pydantic AI's three store protocols on any tether store.

    from tether.adapters.pydantic_ai import (
        TetherConversationStore,   # pydantic_ai.conversation_store.ConversationStore
        TetherStepStore,           # pydantic_ai_harness.step_persistence.StepStore
        TetherMemoryStore,         # pydantic_ai_harness.memory.MemoryStore
    )

Needs the ``pydantic-ai`` extra (pydantic-ai-slim and pydantic-ai-harness); the core
never imports them, and each class imports only its own package: the
``ConversationStore`` needs pydantic-ai-slim >= 2.66 (the first with it), the other two
pydantic-ai-harness. docs/adapters.md maps each onto tether's graph.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConversationConflictError",
    "InvalidMemoryPath",
    "InvalidMessage",
    "MemoryConflict",
    "MemoryOperationConflict",
    "TetherConversationStore",
    "TetherMemoryStore",
    "TetherStepStore",
]

_WHERE = {
    "ConversationConflictError": "_conversation",
    "TetherConversationStore": "_conversation",
    "InvalidMessage": "_codec",
    "TetherStepStore": "_steps",
    "InvalidMemoryPath": "_memory",
    "MemoryConflict": "_memory",
    "MemoryOperationConflict": "_memory",
    "TetherMemoryStore": "_memory",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
