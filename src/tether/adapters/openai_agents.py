"""An OpenAI Agents SDK session on any tether store: ``TetherSession``.

    from tether.adapters.openai_agents import TetherSession

    session = TetherSession("chat-42", store)              # store = await tether.open_store(url)
    result = await Runner.run(agent, "Hello", session=session)

Needs the ``openai-agents`` extra; the core never imports the SDK.

The session is the tether thread ``thread:<session_id>`` of ``namespace``. Each
item is one node that keeps the SDK's item JSON exactly (``payload["item"]``)
beside the fields of docs/graph-encoding.md, so tether's conversation views,
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

import json
from collections.abc import AsyncIterator
from typing import Any, Final

from agents.memory.session_settings import SessionSettings, resolve_session_limit

from ..core import scopes
from ..core.errors import InvalidRequest
from ..core.graph import CausalNode
from ..store import Store
from ..store.txn import Transaction, transact

__all__ = ["TetherSession"]

_PAGE: Final = 256


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
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return raw if isinstance(raw, dict) else {}


def item_node(item: Any, llm: str) -> tuple[str, dict[str, Any]]:
    """The kind and payload of one SDK item (the item itself is kept under ``item``)."""
    if not isinstance(item, dict):
        raise InvalidRequest(
            f"a session item is a JSON object (a TResponseInputItem), got {type(item).__name__}",
            field="items",
        )
    itype = item.get("type")
    role = item.get("role")
    base: dict[str, Any] = {"oa": "item", "run": None, "item": item}
    if itype in (None, "message") and role == "user":
        return "goal", {
            **base,
            "input": _text(item.get("content")),
            "llm": llm,
            "metadata": {"source": "openai-agents"},
        }
    if itype in (None, "message") and role == "assistant":
        return "inference", {
            **base,
            "llm": llm,
            "content": _text(item.get("content")),
            "tool_calls": [],
            "usage": {},
        }
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
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = session_id
        self.scope = scopes.thread(session_id)
        self.store = store
        self.namespace = namespace
        self.llm = llm
        self.session_settings = session_settings

    async def _visible(
        self, limit: int | None, before: int | None = None
    ) -> AsyncIterator[CausalNode]:
        """Visible item nodes, newest first, reading back from ``before`` (a sequence)."""
        hidden = 0
        found = 0
        page_size = _PAGE if limit is None else min(_PAGE, max(limit, 1) + 8)
        while True:
            page = await self.store.nodes(
                self.namespace, self.scope, before=before, limit=page_size, descending=True
            )
            for n in page:
                oa = n.payload.get("oa") if isinstance(n.payload, dict) else None
                if oa == "pop":
                    hidden += 1
                elif oa == "item":
                    if hidden:
                        hidden -= 1
                        continue
                    yield n
                    found += 1
                    if limit is not None and found >= limit:
                        return
            if len(page) < page_size:
                return
            before = page[-1].sequence
            page_size = _PAGE

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The conversation, oldest first; the latest ``limit`` items when a limit applies."""
        n = resolve_session_limit(limit, self.session_settings)
        if n is not None and n <= 0:
            return []
        nodes = [x async for x in self._visible(n)]
        return [x.payload["item"] for x in reversed(nodes)]

    async def add_items(self, items: list[Any]) -> None:
        """Append items in order, atomically (a bad item raises and writes nothing)."""
        if not items:
            return
        planned = [item_node(item, self.llm) for item in items]

        async def fn(txn: Transaction) -> None:
            for kind, payload in planned:
                await txn.append(self.scope, kind, payload)

        await transact(self.store, self.namespace, fn)

    async def pop_item(self) -> Any | None:
        """Hide and return the newest item; None when the session is empty."""

        async def fn(txn: Transaction) -> Any | None:
            head = await txn.head(self.scope)
            async for node in self._visible(1, before=head.sequence + 1):
                await txn.append(self.scope, "resource", {"oa": "pop", "item": node.id})
                return node.payload["item"]
            return None

        return await transact(self.store, self.namespace, fn)

    async def clear_session(self) -> None:
        """Delete every item of the session (the thread scope is reset)."""
        if (await self.store.head(self.namespace, self.scope)).sequence:
            await self.store.reset_scope(self.namespace, self.scope)
