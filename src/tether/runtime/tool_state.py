"""A tool's own durable state (seed 002's ``tools`` module), kept in the graph.

    @tether.tool(state_scope="user")
    async def visits(page: str, state: tether.ToolState) -> int:
        n = (await state.get(page, 0)) + 1
        await state.set(page, n)
        return n

A tool that takes a ``state`` parameter gets a handle on its own key-value store:
``get``, ``set``, ``delete``, ``list`` (keys) and ``items``. It is scoped per tool
and per scope: the thread of the call (the default), its user, or the app
(``@tool(state_scope=...)``). A sync tool gets the same methods without ``await``
(``SyncToolState``; it runs in a worker thread, so it may block on the loop).

In the graph a value is a ``semantic`` node of the reserved type ``tool_state``,
key ``<tool>/<key>`` (resource key ``semantic:tool_state:<tool>/<key>``) in the
scope's graph; ``content: null`` is a delete. Reads are indexed (one resource
head, or one prefix read for ``list``). Writes are staged in the handle and the
executor commits them in the same transaction as the call's ``tool_result``: a
crash before that commit leaves no half-written state, and the re-issued call
sees the state as it was before the first attempt. A tool that raises leaves its
state unchanged.

Concurrency: calls of one tool sharing one state run one at a time within a
process (the executor holds a lock per tool and scope), so parallel calls in one
model response never lose each other's updates. Across processes the last
commit of a key wins; every version stays in the graph.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Coroutine
from typing import Any, Final, Literal, TypeVar

from ..core.errors import InvalidRequest
from ..store.base import Store
from ..store.txn import Transaction, transact
from .credentials import check_not_persisted
from .tools import jsonable

__all__ = [
    "STATE_SCOPES",
    "TOOL_STATE",
    "StateScope",
    "SyncToolState",
    "ToolState",
    "state_key",
    "state_lock",
]

TOOL_STATE: Final = "tool_state"
StateScope = Literal["thread", "user", "app"]
STATE_SCOPES: Final[tuple[str, ...]] = ("thread", "user", "app")
_DELETED: Final = object()
T = TypeVar("T")


def state_key(tool: str, key: str = "") -> str:
    """Resource key of one value (or, with ``key=""``, the prefix of a tool's values)."""
    return f"semantic:{TOOL_STATE}:{tool}/{key}"


# Per event loop, per (store, namespace, scope, tool): held while a stateful call runs
# and commits. Weak values: a lock lives only while a call holds or waits on it, so
# the table does not grow with the number of threads ever served.
_LOCKS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, weakref.WeakValueDictionary[tuple[int, str, str, str], asyncio.Lock]
] = weakref.WeakKeyDictionary()


def state_lock(store: Store, namespace: str, scope: str, tool: str) -> asyncio.Lock:
    """The lock serialising calls of ``tool`` that share the state of ``scope`` (this loop)."""
    loop = asyncio.get_running_loop()
    table = _LOCKS.get(loop)
    if table is None:
        table = _LOCKS[loop] = weakref.WeakValueDictionary()
    key = (id(store), namespace, scope, tool)
    lock = table.get(key)
    if lock is None:
        lock = asyncio.Lock()
        table[key] = lock
    return lock


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key or len(key) > 256:
        raise InvalidRequest(f"a tool state key is a string of 1-256 characters, got {key!r}")
    return key


