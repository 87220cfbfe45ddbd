"""Snapshots of stored scopes: export, import, verify, fork and history (SPEC §1, §6).

Everything here streams a scope through the store's paged reads, so a scope of
any size is exported or verified in bounded memory (import and fork hold the
nodes they write, since they commit them at once).

* **export** writes the SPEC §1 snapshot ``{"version":1,"nodes":[...],"frontier":[...]}``
  with each node's stored sequence, byte for byte what ``AgentState.to_json``
  gives for the same graph, so export after import returns the same bytes.
* **import** validates with the import rules (``AgentState.from_json``), then
  writes every node into an empty scope in one commit: an invalid snapshot, or
  one aimed at a scope that already holds nodes, writes nothing.
* **verify** re-runs the import rules over the stored nodes (identity, parent
  order, contiguous sequences, frontier) plus the store's own indexes (head
  sequence, resource heads), and names the first bad node.
* **fork** copies the causal closure of one node into a new thread: the same
  node ids (identity ignores sequence and createdAt), renumbered sequences, and
  that node as the only head.

On an encrypted store, export and fork read every payload for real, even
inside ``erased_placeholders()`` or with ``on_erased="placeholder"``: an erased
payload raises ``KeyErased`` rather than producing a snapshot (or a fork) of
placeholders whose identities lie; an export checks the whole scope before its
first byte. Verify checks what erasure left: an erased node's links, order,
createdAt and index entries, all but the identity of the payload that is gone,
and counts such nodes (``ScopeCheck.erased``), so a store where one user was
erased still verifies the rest, and reports which scopes were erased. A fork of a thread bound to a user (or of a user's scope) is bound to
that user too, so erasing the user erases the fork.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import IO, Any, Final

import orjson

from ..core.erased import erased_placeholders, is_erased
from ..core.errors import Conflict, InvalidSnapshot, KeyErased, NotFound, StoreError
from ..core.graph import (
    DEFAULT_LIMITS,
    PRUNED_SNAPSHOT_VERSION,
    SNAPSHOT_VERSION,
    AgentState,
    CausalNode,
    Limits,
)
from ..core.snapshot_stream import SnapshotStream
from ..core.telemetry import telemetry
from ..core.validate import NodeChecker
from ..core.vocab import Vocabulary
from ..crypto import bind_thread, bound_user, encrypted
from ..store.base import Head, ScopeWrite, Store
from .prune import PRUNE_KEY, pruned_of, pruned_scope
from .types import ScopeCheck

PAGE: Final = 1000
# A stored scope is not bounded by snapshot limits (a long thread may outgrow
# max_nodes), only by the per-node limits that applied when each node was written.
_STORED_LIMITS: Final = dataclasses.replace(
    DEFAULT_LIMITS, max_nodes=2**62, max_snapshot_bytes=2**62
)

# What an erased payload fails (its placeholder is not the content its id names).
_PAYLOAD_CODES: Final = frozenset({"identity_mismatch", "semantic_payload"})

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while a scope is streamed."""


async def _pages(
    store: Store,
    namespace: str,
    scope: str,
    head: Head,
    *,
    page: int = PAGE,
    erased: set[int] | None = None,
) -> AsyncIterator[list[CausalNode]]:
    """The scope's nodes 1..head.sequence, a page at a time, checking nothing is skipped.

    An erased payload raises ``KeyErased`` (a snapshot never holds a placeholder),
    unless ``erased`` is given: then a page holding one is read again with
    placeholders, and the sequences of its placeholder payloads are added to it.
    """
    after = 0
    while after < head.sequence:
        try:
            with erased_placeholders(False):
                nodes = await store.nodes(
                    namespace, scope, after=after, before=head.sequence + 1, limit=page
                )
        except KeyErased:
            if erased is None:
                raise
            with erased_placeholders(True):
                nodes = await store.nodes(
                    namespace, scope, after=after, before=head.sequence + 1, limit=page
                )
            erased.update(n.sequence for n in nodes if is_erased(n.payload))
        if not nodes:
            raise StoreError(
                f"scope {scope!r} says it holds {head.sequence} nodes but the store returned "
                f"none after sequence {after}; run `tether verify` on it",
                namespace=namespace,
                scope=scope,
            )
        yield nodes
        after = nodes[-1].sequence


async def _same_generation(store: Store, namespace: str, scope: str, head: Head) -> None:
    now = await store.head(namespace, scope)
    if now.generation != head.generation:
        raise Conflict(
            f"scope {scope!r} was reset while it was being read; read it again",
            namespace=namespace,
            scope=scope,
        )


