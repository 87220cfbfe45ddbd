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
index in the namespace's ``app`` graph: one ``resource`` node per status change,
resourceKey ``task:<len(thread)>:<thread>:<run>`` (the length makes the key
unambiguous whatever the ids hold, and gives every thread an indexed prefix),
payload ``{"thread", "run", "status", "started_at", "metadata", "pending"}``
(and ``updated_at`` when written after the fact: an import, a fork, a reindex)
(``pending``: ``[{"call_id", "name"}]`` of a suspended run). It is appended in the
same commit as the node that changed the status, so the index never disagrees
with the thread at a commit boundary. ``{"thread", "run", "deleted": true}``
takes a run out (its thread was reset). Listing is one indexed prefix read of
the app scope's resource heads; filtering by status happens over those heads.

The index is derived data: ``reindex`` rebuilds it from the threads (after an
``app`` reset, or for threads written before it existed), and import and fork
index the runs they bring.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..core import scopes
from ..core.errors import InvalidRequest, NotFound
from ..core.graph import CausalNode
from ..projections.runs import PendingApproval, RunView, run_of, run_views
from ..store.base import Store
from ..store.txn import Transaction, transact

__all__ = [
    "RUN_STATUSES",
    "RunList",
    "RunSummary",
    "TaskState",
    "Transition",
    "drop_entries",
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


def index_key(thread: str, run: str) -> str:
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


def run_entry(thread: str, view: RunView) -> dict[str, Any]:
    """The index payload of a run in the state ``view`` shows."""
    meta = view.goal.payload.get("metadata")
    status = view.status
    return {
        "thread": thread,
        "run": view.run_id,
        "status": status,
        "started_at": view.goal.created_at,
        "seq": view.goal.sequence,
        "metadata": dict(meta) if isinstance(meta, dict) else {},
        "pending": [{"call_id": c.call_id, "name": c.name} for c in view.pending()]
        if status == "suspended"
        else [],
    }


async def stage_entry(txn: Transaction, thread: str, view: RunView) -> None:
    """Append the run's index entry (to the app scope) to ``txn``, with the time of the
    run's last status change (its node's own time, not the index node's)."""
    entry = run_entry(thread, view)
    entry["updated_at"] = transitions(view.goal, view.nodes)[-1].at
    await txn.append(scopes.APP, "resource", entry, resource_key=index_key(thread, view.run_id))


async def _drop_entry(txn: Transaction, key: str, thread: Any, run: Any) -> None:
    await txn.append(
        scopes.APP,
        "resource",
        {"thread": thread, "run": run, "deleted": True},
        resource_key=key,
    )


async def drop_entries(txn: Transaction, entries: Mapping[str, CausalNode]) -> list[str]:
    """Take the live ones of the index ``entries`` (resource heads) out of the index, in
    ``txn``; returns their keys."""
    dropped = []
    for key, head in entries.items():
        p = head.payload
        if isinstance(p, dict) and not p.get("deleted"):
            await _drop_entry(txn, key, p.get("thread"), p.get("run"))
            dropped.append(key)
    return dropped


def summary_of(payload: Any, updated_at: str) -> RunSummary | None:
    """The RunSummary an index entry's payload holds (None for a tombstone). Pure."""
    p = payload
    if not isinstance(p, dict) or p.get("deleted") or not isinstance(p.get("status"), str):
        return None
    return RunSummary(
        thread=str(p.get("thread")),
        run=str(p.get("run")),
        status=p["status"],
        started_at=str(p.get("started_at") or updated_at),
        updated_at=str(p.get("updated_at") or updated_at),
        metadata=dict(p.get("metadata") or {}),
        pending=tuple(dict(x) for x in p.get("pending") or ()),
        seq=p["seq"] if isinstance(p.get("seq"), int) else 0,
    )


def _order(s: RunSummary) -> tuple[str, str, int, str]:
    return (s.started_at, s.thread, s.seq, s.run)


def _summary(node: CausalNode) -> RunSummary | None:
    return summary_of(node.payload, node.created_at)


def index_prefix(thread: str | None = None) -> str:
    """The resource key prefix of the whole index, or of one thread's runs."""
    return thread_prefix(scopes.thread(thread)[7:]) if thread is not None else INDEX_PREFIX


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
    """Every indexed run (of one thread, or of the namespace), oldest first. One indexed read."""
    heads = await store.resource_heads(namespace, scopes.APP, index_prefix(thread))
    found = [s for s in (_summary(n) for n in heads.values()) if s is not None]
    found.sort(key=_order)
    return found


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
    if not states:
        raise NotFound(f"thread {thread!r} has no runs", thread=thread)
    if run is None:
        return states[-1]
    for t in states:
        if t.run == run:
            return t
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
            enough=lambda ns: any(n.kind == "goal" for n in ns),
        )
    goal = next((n for n in reversed(nodes) if n.kind == "goal"), None)
    if goal is None:
        return []
    return [c.approval() for c in RunView.derive(goal, nodes).pending()]


