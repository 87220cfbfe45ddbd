"""Your own backend in four methods: a scope's log, saved with a version check.

``LogBackend`` is the small contract (Liman's ``StateStorage`` has four async methods;
so has this one): keep, per namespace and scope, a *log* (a list of opaque strings)
and a *version* (an integer, 0 for a scope never saved, +1 on every save), and

* ``load(namespace, scope)``: the scope's ``ScopeLog(version, entries)``;
* ``save(namespace, saves)``: for each ``LogSave`` append its entries (or, with
  ``replace=True``, make them the whole log), *only if* every named scope still has the
  version the save expected (compare-and-set), all or nothing; return whether it saved;
* ``namespaces()`` and ``scopes(namespace)``: the names saved so far.

No ``delete``: a reset saves, with ``replace=True``, a log holding only the scope's new
generation, which must outlive its nodes (a log dropped would restart the scope at
generation 0, and a writer that computed against it before its first write would win).

``LogStore(backend)`` is a full ``tether.store.Store`` built on it: what the log holds
(nodes as JSON, each commit's frontier, the generation after a reset or prune) and every
rule of the contract are tether's, run here for every such backend: commits computed
against a stale head raise ``Conflict`` and write nothing, ids a scope holds raise
``DuplicateNodes``, a reset bumps the generation so late writers fail, payloads go
through the codec (so ``tether.crypto.encrypt_store`` composes, with ``keystore=``).
Two writers cannot both win: each load-check-save round ends in the backend's
compare-and-set, and the loser reloads and finds the head moved (``Conflict``).

What it costs, honestly: nothing is indexed. Every read loads the scope's whole log
from the backend; the store parses only the entries it has not parsed before (it keeps
the parsed logs of the last 64 scopes it read, bounded, and uses one only for a log that
begins with exactly its entries), so a process's first read of a 10,000-node thread
parses 10,000 entries, and a backend whose ``load`` reads all of its storage (a file per
scope) does that reading on every read. A commit loads each scope it writes first, and
the listings load every scope they list. A backend whose ``save`` rewrites its storage
makes appends O(history) as well. It suits small deployments, tests and a storage
tether has no backend for, where the nodes per scope stay in the thousands
(docs/storage.md has figures). For long threads, many processes or
heavy reads, implement the full ``Store`` contract (``tether.store.base``: indexed
resource heads, paged reads, appends that never read history back) as the SQLite,
PostgreSQL and Redis backends do, and run the conformance suite on it.

``tether.store.examples`` has two such backends: ``DictBackend`` (a dict, one process)
and ``DirectoryBackend`` (a JSON Lines file per scope in a directory, many processes).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..core.errors import Conflict, StoreError, TetherError
from ..core.graph import CausalNode, new_node
from .base import (
    DuplicateNodes,
    Head,
    JsonCodec,
    PayloadCodec,
    ScopeInfo,
    ScopeStats,
    ScopeWrite,
    Store,
    check_name,
    conflict,
)

__all__ = ["LogBackend", "LogSave", "LogStore", "ScopeLog"]

# A save that lost its compare-and-set is tried again against the new log this often;
# each retry is a new load, so a commit whose heads moved stops at once with Conflict.
_RETRIES = 64


@dataclass(frozen=True, slots=True)
class ScopeLog:
    """A scope's log as the backend holds it: its version and its entries, in order."""

    version: int = 0
    entries: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class LogSave:
    """Part of one ``save``: ``scope`` must be at ``version``; then ``entries`` are
    appended to its log (``replace=True``: they become the whole log) and its version
    becomes ``version + 1``. A save with no entries and ``replace=False`` only checks
    the version (a read dependency of the commit) and changes nothing."""

    scope: str
    version: int
    entries: tuple[str, ...]
    replace: bool = False


