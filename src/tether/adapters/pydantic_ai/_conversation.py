"""Pydantic AI's ``ConversationStore`` (pydantic-ai-slim >= 2.66) on a tether store.

A conversation is the thread ``thread:<conversation_id>`` (``_threads.thread_scope``).
Each ``ConversationEntry`` is one node of the thread where it was first saved (the
message as ``_codec`` stores it, plus ``e``: the entry id, ``p``: the entry before it,
and ``ps``: that entry's thread when it is another one, as after a fork), keyed
``pai:e:<entry id>``; the ``ConversationRecord`` is the resource ``pai:record`` of the
thread, one version per save. A save appends only the new entries and the record, in
one tether transaction that checks the stored revision first: a stale save raises
``ConversationConflictError`` (a ``ConversationConflict``) and writes nothing.

``delete`` appends a tombstone version of the record: the conversation no longer
loads or lists, and its entries stay in the thread (tether's history reads them; a fork
that points into them keeps working). ``tether`` erases data with ``reset`` or
``erase_user``, not with this.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Awaitable, Sequence
from typing import Any, Final, TypeVar

from pydantic import TypeAdapter
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)

from ...core.errors import Conflict
from ...store import Store
from ...store.txn import Transaction, transact
from .._threads import thread_scope
from ._codec import MARK, message_payloads, payload_messages

__all__ = ["ConversationConflictError", "TetherConversationStore"]

T = TypeVar("T")

_RECORD: Final = "pai:record"
_ENTRY: Final = "pai:e:"
_PAGE: Final = 256
_WHERE_MAX: Final = 4096  # entry id -> thread, for entries whose thread a caller did not name
_RECORDS: TypeAdapter[ConversationRecord] = TypeAdapter(ConversationRecord)


class ConversationConflictError(Conflict, ConversationConflict):
    """The conversation changed in the store since it was read (another save, a delete,
    or an entry a fork points at that is not there). Nothing was written. A Pydantic AI
    ``ConversationConflict`` (so a ``UserError``) and a tether ``Conflict``."""

    default_code = "conversation_conflict"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        Conflict.__init__(self, message, code=code, **details)
        # (ConversationConflict's own __init__, reached through Conflict's, set it to the text)
        self.conversation_id = str(details.get("conversation_id", ""))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.code, self.details))


def _rebuild(
    cls: type[ConversationConflictError], message: str, code: str, details: dict[str, Any]
) -> ConversationConflictError:
    return cls(message, code=code, **details)


def _conflict(conversation_id: str, message: str | None = None) -> ConversationConflictError:
    text = message or (
        f"Conversation {conversation_id!r} was saved or deleted since it was loaded, "
        "or already exists in the store. Load it again before saving."
    )
    return ConversationConflictError(text, conversation_id=conversation_id)


async def _typed(call: Awaitable[T]) -> T:
    """``call``'s result; a ``ConversationConflict`` the base class raised itself (a
    revision it checked before writing) becomes ``ConversationConflictError``."""
    try:
        return await call
    except ConversationConflictError:
        raise
    except ConversationConflict as e:
        raise _conflict(e.conversation_id, str(e)) from e


def _live(node: Any) -> dict[str, Any] | None:
    """A record node's payload, or None for none or a deleted conversation."""
    if node is None or node.payload.get("deleted"):
        return None
    payload: dict[str, Any] = node.payload
    return payload


