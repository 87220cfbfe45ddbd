"""``recall``: a tool that lets the model search long-term memory by meaning.

    agent = Agent(None, model, tools=[recall_tool(WordLlamaEmbedder(), scope="user")])

The model calls ``recall(query, k?, type?, key_prefix?)`` and gets the closest
memories of the run's user (``scope="user"``), thread or app, best first, each as
``{"type", "key", "content", "score"}``. The search is
``tether.projections.recall``: the index follows the graph, so a memory written
earlier in the same run is found.

``Agent(recall_memory=RecallMemory(embedder, k=5))`` shows the model, on each call, the
``k`` memories closest to the run's input instead of the whole semantic memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from ..core import scopes
from ..core.canonical import canonical_json
from ..core.messages import Embedder
from ..projections import recall
from ..store.base import Store
from .errors import SpecError
from .tool_state import ToolState
from .tools import Tool, as_tool

__all__ = ["RecallMemory", "recall_tool"]


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


@dataclass(frozen=True, kw_only=True, slots=True)
class RecallMemory:
    """``Agent(recall_memory=RecallMemory(embedder, k=5))``: each model call is shown the
    ``k`` memories closest in meaning to the run's input (from ``scopes``: the run's
    user, its thread, the app), instead of the whole semantic memory."""

    embedder: Embedder
    k: int = 5
    scopes: tuple[str, ...] = ("user", "thread")
    min_score: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "scopes", tuple(self.scopes))
        if not set(self.scopes) <= {"user", "thread", "app"} or not self.scopes:
            raise SpecError("RecallMemory scopes are among user, thread and app")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or not 1 <= self.k <= 100:
            raise SpecError("RecallMemory k is an integer from 1 to 100")

    async def memories(
        self, store: Store, namespace: str, query: Any, *, thread_scope: str, user: str | None
    ) -> dict[str, Any]:
        """``{"type:key": content}`` of the closest memories, best first."""
        text = query if isinstance(query, str) else canonical_json(query).decode()
        if not text.strip():
            return {}
        names = [
            {
                "user": scopes.user(user) if user else None,
                "thread": thread_scope,
                "app": scopes.APP,
            }[s]
            for s in self.scopes
        ]
        hits = await recall(
            store,
            namespace,
            [n for n in names if n is not None],
            text,
            embedder=self.embedder,
            k=self.k,
            min_score=self.min_score,
        )
        return {f"{h.type}:{h.key}": h.content for h in hits}
