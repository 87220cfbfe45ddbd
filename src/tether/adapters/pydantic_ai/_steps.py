"""pydantic-ai-harness's ``StepStore`` (``StepPersistence``) on a tether store.

A run is the thread ``thread:pydantic-ai-run:<run_id>``:

* its ``RunRecord`` is the resource ``pai:run``; ``list_runs`` reads every run's in one
  query across threads (``Store.resource_heads_across``);
* each ``StepEvent`` is one ``resource`` node (``pai: "ev"``), appended, never changed;
  an event whose ``idempotency_key`` the run holds (the key ``pai:ek:<key>``) is not
  appended again;
* each tool call's ledger entry is the resource ``pai:fx:<tool_call_id>``: a
  ``tool_call`` node when it starts, a ``tool_result`` node when it completes or fails,
  as tether's runtime writes them. Resume follows the runtime's rule: a call whose
  result is stored keeps it (a later ``started`` or a second result for it is
  dropped), and a started call without an ``idempotency_key`` of its own gets its
  ``tool_call`` node's id, the key tether's runtime hands a tool, so a call re-issued
  after a crash carries the key the first attempt had;
* a snapshot is one small node (``pai:snap:complete`` / ``pai:snap:interrupted``) naming
  the last message of its history and the thread that holds it: the messages of the
  runs of one conversation (``conversation_id``) live in
  ``thread:pydantic-ai-steps:<conversation_id>`` (a run without one keeps its own in its
  thread), as message nodes (``_codec``) chained by their parents, each message's
  parent the one before it. A snapshot that extends a history stored there (this run's
  or an earlier run's of the conversation) appends only its new messages, in the same
  transaction as the snapshot node: O(delta) per step and per run, not the history
  again; a rewritten history (compaction) branches at its first changed message; a
  cold ``latest_snapshot`` reads the conversation's messages only.

Snapshot idempotency keys follow the harness's stores: a retried save with the key of
either latest snapshot, or with an older ``<sequence>:`` prefix, writes nothing.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Final, TypeVar

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessage
from pydantic_ai_harness.step_persistence import (
    ContinuableSnapshot,
    RunRecord,
    StepEvent,
    ToolEffectRecord,
)

from ...core.graph import CausalNode
from ...store import Store
from ...store.txn import Transaction, transact
from .._threads import thread_scope
from ._codec import MARK, message_payloads, payload_messages

__all__ = ["TetherStepStore"]

T = TypeVar("T")

_RUN: Final = "pai:run"
_SNAP: Final = "pai:snap:"
_EVENT_KEY: Final = "pai:ek:"
_EFFECT: Final = "pai:fx:"
_PAGE: Final = 1000
_LINES_MAX: Final = 256  # threads whose last message line this process keeps

_RUNS: TypeAdapter[RunRecord] = TypeAdapter(RunRecord)
_EVENTS: TypeAdapter[StepEvent] = TypeAdapter(StepEvent)
_EFFECTS: TypeAdapter[ToolEffectRecord] = TypeAdapter(ToolEffectRecord)


def _run_scope(run_id: str) -> str:
    if not isinstance(run_id, str):
        raise TypeError("run_id must be a string")
    return thread_scope(f"pydantic-ai-run:{run_id}")


def _conversation_scope(conversation_id: str) -> str:
    return thread_scope(f"pydantic-ai-steps:{conversation_id}")


def _key_sequence(key: str) -> int | None:
    prefix, sep, _ = key.partition(":")
    if not sep or not prefix.isdigit():
        return None
    return int(prefix)


def _key_of(node: CausalNode) -> str:
    """A ledger entry's idempotency key: the caller's, else the one its call inherited,
    else the id of the call's first ``tool_call`` node (tether's runtime's key)."""
    p = node.payload
    return str(p["fx"]["idempotency_key"] or p.get("ik") or node.id)


def _effect(node: CausalNode) -> ToolEffectRecord:
    record = _EFFECTS.validate_python(node.payload["fx"])
    if record.idempotency_key is None and node.kind == "tool_call":
        record.idempotency_key = _key_of(node)
    return record


