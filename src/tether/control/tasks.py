"""Task state (seed 002's ``task`` module): run metadata, status history, the run index.

Every run carries the caller's metadata (``agent.step(..., metadata=...)``, kept on
its ``goal`` node) and a history of status transitions with times. The history is
a projection, derived from the thread's nodes, never written:

    goal                          running     (the run starts)
    a round whose calls all wait  suspended   (a tool call needing approval)
    verification                  running     (the last pending call was decided)
    answer                        completed
    protocol_error                failed

To list runs across a namespace without reading threads, the runtime keeps a run
index: each run's entry is a ``resource`` node in its own thread's graph,
resourceKey ``task:<run>``, payload ``{"status", "started_at", "seq", "metadata",
"pending", "updated_at"}`` (``pending``: ``[{"call_id", "name"}]`` of a suspended
run; ``updated_at``: the time of the run's last status change). It is appended in
the same commit as the node that changed the status, into the thread scope that
commit already writes, so the index never disagrees with the thread at a commit
boundary and runs of different threads never share a head. Neither thread nor run
is in the payload (both are in where the entry lives), so a fork or an import
under another id cannot carry a wrong one, and no projection takes the entry for
one of the run's own nodes. ``{"deleted": true}`` takes a run out. Listing a
thread is one indexed prefix read of its resource heads; listing a namespace is
``Store.resource_heads_across`` (one indexed query on SQLite and PostgreSQL);
filtering by status happens over those heads. An entry is encrypted with its
thread's key, so erasing the user a thread is bound to erases its entries too.

The index is derived data: ``reindex`` rebuilds it from the threads (and removes
the entries of the layout before, ``task:<len>:<thread>:<run>`` in the ``app``
scope, which listings still read until then), and import and fork index the runs
they bring.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..core import scopes
from ..core.erased import erased_placeholders, is_erased
from ..core.errors import InvalidRequest, KeyErased, NotFound
from ..core.graph import CausalNode
from ..projections.runs import PendingApproval, RunView, is_run_goal, run_of, run_views
from ..store.base import Store
from ..store.txn import Transaction, transact

__all__ = [
    "RUN_STATUSES",
    "RunList",
    "RunSummary",
    "TaskState",
    "Transition",
    "drop_entries",
    "entry_key",
    "index_key",
    "index_prefix",
    "index_thread",
    "list_index",
    "page_runs",
    "pending_approvals",
    "reindex",
    "run_entry",
    "runs",
    "stage_entry",
    "summary_of",
    "task",
    "task_states",
    "transitions",
    "unindex_thread",
    "unindex_user",
]

RUN_STATUSES: Final[tuple[str, ...]] = ("running", "suspended", "completed", "failed")
INDEX_PREFIX: Final = "task:"
MAX_RUNS: Final = 10_000


_PAGE: Final = 1000  # rows per resource_heads_across call


def entry_key(run: str) -> str:
    """The resource key of a run's index entry, in its thread's scope."""
    return INDEX_PREFIX + run


def index_key(thread: str, run: str) -> str:
    """A run's place in a namespace listing: the cursor ``runs(after=...)`` takes (and,
    in app, the key of the layout before the index moved into the threads)."""
    return f"{thread_prefix(thread)}{run}"


def thread_prefix(thread: str) -> str:
    return f"{INDEX_PREFIX}{len(thread)}:{thread}:"


# --------------------------------------------------------------------------- types


@dataclass(frozen=True, kw_only=True, slots=True)
class Transition:
    """One status change of a run: the status it entered, when, and the node that did it."""

    status: str
    at: str
    node: str

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "at": self.at, "node": self.node}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Transition:
        return cls(status=str(data["status"]), at=str(data["at"]), node=str(data["node"]))


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskState:
    """A run as seed 002's task module sees it: metadata, status and its history."""

    thread: str
    run: str
    status: str
    started_at: str
    updated_at: str
    metadata: dict[str, Any] = field(default_factory=dict)
    input: Any = None
    history: tuple[Transition, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread": self.thread,
            "run": self.run,
            "status": self.status,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "metadata": self.metadata,
            "input": self.input,
            "history": [t.to_dict() for t in self.history],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskState:
        return cls(
            thread=str(data["thread"]),
            run=str(data["run"]),
            status=str(data["status"]),
            started_at=str(data["started_at"]),
            updated_at=str(data["updated_at"]),
            metadata=dict(data.get("metadata") or {}),
            input=data.get("input"),
            history=tuple(Transition.from_dict(t) for t in data.get("history") or ()),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSummary:
    """One entry of the run index: where a run is and what it is waiting for."""

    thread: str
    run: str
    status: str
    started_at: str
    updated_at: str
    metadata: dict[str, Any] = field(default_factory=dict)
    pending: tuple[dict[str, Any], ...] = ()
    # The goal's sequence in its thread: orders two runs of a thread started in one
    # millisecond (0 in entries written before it was recorded).
    seq: int = 0

    @property
    def user(self) -> str | None:
        u = self.metadata.get("user")
        return u if isinstance(u, str) else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread": self.thread,
            "run": self.run,
            "status": self.status,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "metadata": self.metadata,
            "pending": [dict(p) for p in self.pending],
            "seq": self.seq,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSummary:
        return cls(
            thread=str(data["thread"]),
            run=str(data["run"]),
            status=str(data["status"]),
            started_at=str(data["started_at"]),
            updated_at=str(data["updated_at"]),
            metadata=dict(data.get("metadata") or {}),
            pending=tuple(dict(p) for p in data.get("pending") or ()),
            seq=int(data.get("seq") or 0),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunList:
    """A page of the run index, oldest run first; ``next_after`` continues it (None: last page)."""

    namespace: str
    runs: tuple[RunSummary, ...] = ()
    next_after: str | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "runs": [r.to_dict() for r in self.runs],
            "next_after": self.next_after,
            "counts": dict(self.counts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunList:
        return cls(
            namespace=str(data["namespace"]),
            runs=tuple(RunSummary.from_dict(r) for r in data.get("runs") or ()),
            next_after=data.get("next_after"),
            counts={str(k): int(v) for k, v in (data.get("counts") or {}).items()},
        )


# --------------------------------------------------------------------------- pure projection


def transitions(goal: CausalNode, nodes: Sequence[CausalNode]) -> list[Transition]:
    """A run's status history, from its goal and the thread's nodes after it (in sequence order).

    An inference and its tool calls commit together, so the status is read after the
    last of them, never in between (where it could look suspended for an instant).
    """
    run = run_of(goal)
    view = RunView(goal=goal)
    out = [Transition(status="running", at=goal.created_at, node=goal.id)]
    mine = [n for n in nodes if n.sequence > goal.sequence and run_of(n) == run]
    for i, n in enumerate(mine):
        view.add(n)
        if n.kind == "goal":
            continue
        nxt = mine[i + 1] if i + 1 < len(mine) else None
        if (
            nxt is not None
            and nxt.kind == "tool_call"
            and n.kind in ("inference", "tool_call")
            and nxt.payload.get("llm") is not None
        ):
            continue  # the rest of this round's calls are in the same commit
        status = view.status
        if status != out[-1].status:
            out.append(Transition(status=status, at=n.created_at, node=n.id))
    return out


def run_entry(view: RunView) -> dict[str, Any]:
    """The index payload of a run in the state ``view`` shows (without ``updated_at``).

    Neither the thread nor the run is in it: the entry lives in its thread's scope under
    ``task:<run>``, so a copy of the thread (a fork, an import under another id) can
    never carry a wrong one. Nor ``run``: a payload with ``run`` would tag the entry as
    one of the run's own nodes for every projection.
    """
    meta = view.goal.payload.get("metadata")
    status = view.status
    return {
        "status": status,
        "started_at": view.goal.created_at,
        "seq": view.goal.sequence,
        "metadata": dict(meta) if isinstance(meta, dict) else {},
        "pending": [{"call_id": c.call_id, "name": c.name} for c in view.pending()]
        if status == "suspended"
        else [],
    }


async def stage_entry(txn: Transaction, thread: str, view: RunView) -> None:
    """Append the run's index entry to ``txn``, in the run's own thread scope, with the
    time of the run's last status change (its node's own time, not the index node's)."""
    entry = run_entry(view)
    entry["updated_at"] = transitions(view.goal, view.nodes)[-1].at
    await txn.append(scopes.thread(thread), "resource", entry, resource_key=entry_key(view.run_id))


async def drop_entries(
    txn: Transaction, scope: str, entries: Mapping[str, CausalNode]
) -> list[str]:
    """Take the live ones of the index ``entries`` (resource heads of ``scope``) out of the
    index, in ``txn``; returns their keys."""
    dropped = []
    for key, head in entries.items():
        p = head.payload
        if isinstance(p, dict) and not p.get("deleted") and not is_erased(p):
            await txn.append(scope, "resource", {"deleted": True}, resource_key=key)
            dropped.append(key)
    return dropped


def summary_of(thread: str, run: str, payload: Any, updated_at: str) -> RunSummary | None:
    """The RunSummary an index entry's payload holds (None for a tombstone or an erased
    payload). Pure."""
    p = payload
    if not isinstance(p, dict) or p.get("deleted") or not isinstance(p.get("status"), str):
        return None
    return RunSummary(
        thread=thread,
        run=run,
        status=p["status"],
        started_at=str(p.get("started_at") or updated_at),
        updated_at=str(p.get("updated_at") or updated_at),
        metadata=dict(p.get("metadata") or {}),
        pending=tuple(dict(x) for x in p.get("pending") or ()),
        seq=p["seq"] if isinstance(p.get("seq"), int) else 0,
    )


def _legacy(key: str, node: CausalNode) -> RunSummary | None:
    """A run index entry of the layout before 0.x (``task:<len>:<thread>:<run>`` in app)."""
    p = node.payload
    if not isinstance(p, dict) or not isinstance(p.get("thread"), str):
        return None
    thread = p["thread"]
    if not key.startswith(thread_prefix(thread)) or not isinstance(p.get("run"), str):
        return None
    return summary_of(thread, p["run"], p, node.created_at)


def _order(s: RunSummary) -> tuple[str, str, int, str]:
    return (s.started_at, s.thread, s.seq, s.run)


def index_prefix(thread: str | None = None) -> str:
    """The resource key prefix of the index entries (in each thread's scope)."""
    if thread is not None:
        scopes.thread(thread)
    return INDEX_PREFIX


def page_runs(
    found: Iterable[RunSummary],
    *,
    namespace: str,
    status: str | Iterable[str] | None = None,
    user: str | None = None,
    after: str | None = None,
    limit: int = 100,
) -> RunList:
    """Filter, count and page index entries (what ``runs`` does after its one read). Pure."""
    wanted = _statuses(status)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RUNS:
        raise InvalidRequest(
            f"limit: an integer from 1 to {MAX_RUNS}, got {limit!r}", field="limit"
        )
    if user is not None:
        scopes.user(user)
    rows = sorted(found, key=_order)
    if user is not None:
        rows = [r for r in rows if r.user == user]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    if wanted is not None:
        rows = [r for r in rows if r.status in wanted]
    if after is not None:
        keys = [index_key(r.thread, r.run) for r in rows]
        if after not in keys:
            raise InvalidRequest(
                f"after: {after!r} is not a cursor of this listing; pass next_after from the "
                "previous page",
                field="after",
            )
        rows = rows[keys.index(after) + 1 :]
    page = rows[:limit]
    more = len(rows) > limit
    return RunList(
        namespace=namespace,
        runs=tuple(page),
        next_after=index_key(page[-1].thread, page[-1].run) if more and page else None,
        counts=dict(sorted(counts.items())),
    )


# --------------------------------------------------------------------------- reads


async def list_index(
    store: Store, namespace: str, *, thread: str | None = None
) -> list[RunSummary]:
    """Every indexed run (of one thread, or of the namespace), oldest first.

    One indexed read of the thread's ``task:`` heads, or for the namespace
    ``Store.resource_heads_across`` over every thread (one query on SQLite and
    PostgreSQL). An erased entry (its user's key destroyed) is left out. Entries a
    store written before the index moved into the threads still holds in ``app`` are
    read too, for runs without an entry of their own, until ``reindex`` removes them.
    """
    found: dict[tuple[str, str], RunSummary] = {}
    with erased_placeholders(True):
        if thread is not None:
            heads = await store.resource_heads(namespace, scopes.thread(thread), INDEX_PREFIX)
            for key, n in heads.items():
                s = summary_of(thread, key[len(INDEX_PREFIX) :], n.payload, n.created_at)
                if s is not None:
                    found[(s.thread, s.run)] = s
            legacy = await store.resource_heads(namespace, scopes.APP, thread_prefix(thread))
        else:
            after: tuple[str, str] | None = None
            while True:
                page = await store.resource_heads_across(
                    namespace, INDEX_PREFIX, scope_prefix="thread:", after=after, limit=_PAGE
                )
                for scope, key, n in page:
                    s = summary_of(scope[7:], key[len(INDEX_PREFIX) :], n.payload, n.created_at)
                    if s is not None:
                        found[(s.thread, s.run)] = s
                if len(page) < _PAGE:
                    break
                after = (page[-1][0], page[-1][1])
            legacy = await store.resource_heads(namespace, scopes.APP, INDEX_PREFIX)
        for key, n in legacy.items():
            s = _legacy(key, n)
            if s is not None and (s.thread, s.run) not in found:
                found[(s.thread, s.run)] = s
    return sorted(found.values(), key=_order)


def _statuses(status: str | Iterable[str] | None) -> frozenset[str] | None:
    if status is None:
        return None
    wanted = (status,) if isinstance(status, str) else tuple(status)
    for s in wanted:
        if s not in RUN_STATUSES:
            raise InvalidRequest(
                f"status: unknown run status {s!r}; use {', '.join(RUN_STATUSES)}", field="status"
            )
    return frozenset(wanted) or None


async def runs(
    store: Store,
    *,
    namespace: str = "default",
    status: str | Iterable[str] | None = None,
    thread: str | None = None,
    user: str | None = None,
    after: str | None = None,
    limit: int = 100,
) -> RunList:
    """Runs of a namespace from the run index, filtered by status (a name or several),
    thread and user, oldest first. ``after`` is the ``next_after`` of the previous page.

    ``counts`` has the number of matching runs per status before paging (the status
    filter aside), so a caller sees how many wait without listing them all.
    """
    from ..store.base import check_name

    check_name("namespace", namespace)
    _statuses(status)  # a bad status fails before anything is read
    return page_runs(
        await list_index(store, namespace, thread=thread),
        namespace=namespace,
        status=status,
        user=user,
        after=after,
        limit=limit,
    )


async def _thread_nodes(store: Store, namespace: str, thread: str) -> list[CausalNode]:
    from ..projections.reads import read_nodes

    scope = scopes.thread(thread)
    head = await store.head(namespace, scope)
    return await read_nodes(store, namespace, scope, after=0, before=head.sequence + 1)


def _views(nodes: list[CausalNode]) -> list[RunView]:
    return list(run_views(nodes).values())


async def task_states(
    store: Store, namespace: str, thread: str, *, nodes: list[CausalNode] | None = None
) -> list[TaskState]:
    """Every run of a thread with its metadata and status history, oldest first."""
    if nodes is None:
        nodes = await _thread_nodes(store, namespace, thread)
    out = []
    for view in _views(nodes):
        history = transitions(view.goal, nodes)
        meta = view.goal.payload.get("metadata")
        out.append(
            TaskState(
                thread=thread,
                run=view.run_id,
                status=history[-1].status,
                started_at=view.goal.created_at,
                updated_at=history[-1].at,
                metadata=dict(meta) if isinstance(meta, dict) else {},
                input=view.goal.payload.get("input"),
                history=tuple(history),
            )
        )
    return out


async def task(store: Store, namespace: str, thread: str, run: str | None = None) -> TaskState:
    """One run's ``TaskState`` (the thread's latest run without ``run``); ``NotFound`` if the
    thread has no such run."""
    from ..core.erased import erased_placeholders
    from ..store.base import check_name

    check_name("namespace", namespace)
    scopes.thread(thread)
    with erased_placeholders(False):  # an erased run is KeyErased, never "no such run"
        states = await task_states(store, namespace, thread)
    if run is None:
        if not states:
            raise NotFound(f"thread {thread!r} has no runs", thread=thread)
        return states[-1]
    for t in states:
        if t.run == run:
            return t
    from .prune import pruned_run

    if (gone := await pruned_run(store, namespace, thread, run)) is not None:
        raise gone
    raise NotFound(
        f"thread {thread!r} has no run {run!r}; list its runs with runs(thread=...)",
        thread=thread,
        run=run,
    )


async def pending_approvals(store: Store, namespace: str, thread: str) -> list[PendingApproval]:
    """The tool calls of the thread's latest run that wait for a human decision (approve or
    reject them by ``call_id``); empty when it waits for nothing.

    Reads the thread from its tail back to the latest goal (the run's size, not the
    thread's), as the runtime does; no agent is needed to see what waits.
    """
    from ..core.erased import erased_placeholders
    from ..projections.reads import read_tail
    from ..store.base import check_name

    check_name("namespace", namespace)
    scope = scopes.thread(thread)
    head = await store.head(namespace, scope)
    with erased_placeholders(False):  # calls come from real payloads: KeyErased if erased
        nodes = await read_tail(
            store,
            namespace,
            scope,
            after=0,
            before=head.sequence + 1,
            enough=lambda ns: any(is_run_goal(n) for n in ns),
        )
    goal = next((n for n in reversed(nodes) if is_run_goal(n)), None)
    if goal is None:
        return []
    return [c.approval() for c in RunView.derive(goal, nodes).pending()]


# --------------------------------------------------------------------------- index upkeep


async def index_thread(store: Store, namespace: str, thread: str) -> int:
    """Bring the index entries of one thread (in its own scope) in line with its runs;
    returns entries written. One commit, against the head it read (a run moving
    meanwhile makes it read again)."""
    scope = scopes.thread(thread)

    async def build(txn: Transaction) -> int:
        head = await txn.head(scope)
        from ..projections.reads import read_nodes

        nodes = await read_nodes(store, namespace, scope, after=0, before=head.sequence + 1)
        with erased_placeholders(True):
            current = await store.resource_heads(namespace, scope, INDEX_PREFIX)
        # An entry written here (an import, a fork, a reindex) carries the run's own time
        # of its last status change, not the time of this commit; an entry already right
        # (the runtime writes it in the commit of the change) is left as it is.
        of_run: dict[Any, list[CausalNode]] = {}
        for n in nodes:
            of_run.setdefault(run_of(n), []).append(n)
        written = 0
        live = set()
        for view in _views(nodes):
            key = entry_key(view.run_id)
            live.add(key)
            entry = run_entry(view)
            old = current.get(key)
            p = old.payload if old is not None and isinstance(old.payload, dict) else None
            if p is None or {k: v for k, v in p.items() if k != "updated_at"} != entry:
                entry["updated_at"] = transitions(view.goal, of_run.get(view.run_id, []))[-1].at
                await txn.append(scope, "resource", entry, resource_key=key)
                written += 1
        stale = {k: h for k, h in current.items() if k not in live}
        if stale:
            # A run a prune cut (its nodes gone, its entry kept: tether.control.prune)
            # stays listed, as the prune left it.
            from .prune import PRUNE_KEY, record_cut_run

            with erased_placeholders(True):
                records = await store.versions(namespace, scope, PRUNE_KEY, limit=1_000_000)
            stale = {
                k: h
                for k, h in stale.items()
                if not any(record_cut_run(r, k[len(INDEX_PREFIX) :]) for r in records)
            }
        return written + len(await drop_entries(txn, scope, stale))

    return await transact(store, namespace, build)


async def _drop_legacy(store: Store, namespace: str, prefix: str, user: str | None = None) -> int:
    """Take the legacy app entries under ``prefix`` (of ``user`` only, if given) out."""

    async def build(txn: Transaction) -> int:
        with erased_placeholders(True):
            current = await store.resource_heads(namespace, scopes.APP, prefix)
        if user is not None:
            current = {
                k: n
                for k, n in current.items()
                if (s := _legacy(k, n)) is not None and s.user == user
            }
        if not current:
            return 0
        await txn.head(scopes.APP)  # pinned: an entry written meanwhile makes this read again
        return len(await drop_entries(txn, scopes.APP, current))

    return await transact(store, namespace, build)


async def unindex_thread(store: Store, namespace: str, thread: str) -> int:
    """Take every run of a (reset) thread out of the index; returns entries removed.

    A reset of the thread already took its own entries with its nodes; this removes
    what the thread scope still holds (a reset of some stores only) and the thread's
    legacy entries in ``app``.
    """
    scope = scopes.thread(thread)

    async def build(txn: Transaction) -> int:
        await txn.head(scope)
        with erased_placeholders(True):
            current = await store.resource_heads(namespace, scope, INDEX_PREFIX)
        return len(await drop_entries(txn, scope, current))

    return await transact(store, namespace, build) + await _drop_legacy(
        store, namespace, thread_prefix(thread)
    )


async def unindex_user(store: Store, namespace: str, user: str) -> int:
    """Take every readable run entry of ``user`` out of the index; returns entries removed.

    An entry lives in its thread's scope, under the key the thread is encrypted with:
    once the user is erased (``tether.crypto.erase_user``) the entries of threads bound
    to the user read as erased and are skipped by every listing. What this removes is
    what is still readable: entries with ``metadata.user == user`` in threads not bound
    to the user (written under the namespace key) and legacy entries in ``app``.
    """
    scopes.user(user)
    by_thread: dict[str, dict[str, CausalNode]] = {}
    after: tuple[str, str] | None = None
    with erased_placeholders(True):
        while True:
            page = await store.resource_heads_across(
                namespace, INDEX_PREFIX, scope_prefix="thread:", after=after, limit=_PAGE
            )
            for scope, key, node in page:
                s = summary_of(scope[7:], key[len(INDEX_PREFIX) :], node.payload, node.created_at)
                if s is not None and s.user == user:
                    by_thread.setdefault(scope, {})[key] = node
            if len(page) < _PAGE:
                break
            after = (page[-1][0], page[-1][1])
    n = 0
    for scope, entries in by_thread.items():

        async def build(txn: Transaction, scope: str = scope, keys: Iterable[str] = entries) -> int:
            await txn.head(scope)
            with erased_placeholders(True):
                current = await store.resource_heads(namespace, scope, INDEX_PREFIX)
            mine = {
                k: h
                for k in keys
                if (h := current.get(k)) is not None
                and (s := summary_of("", k, h.payload, h.created_at)) is not None
                and s.user == user
            }
            return len(await drop_entries(txn, scope, mine))

        n += await transact(store, namespace, build)
    return n + await _drop_legacy(store, namespace, INDEX_PREFIX, user)


async def reindex(store: Store, namespace: str) -> int:
    """Rebuild the run index from every thread of the namespace; returns entries written.

    Each thread's entries are rebuilt in its own scope; the entries of the layout before
    (``task:<len>:<thread>:<run>`` in ``app``) are then taken out, so afterwards the
    listing reads the threads only.
    """
    threads: list[str] = []
    after: str | None = None
    while True:
        page = await store.list_scopes(namespace, prefix="thread:", after=after, limit=500)
        threads += [s.scope[7:] for s in page]
        if len(page) < 500:
            break
        after = page[-1].scope
    written = 0
    for t in threads:
        try:
            written += await index_thread(store, namespace, t)
        except KeyErased:
            continue  # an erased user's thread: its runs (and entries) are gone with the key
    return written + await _drop_legacy(store, namespace, INDEX_PREFIX)
