"""Agent memory: the model's own key-value memory, edited through tools (SPEC §3, seed 004).

Entries are ``semantic`` nodes of type ``agent_memory`` with key ``<memory>/<key>``
in the configured scope (``content: null`` is a deleted entry). Each edit (store,
delete, clear, undo) also appends one ``resource`` node, resource key
``agent_memory:<memory>``, the edit log::

    {"memory", "op": "init"|"store"|"delete"|"clear"|"undo",
     "edits": [{"key", "node", "prev"}],   # entry nodes written, and the versions they replaced
     "below": <log node id> | null,        # the edit under this one on the undo stack
     "undoes": <log node id> | null}       # for "undo": the edit it reverted

so every edit is a version of the log and a clear (many entries) is one edit. ``undo``
reverts the edit on top of the stack by writing successors that carry each entry's
previous content (repeat to go further back); it never reverts the initial state.
The initial state (``initial=``) is what reads see until the memory is first edited
in a scope; the first edit writes it (op ``init``) in the same commit.

Every method can stage into a ``Transaction`` (``txn=``) instead of committing alone.

Erased entries (``tether.crypto.erase_user``) raise ``KeyErased``; inside
``erased_placeholders()`` reads show them with the value ``{"$erased": true}``,
an erased log entry is an edit with op ``"erased"``, and ``undo`` refuses (with
``KeyErased``) to restore what it can no longer read.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from ..core import scopes
from ..core.erased import is_erased, placeholder
from ..core.errors import InvalidRequest, KeyErased
from ..core.graph import CausalNode
from ..core.messages import ToolSpec
from ..store.base import Store
from ..store.txn import Transaction, transact
from .coercion import storable
from .errors import InvalidArguments, NothingToUndo, UnstorableValue

__all__ = ["TOOL_OPS", "AgentMemory", "MemoryEdit", "MemoryVersion"]

T = TypeVar("T")
TOOL_OPS: Final = ("store", "delete", "clear", "recall")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
_PUSH = frozenset({"store", "delete", "clear"})


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryEdit:
    """One edit of an agent memory. ``changed`` is False for a no-op (nothing written)."""

    op: str
    keys: tuple[str, ...]
    changed: bool = True
    node: str | None = None  # the log node
    undoes: str | None = None
    sequence: int | None = None
    created_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "keys": list(self.keys),
            "changed": self.changed,
            "node": self.node,
            "undoes": self.undoes,
            "sequence": self.sequence,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryVersion:
    """One version of one entry (``content`` None: deleted)."""

    key: str
    content: Any
    node: str
    sequence: int
    created_at: str


def _edit(log: CausalNode) -> MemoryEdit:
    if is_erased(log.payload):
        return MemoryEdit(
            op="erased", keys=(), node=log.id, sequence=log.sequence, created_at=log.created_at
        )
    p = log.payload if isinstance(log.payload, dict) else {}
    raw = p.get("edits")
    edits: list[Any] = raw if isinstance(raw, list) else []
    return MemoryEdit(
        op=str(p.get("op")),
        keys=tuple(str(e.get("key")) for e in edits if isinstance(e, dict)),
        node=log.id,
        undoes=p.get("undoes") if isinstance(p.get("undoes"), str) else None,
        sequence=log.sequence,
        created_at=log.created_at,
    )


def _top(log: CausalNode | None) -> str | None:
    """The log node on top of the undo stack when ``log`` is the newest log entry."""
    if log is None or not isinstance(log.payload, dict):
        return None
    op = log.payload.get("op")
    if op in _PUSH:
        return log.id
    below = log.payload.get("below")
    return below if op == "undo" and isinstance(below, str) else None


class AgentMemory:
    """A key-value memory the model maintains itself, in one scope.

    >>> mem = AgentMemory(store, "acme", scope="thread:t1", initial={"tone": "brief"})  # doctest: +SKIP
    >>> await mem.store("name", "Alice")                                               # doctest: +SKIP
    >>> await mem.recall("name")                                                       # doctest: +SKIP
    'Alice'
    """

    def __init__(
        self,
        store: Store,
        namespace: str,
        *,
        scope: str,
        name: str = "memory",
        initial: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidRequest(f"memory name {name!r} must match {_NAME.pattern}", field="name")
        scopes.parse(scope)
        self._store = store
        self.namespace = namespace
        self.scope = scope
        self.name = name
        self.initial: dict[str, Any] = {}
        for k, v in (initial or {}).items():
            self.initial[self._check_key(k)] = self._check_value(k, v)
        self._log_key = f"agent_memory:{name}"
        self._prefix = f"semantic:agent_memory:{name}/"

    # -- helpers -------------------------------------------------------------------

    def _check_key(self, key: object) -> str:
        if not isinstance(key, str) or not key or len(key) > 200 or any(ord(c) < 32 for c in key):
            raise InvalidArguments(
                f"a memory key is 1-200 printable characters, got {key!r}", field="key"
            )
        return key

    def _check_value(self, key: str, value: Any) -> Any:
        data, why = storable(value)
        if why is not None:
            raise UnstorableValue(
                f"memory {self.name!r}: the value of {key!r} is not JSON ({why})", field="value"
            )
        if data is None:
            raise InvalidArguments(
                f"memory {self.name!r}: a stored value cannot be null; use delete", field="value"
            )
        return data

    def _rk(self, key: str) -> str:
        return self._prefix + key

    async def _run(self, fn: Callable[[Transaction], Awaitable[T]], txn: Transaction | None) -> T:
        if txn is not None:
            return await fn(txn)
        return await transact(self._store, self.namespace, fn)

    async def _entry(self, txn: Transaction, key: str, content: Any) -> dict[str, Any]:
        prev = await txn.resource_head(self.scope, self._rk(key))
        node = await txn.semantic(self.scope, "agent_memory", f"{self.name}/{key}", content)
        return {"key": key, "node": node.id, "prev": prev.id if prev is not None else None}

    async def _log(
        self,
        txn: Transaction,
        op: str,
        edits: list[dict[str, Any]],
        below: str | None,
        undoes: str | None = None,
    ) -> CausalNode:
        payload = {"memory": self.name, "op": op, "edits": edits, "below": below, "undoes": undoes}
        return await txn.append(self.scope, "resource", payload, resource_key=self._log_key)

    async def _begin(self, txn: Transaction) -> str | None:
        """Write the initial state on first use; return the top of the undo stack."""
        log = await txn.resource_head(self.scope, self._log_key)
        if log is None and self.initial:
            edits = [await self._entry(txn, k, v) for k, v in self.initial.items()]
            log = await self._log(txn, "init", edits, None)
        return _top(log)

    async def _live(self, txn: Transaction | None) -> dict[str, Any]:
        heads = await self._store.resource_heads(self.namespace, self.scope, self._prefix)
        if txn is not None:
            for n in txn.pending(self.scope):
                if n.resource_key is not None and n.resource_key.startswith(self._prefix):
                    heads[n.resource_key] = n
            log = await txn.resource_head(self.scope, self._log_key)
        else:
            log = await self._store.resource_head(self.namespace, self.scope, self._log_key)
        out = dict(self.initial) if log is None else {}
        for rk, node in sorted(heads.items(), key=lambda kv: kv[1].sequence):
            key = rk[len(self._prefix) :]
            if is_erased(node.payload):
                out[key] = placeholder()
                continue
            content = node.payload.get("content") if isinstance(node.payload, dict) else None
            if content is None:
                out.pop(key, None)
            else:
                out[key] = content
        return out

    # -- edits ---------------------------------------------------------------------

    async def store(self, key: str, value: Any, *, txn: Transaction | None = None) -> MemoryEdit:
        """Set ``key`` to ``value`` (any JSON value but null)."""
        key = self._check_key(key)
        value = self._check_value(key, value)

        async def run(t: Transaction) -> MemoryEdit:
            below = await self._begin(t)
            log = await self._log(t, "store", [await self._entry(t, key, value)], below)
            return MemoryEdit(op="store", keys=(key,), node=log.id, sequence=log.sequence)

        return await self._run(run, txn)

    async def delete(self, key: str, *, txn: Transaction | None = None) -> MemoryEdit:
        """Delete ``key``; a no-op (``changed=False``) when it is not there."""
        key = self._check_key(key)

        async def run(t: Transaction) -> MemoryEdit:
            if key not in await self._live(t):
                return MemoryEdit(op="delete", keys=(), changed=False)
            below = await self._begin(t)
            log = await self._log(t, "delete", [await self._entry(t, key, None)], below)
            return MemoryEdit(op="delete", keys=(key,), node=log.id, sequence=log.sequence)

        return await self._run(run, txn)

    async def clear(self, *, txn: Transaction | None = None) -> MemoryEdit:
        """Delete every entry, as one edit (one undo brings them all back)."""

        async def run(t: Transaction) -> MemoryEdit:
            below = await self._begin(t)
            keys = sorted(await self._live(t))
            if not keys:
                return MemoryEdit(op="clear", keys=(), changed=False)
            edits = [await self._entry(t, k, None) for k in keys]
            log = await self._log(t, "clear", edits, below)
            return MemoryEdit(op="clear", keys=tuple(keys), node=log.id, sequence=log.sequence)

        return await self._run(run, txn)

    async def last_edit(self) -> MemoryEdit | None:
        """The edit ``undo`` would revert next (with its sequence), or None."""
        head = await self._store.resource_head(self.namespace, self.scope, self._log_key)
        top = _top(head)
        if head is None or top is None:
            return None
        if top == head.id:
            return _edit(head)
        found = await self._store.get_nodes(self.namespace, self.scope, [top])
        return _edit(found[top]) if top in found else None

    async def undo(self, *, txn: Transaction | None = None) -> MemoryEdit:
        """Revert the latest edit not yet undone; ``NothingToUndo`` when none is left."""

        async def run(t: Transaction) -> MemoryEdit:
            head = await t.resource_head(self.scope, self._log_key)
            if head is not None and is_erased(head.payload):
                raise self._erased("its edit log")
            top_id = _top(head)
            if head is None or top_id is None:
                raise NothingToUndo(
                    f"memory {self.name!r} in {self.scope!r} has no edit to undo",
                    memory=self.name,
                    scope=self.scope,
                )
            top = head if top_id == head.id else await self._node(t, top_id)
            if is_erased(top.payload):
                raise self._erased("the edit to undo")
            p = top.payload
            prev_ids = [e["prev"] for e in p["edits"] if isinstance(e.get("prev"), str)]
            prevs = await self._nodes(t, prev_ids)
            if any(is_erased(n.payload) for n in prevs.values()):
                raise self._erased("the versions the undo would restore")
            edits = []
            for e in p["edits"]:
                prev = prevs.get(e.get("prev") or "")
                content = prev.payload.get("content") if prev is not None else None
                edits.append(await self._entry(t, e["key"], copy.deepcopy(content)))
            log = await self._log(t, "undo", edits, p.get("below"), undoes=top.id)
            return MemoryEdit(
                op="undo",
                keys=tuple(e["key"] for e in edits),
                node=log.id,
                undoes=top.id,
                sequence=log.sequence,
            )

        return await self._run(run, txn)

    def _erased(self, what: str) -> KeyErased:
        return KeyErased(
            f"cannot undo in memory {self.name!r} of {self.scope!r}: {what} was erased",
            memory=self.name,
            scope=self.scope,
        )

    async def _nodes(self, txn: Transaction, ids: list[str]) -> dict[str, CausalNode]:
        found = dict(await self._store.get_nodes(self.namespace, self.scope, ids))
        for n in txn.pending(self.scope):
            if n.id in ids:
                found[n.id] = n
        return found

    async def _node(self, txn: Transaction, node_id: str) -> CausalNode:
        node = (await self._nodes(txn, [node_id])).get(node_id)
        if node is None:
            raise NothingToUndo(f"the edit {node_id!r} is no longer in {self.scope!r}")
        return node

    # -- reads ---------------------------------------------------------------------

    async def items(self, *, txn: Transaction | None = None) -> dict[str, Any]:
        """Every live entry (the initial state until the first edit)."""
        return await self._live(txn)

    async def recall(self, key: str | None = None, *, txn: Transaction | None = None) -> Any:
        """One entry's value (None when absent), or every entry when ``key`` is None."""
        items = await self._live(txn)
        if key is None:
            return items
        return items.get(self._check_key(key))

    async def history(self, key: str | None = None) -> list[MemoryEdit] | list[MemoryVersion]:
        """The edit log (``key`` None) or every version of one entry, oldest first."""
        if key is None:
            logs = await self._store.versions(self.namespace, self.scope, self._log_key)
            return [_edit(n) for n in logs]
        nodes = await self._store.versions(
            self.namespace, self.scope, self._rk(self._check_key(key))
        )
        return [
            MemoryVersion(
                key=key,
                content=placeholder()
                if is_erased(n.payload)
                else n.payload.get("content")
                if isinstance(n.payload, dict)
                else None,
                node=n.id,
                sequence=n.sequence,
                created_at=n.created_at,
            )
            for n in nodes
        ]

    # -- tools ---------------------------------------------------------------------

    def tool_name(self, op: str) -> str:
        return f"{self.name}_{op}"

    def tools(self, enabled: tuple[str, ...] | list[str] = TOOL_OPS) -> list[ToolSpec]:
        """The tools the model edits this memory with (seed 004's ``enabled_tools``)."""
        unknown = [op for op in enabled if op not in TOOL_OPS]
        if unknown:
            raise InvalidRequest(
                f"unknown memory tool(s) {unknown}; choose from {', '.join(TOOL_OPS)}",
                field="enabled",
            )
        key = {"type": "string", "description": "The entry's key, e.g. 'user_name'."}
        specs = {
            "store": ToolSpec(
                name=self.tool_name("store"),
                description=(
                    f"Remember something in your long-term memory '{self.name}' "
                    "(replaces the entry's previous value)."
                ),
                parameters={
                    "type": "object",
                    "properties": {"key": key, "value": {"description": "Any JSON value."}},
                    "required": ["key", "value"],
                },
            ),
            "delete": ToolSpec(
                name=self.tool_name("delete"),
                description=f"Forget one entry of your memory '{self.name}'.",
                parameters={"type": "object", "properties": {"key": key}, "required": ["key"]},
            ),
            "clear": ToolSpec(
                name=self.tool_name("clear"),
                description=f"Forget every entry of your memory '{self.name}'.",
                parameters={"type": "object", "properties": {}},
            ),
            "recall": ToolSpec(
                name=self.tool_name("recall"),
                description=(
                    f"Read your memory '{self.name}': one entry by key, or every entry "
                    "when no key is given."
                ),
                parameters={"type": "object", "properties": {"key": key}},
            ),
        }
        return [specs[op] for op in enabled]

    async def call(
        self, tool_name: str, arguments: Mapping[str, Any] | None, *, txn: Transaction | None = None
    ) -> dict[str, Any]:
        """Run one of ``tools()`` and return its JSON result (the tool message content)."""
        ops = {self.tool_name(op): op for op in TOOL_OPS}
        op = ops.get(tool_name)
        if op is None:
            raise InvalidArguments(
                f"{tool_name!r} is not a tool of memory {self.name!r}; tools: {', '.join(ops)}",
                field="tool",
            )
        args = dict(arguments or {})
        allowed = {"store": {"key", "value"}, "delete": {"key"}, "clear": set(), "recall": {"key"}}[
            op
        ]
        extra = sorted(set(args) - allowed)
        if extra:
            raise InvalidArguments(f"{tool_name}: unexpected argument(s) {extra}", field=extra[0])
        if op in ("store", "delete") and "key" not in args:
            raise InvalidArguments(f"{tool_name}: 'key' is required", field="key")
        if op == "store":
            if "value" not in args:
                raise InvalidArguments(f"{tool_name}: 'value' is required", field="value")
            await self.store(args["key"], args["value"], txn=txn)
            return {"ok": True, "stored": args["key"]}
        if op == "delete":
            e = await self.delete(args["key"], txn=txn)
            return {"ok": True, "deleted": args["key"], "existed": e.changed}
        if op == "clear":
            e = await self.clear(txn=txn)
            return {"ok": True, "cleared": len(e.keys)}
        key = args.get("key")
        if key is None:
            return {"items": await self.recall(txn=txn)}
        value = await self.recall(key, txn=txn)
        return {"key": key, "found": value is not None, "value": value}
