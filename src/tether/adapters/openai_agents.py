"""An OpenAI Agents SDK session on any tether store: ``TetherSession``.

    from tether.adapters.openai_agents import TetherSession

    session = TetherSession("chat-42", store)              # store = await tether.open_store(url)
    result = await Runner.run(agent, "Hello", session=session)

Needs the ``openai-agents`` extra; the core never imports the SDK.

The session is the tether thread ``thread:<session_id>`` of ``namespace`` (an id no
scope name can hold, the empty one or one over 200 characters or with control
characters, which the SDK's sessions accept too, is ``thread:%<sha256>%%%...``). Each
item is one node that keeps the SDK's item JSON (``payload["item"]``, less the
text the graph field already holds: see ``_compact``; read back exactly) beside the
fields of docs/graph-encoding.md, so tether's conversation views,
inspector and export read the conversation:

==========================================  ===============  =====================
SDK item                                    tether kind      graph-encoding fields
==========================================  ===============  =====================
user message (``role: user``)               ``goal``         ``input``
assistant message                           ``inference``    ``content``
``function_call``                           ``tool_call``    ``call_id name arguments``
``function_call_output``                    ``tool_result``  ``call_id content``
anything else (system, reasoning, ...)      ``resource``     ``role``
==========================================  ===============  =====================

``pop_item`` appends a ``pop`` marker (the graph is append-only): reading walks
the thread backwards and every marker hides the newest item still visible
before it, which is exactly stack order. ``clear_session`` resets the scope:
the items are deleted, not hidden. Every write is one tether transaction, so
two processes appending to one session never lose an item.

``get_items(limit)`` follows the SDK: ``limit`` (else ``session_settings.limit``)
``None`` returns everything, ``N > 0`` the latest N in chronological order, and
``0`` or a negative limit nothing (as the SDK's Redis, MongoDB and Dapr sessions
do; its SQLite session returns everything for a negative limit, an artifact of
SQLite's ``LIMIT -1``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from typing import Any, Final, TypeVar

from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from ..core import strict_json
from ..core.errors import InvalidNode, InvalidRequest, TetherError
from ..store import Store, open_store
from ..store.txn import Transaction, transact
from ._sync import LoopBridge
from ._threads import thread_scope

__all__ = ["InvalidItem", "InvalidSessionId", "SessionClosed", "TetherSession"]

T = TypeVar("T")


class InvalidItem(InvalidRequest, TypeError):
    """An item the session cannot store exactly (not a JSON object, or a value that is
    not JSON). A ``TypeError``, as the SDK's sessions raise for a non-JSON item."""

    default_code = "invalid_item"


class SessionClosed(TetherError, RuntimeError):
    """The session was closed. A ``RuntimeError`` reading ``"<class> is closed"``, exactly
    as the SDK's sessions raise (the code is ``.code``, not in the text)."""

    default_code = "session_closed"

    def __str__(self) -> str:
        return self.message


class InvalidSessionId(InvalidRequest, TypeError):
    """A ``session_id`` that is not a string: ``TypeError("session_id must be a string")``,
    as the SDK's ``MongoDBSession`` raises (the code is ``.code``, not in the text)."""

    default_code = "invalid_session_id"

    def __str__(self) -> str:
        return self.message


def _thread_scope(session_id: Any) -> str:
    """``thread:<session_id>``, as tether has always named a session's thread, for every
    id a scope name can hold (1-200 printable characters). The SDK's sessions also take
    the empty id and any other string: ``_threads.thread_scope`` hashes those."""
    if not isinstance(session_id, str):
        raise InvalidSessionId("session_id must be a string", field="session_id")
    return thread_scope(session_id)


class _Closed:
    """What ``close()`` returns: the session is already closed; awaiting it is a no-op,
    so ``session.close()`` (the SDK's SQLiteSession) and ``await session.close()`` (its
    Redis, MongoDB, Dapr and async SQLite sessions) both work."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


def _loop_free(url: str) -> bool:
    """Stores that belong to no event loop: memory://, and SQLite served inline."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else "sqlite"
    return scheme == "memory" or (scheme == "sqlite" and "offload" not in url)


_PAGE: Final = 256
_PAGE_LONG: Final = 1024


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _arguments(raw: Any) -> Any:
    """A function call's arguments for the graph's ``tool_call`` node: the object the
    model's JSON text holds, read by tether's one JSON policy; text that is not exactly
    one JSON object (invalid, a duplicate key, an integer beyond 2**53-1...) is kept as
    the text itself, never replaced by ``{}`` (the item is stored whole either way)."""
    if isinstance(raw, str):
        try:
            parsed = strict_json.loads(raw, max_depth=64)
        except ValueError:  # CanonicalError included: its codes are ValueErrors
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return raw if isinstance(raw, dict) else {}


