"""The projections the executor reads, all from ``tether.projections`` (one implementation)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..crypto import erased_placeholders, is_erased
from ..projections import semantic_memory
from ..store.base import Store


async def memories(store: Store, namespace: str, scopes: Sequence[str]) -> dict[str, Any]:
    """Current semantic memory over ``scopes`` (later scopes win): ``{"type:key": content}``.

    Reserved types (summaries, agent memory, tool state) are left out: they reach the
    model as messages or through tools. Erased memories (``tether.crypto.erase_user``)
    are left out too: the model works with what the user's data still holds, so a
    user who comes back after an erasure starts afresh.
    """
    out: dict[str, Any] = {}
    for scope in scopes:
        with erased_placeholders():
            found = await semantic_memory(store, namespace, scope)
        out.update((k, v) for k, v in found.items() if not is_erased(v))
    return out
