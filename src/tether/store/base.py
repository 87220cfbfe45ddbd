"""The storage contract: a few async methods over nodes and scope heads (SPEC §5).

All graph logic (identity, frontier, resource chaining, validation) lives in the
core; a backend stores nodes and each scope's head and answers indexed reads.

A scope is a string: ``app``, ``user:<id>`` or ``thread:<id>`` (see ``tether.core.scopes``).
A namespace (tenant) holds scopes; nothing crosses namespaces.

Invariants every backend keeps (the conformance suite checks each one):

* ``commit`` is atomic across all its writes: either every node and head lands or
  nothing does.
* Each write names the head (generation, sequence) it was computed against; if
  the stored head differs, ``Conflict`` is raised and nothing is written.
* Node ids are unique per scope; a write holding an id the scope already has
  raises ``DuplicateNodes`` (a Conflict) and writes nothing.
* ``reset_scope`` deletes a scope's nodes and bumps its generation, so writers
  that computed against the old generation fail.
* Appends cost O(new nodes): nothing is read back or rewritten.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

import orjson

from ..core.errors import Conflict, InvalidNode, InvalidRequest, StoreError
from ..core.graph import ID_PATTERN, KINDS, CausalNode
from ..core.scopes import printable
from .keys import KeyStore
from .vectors import VectorTable

_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")
_id_ok = ID_PATTERN.fullmatch


_valid_names: set[str] = set()  # names that passed: a process uses few, again and again


def check_name(what: str, value: object) -> str:
    """Namespaces and scope names: 1-256 printable characters."""
    if type(value) is str and value in _valid_names:
        return value
    # fullmatch, not match: ``$`` would also accept a trailing newline.
    if not isinstance(value, str) or not _NAME.fullmatch(value) or not printable(value):
        raise InvalidRequest(
            f"{what} must be 1-256 printable characters (no control, format or "
            f"bidirectional characters), got {value!r}",
            field=what,
        )
    if type(value) is str:
        if len(_valid_names) >= 4096:
            _valid_names.clear()
        _valid_names.add(value)
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class Head:
    """Where a scope stands: its generation (bumped by reset), last sequence and frontier."""

    generation: int = 0
    sequence: int = 0
    frontier: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ScopeWrite:
    """New nodes for one scope, computed against ``expected`` (generation, sequence).

    ``nodes`` carry sequences expected.sequence+1 ... contiguous; ``frontier`` is
    the scope's frontier after them. A write with no nodes writes nothing: it only
    asserts that the scope still stands at the expected head (a read dependency),
    and its ``frontier`` is ignored.
    """

    scope: str
    expected_generation: int
    expected_sequence: int
    nodes: tuple[CausalNode, ...]
    frontier: tuple[str, ...]
    # The nodes' sequences only ascend, with holes where nodes were pruned (an import
    # of a pruned snapshot, version 2); the head's sequence becomes the last node's.
    sparse: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ScopeInfo:
    scope: str
    generation: int
    sequence: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ScopeStats:
    nodes: int
    payload_bytes: int
    kinds: dict[str, int]


class DuplicateNodes(Conflict):
    """A commit held node ids the scope already has. Nothing was written.

    The transaction layer resolves it (the existing nodes win: append is idempotent).
    """

    default_code = "duplicate_nodes"

    @property
    def ids(self) -> list[str]:
        v = self.details.get("ids")
        return list(v) if isinstance(v, list | tuple) else []


class PayloadCodec(Protocol):
    """How payloads become stored bytes and back. The cipher of ``tether.crypto`` is one."""

    def encode(self, namespace: str, scope: str, payload: Any) -> bytes: ...

    def decode(self, namespace: str, scope: str, data: bytes) -> Any: ...


class JsonCodec:
    """The default codec: compact JSON via orjson."""

    def encode(self, namespace: str, scope: str, payload: Any) -> bytes:
        return orjson.dumps(payload)

    def decode(self, namespace: str, scope: str, data: bytes) -> Any:
        return orjson.loads(data)


def check_writes(namespace: str, writes: Sequence[ScopeWrite]) -> None:
    """Check a commit's shape before anything is written; every backend calls it first.

    Raises InvalidRequest (bad names, a scope written twice, bad expected head) or
    InvalidNode (malformed node: id, parents, kind, sequence not contiguous). A
    write with no nodes only asserts that its scope's head has not moved.
    """
    check_name("namespace", namespace)
    seen: set[str] = set()
    for w in writes:
        if not isinstance(w, ScopeWrite):
            raise InvalidRequest(f"commit takes ScopeWrite objects, got {type(w).__name__}")
        check_name("scope", w.scope)
        if w.scope in seen:
            raise InvalidRequest(
                f"scope {w.scope!r} appears twice in one commit; put all its nodes in one write",
                field="writes",
            )
        seen.add(w.scope)
        for what, v in (("generation", w.expected_generation), ("sequence", w.expected_sequence)):
            if type(v) is not int or v < 0:
                raise InvalidRequest(
                    f"expected {what} must be an integer >= 0, got {v!r}", field=what
                )
        ids: set[str] = set()  # ids of this write, each checked once
        seq = w.expected_sequence
        for n in w.nodes:
            seq += 1
            if not isinstance(n, CausalNode):
                raise InvalidNode(f"a write holds CausalNode objects, got {type(n).__name__}")
            nid = n.id
            if not isinstance(nid, str) or not _id_ok(nid):
                raise InvalidNode(f"node id {nid!r} is not cw_ + 24 hex digits", code="shape")
            if nid in ids:
                raise InvalidNode(f"node {nid} appears twice in one write", code="duplicate_id")
            if n.kind not in KINDS:
                raise InvalidNode(f"unknown kind {n.kind!r}", code="kind")
            if w.sparse and type(n.sequence) is int and n.sequence > seq:
                seq = n.sequence  # a hole: the nodes between were pruned
            if n.sequence != seq:
                raise InvalidNode(
                    f"node {nid} has sequence {n.sequence!r}; a write computed against "
                    f"sequence {w.expected_sequence} carries {w.expected_sequence + 1}, "
                    f"{w.expected_sequence + 2}, ... in order",
                    code="sequence",
                )
            parents = n.parents
            # A parent that is an earlier node of this write was checked as its id.
            if not isinstance(parents, tuple):
                raise InvalidNode(f"node {nid} has malformed parents", code="shape")
            for p in parents:  # a loop, not all(...): this runs for every node written
                if not isinstance(p, str) or (p not in ids and not _id_ok(p)):
                    raise InvalidNode(f"node {nid} has malformed parents", code="shape")
            ids.add(nid)
            if not isinstance(n.created_at, str):
                raise InvalidNode(f"node {nid} has a non-string createdAt", code="created_at")
            if n.resource_key is not None and (
                not isinstance(n.resource_key, str) or not n.resource_key
            ):
                raise InvalidNode(f"node {nid} has an invalid resource key", code="shape")
        if not all(isinstance(f, str) and (f in ids or _id_ok(f)) for f in w.frontier):
            raise InvalidNode(f"the frontier of {w.scope!r} holds a malformed id", code="frontier")


def conflict(
    namespace: str, scope: str, expected: tuple[int, int], actual: tuple[int, int]
) -> Conflict:
    return Conflict(
        f"scope {scope!r} moved: computed against generation {expected[0]} sequence {expected[1]}, "
        f"now at generation {actual[0]} sequence {actual[1]}; reload and retry",
        namespace=namespace,
        scope=scope,
        expected=list(expected),
        actual=list(actual),
    )


RawHead = tuple[str, str, str, str, tuple[str, ...], str, int, "str | None", bytes]
"""A row of ``_raw_heads_across``: scope, key, then the node's id, kind, parents,
createdAt, sequence, resourceKey and its payload as the codec encoded it."""


class Store(ABC):
    """The async storage contract. Create one with ``tether.open_store(url)``."""

    url: str = ""
    codec: PayloadCodec

    def __init__(self, *, codec: PayloadCodec | None = None) -> None:
        self.codec = codec or JsonCodec()

    # -- writing: public methods check, then call the backend's hook ----------------
    #
    # A backend implements the ``_do_*`` hooks, never the public methods: the checks
    # run once, here, for every backend, so a new one cannot skip them.

    async def commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        """Append to one or several scopes of ``namespace`` in one atomic transaction.

        Raises ``InvalidRequest``/``InvalidNode`` for a malformed commit (nothing
        written), ``Conflict`` if any scope's head differs from its write's expected
        head, ``DuplicateNodes`` if a scope already holds one of the ids; in every
        case nothing from any scope is written.
        """
        check_writes(namespace, writes)
        await self._do_commit(namespace, writes)

    async def commit_stream(
        self,
        namespace: str,
        scope: str,
        *,
        expected_generation: int,
        batches: Callable[[], Iterable[Sequence[CausalNode]]],
        frontier: tuple[str, ...],
        sparse: bool = False,
    ) -> None:
        """Write a whole scope (empty at ``expected_generation``) from batches, atomically.

        ``sparse``: the sequences may have holes (a pruned scope's snapshot).

        ``batches()`` produces the nodes (sequences 1..n, in order) a batch at a
        time; it may be called again from the start if the backend retries. The
        scope ends with ``frontier``. All or nothing, like ``commit``. This default
        holds every node at once; a backend that can write inside one transaction
        batch by batch (SQLite) overrides it, so an import holds one batch.
        """
        nodes = tuple(n for b in batches() for n in b)
        await self.commit(
            namespace,
            [
                ScopeWrite(
                    scope=scope,
                    expected_generation=expected_generation,
                    expected_sequence=0,
                    nodes=nodes,
                    frontier=frontier,
                    sparse=sparse,
                )
            ],
        )

    async def reset_scope(self, namespace: str, scope: str) -> Head:
        """Delete the scope's nodes and bump its generation; return the new head."""
        check_name("namespace", namespace)
        check_name("scope", scope)
        return await self._do_reset_scope(namespace, scope)

    async def reset_scope_if(self, namespace: str, scope: str, expected: Head) -> Head:
        """``reset_scope``, only if the scope still stands at ``expected`` (generation and
        sequence), else ``Conflict`` and nothing done: a reset decided on what was read
        (``tether.control.gc`` deleting an idle thread) never takes a turn written since."""
        check_name("namespace", namespace)
        check_name("scope", scope)
        return await self._do_reset_if(namespace, scope, expected)

    async def _do_reset_if(self, namespace: str, scope: str, expected: Head) -> Head:
        """``reset_scope_if`` once checked, atomically. The default: not supported."""
        raise StoreError(
            f"{type(self).__name__} cannot reset a scope on a condition yet",
            code="reset_if_unsupported",
        )

    async def prune(
        self,
        namespace: str,
        scope: str,
        *,
        expected: Head,
        sequences: Sequence[int],
        record: CausalNode,
    ) -> Head:
        """Remove the nodes at ``sequences`` from ``scope`` and append ``record``, at once.

        The scope must stand at ``expected`` (generation and sequence, else
        ``Conflict``, nothing done); its generation is bumped, like a reset's, so a
        writer that computed against the old head conflicts; ``record`` (sequence
        ``expected.sequence + 1``, the scope's frontier as parents) is the last node and
        the only head after it. The newest node may go too (an earlier prune record
        the new one stands for, ``forget_runs``): the record comes after it, so a
        sequence is never reused. A resource key whose head is cut has its newest
        version left as its head (none left: the key is gone from ``resource_heads``).
        All or nothing. Returns the new head. ``tether.control.prune`` plans it.
        """
        check_name("namespace", namespace)
        check_name("scope", scope)
        cut = tuple(sorted(set(sequences)))
        if any(type(s) is not int or not 1 <= s <= expected.sequence for s in cut):
            raise InvalidRequest(
                f"prune removes nodes 1 .. {expected.sequence} of {scope!r}, by sequence",
                field="sequences",
            )
        write = ScopeWrite(
            scope=scope,
            expected_generation=expected.generation + 1,
            expected_sequence=expected.sequence,
            nodes=(record,),
            frontier=(record.id,),
        )
        check_writes(namespace, [write])
        if not set(expected.frontier) <= set(record.parents):
            raise InvalidRequest("a prune record's parents include the scope's frontier")
        return await self._do_prune(namespace, scope, expected, cut, write)

    async def _do_prune(
        self, namespace: str, scope: str, expected: Head, cut: tuple[int, ...], write: ScopeWrite
    ) -> Head:
        """``prune`` once checked: delete ``cut``, bump the generation, commit ``write``
        (computed against the bumped generation), all or nothing. The default: this
        backend cannot prune yet."""
        raise StoreError(f"{type(self).__name__} cannot prune yet", code="prune_unsupported")

    async def delete_namespace(self, namespace: str) -> int:
        """Reset every scope of the namespace; return how many scopes held nodes."""
        check_name("namespace", namespace)
        return await self._do_delete_namespace(namespace)

    @abstractmethod
    async def _do_commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        """``commit`` once its checks passed: atomic, all or nothing (see ``commit``)."""

    @abstractmethod
    async def _do_reset_scope(self, namespace: str, scope: str) -> Head:
        """``reset_scope`` once the names are checked."""

    @abstractmethod
    async def _do_delete_namespace(self, namespace: str) -> int:
        """``delete_namespace`` once the name is checked."""

    # -- reading -----------------------------------------------------------------

    @abstractmethod
    async def head(self, namespace: str, scope: str) -> Head:
        """The scope's head; ``Head()`` (generation 0, sequence 0) if it never existed."""

    @abstractmethod
    async def nodes(
        self,
        namespace: str,
        scope: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> list[CausalNode]:
        """Nodes with after < sequence < before, ordered by sequence, at most ``limit``.

        ``descending=True`` returns the newest first (for tail reads such as a window view).
        """

    async def payloads(
        self,
        namespace: str,
        scope: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> list[tuple[int, str, Any]]:
        """``(sequence, kind, payload)`` of the nodes ``nodes()`` returns, same order.

        For readers that need no more of a node (a framework session reading its items
        back): a backend may skip building ids, parents and timestamps. This default
        takes them from ``nodes()``."""
        nodes = await self.nodes(
            namespace, scope, after=after, before=before, limit=limit, descending=descending
        )
        return [(n.sequence, n.kind, n.payload) for n in nodes]

    @abstractmethod
    async def get_nodes(
        self, namespace: str, scope: str, ids: Sequence[str]
    ) -> dict[str, CausalNode]:
        """The nodes with these ids that the scope holds (missing ids are left out)."""

    @abstractmethod
    async def resource_head(self, namespace: str, scope: str, key: str) -> CausalNode | None:
        """The current (newest) node of one resource key."""

    @abstractmethod
    async def resource_heads(
        self, namespace: str, scope: str, prefix: str = ""
    ) -> dict[str, CausalNode]:
        """Current node of every resource key starting with ``prefix`` (indexed, not scanned)."""

    @abstractmethod
    async def versions(
        self, namespace: str, scope: str, key: str, *, limit: int = 1000
    ) -> list[CausalNode]:
        """Every version of one resource key, oldest first."""

    async def resource_heads_across(
        self,
        namespace: str,
        key_prefix: str,
        *,
        scope_prefix: str = "thread:",
        after: tuple[str, str] | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, str, CausalNode]]:
        """``(scope, key, node)``: the current node of every resource key starting with
        ``key_prefix`` in every non-empty scope starting with ``scope_prefix``, ordered by
        (scope, key) in code point order, after the ``(scope, key)`` cursor ``after``, at
        most ``limit``. Continue with the last row's (scope, key).

        A read over many scopes in one call (the run index lives in each thread: this
        lists a namespace's runs). A backend that can answer it in one indexed query
        implements ``_raw_heads_across``; otherwise this pages ``list_scopes`` and
        ``resource_heads``. Each payload is decoded with its own scope's codec key.
        """
        check_name("namespace", namespace)
        if limit <= 0:
            return []
        raw = await self._raw_heads_across(namespace, key_prefix, scope_prefix, after, limit)
        if raw is not None:
            return self.decode_across(namespace, raw)
        return await self._heads_across_by_scope(namespace, key_prefix, scope_prefix, after, limit)

    async def _raw_heads_across(
        self,
        namespace: str,
        key_prefix: str,
        scope_prefix: str,
        after: tuple[str, str] | None,
        limit: int,
    ) -> list[RawHead] | None:
        """``resource_heads_across`` in one query, payloads left encoded (the codec's
        bytes), or None (the default): this backend has no such query."""
        return None

    def decode_across(
        self, namespace: str, raw: Iterable[RawHead]
    ) -> list[tuple[str, str, CausalNode]]:
        """Rows of ``_raw_heads_across`` with their payloads decoded (each by its scope)."""
        from ..core.graph import new_node

        codec = self.codec
        if type(codec) is JsonCodec:
            return [
                (sc, key, new_node(i, k, ps, orjson.loads(d), c, q, rk))
                for sc, key, i, k, ps, c, q, rk, d in raw
            ]
        return [
            (sc, key, new_node(i, k, ps, codec.decode(namespace, sc, d), c, q, rk))
            for sc, key, i, k, ps, c, q, rk, d in raw
        ]

    async def _heads_across_by_scope(
        self,
        namespace: str,
        key_prefix: str,
        scope_prefix: str,
        after: tuple[str, str] | None,
        limit: int,
    ) -> list[tuple[str, str, CausalNode]]:
        out: list[tuple[str, str, CausalNode]] = []
        cursor: str | None = None
        if after is not None:
            # The cursor's own scope may hold more keys after it: start there.
            heads = await self.resource_heads(namespace, after[0], key_prefix)
            if after[0].startswith(scope_prefix):
                out += [(after[0], k, n) for k, n in heads.items() if k > after[1]]
            cursor = after[0]
        while len(out) < limit:
            page = await self.list_scopes(
                namespace, prefix=scope_prefix, after=cursor, limit=min(500, max(limit, 50))
            )
            for info in page:
                heads = await self.resource_heads(namespace, info.scope, key_prefix)
                out += [(info.scope, k, n) for k, n in heads.items()]
                if len(out) >= limit:
                    break
            if len(page) < min(500, max(limit, 50)) or len(out) >= limit:
                break
            cursor = page[-1].scope
        return out[:limit]

    @abstractmethod
    async def list_namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        """Namespaces that hold at least one non-empty scope, sorted, paged by ``after``."""

    @abstractmethod
    async def list_scopes(
        self, namespace: str, *, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[ScopeInfo]:
        """Non-empty scopes of a namespace whose name starts with ``prefix``, sorted, paged."""

    @abstractmethod
    async def stats(self, namespace: str, scope: str) -> ScopeStats:
        """Node count, stored payload bytes and nodes per kind of one scope."""

    # -- what the backend supports (hooks with defaults) ---------------------------

    @property
    def reads_follow_heads(self) -> bool:
        """Whether what a read of a scope returns changes only when the scope's head
        (generation, sequence) moves, so a process may keep what it read and follow the
        new nodes (``tether.projections.view_cache``). True with the plain JSON codec;
        False with any other (the cipher of ``tether.crypto``: erasing a user's key
        turns payloads into placeholders where they are, the heads unmoved)."""
        return type(self.codec) is JsonCodec

    async def keystore(self) -> KeyStore | None:
        """Where this backend keeps the key table of ``tether.crypto``: beside its own data,
        on its own connections, so keys live and die with what they open. None (the
        default): this backend keeps no keys; ``encrypt_store`` then needs ``keystore=``."""
        return None

    def vector_table(self) -> VectorTable | None:
        """Where this backend keeps the recall index (``tether.store.vectors``) beside its
        data, or None (the default): the index then lives in the searching process."""
        return None

    async def holds_keys(self) -> bool:
        """Whether this store's database holds key-check values (it was opened with a
        cipher, so opening it without one must fail). Read-only, through the store's own
        connection; the default, for a backend without a key table, is False."""
        return False

    async def close(self) -> None:  # noqa: B027 - optional for backends with nothing to release
        """Release connections. The store is unusable afterwards."""

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
