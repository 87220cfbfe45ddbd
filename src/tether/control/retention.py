"""Retention: per-namespace policies applied by ``gc`` (issue 43).

    await control.retention.set_retention(store, "acme", idle_thread_days=90)
    results = await control.gc(store)              # every namespace with a policy
    results[0].deleted, results[0].to_dict()

A namespace's policy is a node of its ``app`` scope (kind ``resource``, key
``retention``: ``{"idle_thread_days": N}``), so it is versioned, exported and reset
like any state. ``gc`` deletes every thread of the namespace whose newest node is
older than ``idle_thread_days`` before ``now``, as ``reset`` deletes a thread (its
nodes, its runs' index entries with them, its recall vectors), each one only if it
still stands where ``gc`` read it (``Store.reset_scope_if``): a turn written since is
never lost, the thread is kept (``moved``). Safe to run from cron on several machines
at once: each deletion is one conditional reset, and a thread already deleted is not
idle any more. ``dry_run`` says which threads would go.

``memory_ttl_days``: a memory (a semantic item of any scope of the namespace, not a
reserved type) whose current version was written longer ago is forgotten (a tombstone
version, as ``forget`` writes), only if that version is still the current one when the
tombstone commits. Writing a memory again restarts its time.

Refreshed on read (``memory_ttl_refresh_on_read``, or ``semantic_memory(...,
refresh_ttl=True)``; LangGraph's TTLConfig ``refresh_on_read``): a read records, for
each memory it returned, that this version was read (``refresh_memories``: a
``ttl:semantic:<type>:<key>`` node, at most one a minute per memory), and the TTL
counts from the later of the write and that read. The record is written only if the
version read is still current, and ``gc`` tombstones only if the record is still the
one it judged, both in one fenced transaction: a refresh never brings back a
forgotten memory, and a memory refreshed after ``gc`` judged it is kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from ..core import scopes
from ..core.erased import erased_placeholders
from ..core.errors import Conflict, InvalidRequest, InvalidSnapshot, KeyErased, StoreError
from ..projections.recall_index import vector_table
from ..projections.semantic import (
    REFRESH_EVERY_S,
    RESERVED_TYPES,
    RETENTION_KEY,
    TOUCH_PREFIX,
    refresh_memories,
)
from ..projections.semantic import last_use as _last_use
from ..store.base import Head, Store, check_name
from ..store.txn import Transaction, transact
from . import tasks
from .snapshot import check_snapshot_file, export_chunks
from .stats import namespaces_named

__all__ = [
    "REFRESH_EVERY_S",
    "RETENTION_KEY",
    "TOUCH_PREFIX",
    "GcResult",
    "RetentionPolicy",
    "gc",
    "refresh_memories",
    "retention",
    "set_retention",
]

_POLICY_FIELDS: Final = frozenset(
    {"idle_thread_days", "memory_ttl_days", "memory_ttl_refresh_on_read", "export_idle_threads"}
)
_PAGE: Final = 500
_MAX_NAME: Final = 200  # bytes of a percent-encoded name in an export file's name


@dataclass(frozen=True, kw_only=True, slots=True)
class RetentionPolicy:
    """A namespace's retention: threads idle longer than ``idle_thread_days`` are deleted
    by ``gc`` (None: kept forever)."""

    idle_thread_days: float | None = None
    memory_ttl_days: float | None = None  # memories not written (or read) for this long go
    # A read of memories (``semantic_memory``) restarts their time, as LangGraph's
    # TTLConfig ``refresh_on_read``; a read may still say ``refresh_ttl=False``.
    memory_ttl_refresh_on_read: bool = False
    # Each idle thread's snapshot is written to gc's export directory, and checked,
    # before the thread is deleted; gc without a directory then deletes nothing.
    export_idle_threads: bool = False

    def __post_init__(self) -> None:
        for flag in ("memory_ttl_refresh_on_read", "export_idle_threads"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidRequest(
                    f"{flag} is true or false, got {getattr(self, flag)!r}", field=flag
                )
        for name in ("idle_thread_days", "memory_ttl_days"):
            d = getattr(self, name)
            if d is not None and (
                isinstance(d, bool) or not isinstance(d, int | float) or not 0 < d < 1e6
            ):
                raise InvalidRequest(f"{name} is a number of days > 0, got {d!r}", field=name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "idle_thread_days": self.idle_thread_days,
            "memory_ttl_days": self.memory_ttl_days,
            "memory_ttl_refresh_on_read": self.memory_ttl_refresh_on_read,
            "export_idle_threads": self.export_idle_threads,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetentionPolicy:
        """A policy from its JSON form (unknown fields refused: a typo would keep data)."""
        if not isinstance(data, Mapping):
            raise InvalidRequest("a retention policy is a JSON object", field="policy")
        unknown = set(data) - _POLICY_FIELDS
        if unknown:
            name = sorted(unknown)[0]
            raise InvalidRequest(
                f"unknown field {name!r}; a retention policy has "
                + ", ".join(sorted(_POLICY_FIELDS)),
                field=name,
            )
        return cls(
            idle_thread_days=data.get("idle_thread_days"),
            memory_ttl_days=data.get("memory_ttl_days"),
            memory_ttl_refresh_on_read=data.get("memory_ttl_refresh_on_read", False),
            export_idle_threads=data.get("export_idle_threads", False),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class GcResult:
    """What ``gc`` did (or, ``dry_run``, would do) in one namespace."""

    namespace: str
    now: str
    policy: RetentionPolicy
    deleted: tuple[str, ...] = ()  # threads deleted (or that would be)
    moved: tuple[str, ...] = ()  # idle when read, written since: kept
    forgotten: tuple[str, ...] = ()  # "<scope>/<type>:<key>": memories past their TTL
    exported: tuple[str, ...] = ()  # the snapshot files written (one per deleted thread)
    # Idle, to be exported, but erased (its owner's key destroyed: no snapshot can be
    # written): skipped, kept as it is.
    erased: tuple[str, ...] = ()
    dry_run: bool = False
    operation: str = field(default="gc", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "namespace": self.namespace,
            "now": self.now,
            "policy": self.policy.to_dict(),
            "deleted": list(self.deleted),
            "moved": list(self.moved),
            "forgotten": list(self.forgotten),
            "exported": list(self.exported),
            "erased": list(self.erased),
            "dry_run": self.dry_run,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GcResult:
        return cls(
            namespace=data["namespace"],
            now=data["now"],
            policy=RetentionPolicy.from_dict(data["policy"]),
            deleted=tuple(data.get("deleted", ())),
            moved=tuple(data.get("moved", ())),
            forgotten=tuple(data.get("forgotten", ())),
            exported=tuple(data.get("exported", ())),
            erased=tuple(data.get("erased", ())),
            dry_run=bool(data.get("dry_run", False)),
        )


async def set_retention(
    store: Store,
    namespace: str,
    *,
    idle_thread_days: float | None = None,
    memory_ttl_days: float | None = None,
    memory_ttl_refresh_on_read: bool = False,
    export_idle_threads: bool = False,
) -> RetentionPolicy:
    """Set ``namespace``'s retention policy (a new version of its ``retention`` node)."""
    check_name("namespace", namespace)
    policy = RetentionPolicy(
        idle_thread_days=idle_thread_days,
        memory_ttl_days=memory_ttl_days,
        memory_ttl_refresh_on_read=memory_ttl_refresh_on_read,
        export_idle_threads=export_idle_threads,
    )

    async def write(txn: Any) -> None:
        await txn.append(scopes.APP, "resource", policy.to_dict(), resource_key=RETENTION_KEY)

    await transact(store, namespace, write)
    return policy