class TetherConversationStore(ConversationStore):
    """Pydantic AI's ``ConversationStore`` over a tether store (one namespace)."""

    def __init__(self, store: Store, *, namespace: str = "default", llm: str = "agent") -> None:
        self.store = store
        self.namespace = namespace
        self.llm = llm
        self._where: OrderedDict[str, str] = OrderedDict()

    # -- the base class's operations, their conflicts typed ------------------------------

    async def save(self, *args: Any, **kwargs: Any) -> list[ConversationEntry]:
        return await _typed(super().save(*args, **kwargs))

    async def branch(self, *args: Any, **kwargs: Any) -> Any:
        return await _typed(super().branch(*args, **kwargs))

    async def fork(self, *args: Any, **kwargs: Any) -> Any:
        return await _typed(super().fork(*args, **kwargs))

    if hasattr(ConversationStore, "update"):  # pydantic-ai-slim >= 2.68

        async def update(self, *args: Any, **kwargs: Any) -> ConversationRecord:
            return await _typed(super().update(*args, **kwargs))

    # -- where an entry lives ---------------------------------------------------------

    def _remember(self, entry_id: str | None, scope: str | None) -> None:
        if entry_id is None or scope is None:
            return
        self._where[entry_id] = scope
        self._where.move_to_end(entry_id)
        while len(self._where) > _WHERE_MAX:
            self._where.popitem(last=False)

    async def _locate(self, entry_id: str) -> str | None:
        scope = self._where.get(entry_id)
        if scope is not None:
            return scope
        key = _ENTRY + entry_id
        rows = await self.store.resource_heads_across(
            self.namespace, key, scope_prefix="thread:", limit=2
        )
        for sc, k, _ in rows:
            if k == key:
                self._remember(entry_id, sc)
                return sc
        return None

    # -- the five primitives ---------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        scope = thread_scope(conversation_id)
        p = _live(await self.store.resource_head(self.namespace, scope, _RECORD))
        if p is None:
            return None
        record = _RECORDS.validate_python(p["rec"])
        self._remember(record.head_id, p.get("hs"))
        return record

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        out: list[ConversationRecord] = []
        after: tuple[str, str] | None = None
        while True:
            rows = await self.store.resource_heads_across(
                self.namespace, _RECORD, scope_prefix="thread:", after=after, limit=500
            )
            for _sc, key, node in rows:
                p = _live(node) if key == _RECORD else None
                if p is None:
                    continue
                record = _RECORDS.validate_python(p["rec"])
                if scope is None or record.scope == scope:
                    out.append(record)
            if len(rows) < 500:
                break
            after = (rows[-1][0], rows[-1][1])
        out.sort(key=lambda r: r.updated_at, reverse=True)
        return out if limit is None else out[:limit]

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        cid = record.conversation_id
        scope = thread_scope(cid)
        planned = message_payloads([e.message for e in new_entries], self.llm)
        new_ids = {e.id for e in new_entries}

        async def fn(txn: Transaction) -> str | None:
            stored = _live(await txn.resource_head(scope, _RECORD))
            if (stored["rec"]["revision"] if stored else None) != expected_revision:
                raise _conflict(cid)
            # where the entry before each new one lives (a fork's: another thread)
            known: dict[str, str] = {}
            if stored is not None and stored["rec"]["head_id"] and stored.get("hs"):
                known[stored["rec"]["head_id"]] = stored["hs"]
            for eid in {e.parent_id for e in new_entries} | {record.head_id}:
                if eid is None or eid in new_ids or eid in known:
                    continue
                found = await self._locate(eid)
                if found is None:  # a concurrent delete or rewrite released it
                    raise _conflict(cid)
                known[eid] = found
            head = await txn.head(scope)
            for e, (kind, payload) in zip(new_entries, planned, strict=True):
                p: dict[str, Any] = {**payload, MARK: "e", "e": e.id, "p": e.parent_id}
                parent = e.parent_id
                if parent is not None and parent not in new_ids and known[parent] != scope:
                    p["ps"] = known[parent]
                txn.hint_resource(scope, _ENTRY + e.id, None, at=head)
                await txn.append(scope, kind, p, resource_key=_ENTRY + e.id, new=True)
            keep = record
            if stored is not None:  # a save never changes what ``update`` wrote
                old = stored["rec"]
                keep = dataclasses.replace(record, title=old["title"], metadata=old["metadata"])
            hs = (
                None
                if record.head_id is None
                else (scope if record.head_id in new_ids else known[record.head_id])
            )
            await txn.append(
                scope,
                "resource",
                {MARK: "rec", "rec": _RECORDS.dump_python(keep, mode="json"), "hs": hs},
                resource_key=_RECORD,
            )
            return hs

        hs = await transact(self.store, self.namespace, fn)
        for e in new_entries:
            self._remember(e.id, scope)
        self._remember(record.head_id, hs)

    async def write_details(
        self,
        conversation_id: str,
        details: Any,
        *,
        expected_revision: str,
        expected: Any = None,
    ) -> ConversationRecord:
        scope = thread_scope(conversation_id)
        for key in (*details, *(expected or {})):
            if key not in ("title", "metadata"):
                raise NotImplementedError(f"TetherConversationStore stores no {key!r}")

        async def fn(txn: Transaction) -> ConversationRecord:
            stored = _live(await txn.resource_head(scope, _RECORD))
            if stored is None or stored["rec"]["revision"] != expected_revision:
                raise _conflict(conversation_id)
            record = _RECORDS.validate_python(stored["rec"])
            if expected and any(getattr(record, k) != v for k, v in expected.items()):
                raise _conflict(conversation_id)
            record = dataclasses.replace(record, **details)
            await txn.append(
                scope,
                "resource",
                {**stored, "rec": _RECORDS.dump_python(record, mode="json")},
                resource_key=_RECORD,
            )
            return record

        return await transact(self.store, self.namespace, fn)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        scope = thread_scope(conversation_id)

        async def fn(txn: Transaction) -> None:
            stored = _live(await txn.resource_head(scope, _RECORD))
            if stored is None or stored["rec"]["revision"] != expected_revision:
                raise _conflict(conversation_id)
            await txn.append(
                scope,
                "resource",
                {MARK: "rec", "deleted": True, "revision": expected_revision},
                resource_key=_RECORD,
            )

        await transact(self.store, self.namespace, fn)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        (entry,) = await self.read_history(entry_id, limit=1)
        return entry

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries up to ``head_id``: one backward read of the head's thread (and of
        the thread a fork points into, from where it points), not a read per entry."""
        if head_id is None or limit == 0:
            return []
        scope = await self._locate(head_id)
        if scope is None:
            raise KeyError(head_id)
        rows: list[tuple[str, dict[str, Any]]] = []
        want: str | None = head_id
        before: int | None = None
        while want is not None and (limit is None or len(rows) < limit):
            page = await self.store.payloads(
                self.namespace, scope, before=before, limit=_PAGE, descending=True
            )
            for seq, kind, p in page:
                before = seq
                if type(p) is not dict or p.get(MARK) != "e" or p["e"] != want:
                    continue
                rows.append((kind, p))
                want = p["p"]
                if want is None or (limit is not None and len(rows) >= limit):
                    break
                if "ps" in p:  # the entry before lives in the thread this one forked from
                    scope, before = p["ps"], None
                    break
            else:
                if len(page) < _PAGE:
                    raise KeyError(want)
        rows.reverse()
        messages = payload_messages(rows)
        return [
            ConversationEntry(id=p["e"], parent_id=p["p"], message=m)
            for (_, p), m in zip(rows, messages, strict=True)
        ]
