"""The projections the executor reads, all from ``tether.memory`` (one implementation)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..memory import semantic_memory
from ..store._base import Store


async def memories(store: Store, namespace: str, scopes: Sequence[str]) -> dict[str, Any]:
    """Current semantic memory over ``scopes`` (later scopes win): ``{"type:key": content}``.

    Reserved types (summaries, agent memory, tool state) are left out: they reach the
    model as messages or through tools.
    """
    out: dict[str, Any] = {}
    for scope in scopes:
        out.update(await semantic_memory(store, namespace, scope))
    return out
