"""Transactions: compute appends against scope heads, commit them atomically.

The pure append rules (``make_node``, ``advance_frontier``) run here against a
draft of each touched scope; the store only sees finished nodes and heads. A
commit is optimistic: if another writer moved a head, ``Conflict`` is raised and
nothing is written; ``transact`` reloads, recomputes and retries.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from ..core.erased import erased_placeholders
from ..core.errors import Conflict, InvalidNode, StoreError
from ..core.graph import (
    DEFAULT_LIMITS,
    CausalNode,
    Limits,
    advance_frontier,
    check_semantic_payload,
    make_node,
    semantic_key,
)
from ..core.telemetry import AttrValue, telemetry
from ..core.vocab import DEFAULT_VOCABULARY, Vocabulary
from .base import DuplicateNodes, Head, ScopeWrite, Store, check_name

T = TypeVar("T")


@dataclass
class _Draft:
    head: Head
    frontier: list[str]
    nodes: list[CausalNode] = field(default_factory=list)
    by_id: dict[str, CausalNode] = field(default_factory=dict)
    heads: dict[str, str | None] = field(default_factory=dict)  # resource key -> id (None: none)
    known: set[str] = field(default_factory=set)  # ids known to exist in the store
    absent: set[str] = field(default_factory=set)  # ids the caller says are not stored


class _Op(NamedTuple):
    # A NamedTuple, not a frozen dataclass: built on every append, 3x cheaper.
    scope: str
    kind: str
    payload: Any
    parents: tuple[str, ...] | None
    resource_key: str | None
    new: bool = False  # the caller says no node of this content is stored (``append``)


class Transaction:
    """Appends to scopes of one namespace, committed together or not at all.

    >>> txn = Transaction(store, "acme")                          # doctest: +SKIP
    >>> goal = await txn.append("thread:t1", "goal", {"text": "hi"})  # doctest: +SKIP
    >>> await txn.commit()                                          # doctest: +SKIP
    """

    def __init__(
        self,
        store: Store,
        namespace: str,
        *,
        vocabulary: Vocabulary = DEFAULT_VOCABULARY,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.store = store
        self.namespace = check_name("namespace", namespace)
        self.vocabulary = vocabulary
        self.limits = limits
        self._drafts: dict[str, _Draft] = {}
        self._ops: list[_Op] = []
        self._ids: list[str] = []  # the id of each op's node, as ``append`` returned it
        self._existing: set[str] = set()  # ids a commit found already stored
        self._done = False

    async def _draft(self, scope: str) -> _Draft:
        d = self._drafts.get(scope)
        if d is None:
            check_name("scope", scope)
            head = await self.store.head(self.namespace, scope)
            d = _Draft(head=head, frontier=list(head.frontier), known=set(head.frontier))
            self._drafts[scope] = d
        return d

    def seed(self, scope: str, head: Head) -> None:
        """Compute ``scope`` against ``head`` instead of reading it.

        ``head`` must be a head the scope really had: one the caller read, or one its own
        commit left (``committed_head``). The commit checks its (generation, sequence)
        like a head read here, so a head that has moved since costs a ``Conflict`` and
        nothing is written. Only before the transaction touches ``scope``.
        """
        if scope in self._drafts:
            raise StoreError(f"scope {scope!r} is already in this transaction: seed it first")
        check_name("scope", scope)
        self._drafts[scope] = _Draft(
            head=head, frontier=list(head.frontier), known=set(head.frontier)
        )

    def hint_resource(self, scope: str, key: str, node: str | None, *, at: Head) -> None:
        """``key``'s current node in ``scope`` was ``node`` (its id; None: none) at ``at``.

        Saves the look-up of the previous version when ``key`` is appended. Used only if
        this transaction computes ``scope`` against that same (generation, sequence), the
        one its commit checks, so a hint for another head is ignored; appends of this
        transaction to ``key`` stay newer than the hint.
        """
        d = self._drafts.get(scope)
        if d is not None and (d.head.generation, d.head.sequence) == (at.generation, at.sequence):
            d.heads.setdefault(key, node)

    def base(self, scope: str) -> Head | None:
        """The head ``scope`` is computed against (None: not touched yet); after a commit,
        the one it checked."""
        d = self._drafts.get(scope)
        return None if d is None else d.head

    def committed_head(self, scope: str) -> Head | None:
        """After ``commit``: ``scope``'s head as the commit left it (None if the commit
        wrote nothing to ``scope``, so its head was not checked)."""
        d = self._drafts.get(scope)
        if not self._done or d is None or not d.nodes:
            return None
        return Head(
            generation=d.head.generation,
            sequence=d.head.sequence + len(d.nodes),
            frontier=tuple(d.frontier),
        )

    async def head(self, scope: str) -> Head:
        """The head this transaction computes against (read once, then cached)."""
        return (await self._draft(scope)).head

    async def frontier(self, scope: str) -> list[str]:
        """The scope's frontier including this transaction's pending appends."""
        return list((await self._draft(scope)).frontier)

    async def hint(
        self, scope: str, *, stored: Iterable[str] = (), absent: Iterable[str] = ()
    ) -> None:
        """What the caller knows of ``scope`` at this transaction's head, to save look-ups.

        ``stored``: ids that are in the store (parents need no existence check); must
        be true, e.g. ids the caller committed or read at this head's generation.
        ``absent``: ids the caller found missing; a wrong one costs a retry (the
        commit reports the duplicate and the transaction replays without hints).
        """
        d = await self._draft(scope)
        d.known.update(stored)
        d.absent.update(absent)

    def pending(self, scope: str | None = None) -> list[CausalNode]:
        if scope is not None:
            d = self._drafts.get(scope)
            return list(d.nodes) if d else []
        return [n for d in self._drafts.values() for n in d.nodes]

    async def resource_head(self, scope: str, key: str) -> CausalNode | None:
        """Current node of a resource key, pending appends included."""
        d = await self._draft(scope)
        if key in d.heads:
            nid = d.heads[key]
            if nid is None:
                return None
            if nid in d.by_id:
                return d.by_id[nid]
        node = await self.store.resource_head(self.namespace, scope, key)
        d.heads[key] = node.id if node else None
        return node

    async def append(
        self,
        scope: str,
        kind: str,
        payload: Any,
        *,
        parents: Iterable[str] | None = None,
        resource_key: str | None = None,
        new: bool = False,
    ) -> CausalNode:
        """Append a node to ``scope`` (SPEC §1 rules) and return it; committed by ``commit``.

        ``new=True``: the caller knows the scope holds no node of this content at this
        transaction's head, as ``hint(absent=[id])`` says for an id the caller would
        otherwise compute first; it saves the look-up of a node whose parents are all
        stored. A wrong claim costs a replay (the commit reports the stored node), never
        a duplicate.
        """
        if self._done:
            raise StoreError("this transaction has already been committed; start a new one")
        if parents is not None and isinstance(parents, str):
            raise InvalidNode("parents must be a list of node ids, not a string", code="shape")
        op = _Op(
            scope, kind, payload, None if parents is None else tuple(parents), resource_key, new
        )
        node = await self._apply(op)
        self._ops.append(op)
        self._ids.append(node.id)
        return node

    async def semantic(
        self, scope: str, type_: str, key: str, content: Any, **kw: Any
    ) -> CausalNode:
        return await self.append(
            scope, "semantic", {"type": type_, "key": key, "content": content}, **kw
        )

    async def _apply(self, op: _Op) -> CausalNode:
        d = self._drafts.get(op.scope) or await self._draft(op.scope)
        if op.parents is None:
            ps = list(d.frontier)
        else:
            ps = list(op.parents)
            unknown = [p for p in ps if p not in d.by_id and p not in d.known]
            if unknown:
                with erased_placeholders():  # only their ids count: an erased parent is a parent
                    found = await self.store.get_nodes(self.namespace, op.scope, unknown)
                missing = [p for p in unknown if p not in found]
                if missing:
                    raise InvalidNode(
                        f"parent {missing[0]!r} is not in scope {op.scope!r}", code="parent_missing"
                    )
                d.known.update(found)
        rk = op.resource_key
        if op.kind == "semantic" and rk is None:
            t, k = check_semantic_payload(op.payload)
            rk = semantic_key(t, k)
        if rk is not None:
            # Only the previous version's id is needed, so an erased one (its user's data
            # was erased, tether.crypto) is superseded instead of blocking every new write.
            if rk in d.heads:  # pending, read before, or hinted at this head
                prev_id = d.heads[rk]
            else:
                with erased_placeholders():
                    prev = await self.resource_head(op.scope, rk)
                prev_id = None if prev is None else prev.id
            if prev_id is not None and prev_id not in ps:
                ps.append(prev_id)
        node = make_node(
            op.kind,
            op.payload,
            ps,
            sequence=d.head.sequence + len(d.nodes) + 1,
            resource_key=rk,
            limits=self.limits,
            vocabulary=self.vocabulary,
        )
        if node.id in d.by_id:
            return d.by_id[node.id]
        # Could this node already be stored? Not if a parent is new in this
        # transaction (its id would name an unstored node), nor if its parents are
        # the frontier (a stored child of every frontier node would have taken them
        # off the frontier). So only explicit parents that are all stored need a
        # look-up, which keeps the common append free of round trips.
        if node.id in self._existing or (
            op.parents is not None
            and not op.new
            and node.id not in d.absent
            and not any(p in d.by_id for p in node.parents)
        ):
            found = await self.store.get_nodes(self.namespace, op.scope, [node.id])
            if node.id in found:
                d.known.add(node.id)
                return found[node.id]
        d.nodes.append(node)
        d.by_id[node.id] = node
        d.frontier = advance_frontier(d.frontier, node)
        if rk is not None:
            d.heads[rk] = node.id
        return node

    async def commit(self) -> dict[str, list[CausalNode]]:
        """Write every pending node atomically. Returns the nodes written, per scope.

        Raises Conflict if a head moved since it was read (nothing written).
        """
        if telemetry.enabled:
            return await _observed_commit(self)
        return await self._commit()

    async def _commit(self) -> dict[str, list[CausalNode]]:
        if self._done:
            raise StoreError("this transaction has already been committed")
        for _ in range(8):
            writes = [
                ScopeWrite(
                    scope=s,
                    expected_generation=d.head.generation,
                    expected_sequence=d.head.sequence,
                    nodes=tuple(d.nodes),
                    frontier=tuple(d.frontier),
                )
                for s, d in self._drafts.items()
                if d.nodes
            ]
            if not writes:
                self._done = True
                return {}
            try:
                await self.store.commit(self.namespace, writes)
            except DuplicateNodes as e:
                # Append is idempotent: the stored nodes win. Recompute from the same
                # heads, treating those ids as present, and try again.
                self._existing.update(e.ids)
                await self._replay()
                continue
            self._done = True
            return {w.scope: list(w.nodes) for w in writes}
        raise StoreError("could not settle duplicate nodes after 8 attempts")

    async def _replay(self) -> None:
        """Apply the appends again after a commit found some of their nodes stored.

        Against the same heads (the commit checks them again, so a head that moved
        meanwhile is a ``Conflict``, not ops computed from one state committed on
        another), with the stored ones now found instead of appended. Sound only if
        every append comes out as the node ``append`` returned: a later append (its
        parents) or the caller (a payload) may name it. A stored node found where a
        pending one was moves the frontier, so an append on the frontier after it
        comes out as another node: then ``_Recompute``, and ``transact`` runs the
        caller's function again, with the stored ids known from the start.
        """
        ops, ids, self._ops, self._ids = self._ops, self._ids, [], []
        old, self._drafts = self._drafts, {}
        for scope, d in old.items():
            self._drafts[scope] = _Draft(
                head=d.head,
                frontier=list(d.head.frontier),
                known=d.known,
                absent=d.absent - self._existing,
                # resource heads read or hinted (not this transaction's own appends)
                heads={k: v for k, v in d.heads.items() if v is None or v not in d.by_id},
            )
        for op, was in zip(ops, ids, strict=True):
            node = await self._apply(op)
            if node.id != was:
                raise _Recompute(
                    f"scope {op.scope!r} already held nodes this transaction appended, and "
                    "its appends after them depend on that: compute them again (transact does)",
                    namespace=self.namespace,
                    scope=op.scope,
                )
            self._ops.append(op)
            self._ids.append(node.id)


class _Recompute(Conflict):
    """A commit found nodes already stored that the transaction's later appends were
    computed without: nothing was written; compute them again (``transact`` does, with
    the stored ids known)."""


async def transact(
    store: Store,
    namespace: str,
    fn: Callable[[Transaction], Awaitable[T]],
    *,
    attempts: int = 10,
    vocabulary: Vocabulary = DEFAULT_VOCABULARY,
    limits: Limits = DEFAULT_LIMITS,
) -> T:
    """Run ``fn`` in a transaction and commit; on Conflict reload, recompute and retry.

    ``fn`` must compute its appends from what it reads through the transaction,
    so that a retry recomputes them against the new heads.

    A ``StoreError`` is retried too (with a longer backoff) only when it proves the
    commit was not applied (``details["committed"] is False``: the server could not
    be reached, or refused before running it). One whose outcome is unknown
    (``code="commit_unknown"``) is raised: running ``fn`` again could append the
    turn twice; read the scope to learn whether it landed.
    """
    existing: set[str] = set()  # ids a commit found stored: looked up, never re-appended
    for attempt in range(attempts):
        txn = Transaction(store, namespace, vocabulary=vocabulary, limits=limits)
        txn._existing.update(existing)
        result = await fn(txn)
        try:
            await txn.commit()
            return result
        except Conflict as e:
            existing.update(txn._existing)
            if attempt == attempts - 1:
                raise
            if isinstance(e, _Recompute):
                continue  # nothing moved: compute again at once, the stored nodes known
            telemetry.record("counter", "tether.transact.retries", 1)
            await asyncio.sleep(random.uniform(0, 0.002 * 2**attempt))
        except StoreError as e:
            if e.details.get("committed") is not False or attempt == attempts - 1:
                raise
            telemetry.record("counter", "tether.transact.retries", 1)
            await asyncio.sleep(random.uniform(0.5, 1.0) * min(1.0, 0.01 * 2**attempt))
    raise AssertionError("unreachable")


async def _observed_commit(txn: Transaction) -> dict[str, list[CausalNode]]:
    """``txn.commit()`` in a ``tether.commit`` span, with its duration, size and conflicts."""
    scopes = sorted(s for s, d in txn._drafts.items() if d.nodes)
    attrs: dict[str, AttrValue] = {"tether.namespace": txn.namespace, "tether.scopes": scopes}
    outcome = "error"
    start = time.perf_counter()
    with telemetry.span("tether.commit", "internal", attrs) as span:
        try:
            written = await txn._commit()
            outcome = "ok"
        except Conflict:
            outcome = "conflict"
            telemetry.record("counter", "tether.commit.conflicts", 1)
            raise
        finally:
            telemetry.record(
                "histogram",
                "tether.commit.duration",
                time.perf_counter() - start,
                {"outcome": outcome},
            )
        ids = [n.id for nodes in written.values() for n in nodes]
        telemetry.record("histogram", "tether.commit.nodes", len(ids))
        if span.is_recording():
            span.set_attribute("tether.nodes", len(ids))
            span.set_attribute("tether.node_ids", ids[:64])
    return written
