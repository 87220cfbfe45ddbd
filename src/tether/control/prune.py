"""Prune: physically remove the nodes of a scope that nothing current needs (issue 43).

    plan = await control.prune(store, namespace="acme", thread="t1", dry_run=True)
    plan.nodes, plan.payload_bytes, plan.to_dict()        # what it would free
    await control.prune(store, namespace="acme", thread="t1", keep_versions=3)

What goes (``plan_prune``, pure, over the scope's nodes):

* **what a summary stands for** (``compacted``, on by default): every node of a
  finished run (it has an answer or a protocol_error) that lies wholly at or before
  the ``through`` of the current summary of every LLM node of the thread, with its
  step records (``run:<run>:node:*``). A view reads from its summary on, so none of
  them is shown again. Its run index entry stays: the runs listing still lists it.
* **old versions** (``keep_versions=N``): versions of variables (``var:``), memories
  (``semantic:``, not summaries, whose older versions undo a compaction), the reads
  recorded for a memory's TTL (``ttl:``) and run index entries (``task:``, of a run
  that is over), older than the newest N.
* **finished runs older than a date** (``finished_before``): of a run finished
  before it, the nodes no view shows (its tool_call and verification nodes); when a
  summary stands for it, all of it, and its run index entry, every version: the runs
  listing no longer lists it (nor a run an earlier prune cut, once over before the date).

A run is touched only once it is over: it has an answer or a protocol_error and every
tool call of it has a result (so nothing of it waits for approval or runs). What
always stays: the frontier; the current version of every resource key (every
variable, memory, system prompt, summary, step record and run index entry) but the
index entries and step records of runs cut as above; every node of a run that is not
over, and of the thread's latest run (so a pending approval, an unfinished tool call
and the execution state of the run in progress are never touched); anything outside a
run. So every current projection (each LLM's view from its summary on, the variables,
the memories, the runs that can still move) reads the same after a prune as before
(tests/test_prune.py checks it over random threads). A run cut, asked for by id,
raises ``RunPruned`` (a ``NotFound``, code ``run_pruned``).

``forget_runs`` forgets every pruned run id so far: the record keeps no tag of the runs
this prune cuts, and it stands for the scope's earlier prune records, cut with the rest
(their tags go too, and its digest covers theirs): it holds what the scope lacks, all of
it. Those ids then answer a plain ``NotFound``, as an id never seen, and the index
entries of every run whose goal is gone go (the runs listing forgets them; ``reindex``
would). The record then no longer grows with the runs cut (8 bytes each).

The cut is committed as one node of the scope, kind ``resource`` and resource key
``prune``: what was cut (the sequences as ranges, the ids of those a remaining node
names as a parent, the count, the bytes, a digest of the cut nodes: SHA-256 of their
canonical snapshot form in sequence order, and the runs cut as 8-byte tags; ranges,
ids and tags packed: ``prune_record_payload``), so ``verify`` still proves every node
that remains and an export says what it lacks. The store removes the nodes, bumps the
scope's generation (fenced like a reset: a writer that computed against the old head
gets a ``Conflict``, and every process's kept views are read again) and appends the
record, atomically: after a crash the scope is as before or as after.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import functools
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..core import scopes
from ..core.canonical import canonical_json
from ..core.errors import Conflict, InvalidRequest, RunPruned
from ..core.graph import CausalNode, make_node
from ..core.validate import Pruned
from ..projections.projection import SummaryContent, summary_key
from ..projections.reads import read_nodes
from ..projections.runs import STEP_PREFIX
from ..store.base import Head, Store, check_name
from .tasks import INDEX_PREFIX

__all__ = [
    "PRUNE_KEY",
    "PrunePlan",
    "PruneResult",
    "plan_prune",
    "prune",
    "prune_record_payload",
    "prune_selected",
    "pruned_of",
    "pruned_run",
    "pruned_scope",
    "record_cut_run",
]

PRUNE_KEY: Final = "prune"  # resource key of a scope's prune records
_VERSIONED = ("var:", "semantic:", "ttl:")  # ttl: a memory's last read (retention)
_SUMMARY = "semantic:summary:"
# Nodes of a finished run that no view shows (the inference holds its calls).
_BOOKKEEPING = frozenset({"tool_call", "verification"})


@dataclass(frozen=True, kw_only=True, slots=True)
class PrunePlan:
    """What a prune of one scope removes: the nodes' sequences (ascending), the ids of
    those a remaining node names as a parent, and their count and payload bytes."""

    scope: str
    sequences: tuple[int, ...] = ()
    parents_cut: tuple[str, ...] = ()
    payload_bytes: int = 0
    digest: str = ""
    reasons: dict[str, int] = field(default_factory=dict)  # reason -> nodes
    runs: tuple[str, ...] = ()  # the runs whose goal it cuts
    # forget_runs: the record keeps no run tags and stands for every earlier record (cut
    # with the rest): ``lacks`` is what the scope lacks after, all of it, as ranges, and
    # ``parents_cut`` every cut id a remaining node or the record names; ``forgotten``
    # counts the run ids no record will hold any more (these runs and the earlier tags).
    forget_runs: bool = False
    lacks: tuple[tuple[int, int], ...] = ()
    forgotten: int = 0

    @property
    def nodes(self) -> int:
        return len(self.sequences)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "nodes": self.nodes,
            "payload_bytes": self.payload_bytes,
            "reasons": dict(self.reasons),
            "digest": self.digest,
            "forget_runs": self.forget_runs,
            "forgotten_runs": self.forgotten,
        }


def _run(n: CausalNode) -> str | None:
    p = n.payload
    r = p.get("run") if isinstance(p, dict) else None
    return r if isinstance(r, str) else None


def _llm(n: CausalNode) -> str | None:
    p = n.payload
    v = p.get("llm") if isinstance(p, dict) else None
    return v if isinstance(v, str) else None


def _through(nodes: Sequence[CausalNode]) -> int:
    """The sequence up to which every LLM node's current summary stands (0: none)."""
    llms: set[str] = set()
    summaries: dict[str, CausalNode] = {}
    for n in nodes:
        if n.kind in ("goal", "inference"):
            llm = _llm(n)
            if llm is not None:
                llms.add(llm)
        if n.resource_key is not None and n.resource_key.startswith(_SUMMARY):
            summaries[n.resource_key] = n  # the newest wins: sequence order
    if not llms:
        return 0
    through = None
    for llm in llms:
        node = summaries.get(summary_key(llm))
        s = None
        if node is not None and isinstance(node.payload, dict):
            s = SummaryContent.parse(node.payload.get("content"))
        t = s.through if s is not None else 0
        through = t if through is None else min(through, t)
    return through or 0