def _snapshot(
    run_id: str, snap: dict[str, Any], by_id: dict[str, tuple[str, dict[str, Any], str]]
) -> ContinuableSnapshot:
    """A snapshot node's snapshot: its history walked back from its last message."""
    rows: list[tuple[str, dict[str, Any]]] = []
    at = snap["head"]
    while at and len(rows) < snap["n"]:
        kind, p, parent = by_id[at]
        rows.append((kind, p))
        at = parent
    rows.reverse()
    return ContinuableSnapshot(
        run_id=run_id,
        step_index=snap["step"],
        messages=payload_messages(rows),
        conversation_id=snap["conv"],
        parent_run_id=snap["parent"],
        agent_name=snap["agent"],
        timestamp=datetime.fromisoformat(snap["at"]),
        state=snap["state"],
        idempotency_key=snap["key"],
    )


class TetherStepStore:
    """The harness's ``StepStore`` protocol over a tether store (one namespace)."""

    def __init__(self, store: Store, *, namespace: str = "default", llm: str = "agent") -> None:
        self.store = store
        self.namespace = namespace
        self.llm = llm
        # message thread -> (its generation, the message ids of the last history saved
        # there, each message's (kind, payload), and a copy of each message): a save
        # compares its history with this line (``==``) instead of reading messages back.
        # The ids are stored nodes of that generation (committed or read by this
        # process; a reset bumps the generation, and the line is not used).
        self._lines: OrderedDict[str, tuple[int, list[str], list[Any], list[Any]]] = OrderedDict()

    async def _commit(self, fn: Callable[[Transaction], Awaitable[T]]) -> T:
        return await transact(self.store, self.namespace, fn)

    # -- runs ------------------------------------------------------------------------

    async def register_run(self, record: RunRecord) -> None:
        scope = _run_scope(record.run_id)
        payload = {MARK: "run", "rec": _RUNS.dump_python(record, mode="json")}

        async def fn(txn: Transaction) -> None:
            await txn.append(scope, "resource", payload, resource_key=_RUN)

        await self._commit(fn)

    async def get_run(self, *, run_id: str) -> RunRecord | None:
        node = await self.store.resource_head(self.namespace, _run_scope(run_id), _RUN)
        return None if node is None else _RUNS.validate_python(node.payload["rec"])

    async def list_runs(
        self, *, parent_run_id: str | None = None, conversation_id: str | None = None
    ) -> list[RunRecord]:
        out: list[RunRecord] = []
        after: tuple[str, str] | None = None
        while True:
            rows = await self.store.resource_heads_across(
                self.namespace,
                _RUN,
                scope_prefix="thread:pydantic-ai-run:",
                after=after,
                limit=500,
            )
            for _, key, node in rows:
                if key != _RUN:
                    continue
                r = _RUNS.validate_python(node.payload["rec"])
                if (parent_run_id is None or r.parent_run_id == parent_run_id) and (
                    conversation_id is None or r.conversation_id == conversation_id
                ):
                    out.append(r)
            if len(rows) < 500:
                break
            after = (rows[-1][0], rows[-1][1])
        return sorted(out, key=lambda r: r.started_at)

    # -- events ----------------------------------------------------------------------

    async def append_event(self, event: StepEvent) -> None:
        scope = _run_scope(event.run_id)
        payload = {MARK: "ev", "ev": _EVENTS.dump_python(event, mode="json")}
        key = event.idempotency_key

        async def fn(txn: Transaction) -> None:
            if key is None:
                await txn.append(scope, "resource", payload)
                return
            if await txn.resource_head(scope, _EVENT_KEY + key) is not None:
                return  # a retried append
            await txn.append(scope, "resource", payload, resource_key=_EVENT_KEY + key)

        await self._commit(fn)

    async def list_events(self, *, run_id: str) -> list[StepEvent]:
        scope = _run_scope(run_id)
        out: list[StepEvent] = []
        after = 0
        while True:
            page = await self.store.payloads(self.namespace, scope, after=after, limit=_PAGE)
            out.extend(
                _EVENTS.validate_python(p["ev"])
                for _, _, p in page
                if type(p) is dict and p.get(MARK) == "ev"
            )
            if len(page) < _PAGE:
                return out
            after = page[-1][0]

    # -- snapshots -------------------------------------------------------------------

    async def _messages(self, scope: str) -> dict[str, tuple[str, dict[str, Any], str]]:
        """Every message node of a thread: id -> (kind, payload, parent id or "")."""
        out: dict[str, tuple[str, dict[str, Any], str]] = {}
        after = 0
        while True:
            page = await self.store.nodes(self.namespace, scope, after=after, limit=_PAGE)
            for n in page:
                p = n.payload
                if type(p) is dict and p.get(MARK) == "m":
                    out[n.id] = (n.kind, p, n.parents[0] if n.parents else "")
            if len(page) < _PAGE:
                return out
            after = page[-1].sequence

    async def _match(self, scope: str, planned: list[Any]) -> tuple[list[str], list[Any]]:
        """The longest stored line of ``scope`` that ``planned`` starts with (a cold
        process: one read of the thread's messages, walked from the first)."""
        children: dict[str, list[str]] = {}
        by_id = await self._messages(scope)
        for nid, (_, _, parent) in by_id.items():
            children.setdefault(parent, []).append(nid)
        ids: list[str] = []
        at = ""
        for want in planned:
            nxt = next((c for c in children.get(at, ()) if by_id[c][:2] == want), None)
            if nxt is None:
                break
            ids.append(nxt)
            at = nxt
        return ids, [by_id[i][:2] for i in ids]

    async def save_snapshot(self, snapshot: ContinuableSnapshot) -> None:
        run_id = snapshot.run_id
        home = _run_scope(run_id)
        cid = snapshot.conversation_id
        mscope = _conversation_scope(cid) if cid is not None else home
        messages = list(snapshot.messages)
        key = snapshot.idempotency_key
        meta = {
            "ms": mscope,
            "step": snapshot.step_index,
            "state": snapshot.state,
            "key": key,
            "at": snapshot.timestamp.isoformat(),
            "conv": cid,
            "parent": snapshot.parent_run_id,
            "agent": snapshot.agent_name,
        }
        done: list[tuple[int, list[str], list[Any], list[ModelMessage]]] = []

        async def fn(txn: Transaction) -> None:
            done.clear()
            if key is not None:
                latest = [
                    n
                    for n in [
                        await txn.resource_head(home, _SNAP + "complete"),
                        await txn.resource_head(home, _SNAP + "interrupted"),
                    ]
                    if n is not None
                ]
                latest.sort(key=lambda n: n.sequence)
                if latest:
                    seq = _key_sequence(key)
                    newest = latest[-1].payload.get("key")
                    top = _key_sequence(newest) if isinstance(newest, str) else None
                    if any(n.payload.get("key") == key for n in latest) or (
                        seq is not None and top is not None and seq < top
                    ):
                        return  # a retried or superseded save
            head = await txn.head(mscope)
            cached = self._lines.get(mscope)
            copies: list[Any]
            if cached is not None and cached[0] == head.generation:
                # Compared as objects (as Pydantic AI's stores match messages, with
                # ``==``), so only the new messages are serialized and checked: O(delta).
                ids, stored, copies = cached[1], cached[2], cached[3]
                shared = 0
                for a, b in zip(copies, messages, strict=False):
                    if a != b:
                        break
                    shared += 1
                tail = message_payloads(messages[shared:], self.llm)
            else:  # a cold process: the whole history once, matched against the thread
                planned = message_payloads(messages, self.llm)
                ids, stored = await self._match(mscope, planned)
                copies = []
                shared = 0
                for was, now in zip(stored, planned, strict=False):
                    if was != now:
                        break
                    shared += 1
                tail = planned[shared:]
            out = ids[:shared]
            await txn.hint(mscope, stored=out)
            parent: str | None = out[-1] if out else None
            for kind, payload in tail:
                node = await txn.append(mscope, kind, payload, parents=[parent] if parent else [])
                parent = node.id
                out.append(node.id)
            await txn.append(
                home,
                "resource",
                {MARK: "snap", "head": parent, "n": len(out), **meta},
                resource_key=_SNAP + snapshot.state,
            )
            line = [*stored[:shared], *tail]
            kept = [*copies[:shared], *copy.deepcopy(messages[len(copies[:shared]) :])]
            done.append((head.generation, out, line, kept))

        await self._commit(fn)
        if done:
            self._keep_line(mscope, done[0])

    def _keep_line(self, scope: str, line: tuple[int, list[str], list[Any], list[Any]]) -> None:
        self._lines[scope] = line
        self._lines.move_to_end(scope)
        while len(self._lines) > _LINES_MAX:
            self._lines.popitem(last=False)

    async def latest_snapshot(
        self, *, run_id: str, include_interrupted: bool = False
    ) -> ContinuableSnapshot | None:
        home = _run_scope(run_id)
        states = ("complete", "interrupted") if include_interrupted else ("complete",)
        heads = [await self.store.resource_head(self.namespace, home, _SNAP + s) for s in states]
        found = [n for n in heads if n is not None]
        if not found:
            return None
        snap = max(found, key=lambda n: n.sequence).payload
        by_id = await self._messages(snap["ms"]) if snap["head"] else {}
        return _snapshot(run_id, snap, by_id)

    async def list_snapshots(
        self, *, run_id: str, include_interrupted: bool = False
    ) -> list[ContinuableSnapshot]:
        """Every snapshot of ``run_id`` in write order (``interrupted`` ones only with
        ``include_interrupted``). Not part of ``StepStore``: the harness's
        ``conversation_search`` reads it (its ``SnapshotStore`` protocol)."""
        home = _run_scope(run_id)
        snaps: list[dict[str, Any]] = []
        after = 0
        while True:
            page = await self.store.payloads(self.namespace, home, after=after, limit=_PAGE)
            snaps.extend(
                p
                for _, _, p in page
                if type(p) is dict
                and p.get(MARK) == "snap"
                and (include_interrupted or p["state"] == "complete")
            )
            if len(page) < _PAGE:
                break
            after = page[-1][0]
        by_scope: dict[str, dict[str, tuple[str, dict[str, Any], str]]] = {}
        for p in snaps:
            if p["ms"] not in by_scope:
                by_scope[p["ms"]] = await self._messages(p["ms"])
        return [_snapshot(run_id, p, by_scope[p["ms"]]) for p in snaps]

    # -- the tool-effect ledger ----------------------------------------------------------

    async def record_tool_effect(self, record: ToolEffectRecord) -> None:
        scope = _run_scope(record.run_id)
        key = _EFFECT + record.tool_call_id
        data = _EFFECTS.dump_python(record, mode="json")

        async def fn(txn: Transaction) -> None:
            prior = await txn.resource_head(scope, key)
            prior_status = prior.payload["fx"]["status"] if prior is not None else None
            if prior_status in ("completed", "failed"):
                return  # the call has its result: a re-issued call or a second result is dropped
            if record.status == "started":
                payload: dict[str, Any] = {
                    MARK: "fx",
                    "run": None,
                    "llm": None,
                    "call_id": record.tool_call_id,
                    "name": record.tool_name,
                    "arguments": {},
                    "needs_approval": False,
                    "fx": data,
                }
                if prior is not None and data["idempotency_key"] is None:
                    # a re-issued or annotated call keeps the key of its first attempt
                    payload["ik"] = _key_of(prior)
                await txn.append(scope, "tool_call", payload, resource_key=key)
                return
            await txn.append(
                scope,
                "tool_result",
                {
                    MARK: "fx",
                    "run": None,
                    "llm": None,
                    "call_id": record.tool_call_id,
                    "name": record.tool_name,
                    "content": record.effect_summary,
                    "is_error": record.status == "failed",
                    "fx": data,
                },
                resource_key=key,
            )

        await self._commit(fn)

    async def get_tool_effect(self, *, run_id: str, tool_call_id: str) -> ToolEffectRecord | None:
        node = await self.store.resource_head(
            self.namespace, _run_scope(run_id), _EFFECT + tool_call_id
        )
        return None if node is None else _effect(node)

    async def list_unresolved_tool_effects(self, *, run_id: str) -> list[ToolEffectRecord]:
        heads = await self.store.resource_heads(self.namespace, _run_scope(run_id), _EFFECT)
        found = [_effect(n) for _, n in sorted(heads.items(), key=lambda kv: kv[1].sequence)]
        return [r for r in found if r.status == "started"]