class ToolState:
    """One tool's state in one scope: reads from the store, writes staged until committed.

    Inside a tool the executor commits the writes with the call's result. Elsewhere
    (a script, a migration) call ``await state.commit()``.
    """

    __slots__ = ("_staged", "namespace", "scope", "secrets", "store", "tool")

    def __init__(self, store: Store, namespace: str, *, scope: str, tool: str) -> None:
        self.store = store
        self.namespace = namespace
        self.scope = scope
        self.tool = tool
        self._staged: dict[str, Any] = {}  # key -> value, or _DELETED
        # The call's credential values: a key holding one is refused (keys are stored
        # in clear, even on an encrypted store, and cannot be redacted).
        self.secrets: tuple[str, ...] = ()

    def _key(self, key: Any) -> str:
        checked = _check_key(key)
        check_not_persisted(f"tool state key of {self.tool!r}", checked, self.secrets)
        return checked

    def __repr__(self) -> str:
        return f"ToolState(tool={self.tool!r}, scope={self.scope!r})"

    async def get(self, key: str, default: Any = None) -> Any:
        """The current value of ``key`` (this call's own writes included), else ``default``."""
        _check_key(key)
        if key in self._staged:
            v = self._staged[key]
            return default if v is _DELETED else v
        node = await self.store.resource_head(self.namespace, self.scope, state_key(self.tool, key))
        if node is None or node.payload.get("content") is None:
            return default
        return node.payload["content"]

    async def set(self, key: str, value: Any) -> None:
        """Set ``key`` to a JSON value (committed with the call's result)."""
        self._key(key)
        if value is None:
            raise InvalidRequest(
                f"tool state {self.tool}/{key}: None is how a delete is stored; "
                "call delete(key) instead"
            )
        self._staged[key] = jsonable(value)

    async def delete(self, key: str) -> bool:
        """Delete ``key``; False when it held nothing."""
        existed = await self.get(self._key(key), _DELETED) is not _DELETED
        self._staged[key] = _DELETED
        return existed

    async def items(self, prefix: str = "") -> dict[str, Any]:
        """Every live key starting with ``prefix`` and its value, sorted by key."""
        heads = await self.store.resource_heads(
            self.namespace, self.scope, state_key(self.tool, prefix)
        )
        start = len(state_key(self.tool))
        out = {
            k[start:]: n.payload["content"]
            for k, n in heads.items()
            if n.payload.get("content") is not None
        }
        for k, v in self._staged.items():
            if k.startswith(prefix):
                if v is _DELETED:
                    out.pop(k, None)
                else:
                    out[k] = v
        return dict(sorted(out.items()))

    async def list(self, prefix: str = "") -> list[str]:
        """The live keys starting with ``prefix``, sorted (one indexed read)."""
        return list(await self.items(prefix))

    # -- committing

    @property
    def dirty(self) -> bool:
        return bool(self._staged)

    def staged(self) -> dict[str, Any]:
        """The pending writes: key -> value (None for a delete)."""
        return {k: (None if v is _DELETED else v) for k, v in self._staged.items()}

    def discard(self) -> None:
        self._staged.clear()

    async def stage(self, txn: Transaction, *, redact: Any = None) -> int:
        """Append the pending writes to ``txn`` (a value equal to the stored one is skipped).

        ``redact`` (a function of a JSON value) scrubs each value first. Returns the
        number of nodes appended.
        """
        written = 0
        for key, value in self._staged.items():
            content = None if value is _DELETED else value
            if redact is not None and content is not None:
                content = redact(content)
            check_not_persisted(f"tool state key of {self.tool!r}", key, self.secrets)
            rk = state_key(self.tool, key)
            head = await txn.resource_head(self.scope, rk)
            current = None if head is None else head.payload.get("content")
            if current == content and (head is not None or content is None):
                continue
            await txn.semantic(self.scope, TOOL_STATE, f"{self.tool}/{key}", content)
            written += 1
        return written

    async def commit(self) -> int:
        """Write the pending changes in one commit (outside the runtime); returns nodes written."""
        if not self._staged:
            return 0
        n = await transact(self.store, self.namespace, self.stage)
        self._staged.clear()
        return n

    def sync(self, loop: asyncio.AbstractEventLoop) -> SyncToolState:
        return SyncToolState(self, loop)


class SyncToolState:
    """``ToolState`` for a sync tool running in a worker thread: the same methods, no await."""

    __slots__ = ("_loop", "_state")

    def __init__(self, state: ToolState, loop: asyncio.AbstractEventLoop) -> None:
        self._state = state
        self._loop = loop

    def __repr__(self) -> str:
        return f"SyncToolState(tool={self._state.tool!r}, scope={self._state.scope!r})"

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            coro.close()
            raise InvalidRequest(
                "SyncToolState would block the event loop: use it from a sync tool "
                "(run in a worker thread), or await ToolState's methods"
            )
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def get(self, key: str, default: Any = None) -> Any:
        return self._run(self._state.get(key, default))

    def set(self, key: str, value: Any) -> None:
        self._run(self._state.set(key, value))

    def delete(self, key: str) -> bool:
        return self._run(self._state.delete(key))

    def items(self, prefix: str = "") -> dict[str, Any]:
        return self._run(self._state.items(prefix))

    def list(self, prefix: str = "") -> list[str]:
        return self._run(self._state.list(prefix))