def plan_prune(
    scope: str,
    nodes: Sequence[CausalNode],
    frontier: Iterable[str],
    *,
    compacted: bool = True,
    keep_versions: int | None = None,
    finished_before: str | None = None,
    forget_runs: bool = False,
    payload_size: Any = None,
) -> PrunePlan:
    """The nodes of ``scope`` (all of them, in sequence order) that a prune removes.

    ``finished_before``: an ISO 8601 timestamp compared with the nodes' createdAt (as
    tether writes them, UTC with a ``Z``). ``forget_runs``: also the scope's earlier
    prune records (the new one stands for them, without run tags) and the index
    entries of every run whose goal is gone. ``payload_size(node) -> int`` counts the
    bytes freed (default: the length of the payload's canonical JSON).
    """
    if type(forget_runs) is not bool:
        raise InvalidRequest(f"forget_runs is a boolean, got {forget_runs!r}", field="forget_runs")
    if keep_versions is not None and (type(keep_versions) is not int or keep_versions < 1):
        raise InvalidRequest(
            f"keep_versions is an integer >= 1 (the newest versions kept), got {keep_versions!r}",
            field="keep_versions",
        )
    if finished_before is not None and not isinstance(finished_before, str):
        raise InvalidRequest(
            f"finished_before is an ISO 8601 timestamp, got {finished_before!r}",
            field="finished_before",
        )
    keep: set[int] = set()
    front = set(frontier)
    heads: dict[str, int] = {}
    versions: dict[str, list[CausalNode]] = {}
    runs: dict[str, list[CausalNode]] = {}
    goals: set[str] = set()
    finished: set[str] = set()
    calls: dict[str, str] = {}  # tool_call id -> its run, until a result names it
    latest: str | None = None
    for n in nodes:
        if n.id in front:
            keep.add(n.sequence)
        rk = n.resource_key
        if rk is not None:
            heads[rk] = n.sequence
            versions.setdefault(rk, []).append(n)
        r = _run(n)
        if r is None:
            if rk is None:
                keep.add(n.sequence)  # outside any run, not a version: stays
            continue
        runs.setdefault(r, []).append(n)
        if n.kind == "goal":
            latest = r
            goals.add(r)
        elif n.kind in ("answer", "protocol_error"):
            finished.add(r)
        elif n.kind == "tool_call":
            calls[n.id] = r
        elif n.kind == "tool_result":
            for p in n.parents:
                calls.pop(p, None)
    open_calls = set(calls.values())
    # A run prune may touch: its goal is here, it ended, and no tool call of it waits for
    # a result (so nothing of it waits for approval or runs).
    done = {r for r in goals if r in finished and r not in open_calls}
    keep.update(heads.values())

    cut: dict[int, str] = {}  # sequence -> reason
    dropped: list[str] = []  # runs whose index entry goes, every version of it
    through = _through(nodes) if compacted or finished_before is not None else 0
    for r, members in runs.items():
        if r not in done or r == latest:
            continue
        covered = through > 0 and members[-1].sequence <= through
        old = finished_before is not None and max(n.created_at for n in members) < finished_before
        if covered and (compacted or old):
            why = "compacted" if compacted else "finished_before"
            for n in members:
                cut.setdefault(n.sequence, why)
            if old:
                dropped.append(r)
        elif old:
            for n in members:
                if n.kind in _BOOKKEEPING:
                    cut.setdefault(n.sequence, "finished_before")
    entries = {rk: vs for rk, vs in versions.items() if rk.startswith(INDEX_PREFIX)}
    drop_keys = {INDEX_PREFIX + r for r in dropped}
    # A run cut whole takes its step records (``run:<run>:node:*``) with it: only its
    # own view reads them.
    whole = {r for r, members in runs.items() if members[0].sequence in cut}
    for rk in versions:
        end = rk.find(":node:", len(STEP_PREFIX))
        if rk.startswith(STEP_PREFIX) and end > 0 and rk[len(STEP_PREFIX) : end] in whole:
            drop_keys.add(rk)
    if finished_before is not None:
        # An entry whose run an earlier prune cut (its goal is gone): out of the index
        # too once that run ended before the date.
        for rk, vs in entries.items():
            r = rk[len(INDEX_PREFIX) :]
            if r not in goals and _entry_done(vs[-1]) and vs[-1].created_at < finished_before:
                drop_keys.add(rk)
    for rk in drop_keys:
        for n in versions.get(rk, ()):
            cut.setdefault(n.sequence, cut.get(n.sequence) or "finished_before")
            keep.discard(n.sequence)  # the head too: the key goes whole
    if keep_versions is not None:
        for rk, vs in versions.items():
            if rk in drop_keys:
                continue
            if rk.startswith(INDEX_PREFIX):
                r = rk[len(INDEX_PREFIX) :]
                if not (r in done if r in goals else _entry_done(vs[-1])):
                    continue  # a run that can still move keeps its entry's history
            elif not rk.startswith(_VERSIONED) or rk.startswith(_SUMMARY):
                continue
            for n in vs[:-keep_versions]:
                cut.setdefault(n.sequence, "old_versions")
    for s in keep:
        cut.pop(s, None)
    for n in nodes:
        if n.id in front:
            cut.pop(n.sequence, None)  # the frontier always stays
    # The runs whose goal goes (asked for by id, each says it was pruned).
    gone_runs = sorted(
        r for r, members in runs.items() if r in goals and members[0].sequence in cut
    )
    if not forget_runs:
        return plan_selected(scope, nodes, cut, payload_size=payload_size, runs=gone_runs)
    return _plan_forget(scope, nodes, front, cut, versions, goals, gone_runs, payload_size)


