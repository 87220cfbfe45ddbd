"""``recall``: a tool that lets the model search long-term memory by meaning.

    agent = Agent(None, model, tools=[recall_tool(WordLlamaEmbedder(), scope="user")])

The model calls ``recall(query, k?, type?, key_prefix?)`` and gets the closest
memories of the run's user (``scope="user"``), thread or app, best first, each as
``{"type", "key", "content", "score"}``. The search is
``tether.projections.recall``: the index follows the graph, so a memory written
earlier in the same run is found.
"""

from __future__ import annotations

from typing import Annotated, Any

from ..core.messages import Embedder
from ..projections import recall
from .tool_state import ToolState
from .tools import Tool, as_tool

__all__ = ["recall_tool"]


def recall_tool(
    embedder: Embedder,
    *,
    scope: str = "user",
    k: int = 5,
    name: str = "recall",
    min_score: float | None = None,
) -> Tool:
    """A ``Tool`` searching the memory of ``scope`` (thread, user or app) by meaning."""
    default_k = k

    async def recall_fn(
        query: Annotated[str, "what to look for, in plain words"],
        k: Annotated[int | None, "how many memories at most (default 5)"] = None,
        type: Annotated[str | None, "only memories of this type"] = None,
        key_prefix: Annotated[str | None, "only memories whose key starts with this"] = None,
        *,
        state: ToolState,
    ) -> list[dict[str, Any]]:
        """Search long-term memory by meaning: the memories closest to the query, best first."""
        hits = await recall(
            state.store,
            state.namespace,
            state.scope,
            query,
            embedder=embedder,
            k=min(max(k or default_k, 1), 50),
            types=type,
            key_prefix=key_prefix,
            min_score=min_score,
        )
        return [
            {"type": h.type, "key": h.key, "content": h.content, "score": round(h.score, 4)}
            for h in hits
        ]

    return as_tool(recall_fn, name=name, state_scope=scope)