class LogBackend(ABC):
    """The four methods a backend of your own implements (see the module's docstring).

    Entries are strings tether made (one line of JSON each, no newline); store them as
    they are and hand them back in the same order. Names are tether's namespace and
    scope names: 1-256 printable characters, any of them (``/`` included).
    """

    @abstractmethod
    async def load(self, namespace: str, scope: str) -> ScopeLog:
        """The scope's log; ``ScopeLog()`` (version 0, no entries) if it was never saved."""

    @abstractmethod
    async def save(self, namespace: str, saves: Sequence[LogSave]) -> bool:
        """All or nothing: if every ``save.scope`` is at ``save.version``, apply them all
        (append, or replace with ``replace``; version + 1, the check-only ones unchanged)
        and return True; otherwise change nothing and return False. Atomic against other
        saves, in this process and in any other sharing the storage."""

    @abstractmethod
    async def namespaces(self) -> Iterable[str]:
        """Every namespace with at least one saved scope (any order)."""

    @abstractmethod
    async def scopes(self, namespace: str) -> Iterable[str]:
        """Every scope of ``namespace`` ever saved (any order; tether skips empty ones)."""

    async def close(self) -> None:  # noqa: B027 - optional: a backend may hold nothing
        """Release what the backend holds (files, connections)."""