def _plan_forget(
    scope: str,
    nodes: Sequence[CausalNode],
    front: set[str],
    cut: dict[int, str],
    versions: Mapping[str, list[CausalNode]],
    goals: set[str],
    gone_runs: Sequence[str],
    payload_size: Any,
) -> PrunePlan:
    """``forget_runs``: ``cut`` and with it the index entries (every version) of each run
    whose goal is gone (cut now or by an earlier prune; not one in the frontier), and,
    when there is anything to do, the earlier prune records, which the new one stands
    for: what the scope lacks after, whole, and no run tags."""
    left = goals - set(gone_runs)
    for rk, vs in versions.items():
        run = rk[len(INDEX_PREFIX) :]
        if rk.startswith(INDEX_PREFIX) and run not in left and not any(n.id in front for n in vs):
            for n in vs:
                cut.setdefault(n.sequence, "forget_runs")
    records = versions.get(PRUNE_KEY, [])
    tags = sum(_tag_count(r) for r in records)
    if not cut and not tags:
        return PrunePlan(scope=scope, forget_runs=True)
    for r in records:
        cut[r.sequence] = "prune_records"  # the frontier too: the new record names it
    earlier = pruned_of(records)
    plan = plan_selected(
        scope,
        nodes,
        cut,
        payload_size=payload_size,
        runs=gone_runs,
        earlier=earlier.parents,
        named=front,
    )
    lacks = _merge([*earlier.ranges, *ranges(plan.sequences)])
    return dataclasses.replace(
        plan, forget_runs=True, lacks=tuple(lacks), forgotten=len(gone_runs) + tags
    )