# --------------------------------------------------------------------------- index upkeep


async def index_thread(store: Store, namespace: str, thread: str) -> int:
    """Bring the index entries of one thread in line with its runs; returns entries written."""
    nodes = await _thread_nodes(store, namespace, thread)
    views = _views(nodes)
    # An entry written here (an import, a fork, a reindex) carries the run's own time of
    # its last status change, not the time of this commit; an entry already right (the
    # runtime writes it in the commit of the change) is left as it is.
    of_run: dict[Any, list[CausalNode]] = {}
    for n in nodes:
        of_run.setdefault(run_of(n), []).append(n)
    changed = {v.run_id: transitions(v.goal, of_run.get(v.run_id, []))[-1].at for v in views}

    async def build(txn: Transaction) -> int:
        await txn.head(scopes.APP)
        current = await store.resource_heads(namespace, scopes.APP, thread_prefix(thread))
        written = 0
        live = set()
        for view in views:
            key = index_key(thread, view.run_id)
            live.add(key)
            entry = run_entry(thread, view)
            head = current.get(key)
            old = head.payload if head is not None and isinstance(head.payload, dict) else None
            if old is None or {k: v for k, v in old.items() if k != "updated_at"} != entry:
                entry["updated_at"] = changed[view.run_id]
                await txn.append(scopes.APP, "resource", entry, resource_key=key)
                written += 1
        stale = {k: h for k, h in current.items() if k not in live}
        return written + len(await drop_entries(txn, stale))

    return await transact(store, namespace, build)


async def unindex_thread(store: Store, namespace: str, thread: str) -> int:
    """Take every run of a (reset) thread out of the index; returns entries removed."""

    async def build(txn: Transaction) -> int:
        await txn.head(scopes.APP)
        current = await store.resource_heads(namespace, scopes.APP, thread_prefix(thread))
        return len(await drop_entries(txn, current))

    return await transact(store, namespace, build)


async def unindex_user(store: Store, namespace: str, user: str) -> int:
    """Take every run of ``user`` out of the index; returns entries removed.

    The index copies a run's metadata (the caller's, and its user id) into the app
    scope, which is encrypted with the namespace's key, not the user's: erasing a
    user (``tether.crypto.erase_user``) should call this too, so no copy outlives
    the erased threads.
    """
    scopes.user(user)

    async def build(txn: Transaction) -> int:
        await txn.head(scopes.APP)
        current = await store.resource_heads(namespace, scopes.APP, INDEX_PREFIX)
        n = 0
        for key, head in current.items():
            s = _summary(head)
            if s is not None and s.user == user:
                await _drop_entry(txn, key, s.thread, s.run)
                n += 1
        return n

    return await transact(store, namespace, build)


async def reindex(store: Store, namespace: str) -> int:
    """Rebuild the run index from every thread of the namespace; returns entries written."""
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
        written += await index_thread(store, namespace, t)
    known = set(threads)
    for t in {s.thread for s in await list_index(store, namespace)} - known:
        written += await unindex_thread(store, namespace, t)
    return written