# --------------------------------------------------------------------------- export


async def export_chunks(
    store: Store,
    namespace: str,
    scope: str,
    *,
    page: int = PAGE,
    progress: Progress | None = None,
) -> AsyncIterator[bytes]:
    """The scope's snapshot as compact JSON, in chunks (one per page of nodes).

    The snapshot is the scope as of the head read first; nodes appended while
    exporting are left out. A reset during the export raises ``Conflict``.
    """
    head = await store.head(namespace, scope)
    if encrypted(store) is not None:
        # Every payload must decrypt before the first byte goes out, so an erased one
        # is a KeyErased error up front, never a truncated snapshot (a second read).
        async for _ in _pages(store, namespace, scope, head, page=page):
            pass
    with erased_placeholders(False):
        pruned = await pruned_scope(store, namespace, scope)
    if pruned:
        # A pruned scope's snapshot says what it lacks, before its nodes; its version
        # (2) makes a reader that knows only whole graphs refuse it, not misread it.
        what = {"sequences": [list(r) for r in pruned.ranges], "parents": sorted(pruned.parents)}
        yield b'{"version":%d,"pruned":%s,"nodes":[' % (
            PRUNED_SNAPSHOT_VERSION,
            orjson.dumps(what),
        )
    else:
        yield b'{"version":%d,"nodes":[' % SNAPSHOT_VERSION
    done = 0
    async for nodes in _pages(store, namespace, scope, head, page=page):
        parts = [orjson.dumps(n.to_dict()) for n in nodes]
        yield (b"," if done else b"") + b",".join(parts)
        done += len(nodes)
        if progress is not None:
            progress(nodes[-1].sequence, head.sequence)
    await _same_generation(store, namespace, scope, head)
    yield b'],"frontier":' + orjson.dumps(list(head.frontier)) + b"}"


async def export_snapshot(store: Store, namespace: str, scope: str) -> bytes:
    """The scope's whole snapshot as JSON bytes."""
    return b"".join([c async for c in export_chunks(store, namespace, scope)])


# --------------------------------------------------------------------------- import


Source = bytes | str | dict[str, Any] | AgentState | os.PathLike[str] | IO[bytes]
"""A snapshot from outside: JSON bytes or text, decoded JSON, a file's path or a binary file."""

# A file up to this size is checked and written from one read (its nodes are held
# between the two); a larger one is read twice, holding one batch at a time.
_HOLD_BYTES: Final = 16 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class ImportedSnapshot:
    """What an import wrote: how many nodes, the frontier, the file's SHA-256 (if streamed)."""

    nodes: int
    frontier: list[str]
    sha256: str = ""

    def __len__(self) -> int:
        return self.nodes


def load_snapshot(
    data: bytes | str | dict[str, Any] | AgentState,
    *,
    limits: Limits = DEFAULT_LIMITS,
    vocabulary: Vocabulary | None = None,
) -> AgentState:
    """Validate a snapshot from outside (bytes, text or decoded JSON). Raises InvalidSnapshot."""
    if isinstance(data, AgentState):
        return data
    if isinstance(data, dict):
        return AgentState.from_dict(data, limits=limits, vocabulary=vocabulary)
    return AgentState.from_json(data, limits=limits, vocabulary=vocabulary)


class _Spooled(io.RawIOBase):
    """A pipe read once: what the first pass reads is kept (memory up to _HOLD_BYTES,
    then a temporary file) for the second, so a pipe over a limit is refused as soon
    as it is read past it, like a file."""

    def __init__(self, src: IO[bytes], spool: IO[bytes]) -> None:
        self.src, self.spool, self.replay = src, spool, False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self.replay:
            return self.spool.read(n)
        chunk = self.src.read(n)
        self.spool.write(chunk)
        return chunk

    def tell(self) -> int:
        return self.spool.tell()

    def seek(self, pos: int, whence: int = 0) -> int:
        self.replay = True
        return self.spool.seek(pos, whence)


@contextlib.contextmanager
def _open(
    data: bytes | str | os.PathLike[str] | IO[bytes], *, twice: bool = False
) -> Iterator[IO[bytes]]:
    if isinstance(data, bytes | bytearray | memoryview):
        yield io.BytesIO(data)
    elif isinstance(data, str):
        yield io.BytesIO(data.encode("utf-8", "surrogatepass"))
    elif isinstance(data, os.PathLike):
        try:
            f = open(data, "rb")  # noqa: SIM115 - closed below
        except OSError as e:
            raise InvalidSnapshot(
                f"cannot read {os.fspath(data)!r}: {e.strerror}", code="io"
            ) from None
        with f:
            yield f
    elif data.seekable() or not twice:
        yield data
    else:
        with tempfile.SpooledTemporaryFile(max_size=_HOLD_BYTES) as spool:
            yield _Spooled(data, spool)  # type: ignore[misc]