async def retention(store: Store, namespace: str) -> RetentionPolicy | None:
    """``namespace``'s retention policy, or None (none set)."""
    check_name("namespace", namespace)
    node = await store.resource_head(namespace, scopes.APP, RETENTION_KEY)
    if node is None or not isinstance(node.payload, dict):
        return None
    try:
        return RetentionPolicy.from_dict(node.payload)
    except InvalidRequest:
        return None  # a policy this tether cannot read is no policy: nothing is deleted


def _utc(now: dt.datetime | str | None) -> dt.datetime:
    if now is None:
        return dt.datetime.now(dt.UTC)
    if isinstance(now, str):
        try:
            now = dt.datetime.fromisoformat(now.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidRequest(f"now is an ISO 8601 time, got {now!r}", field="now") from None
    if not isinstance(now, dt.datetime):
        raise InvalidRequest(f"now is an ISO 8601 time, got {now!r}", field="now")
    return now if now.tzinfo is not None else now.replace(tzinfo=dt.UTC)


def _iso(t: dt.datetime) -> str:
    t = t.astimezone(dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


async def gc(
    store: Store,
    namespace: str | None = None,
    *,
    now: dt.datetime | str | None = None,
    dry_run: bool = False,
    export_dir: str | os.PathLike[str] | None = None,
) -> list[GcResult]:
    """Apply the retention policy of ``namespace`` (or of every namespace that has one).

    ``export_dir``: each idle thread's snapshot is written there (``<dir>/<namespace>/
    <thread>.g<generation>.json``, names percent-encoded), read back and checked before
    the thread is deleted; needed where a policy says ``export_idle_threads`` (without
    it such a gc raises ``InvalidRequest`` before deleting anything), and used for
    every namespace when given."""
    at = _utc(now)
    folder = None if export_dir is None else Path(export_dir)
    names = await namespaces_named(store, namespace)
    todo: list[tuple[str, RetentionPolicy]] = []
    for ns in names:
        policy = await retention(store, ns)
        if policy is None or (policy.idle_thread_days is None and policy.memory_ttl_days is None):
            continue
        if policy.export_idle_threads and policy.idle_thread_days and not (folder or dry_run):
            raise InvalidRequest(
                f"namespace {ns!r} exports idle threads before deleting them: give gc "
                "an export directory (export_dir=, tether gc --export-dir); nothing "
                "was deleted",
                field="export_dir",
                namespace=ns,
            )
        todo.append((ns, policy))
    out: list[GcResult] = []
    for ns, policy in todo:
        result = await _gc_namespace(store, ns, policy, at, dry_run, folder)
        if policy.memory_ttl_days is not None:
            forgotten = await _forget_expired(store, ns, policy.memory_ttl_days, at, dry_run)
            result = dataclasses.replace(result, forgotten=tuple(forgotten))
        out.append(result)
    return out


async def _forget_expired(
    store: Store, ns: str, days: float, at: dt.datetime, dry_run: bool
) -> list[str]:
    """Tombstone every memory (not a reserved type: summaries, agent memories, tool
    state) of every scope of ``ns`` whose current version was written over ``days`` ago,
    each only if that version is still the current one when its tombstone commits."""
    cutoff = _iso(at - dt.timedelta(days=days))
    out: list[str] = []
    after: str | None = None
    while True:
        page = await store.list_scopes(ns, after=after, limit=_PAGE)
        for info in page:
            with erased_placeholders(True):  # an erased memory is gone already
                heads = await store.resource_heads(ns, info.scope, "semantic:")
                touches = await store.resource_heads(ns, info.scope, TOUCH_PREFIX + "semantic:")
            for key, node in heads.items():
                p = node.payload
                touch = touches.get(TOUCH_PREFIX + key)
                if (
                    not isinstance(p, dict)
                    or p.get("content") is None
                    or p.get("$erased") is True
                    or p.get("type") in RESERVED_TYPES
                    or _last_use(node, touch) >= cutoff
                ):
                    continue
                touched = None if touch is None else touch.id
                if dry_run or await _tombstone(store, ns, info.scope, key, node.id, touched):
                    out.append(f"{info.scope}/{key.removeprefix('semantic:')}")
        if len(page) < _PAGE:
            break
        after = page[-1].scope
    return out


async def _tombstone(
    store: Store, ns: str, scope: str, key: str, judged: str, touched: str | None = None
) -> bool:
    """Forget the memory ``key`` of ``scope`` if its current version is still ``judged``
    and no read refreshed it since (its touch is still ``touched``). One transaction:
    a write or a refresh committed meanwhile makes it run again, and then it keeps."""

    async def run(txn: Transaction) -> bool:
        head = await txn.resource_head(scope, key)
        if head is None or head.id != judged:
            return False  # written since it was judged: not expired any more
        touch = await txn.resource_head(scope, TOUCH_PREFIX + key)
        if (None if touch is None else touch.id) != touched:
            return False  # read since (its TTL refreshed): not expired any more
        p = head.payload
        await txn.semantic(scope, p["type"], p["key"], None)
        return True

    return await transact(store, ns, run)


async def _gc_namespace(
    store: Store,
    ns: str,
    policy: RetentionPolicy,
    at: dt.datetime,
    dry_run: bool,
    folder: Path | None = None,
) -> GcResult:
    if policy.idle_thread_days is None:
        return GcResult(namespace=ns, now=_iso(at), policy=policy, dry_run=dry_run)
    cutoff = _iso(at - dt.timedelta(days=policy.idle_thread_days))
    idle: list[tuple[str, Any]] = []
    after: str | None = None
    while True:
        page = await store.list_scopes(ns, prefix="thread:", after=after, limit=_PAGE)
        for info in page:
            head = await store.head(ns, info.scope)
            with erased_placeholders(True):  # only its createdAt is read
                newest = await store.nodes(
                    ns, info.scope, before=head.sequence + 1, limit=1, descending=True
                )
            if newest and newest[0].created_at < cutoff:
                idle.append((info.scope, head))
        if len(page) < _PAGE:
            break
        after = page[-1].scope
    deleted: list[str] = []
    moved: list[str] = []
    exported: list[str] = []
    erased: list[str] = []
    for scope, head in idle:
        if dry_run:
            deleted.append(scope)
            continue
        path = None
        if folder is not None:
            try:
                path = await _export_checked(store, ns, scope, head, folder)
            except KeyErased:
                erased.append(scope)  # nothing left to export: skipped, said so
                continue
            if path is None:
                moved.append(scope)  # written while it was exported: not idle, kept
                continue
        try:
            await store.reset_scope_if(ns, scope, head)
        except Conflict:
            if path is not None:
                path.unlink(missing_ok=True)  # a snapshot of a thread that stays
            if (await store.head(ns, scope)).sequence > 0:
                moved.append(scope)  # a turn came since it was read: not idle, kept
            continue  # (or another gc deleted it first)
        if path is not None:
            exported.append(str(path))
        await vector_table(store).drop(ns, scope)
        await tasks.unindex_thread(store, ns, scope.removeprefix("thread:"))
        deleted.append(scope)
    return GcResult(
        namespace=ns,
        now=_iso(at),
        policy=policy,
        deleted=tuple(deleted),
        moved=tuple(moved),
        exported=tuple(exported),
        erased=tuple(erased),
        dry_run=dry_run,
    )


def export_path(folder: Path, ns: str, scope: str, generation: int) -> Path:
    """Where gc writes the snapshot of ``scope`` (a thread) of ``ns`` at ``generation``."""

    def name(text: str) -> str:
        safe = quote(text, safe="")
        if len(safe) > _MAX_NAME:  # a file name is at most 255 bytes
            return "sha256-" + hashlib.sha256(text.encode()).hexdigest()
        return safe

    return folder / name(ns) / f"{name(scope.removeprefix('thread:'))}.g{generation}.json"


async def _export_checked(
    store: Store, ns: str, scope: str, head: Head, folder: Path
) -> Path | None:
    """Write ``scope``'s snapshot durably (a temporary file, fsynced, renamed, the
    directory fsynced), read it back and check it: every id and link, and that it is
    the scope at ``head`` (its frontier, its node count). None: the scope moved on (a
    write, a prune or a reset since ``head``); any other failure raises, and the thread
    is not deleted. A crash before the rename leaves only a temporary file."""
    path = export_path(folder, ns, scope, head.generation)
    held = (await store.stats(ns, scope)).nodes
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    f = await asyncio.to_thread(open, tmp, "wb")
    try:
        async for chunk in export_chunks(store, ns, scope):  # a page of nodes at a time
            await asyncio.to_thread(f.write, chunk)
        await asyncio.to_thread(_sync_close, f)
    except Conflict:
        f.close()
        tmp.unlink(missing_ok=True)
        return None  # reset (or pruned) while it was read
    except BaseException:
        f.close()
        tmp.unlink(missing_ok=True)
        raise
    await asyncio.to_thread(_publish, tmp, path)
    try:
        checked = await asyncio.to_thread(check_snapshot_file, path)
    except InvalidSnapshot as e:
        path.unlink(missing_ok=True)
        raise StoreError(
            f"the snapshot of {scope!r} written to {str(path)!r} does not read back "
            f"whole ({e}); the thread was not deleted",
            code="export_failed",
            namespace=ns,
            scope=scope,
        ) from e
    if list(checked.frontier) != list(head.frontier) or checked.nodes != held:
        path.unlink(missing_ok=True)
        return None  # written since gc read it: the snapshot is of a newer thread
    return path


def _sync_close(f: Any) -> None:
    f.flush()
    os.fsync(f.fileno())
    f.close()


def _publish(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` to ``path`` and make the rename durable (fsync the directory)."""
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


utc_time = _utc  # an ISO 8601 time (or None: now) as an aware datetime, InvalidRequest if not
iso_time = _iso  # a datetime as tether's createdAt text (UTC, milliseconds)