def _merge(spans: Iterable[Sequence[int]]) -> list[tuple[int, int]]:
    """[first, last] ranges, sorted and merged where they touch or overlap."""
    merged: list[tuple[int, int]] = []
    for a, b in sorted((s[0], s[1]) for s in spans):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def _tag_count(record: CausalNode) -> int:
    """How many run tags a prune record holds."""
    return len(_tags(record)) // 8


def _entry_done(head: CausalNode) -> bool:
    """Whether a run index entry (its head) says the run is over: completed or failed and
    waiting for nothing, or taken out of the index."""
    p = head.payload
    if not isinstance(p, dict):
        return False
    if p.get("deleted") is True:
        return True
    return p.get("status") in ("completed", "failed") and not p.get("pending")


def digest(nodes: Iterable[CausalNode]) -> str:
    """SHA-256 of the nodes' canonical snapshot form, in the order given."""
    h = hashlib.sha256()
    for n in nodes:
        h.update(canonical_json(n.to_dict()))
        h.update(b"\n")
    return "sha256:" + h.hexdigest()


def ranges(sequences: Sequence[int]) -> list[list[int]]:
    """Ascending sequences as [first, last] ranges: [1, 2, 3, 7] -> [[1, 3], [7, 7]]."""
    out: list[list[int]] = []
    for s in sequences:
        if out and out[-1][1] == s - 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def _run_tag(run: str) -> bytes:
    """A run's 8-byte tag in a prune record: the start of the SHA-256 of its id."""
    return hashlib.sha256(run.encode()).digest()[:8]


def pack_runs(runs: Iterable[str]) -> dict[str, Any]:
    """The runs a prune cut, as its record holds them: how many, and their tags (sorted,
    base64) rather than their ids, 11 bytes a run (a run id is 28)."""
    tags = sorted({_run_tag(r) for r in runs})
    return {"count": len(tags), "sha256_64": base64.b64encode(b"".join(tags)).decode()}


def _tags(record: CausalNode) -> bytes:
    """The run tags a prune record holds, concatenated (none: empty)."""
    p = record.payload.get("pruned") if isinstance(record.payload, dict) else None
    runs = p.get("runs") if isinstance(p, dict) else None
    packed = runs.get("sha256_64") if isinstance(runs, dict) else None
    if not isinstance(packed, str):
        return b""
    try:
        return base64.b64decode(packed, validate=True)
    except ValueError:
        return b""


def record_cut_run(record: CausalNode, run: str) -> bool:
    """Whether the prune ``record`` says it cut run ``run`` (its goal and all); a record
    of a prune with ``forget_runs`` says it of none."""
    tags = _tags(record)
    tag = _run_tag(run)
    return any(tags[i : i + 8] == tag for i in range(0, len(tags) - 7, 8))


async def pruned_run(store: Store, namespace: str, thread: str, run: str) -> RunPruned | None:
    """The ``RunPruned`` error for run ``run`` of ``thread`` if a prune cut it, else None:
    what a lookup of a run by id raises in place of a plain ``NotFound``."""
    records = await store.versions(namespace, scopes.thread(thread), PRUNE_KEY, limit=1_000_000)
    for r in reversed(records):
        if record_cut_run(r, run):
            return RunPruned(
                f"run {run!r} of thread {thread!r} was pruned: its nodes are gone for good "
                f"(prune record {r.id}, {r.created_at})",
                thread=thread,
                run=run,
                record=r.id,
            )
    return None