def check_snapshot_file(
    data: Source,
    *,
    limits: Limits = DEFAULT_LIMITS,
    vocabulary: Vocabulary | None = None,
) -> ImportedSnapshot:
    """Check a snapshot as a stream (limits enforced while it is read), holding no node."""
    if isinstance(data, dict) and data.get("version") == PRUNED_SNAPSHOT_VERSION:
        data = orjson.dumps(data)  # a pruned snapshot is checked as a stream (its holes)
    if isinstance(data, dict | AgentState):
        state = load_snapshot(data, limits=limits, vocabulary=vocabulary)
        return ImportedSnapshot(len(state), state.frontier)
    with _open(data) as f:
        s = SnapshotStream(f, limits=limits, vocabulary=vocabulary)
        for _ in s.batches():
            pass
        return ImportedSnapshot(s.count, s.frontier, s.sha256)


async def import_snapshot(
    store: Store,
    namespace: str,
    scope: str,
    data: Source,
    *,
    replace: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    vocabulary: Vocabulary | None = None,
) -> ImportedSnapshot:
    """Validate ``data`` and write it into ``scope`` in one commit; say what was written.

    A snapshot given as bytes, text, a path or a file is read as a stream: every
    limit is enforced while it is read, so a file over one is refused before it
    is all read, and a valid one is checked in full, then written (on SQLite) a
    batch at a time inside one transaction. The scope must be empty (never used,
    or reset) unless ``replace`` is set, in which case it is reset first (only
    once the snapshot has passed validation). Raises ``InvalidSnapshot`` (nothing
    written) or ``Conflict`` (code ``scope_not_empty``, or another writer got
    there first; nothing written).
    """
    if isinstance(data, dict) and data.get("version") == PRUNED_SNAPSHOT_VERSION:
        data = orjson.dumps(data)  # a pruned snapshot is checked as a stream (its holes)
    if isinstance(data, dict | AgentState):
        state = load_snapshot(data, limits=limits, vocabulary=vocabulary)
        await _write(
            store,
            namespace,
            scope,
            replace,
            len(state),
            lambda: [state.nodes],
            tuple(state.frontier),
        )
        return ImportedSnapshot(len(state), state.frontier)
    with _open(data, twice=True) as f:
        start = f.tell()
        first = SnapshotStream(f, limits=limits, vocabulary=vocabulary)
        held: list[list[CausalNode]] | None = []
        records: list[CausalNode] = []  # the prune records a pruned snapshot holds
        for batch in first.batches():
            records += [n for n in batch if n.resource_key == PRUNE_KEY]
            if held is not None:
                held.append(batch)
                if first._t.read > _HOLD_BYTES:
                    held = None  # too big to hold: read it again to write it
        checked = ImportedSnapshot(first.count, first.frontier, first.sha256)
        said = pruned_of(records)
        if (said.ranges, said.parents) != (first.pruned.ranges, first.pruned.parents):
            # What it says it lacks must be what its own prune records say, so the
            # scope it becomes verifies (verify reads the records); else nothing is written.
            raise InvalidSnapshot(
                "the snapshot's pruned object is not what its prune records say it lacks",
                code="sequence",
            )

        def again() -> Iterator[list[CausalNode]]:
            f.seek(start)
            second = SnapshotStream(f, limits=limits, vocabulary=vocabulary)
            yield from second.batches()
            if second.sha256 != checked.sha256:
                raise InvalidSnapshot(
                    "the snapshot file changed while it was imported; nothing was written",
                    code="changed",
                )

        batches = (lambda: held) if held is not None else again
        await _write(
            store,
            namespace,
            scope,
            replace,
            checked.nodes,
            batches,
            tuple(checked.frontier),
            sparse=bool(first.pruned),
        )
        return checked


async def _write(
    store: Store,
    namespace: str,
    scope: str,
    replace: bool,
    count: int,
    batches: Callable[[], Iterable[Sequence[CausalNode]]],
    frontier: tuple[str, ...],
    *,
    sparse: bool = False,
) -> None:
    head = await store.head(namespace, scope)
    if head.sequence > 0:
        if not replace:
            raise Conflict(
                f"scope {scope!r} already holds {head.sequence} nodes; import into an empty "
                "scope (a new thread id) or pass replace=True (--replace) to reset it first",
                code="scope_not_empty",
                namespace=namespace,
                scope=scope,
            )
        head = await store.reset_scope(namespace, scope)
    if count:
        # Not a Transaction, but a commit all the same: traced as one.
        with _commit_span(namespace, scope, count):
            await store.commit_stream(
                namespace,
                scope,
                expected_generation=head.generation,
                batches=batches,
                frontier=frontier,
                **({"sparse": True} if sparse else {}),
            )