# Where an item's text also sits in the graph-encoding field (``input`` of a goal,
# ``content`` of an inference or a tool result), the item is stored without it and
# rebuilt on read, exactly: the text is stored once (bytes on disk, and a read decodes
# half as much). ``oa`` says how: "item" (the item whole, or with a ``hole``: the path
# of the one string left ``null`` in it), "rc"/"cr" (the item is exactly
# ``{"role", "content"}`` / ``{"content", "role"}`` with the text as content).
_TEXT_FIELD: Final = {"goal": "input", "inference": "content", "tool_result": "content"}
_ROLE: Final = {"goal": "user", "inference": "assistant"}
_ITEM_MARKS: Final = frozenset({"item", "rc", "cr"})


def _hole(item: dict[str, Any], text: str) -> list[Any] | None:
    """The path of the one string in ``item`` equal to ``text`` that the graph field
    holds: ``["content"]``, ``["output"]`` or ``["content", i, "text"]``."""
    for key in ("content", "output"):
        value = item.get(key)
        if value == text:
            return [key]
        if isinstance(value, list):
            found = [
                i
                for i, part in enumerate(value)
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            ]
            if len(found) == 1 and value[found[0]]["text"] == text:
                return [key, found[0], "text"]
    return None


def _compact(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    field = _TEXT_FIELD.get(kind)
    text = payload.get(field) if field else None
    item = payload["item"]
    if not isinstance(text, str) or not text:
        return payload
    role = _ROLE.get(kind)
    if role and len(item) == 2 and item.get("role") == role and item.get("content") == text:
        order = "rc" if next(iter(item)) == "role" else "cr"
        return {**{k: v for k, v in payload.items() if k != "item"}, "oa": order}
    path = _hole(item, text)
    if path is None:
        return payload
    if len(path) == 1:
        stored = {**item, path[0]: None}
    else:
        parts = list(item[path[0]])
        parts[path[1]] = {**parts[path[1]], "text": None}
        stored = {**item, path[0]: parts}
    return {**payload, "item": stored, "hole": path}


def node_item(kind: str, p: dict[str, Any]) -> Any:
    """The SDK item a node (its kind and payload) stores, rebuilt exactly (``_compact``)."""
    oa = p["oa"]
    if oa == "item":
        path = p.get("hole")
        if path is None:
            return p["item"]
        item = p["item"]
        text = p[_TEXT_FIELD[kind]]
        if len(path) == 1:
            return {**item, path[0]: text}
        parts = list(item[path[0]])
        parts[path[1]] = {**parts[path[1]], "text": text}
        return {**item, path[0]: parts}
    text = p[_TEXT_FIELD[kind]]
    role = _ROLE[kind]
    return {"role": role, "content": text} if oa == "rc" else {"content": text, "role": role}


def item_node(item: Any, llm: str) -> tuple[str, dict[str, Any]]:
    """The kind and payload of one SDK item (the item itself is kept under ``item``,
    less the text the graph-encoding field already holds)."""
    kind, payload = _item_node(item, llm)
    return kind, _compact(kind, payload)


def _item_node(item: Any, llm: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(item, dict):
        raise InvalidItem(
            f"a session item is a JSON object (a TResponseInputItem), got {type(item).__name__}",
            field="items",
        )
    itype = item.get("type")
    role = item.get("role")
    base: dict[str, Any] = {"oa": "item", "run": None, "item": item}
    # A goal's ``metadata`` and an inference's ``tool_calls`` and ``usage`` would be
    # empty here (the SDK's items carry none: a function call is an item of its own);
    # they are left out (readers treat a missing one as empty): 15 and 27 bytes an item.
    if itype in (None, "message") and role == "user":
        return "goal", {**base, "input": _text(item.get("content")), "llm": llm}
    if itype in (None, "message") and role == "assistant":
        return "inference", {**base, "llm": llm, "content": _text(item.get("content"))}
    if itype == "function_call":
        return "tool_call", {
            **base,
            "llm": llm,
            "call_id": item.get("call_id"),
            "name": item.get("name"),
            "arguments": _arguments(item.get("arguments")),
            "needs_approval": False,
        }
    if itype == "function_call_output":
        output = item.get("output")
        return "tool_result", {
            **base,
            "llm": llm,
            "call_id": item.get("call_id"),
            "name": None,
            "content": output if isinstance(output, str) else _text(output),
            "is_error": False,
        }
    return "resource", {**base, "role": role if isinstance(role, str) else itype}


class TetherSession:
    """The SDK's ``Session`` protocol (get_items, add_items, pop_item, clear_session)."""

    def __init__(
        self,
        session_id: str,
        store: Store,
        *,
        namespace: str = "default",
        llm: str = "agent",
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.scope = _thread_scope(session_id)
        self.session_id = session_id
        self.store = store
        self.namespace = namespace
        self.llm = llm
        # As the SDK's sessions: a dict is coerced (unknown keys raise TypeError),
        # None becomes SessionSettings().
        self.session_settings: SessionSettings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        # Calls go to the store's own loop (the SDK's run_sync runs the session on
        # another thread's loop); memory:// and inline SQLite run in the caller's thread.
        self._bridge = LoopBridge(inline=_loop_free(getattr(store, "url", "") or "memory://"))
        self._owns_store = False
        self._closed = False

    @classmethod
    def from_url(cls, session_id: str, url: str, **kw: Any) -> TetherSession:
        """Open a store by URL; the session owns it and ``close()`` closes it. Works in
        sync and async code (as ``SQLiteSession(session_id, path)``)."""
        bridge = LoopBridge(private=True, inline=_loop_free(url))
        try:
            store = bridge.run_sync(lambda: open_store(url))
        except BaseException:
            bridge.stop()
            raise
        session = cls(session_id, store, **kw)
        session._bridge = bridge
        session._owns_store = True
        return session

    def close(self) -> _Closed:
        """Close the session (and its store, if ``from_url`` opened it). Later calls
        raise ``SessionClosed``. Returns an awaitable, so ``await session.close()``
        works too."""
        if not self._closed:
            self._closed = True
            try:
                if self._owns_store:
                    self._owns_store = False
                    self._bridge.run_sync(self.store.close)
            finally:
                if self._bridge.owns_loop:
                    self._bridge.stop()
        return _Closed()

    def _closed_message(self) -> str:
        # Exactly the SDK's text: "SQLiteSession is closed", "MongoDBSession is closed"...
        return f"{type(self).__name__} is closed"

    async def _run(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        if self._closed:
            raise SessionClosed(self._closed_message())
        return await self._bridge.run(make)

    async def _visible(
        self, limit: int | None, before: int | None = None
    ) -> list[tuple[int, str, Any]]:
        """Visible item nodes, newest first, reading back from ``before`` (a sequence).

        ``(sequence, kind, payload)`` from ``Store.payloads`` (no ids, parents or
        timestamps built), in one plain loop (no generator step per node: on a long
        history that per-item cost is most of a read after decoding)."""
        hidden = 0
        out: list[tuple[int, str, Any]] = []
        page_size = _PAGE if limit is None else min(_PAGE, max(limit, 1) + 8)
        marks = _ITEM_MARKS
        while True:
            page = await self.store.payloads(
                self.namespace, self.scope, before=before, limit=page_size, descending=True
            )
            for n in page:
                p = n[2]
                oa = p.get("oa") if type(p) is dict else None
                if oa in marks:
                    if hidden:
                        hidden -= 1
                    else:
                        out.append(n)
                        if limit is not None and len(out) >= limit:
                            return out
                elif oa == "pop":
                    hidden += 1
            if len(page) < page_size:
                return out
            before = page[-1][0]
            page_size = _PAGE_LONG

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The conversation, oldest first; the latest ``limit`` items when a limit applies."""
        n = resolve_session_limit(limit, self.session_settings)
        if n is not None and n <= 0:
            if self._closed:
                raise SessionClosed(self._closed_message())
            return []

        async def read() -> list[Any]:
            nodes = await self._visible(n)
            nodes.reverse()
            return [node_item(kind, p) for _, kind, p in nodes]

        return await self._run(read)

    async def add_items(self, items: list[Any]) -> None:
        """Append items in order, atomically (a bad item raises and writes nothing)."""
        if self._closed:
            raise SessionClosed(self._closed_message())
        if not items:
            return
        planned = [item_node(item, self.llm) for item in items]

        async def fn(txn: Transaction) -> None:
            for kind, payload in planned:
                try:
                    await txn.append(self.scope, kind, payload)
                except InvalidNode as e:
                    raise InvalidItem(
                        f"a session item holds a value that is not JSON: {e.message}",
                        field="items",
                    ) from e

        await self._run(lambda: transact(self.store, self.namespace, fn))

    async def pop_item(self) -> Any | None:
        """Hide and return the newest item; None when the session is empty."""

        async def fn(txn: Transaction) -> Any | None:
            head = await txn.head(self.scope)
            for seq, kind, payload in await self._visible(1, before=head.sequence + 1):
                (node,) = await self.store.nodes(self.namespace, self.scope, after=seq - 1, limit=1)
                await txn.append(self.scope, "resource", {"oa": "pop", "item": node.id})
                return node_item(kind, payload)
            return None

        return await self._run(lambda: transact(self.store, self.namespace, fn))

    async def clear_session(self) -> None:
        """Delete every item of the session (the thread scope is reset)."""

        async def clear() -> None:
            if (await self.store.head(self.namespace, self.scope)).sequence:
                await self.store.reset_scope(self.namespace, self.scope)

        await self._run(clear)