def pack_ranges(sequences: Sequence[int]) -> list[int]:
    """Ascending sequences as a flat list of small numbers: the first sequence and the
    length of its range (last - first), then for each next range the gap from the end of
    the one before (first - previous last) and its length. [1, 2, 3, 7] -> [1, 2, 4, 0]."""
    return pack_spans(ranges(sequences))


def pack_spans(spans: Iterable[Sequence[int]]) -> list[int]:
    """Ascending, apart [first, last] ranges packed as ``pack_ranges`` packs them."""
    out: list[int] = []
    end = 0
    for a, b in spans:
        out += [a - end, b - a]
        end = b
    return out


def unpack_ranges(packed: Any) -> list[tuple[int, int]] | None:
    """``pack_ranges`` read back as [first, last] ranges; None if it is not one."""
    if not isinstance(packed, list) or len(packed) % 2 or any(type(x) is not int for x in packed):
        return None
    out: list[tuple[int, int]] = []
    end = 0
    for i in range(0, len(packed), 2):
        gap, length = packed[i], packed[i + 1]
        if gap < 1 or length < 0:
            return None
        out.append((end + gap, end + gap + length))
        end += gap + length
    return out


def pack_ids(ids: Iterable[str]) -> str:
    """Node ids (``cw_`` + 24 hex digits), sorted, as the base64 of their 12 bytes each:
    16 characters an id in place of 30 in a JSON list."""
    return base64.b64encode(b"".join(bytes.fromhex(i[3:]) for i in sorted(ids))).decode()


def unpack_ids(packed: Any) -> list[str] | None:
    """``pack_ids`` read back; None if it is not one."""
    if not isinstance(packed, str):
        return None
    try:
        raw = base64.b64decode(packed, validate=True)
    except ValueError:
        return None
    if len(raw) % 12:
        return None
    return ["cw_" + raw[i : i + 12].hex() for i in range(0, len(raw), 12)]