@contextlib.contextmanager
def _commit_span(namespace: str, scope: str, nodes: int) -> Iterator[None]:
    """A ``tether.commit`` span (and the nodes metric) around a write of ``nodes`` new
    nodes to ``scope`` that does not go through a Transaction (an import, a fork)."""
    attrs: dict[str, Any] = {"tether.namespace": namespace, "tether.scopes": [scope]}
    with telemetry.span("tether.commit", "internal", attrs) as span:
        yield
        telemetry.record("histogram", "tether.commit.nodes", nodes)
        if span.is_recording():
            span.set_attribute("tether.nodes", nodes)


# --------------------------------------------------------------------------- verify


def _failed(scope: str, e: InvalidSnapshot, checked: int, erased: int = 0) -> ScopeCheck:
    return ScopeCheck(
        scope=scope,
        ok=False,
        checked=checked,
        erased=min(erased, checked),
        code=e.code,
        message=e.message,
        index=e.index,
        node_id=e.node_id,
    )


async def verify_scope(
    store: Store,
    namespace: str,
    scope: str,
    *,
    page: int = PAGE,
    progress: Progress | None = None,
) -> ScopeCheck:
    """Recompute every identity and link of a stored scope; report the first bad node.

    Checks, streaming: the import rules of SPEC §1 for every node in sequence
    order (shape, kind, identity, parents earlier and sorted, sequence 1..n,
    createdAt, semantic payloads), the stored frontier (entries unique and
    present), the head's sequence against the nodes found, and the resource-head
    index against the newest node of each key. On an encrypted store, a node whose
    payload was erased is checked in all but its identity and counted in ``erased``.
    """
    head = await store.head(namespace, scope)
    # A pruned scope lacks what its prune records say, and nothing else (tether.control.prune).
    with erased_placeholders(False):
        pruned = await pruned_scope(store, namespace, scope)
    checker = NodeChecker(limits=_STORED_LIMITS, pruned=pruned)
    newest: dict[str, tuple[int, str]] = {}
    # Sequences whose payload reads as erased (an encrypted store only: a plaintext
    # payload that happens to read {"$erased": true} is checked like any other).
    erased: set[int] | None = set() if encrypted(store) is not None else None
    found_erased = 0
    async for nodes in _pages(store, namespace, scope, head, page=page, erased=erased):
        for n in nodes:
            try:
                try:
                    checker.check(n.to_dict())
                except InvalidSnapshot as e:
                    # The placeholder stands where the payload was: all but what
                    # depends on the payload is checked (the rest of the node failed first).
                    if not erased or n.sequence not in erased or e.code not in _PAYLOAD_CODES:
                        raise
                    checker.check(n.to_dict(), erased=True)
                    found_erased += 1
            except InvalidSnapshot as e:
                if e.code == "parent_missing":
                    # Streaming cannot see ahead: a parent stored later is an order fault.
                    later = [p for p in n.parents if p not in checker.seen]
                    with erased_placeholders(erased is not None):
                        stored_later = later and await store.get_nodes(namespace, scope, later[:1])
                    if stored_later:
                        e = InvalidSnapshot(
                            f"parent {later[0]} does not come earlier in sequence "
                            f"(node {checker.count}, {n.id})",
                            code="parent_order",
                            index=checker.count,
                            node_id=n.id,
                        )
                return _failed(scope, e, checker.count, found_erased)
            if n.resource_key is not None:
                newest[n.resource_key] = (checker.count - 1, n.id)
        if progress is not None:
            progress(checker.count, head.sequence)
    if checker.sequence != head.sequence:
        return ScopeCheck(
            scope=scope,
            ok=False,
            checked=checker.count,
            code="sequence",
            message=f"the head says {head.sequence} nodes; the store returned up to "
            f"sequence {checker.sequence}",
            erased=found_erased,
        )
    try:
        checker.check_end()
        checker.check_frontier(list(head.frontier))
    except InvalidSnapshot as e:
        return _failed(scope, e, checker.count, found_erased)
    with erased_placeholders(erased is not None):  # only the heads' ids are compared
        stored = await store.resource_heads(namespace, scope)
    for key in sorted(set(stored) | set(newest)):
        want = newest.get(key)
        got = stored.get(key)
        if want is None or got is None or got.id != want[1]:
            return ScopeCheck(
                scope=scope,
                ok=False,
                checked=checker.count,
                code="resource_head",
                message=(
                    f"the index says the head of {key!r} is {got.id if got else None}; "
                    f"the newest node of that key is {want[1] if want else None}"
                ),
                index=want[0] if want else None,
                node_id=want[1] if want else (got.id if got else None),
                erased=found_erased,
            )
    await _same_generation(store, namespace, scope, head)
    return ScopeCheck(scope=scope, ok=True, checked=checker.count, erased=found_erased)