# -- the log's entries --------------------------------------------------------------------
#
# A node:        {"id","kind","parents","createdAt","sequence"[,"resourceKey"],
#                 "payload": <the JSON codec's bytes> | "payload64": <base64 of the codec's>
#                 [,"frontier": [...]]}   (the last node of a commit carries the frontier)
# A generation:  {"generation": g}        (the first entry after a reset or a prune)


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A log as read: its head, and per node its id, kind, sequence and resource key
    (``nodes``, no payload) beside the entry itself (``raw``, parsed again for each node
    a read returns, so no caller ever shares a payload object with another)."""

    version: int
    entries: tuple[str, ...]  # every entry, as loaded
    generation: int
    frontier: tuple[str, ...]
    nodes: list[tuple[str, str, int, str | None]]  # (id, kind, sequence, resourceKey)
    raw: list[str]  # the entry of each node

    @property
    def sequence(self) -> int:
        return self.nodes[-1][2] if self.nodes else 0

    @property
    def at(self) -> tuple[int, int]:
        return (self.generation, self.sequence)


# What a store keeps of the logs it read, so that a read whose log only grew parses the
# new entries alone (and one whose log did not change parses nothing): bounded by scopes
# and by entries. Validity needs no trust in versions: a kept parse is used only for a
# log whose entries begin with exactly the entries it was made from.
_CACHE_SCOPES = 64
_CACHE_ENTRIES = 200_000


def _corrupt(namespace: str, scope: str, why: str) -> StoreError:
    return StoreError(
        f"the log of {scope!r} in {namespace!r} is not one tether wrote: {why}",
        code="corrupt_log",
        namespace=namespace,
        scope=scope,
    )


class LogStore(Store):
    """A full ``Store`` over a ``LogBackend``: ``LogStore(DictBackend())``.

    Every read loads the scope's whole log (see the module's docstring for the costs
    and when to implement ``Store`` instead). Usable from several OS threads, each with
    its own event loop, if the backend is (both examples are).
    """

    def __init__(self, backend: LogBackend, *, codec: PayloadCodec | None = None) -> None:
        if not isinstance(backend, LogBackend):
            raise StoreError(
                f"LogStore takes a tether.store.LogBackend, got {type(backend).__name__}",
                code="invalid_request",
            )
        super().__init__(codec=codec)
        self.backend = backend
        self.url = f"log://{type(backend).__name__}"
        self._closed = False
        self._lock = threading.Lock()  # guards the kept parses; never held across an await
        self._parsed: dict[tuple[str, str], _Parsed] = {}  # oldest first
        self._cached = 0  # entries in _parsed

    # -- the log -------------------------------------------------------------------------

    async def _load(self, namespace: str, scope: str) -> _Parsed:
        if self._closed:
            raise StoreError("this store is closed; build a new LogStore", code="closed")
        log = await self.backend.load(namespace, scope)
        if (
            not isinstance(log, ScopeLog)
            or type(log.version) is not int
            or log.version < 0
            or not isinstance(log.entries, tuple | list)
        ):
            raise _corrupt(namespace, scope, f"load returned {log!r}, not a ScopeLog")
        entries = tuple(log.entries)
        with self._lock:
            kept = self._parsed.get((namespace, scope))
        if kept is not None and (
            kept.entries is entries
            or (len(entries) >= len(kept.entries) and entries[: len(kept.entries)] == kept.entries)
        ):
            parsed = self._parse(namespace, scope, log.version, entries, kept)
        else:
            parsed = self._parse(namespace, scope, log.version, entries, None)
        with self._lock:
            cache = self._parsed
            old = cache.pop((namespace, scope), None)
            self._cached -= len(old.entries) if old is not None else 0
            if len(entries) <= _CACHE_ENTRIES:
                cache[namespace, scope] = parsed
                self._cached += len(entries)
            while cache and (len(cache) > _CACHE_SCOPES or self._cached > _CACHE_ENTRIES):
                gone = cache.pop(next(iter(cache)))
                self._cached -= len(gone.entries)
        return parsed

    @staticmethod
    def _parse(
        namespace: str, scope: str, version: int, entries: tuple[str, ...], kept: _Parsed | None
    ) -> _Parsed:
        """Parse ``entries``, from where ``kept`` (a parse of a prefix of them) ends."""
        if kept is not None and len(kept.entries) == len(entries):
            return _Parsed(version, entries, kept.generation, kept.frontier, kept.nodes, kept.raw)
        generation, frontier = (kept.generation, kept.frontier) if kept else (0, ())
        nodes = list(kept.nodes) if kept else []
        raws = list(kept.raw) if kept else []
        for i in range(len(kept.entries) if kept else 0, len(entries)):
            raw = entries[i]
            try:
                e = orjson.loads(raw)
            except (orjson.JSONDecodeError, TypeError) as err:
                raise _corrupt(namespace, scope, f"entry {i} is no JSON ({err})") from None
            if not isinstance(e, dict):
                raise _corrupt(namespace, scope, f"entry {i} is no object")
            if "id" in e:
                nid, kind, seq, rk = e["id"], e.get("kind"), e.get("sequence"), e.get("resourceKey")
                if (
                    not isinstance(nid, str)
                    or not isinstance(kind, str)
                    or not (rk is None or isinstance(rk, str))
                    or type(seq) is not int
                    or seq <= (nodes[-1][2] if nodes else 0)
                ):
                    raise _corrupt(namespace, scope, f"entry {i} is no node in sequence")
                nodes.append((nid, kind, seq, rk))
                raws.append(raw)
                if "frontier" in e:
                    if not isinstance(e["frontier"], list):
                        raise _corrupt(namespace, scope, f"entry {i} has no list as frontier")
                    frontier = tuple(e["frontier"])
            elif i == 0 and type(e.get("generation")) is int:
                generation = e["generation"]
            else:
                raise _corrupt(namespace, scope, f"entry {i} is neither a node nor a generation")
        return _Parsed(version, entries, generation, frontier, nodes, raws)

    def _node(self, namespace: str, scope: str, raw: str) -> CausalNode:
        e: dict[str, Any] = orjson.loads(raw)  # parsed when the log was: valid JSON
        try:
            if "payload64" in e:
                payload = self.codec.decode(namespace, scope, base64.b64decode(e["payload64"]))
            elif type(self.codec) is JsonCodec:
                payload = e["payload"]
            else:  # written by a plain store, read through another codec
                payload = self.codec.decode(namespace, scope, orjson.dumps(e["payload"]))
            return new_node(
                e["id"],
                e["kind"],
                tuple(e["parents"]),
                payload,
                e["createdAt"],
                e["sequence"],
                e.get("resourceKey"),
            )
        except (KeyError, TypeError, ValueError, binascii.Error) as err:
            if isinstance(err, TetherError):  # the codec's own (a cipher's KeyErased...)
                raise
            raise _corrupt(
                namespace, scope, f"node {e.get('id')!r} cannot be read ({err!r})"
            ) from None

    def _entry(self, namespace: str, scope: str, n: CausalNode, frontier: Any) -> str:
        d: dict[str, Any] = {
            "id": n.id,
            "kind": n.kind,
            "parents": list(n.parents),
            "createdAt": n.created_at,
            "sequence": n.sequence,
        }
        if n.resource_key is not None:
            d["resourceKey"] = n.resource_key
        data = self.codec.encode(namespace, scope, n.payload)
        if type(self.codec) is JsonCodec:
            d["payload"] = orjson.Fragment(data)
        else:
            d["payload64"] = base64.b64encode(data).decode("ascii")
        if frontier is not None:
            d["frontier"] = list(frontier)
        return orjson.dumps(d).decode()

    async def _save(self, namespace: str, saves: Sequence[LogSave]) -> bool:
        ok = await self.backend.save(namespace, saves)
        if type(ok) is not bool:
            raise StoreError(
                f"{type(self.backend).__name__}.save returned {ok!r}; it returns True "
                "(saved) or False (a version differed, nothing saved)",
                code="backend_contract",
            )
        return ok

    # -- writing -------------------------------------------------------------------------

    async def _do_commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        for _ in range(_RETRIES):
            saves: list[LogSave] = []
            for w in writes:
                log = await self._load(namespace, w.scope)
                if log.at != (w.expected_generation, w.expected_sequence):
                    raise conflict(
                        namespace, w.scope, (w.expected_generation, w.expected_sequence), log.at
                    )
                if w.nodes:
                    held = {e[0] for e in log.nodes}
                    dup = [n.id for n in w.nodes if n.id in held]
                    if dup:
                        raise DuplicateNodes(
                            f"scope {w.scope!r} already holds {len(dup)} of these nodes",
                            namespace=namespace,
                            scope=w.scope,
                            ids=dup,
                        )
                last = len(w.nodes) - 1
                entries = tuple(
                    self._entry(namespace, w.scope, n, w.frontier if i == last else None)
                    for i, n in enumerate(w.nodes)
                )
                saves.append(LogSave(scope=w.scope, version=log.version, entries=entries))
            if await self._save(namespace, saves):
                return
        raise Conflict(
            f"{_RETRIES} saves in a row lost their version check; retry later",
            namespace=namespace,
        )

    async def _do_reset_scope(self, namespace: str, scope: str) -> Head:
        for _ in range(_RETRIES):
            log = await self._load(namespace, scope)
            gen = log.generation + 1
            entry = orjson.dumps({"generation": gen}).decode()
            save = LogSave(scope=scope, version=log.version, entries=(entry,), replace=True)
            if await self._save(namespace, [save]):
                return Head(generation=gen)
        raise Conflict(f"{_RETRIES} resets of {scope!r} in a row lost their version check")

    async def _do_prune(
        self, namespace: str, scope: str, expected: Head, cut: tuple[int, ...], write: ScopeWrite
    ) -> Head:
        log = await self._load(namespace, scope)
        if log.at != (expected.generation, expected.sequence):
            raise conflict(namespace, scope, (expected.generation, expected.sequence), log.at)
        (record,) = write.nodes
        if any(e[0] == record.id for e in log.nodes):
            raise DuplicateNodes(
                f"scope {scope!r} already holds node {record.id}",
                namespace=namespace,
                scope=scope,
                ids=[record.id],
            )
        gone = set(cut)
        kept = [raw for raw, e in zip(log.raw, log.nodes, strict=True) if e[2] not in gone]
        gen = expected.generation + 1
        entries = (
            orjson.dumps({"generation": gen}).decode(),
            *kept,
            self._entry(namespace, scope, record, write.frontier),
        )
        if not await self._save(
            namespace, [LogSave(scope=scope, version=log.version, entries=entries, replace=True)]
        ):
            latest = await self._load(namespace, scope)
            raise conflict(namespace, scope, (expected.generation, expected.sequence), latest.at)
        return Head(generation=gen, sequence=record.sequence, frontier=write.frontier)

    async def _do_delete_namespace(self, namespace: str) -> int:
        for _ in range(_RETRIES):
            saves: list[LogSave] = []
            held = 0
            for scope in sorted(set(await self._names(namespace))):
                log = await self._load(namespace, scope)
                held += bool(log.nodes)
                entry = orjson.dumps({"generation": log.generation + 1}).decode()
                saves.append(
                    LogSave(scope=scope, version=log.version, entries=(entry,), replace=True)
                )
            if not saves or await self._save(namespace, saves):
                return held
        raise Conflict(f"{_RETRIES} deletions of {namespace!r} in a row lost a version check")

    # -- reading -------------------------------------------------------------------------

    async def head(self, namespace: str, scope: str) -> Head:
        log = await self._load(namespace, scope)
        return Head(generation=log.generation, sequence=log.sequence, frontier=log.frontier)

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
        if limit <= 0:
            return []
        log = await self._load(namespace, scope)
        seqs = [e[2] for e in log.nodes]
        lo = bisect.bisect_right(seqs, after)
        hi = len(seqs) if before is None else bisect.bisect_left(seqs, before)
        picked = (
            range(hi - 1, max(lo, hi - limit) - 1, -1)
            if descending
            else range(lo, min(hi, lo + limit))
        )
        return [self._node(namespace, scope, log.raw[i]) for i in picked]

    async def get_nodes(
        self, namespace: str, scope: str, ids: Sequence[str]
    ) -> dict[str, CausalNode]:
        want = set(ids)
        log = await self._load(namespace, scope)
        return {
            e[0]: self._node(namespace, scope, raw)
            for e, raw in zip(log.nodes, log.raw, strict=True)
            if e[0] in want
        }

    async def resource_head(self, namespace: str, scope: str, key: str) -> CausalNode | None:
        log = await self._load(namespace, scope)
        for i in range(len(log.nodes) - 1, -1, -1):
            if log.nodes[i][3] == key:
                return self._node(namespace, scope, log.raw[i])
        return None

    async def resource_heads(
        self, namespace: str, scope: str, prefix: str = ""
    ) -> dict[str, CausalNode]:
        log = await self._load(namespace, scope)
        newest: dict[str, int] = {}
        for i, e in enumerate(log.nodes):
            rk = e[3]
            if rk is not None and rk.startswith(prefix):
                newest[rk] = i
        return {k: self._node(namespace, scope, log.raw[newest[k]]) for k in sorted(newest)}

    async def versions(
        self, namespace: str, scope: str, key: str, *, limit: int = 1000
    ) -> list[CausalNode]:
        log = await self._load(namespace, scope)
        found = [i for i, e in enumerate(log.nodes) if e[3] == key][: max(limit, 0)]
        return [self._node(namespace, scope, log.raw[i]) for i in found]

    async def _names(self, namespace: str) -> list[str]:
        if self._closed:
            raise StoreError("this store is closed; build a new LogStore", code="closed")
        names = list(await self.backend.scopes(namespace))
        if not all(isinstance(n, str) for n in names):
            raise StoreError(
                f"{type(self.backend).__name__}.scopes returned a name that is no string",
                code="backend_contract",
            )
        return names

    async def list_namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        if self._closed:
            raise StoreError("this store is closed; build a new LogStore", code="closed")
        out: list[str] = []
        for name in sorted(set(await self.backend.namespaces())):
            if len(out) >= limit:
                break
            if after is not None and name <= after:
                continue
            for scope in await self._names(name):
                if (await self._load(name, scope)).nodes:
                    out.append(name)
                    break
        return out

    async def list_scopes(
        self, namespace: str, *, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[ScopeInfo]:
        check_name("namespace", namespace)
        out: list[ScopeInfo] = []
        for scope in sorted(set(await self._names(namespace))):
            if len(out) >= limit:
                break
            if not scope.startswith(prefix) or (after is not None and scope <= after):
                continue
            log = await self._load(namespace, scope)
            if log.nodes:
                out.append(ScopeInfo(scope=scope, generation=log.generation, sequence=log.sequence))
        return out

    async def stats(self, namespace: str, scope: str) -> ScopeStats:
        log = await self._load(namespace, scope)
        kinds: dict[str, int] = {}
        size = 0
        for e, raw in zip(log.nodes, log.raw, strict=True):
            kinds[e[1]] = kinds.get(e[1], 0) + 1
            d = orjson.loads(raw)
            if "payload64" in d:
                size += len(base64.b64decode(d["payload64"]))
            else:  # the JSON codec's bytes, as orjson writes them again
                size += len(orjson.dumps(d["payload"]))
        return ScopeStats(nodes=len(log.nodes), payload_bytes=size, kinds=kinds)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self.backend.close()
