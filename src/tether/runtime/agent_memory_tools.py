"""The model's own key-value memory, offered as tools (seed 004's ``agent_memory``).

    agent = Agent(spec, model, agent_memory=[MemoryTools(name="notes", scope="user")])

The model gets ``notes_store``, ``notes_delete``, ``notes_clear`` and ``notes_recall``
(``tools=`` picks a subset). The edit is ``tether.projections.AgentMemory``'s; the
executor stages it in the same transaction as the call's ``tool_result``, so an
edit and its receipt commit together: a crash can never leave an edit without a
result, or re-apply it on resume.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core import scopes
from ..core.messages import ToolSpec
from ..projections import TOOL_OPS, AgentMemory
from ..store.base import Store
from .errors import SpecError

__all__ = ["MemoryTools"]


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryTools:
    """One named agent memory in ``scope`` (thread, user or app) with an initial state."""

    name: str = "memory"
    scope: Literal["thread", "user", "app"] = "thread"
    initial: Mapping[str, Any] | None = None
    tools: tuple[str, ...] = TOOL_OPS
    _specs: tuple[ToolSpec, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        if self.scope not in ("thread", "user", "app"):
            raise SpecError(f"agent memory {self.name!r}: scope is thread, user or app")
        object.__setattr__(self, "tools", tuple(self.tools))
        try:
            # Built once against the app scope: the tool schemas do not depend on the scope.
            specs = self._memory(None, "default", "app").tools(self.tools)
        except Exception as e:
            raise SpecError(f"agent memory {self.name!r}: {e}") from None
        object.__setattr__(self, "_specs", tuple(specs))

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    def _memory(self, store: Store | None, namespace: str, scope: str) -> AgentMemory:
        return AgentMemory(
            store,  # type: ignore[arg-type]  # None only to build the tool schemas
            namespace,
            scope=scope,
            name=self.name,
            initial=self.initial,
        )

    def bind(
        self, store: Store, namespace: str, *, thread: str, user: str | None
    ) -> AgentMemory | str:
        """The memory for one call, or why it cannot be used (a user scope with no user)."""
        if self.scope == "user":
            if user is None:
                return f"memory {self.name!r} is kept per user, and this conversation has no user"
            return self._memory(store, namespace, scopes.user(user))
        if self.scope == "app":
            return self._memory(store, namespace, scopes.APP)
        return self._memory(store, namespace, scopes.thread(thread))


def memory_tools(configs: Iterable[MemoryTools] | MemoryTools | None) -> dict[str, MemoryTools]:
    """Tool name -> the memory serving it."""
    if configs is None:
        return {}
    items = [configs] if isinstance(configs, MemoryTools) else list(configs)
    out: dict[str, MemoryTools] = {}
    names: set[str] = set()
    for m in items:
        if not isinstance(m, MemoryTools):
            raise SpecError(f"agent_memory takes MemoryTools values, got {m!r}")
        if m.name in names:
            raise SpecError(f"two agent memories are named {m.name!r}")
        names.add(m.name)
        for s in m.specs:
            out[s.name] = m
    return out