def verify_snapshot(
    data: Source, *, name: str = "snapshot", limits: Limits = DEFAULT_LIMITS
) -> ScopeCheck:
    """Check a snapshot from outside without writing it anywhere (streamed, like import)."""
    try:
        checked = check_snapshot_file(data, limits=limits)
    except InvalidSnapshot as e:
        return _failed(name, e, e.index or 0)
    return ScopeCheck(scope=name, ok=True, checked=checked.nodes)


# --------------------------------------------------------------------------- fork


async def fork_thread(
    store: Store,
    namespace: str,
    source: str,
    node_id: str,
    target: str,
) -> list[CausalNode]:
    """Write the causal closure of ``node_id`` (in ``source``) as the new scope ``target``.

    The nodes keep their ids, payloads and createdAt; their sequences are
    renumbered 1..n in the source's order; ``node_id`` becomes the only head.
    ``target`` must be empty. Raises NotFound or Conflict (code ``scope_not_empty``).
    """
    if target == source:
        raise Conflict(
            "a fork writes a new scope; name a thread other than the source",
            code="scope_not_empty",
            scope=target,
        )
    src_head = await store.head(namespace, source)
    tgt_head = await store.head(namespace, target)
    if tgt_head.sequence > 0:
        raise Conflict(
            f"scope {target!r} already holds {tgt_head.sequence} nodes; fork into a new thread id",
            code="scope_not_empty",
            namespace=namespace,
            scope=target,
        )
    closure: dict[str, CausalNode] = {}
    wanted = [node_id]
    while wanted:
        batch, wanted = wanted[:PAGE], wanted[PAGE:]
        with erased_placeholders(False):  # an erased node cannot be copied
            found = await store.get_nodes(namespace, source, batch)
        for nid in batch:
            n = found.get(nid)
            if n is None:
                if nid == node_id:
                    raise NotFound(
                        f"no node {node_id} in {source!r}; `tether history` lists its nodes",
                        namespace=namespace,
                        scope=source,
                        node_id=node_id,
                    )
                raise StoreError(
                    f"node {nid} is a parent in {source!r} but is not stored; run `tether verify`",
                    namespace=namespace,
                    scope=source,
                    node_id=nid,
                )
            closure[nid] = n
            wanted.extend(p for p in n.parents if p not in closure and p not in wanted)
    ordered = sorted(closure.values(), key=lambda n: n.sequence)
    nodes = tuple(dataclasses.replace(n, sequence=i) for i, n in enumerate(ordered, 1))
    await _same_generation(store, namespace, source, src_head)
    owner = (
        source[5:]
        if source.startswith("user:")
        else await bound_user(store, namespace, source[7:])
        if source.startswith("thread:")
        else None
    )
    if owner is not None and target.startswith("thread:"):
        # The fork holds the user's data: it is erased with the user, like the source.
        await bind_thread(store, namespace, target[7:], owner)
    with _commit_span(namespace, target, len(nodes)):
        await store.commit(
            namespace,
            [
                ScopeWrite(
                    scope=target,
                    expected_generation=tgt_head.generation,
                    expected_sequence=0,
                    nodes=nodes,
                    frontier=(node_id,),
                )
            ],
        )
    return list(nodes)


# --------------------------------------------------------------------------- history


async def history_page(
    store: Store,
    namespace: str,
    scope: str,
    *,
    after: int = 0,
    before: int | None = None,
    limit: int = 100,
    descending: bool = False,
) -> tuple[list[CausalNode], int | None]:
    """One page of a scope's nodes and the cursor of the next page (None on the last).

    Ascending pages continue with ``after=cursor``; descending ones (newest first)
    with ``before=cursor``.
    """
    nodes = await store.nodes(
        namespace, scope, after=after, before=before, limit=limit + 1, descending=descending
    )
    more = len(nodes) > limit
    nodes = nodes[:limit]
    return nodes, (nodes[-1].sequence if more and nodes else None)