def prune_record_payload(plan: PrunePlan, options: Mapping[str, Any]) -> dict[str, Any]:
    """The payload of the ``prune`` record a prune commits: what was cut, packed
    (``pack_ranges``, ``pack_ids``, ``pack_runs``), and the options.

    With ``forget_runs`` the runs are a count, no tags, and the ranges and ids are what
    the scope lacks after, all of it: the record stands for the earlier ones (cut with
    the rest, so its digest covers theirs)."""
    return {
        "pruned": {
            "nodes": plan.nodes,
            "ranges": pack_spans(plan.lacks) if plan.forget_runs else pack_ranges(plan.sequences),
            "parents": pack_ids(plan.parents_cut),
            "payload_bytes": plan.payload_bytes,
            "digest": plan.digest,
            "reasons": dict(plan.reasons),
            "runs": {"count": len(plan.runs)} if plan.forget_runs else pack_runs(plan.runs),
        },
        "options": dict(options),
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class PruneResult:
    """What ``prune`` did (or, with ``dry_run``, would do) to one scope."""

    namespace: str
    scope: str
    dry_run: bool
    nodes: int
    payload_bytes: int
    reasons: dict[str, int] = field(default_factory=dict)
    digest: str = ""
    runs: int = 0  # runs whose goal it cut (asked for by id, each says it was pruned)
    record: str | None = None  # the id of the prune record committed (None: none)
    generation: int = 0  # the scope's generation after (a prune bumps it)
    # forget_runs: the run ids no prune record holds any more (they answer a plain
    # NotFound): the runs this prune cuts and those earlier prunes remembered.
    forget_runs: bool = False
    forgotten_runs: int = 0
    operation: str = field(default="prune", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "namespace": self.namespace,
            "scope": self.scope,
            "dry_run": self.dry_run,
            "nodes": self.nodes,
            "payload_bytes": self.payload_bytes,
            "reasons": dict(self.reasons),
            "digest": self.digest,
            "runs": self.runs,
            "record": self.record,
            "generation": self.generation,
            "forget_runs": self.forget_runs,
            "forgotten_runs": self.forgotten_runs,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PruneResult:
        return cls(
            namespace=data["namespace"],
            scope=data["scope"],
            dry_run=bool(data["dry_run"]),
            nodes=data["nodes"],
            payload_bytes=data["payload_bytes"],
            reasons=dict(data.get("reasons", {})),
            digest=data.get("digest", ""),
            runs=data.get("runs", 0),
            record=data.get("record"),
            generation=data.get("generation", 0),
            forget_runs=bool(data.get("forget_runs", False)),
            forgotten_runs=data.get("forgotten_runs", 0),
        )


_ATTEMPTS: Final = 5


async def prune(
    store: Store,
    namespace: str,
    *,
    thread: str | None = None,
    user: str | None = None,
    compacted: bool = True,
    keep_versions: int | None = None,
    finished_before: str | None = None,
    forget_runs: bool = False,
    dry_run: bool = False,
) -> PruneResult:
    """Prune one scope (``thread``, ``user``, or with neither the ``app`` scope): see the
    module docstring. ``dry_run`` plans only and says what it would free.

    ``forget_runs``: forget every pruned run id so far. The record keeps no tag of the
    runs this prune cuts and stands for the earlier records, cut with the rest (their
    tags go too): those ids then answer a plain ``NotFound``, as an id never seen, and
    their index entries go (the runs listing forgets them). ``verify``, export and
    import hold as after any prune. Off by default: a pruned run says so (``RunPruned``).

    Reads the scope, plans, and commits the cut against the head it read: a writer
    that moved the scope meanwhile makes it plan again (a few times, then
    ``Conflict``); a writer that computed against the head before the prune gets a
    ``Conflict``. Raises ``InvalidRequest`` for bad options, before anything is read.
    """
    check_name("namespace", namespace)
    if thread is not None and user is not None:
        raise InvalidRequest("prune one scope: thread= or user=, not both", field="user")
    scope = (
        scopes.thread(thread)
        if thread is not None
        else scopes.user(user)
        if user is not None
        else scopes.APP
    )
    if type(compacted) is not bool or type(dry_run) is not bool:
        raise InvalidRequest("compacted and dry_run are booleans", field="compacted")
    if type(forget_runs) is not bool:
        raise InvalidRequest(f"forget_runs is a boolean, got {forget_runs!r}", field="forget_runs")
    if finished_before is not None:
        finished_before = _timestamp(finished_before)
    options: dict[str, Any] = {
        "compacted": compacted,
        "keep_versions": keep_versions,
        "finished_before": finished_before,
    }
    if forget_runs:
        options["forget_runs"] = True  # in the record only when set: older ones read alike
    plan_prune(scope, (), (), **options)  # the options' own checks, before any read
    for _ in range(_ATTEMPTS):
        head = await store.head(namespace, scope)
        nodes = await read_nodes(store, namespace, scope, after=0, before=head.sequence + 1)
        plan = plan_prune(scope, nodes, head.frontier, **options)
        done = await _cut(store, namespace, scope, head, plan, options, dry_run=dry_run)
        if done is not None:
            return done
    raise Conflict(f"{scope!r} kept moving while it was pruned; nothing was cut, retry")


async def _cut(
    store: Store,
    namespace: str,
    scope: str,
    head: Head,
    plan: PrunePlan,
    options: Mapping[str, Any],
    *,
    dry_run: bool,
) -> PruneResult | None:
    """Commit ``plan`` (planned at ``head``) with its record, or only report it (a dry
    run, or nothing to cut); None when the scope moved meanwhile: plan again."""
    result = functools.partial(
        PruneResult,
        namespace=namespace,
        scope=scope,
        nodes=plan.nodes,
        payload_bytes=plan.payload_bytes,
        reasons=plan.reasons,
        digest=plan.digest,
        runs=len(plan.runs),
        forget_runs=plan.forget_runs,
        forgotten_runs=plan.forgotten,
    )
    if dry_run or not plan.sequences:
        return result(dry_run=dry_run, generation=head.generation)
    previous = await store.resource_head(namespace, scope, PRUNE_KEY)
    if plan.forget_runs:
        previous = None  # cut with the rest: the record stands for it
    parents = sorted({*head.frontier, *([previous.id] if previous is not None else [])})
    record = make_node(
        "resource",
        prune_record_payload(plan, options),
        parents,
        sequence=head.sequence + 1,
        resource_key=PRUNE_KEY,
    )
    try:
        after = await store.prune(
            namespace, scope, expected=head, sequences=plan.sequences, record=record
        )
    except Conflict:
        return None
    return result(dry_run=False, record=record.id, generation=after.generation)


def _timestamp(value: Any) -> str:
    """An ISO 8601 timestamp as tether writes createdAt (UTC, milliseconds, ``Z``)."""
    if not isinstance(value, str):
        raise InvalidRequest(
            f"finished_before is an ISO 8601 timestamp, got {value!r}", field="finished_before"
        )
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequest(
            f"finished_before is an ISO 8601 timestamp, got {value!r}", field="finished_before"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    t = t.astimezone(dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def pruned_of(records: Iterable[CausalNode]) -> Pruned:
    """What the ``prune`` records of a scope (every version of its ``prune`` key) say it
    lacks, together: the sequences cut (merged ranges) and the cut ids a node names."""
    seqs: list[tuple[int, int]] = []
    parents: set[str] = set()
    for r in records:
        p = r.payload.get("pruned") if isinstance(r.payload, dict) else None
        if not isinstance(p, dict):
            continue
        packed = unpack_ranges(p.get("ranges"))
        if packed is not None:
            seqs += packed
        for pair in p.get("sequences") or ():  # a record written before they were packed
            if isinstance(pair, list) and len(pair) == 2 and all(type(x) is int for x in pair):
                seqs.append((pair[0], pair[1]))
        held = p.get("parents")
        ids = unpack_ids(held)
        if ids is None and isinstance(held, list):  # a record written before: the ids
            ids = [x for x in held if isinstance(x, str)]
        parents.update(ids or ())
    return Pruned(_merge(seqs), parents)


async def pruned_scope(store: Store, namespace: str, scope: str) -> Pruned:
    """What ``scope`` lacks after its prunes (empty: never pruned)."""
    return pruned_of(await store.versions(namespace, scope, PRUNE_KEY, limit=1_000_000))


def plan_selected(
    scope: str,
    nodes: Sequence[CausalNode],
    cut: Mapping[int, str],
    *,
    payload_size: Any = None,
    runs: Sequence[str] = (),
    earlier: Iterable[str] = (),
    named: Iterable[str] = (),
) -> PrunePlan:
    """A ``PrunePlan`` of the nodes whose sequences are ``cut`` (sequence -> reason);
    ``runs``: the runs whose goal it cuts. ``earlier``: ids cut before that the plan's
    ``parents_cut`` keeps where still named; ``named``: the ids the record will name."""
    if not cut:
        return PrunePlan(scope=scope)
    gone = [n for n in nodes if n.sequence in cut]
    remaining_parents = {p for n in nodes if n.sequence not in cut for p in n.parents}
    remaining_parents.update(named)
    size = payload_size or (lambda n: len(canonical_json(n.payload)))
    reasons: dict[str, int] = {}
    for why in cut.values():
        reasons[why] = reasons.get(why, 0) + 1
    return PrunePlan(
        scope=scope,
        sequences=tuple(sorted(cut)),
        parents_cut=tuple(sorted(({n.id for n in gone} | set(earlier)) & remaining_parents)),
        payload_bytes=sum(size(n) for n in gone),
        digest=digest(gone),
        reasons=reasons,
        runs=tuple(runs),
    )


async def prune_selected(
    store: Store,
    namespace: str,
    scope: str,
    select: Callable[[Sequence[CausalNode]], Mapping[int, str]],
    *,
    dry_run: bool = False,
) -> PruneResult:
    """Remove the nodes of ``scope`` that ``select`` names, as ``prune`` removes its own.

    For a layer that knows what its nodes need (a framework adapter): ``select(nodes)``
    gets every node of the scope in sequence order and returns the sequences to cut
    (sequence -> reason); the frontier always stays. The cut is recorded, fenced and
    atomic exactly as ``prune``'s (``verify`` and export still prove what remains);
    planned again if the scope moves meanwhile (a few times, then ``Conflict``)."""
    check_name("namespace", namespace)
    check_name("scope", scope)
    for _ in range(_ATTEMPTS):
        head = await store.head(namespace, scope)
        nodes = await read_nodes(store, namespace, scope, after=0, before=head.sequence + 1)
        front = set(head.frontier)
        wanted = select(nodes)
        cut = {n.sequence: wanted[n.sequence] for n in nodes if n.sequence in wanted}
        for n in nodes:
            if n.id in front:
                cut.pop(n.sequence, None)
        plan = plan_selected(scope, nodes, cut)
        done = await _cut(store, namespace, scope, head, plan, {"selected": True}, dry_run=dry_run)
        if done is not None:
            return done
    raise Conflict(f"{scope!r} kept moving while it was pruned; nothing was cut, retry")
