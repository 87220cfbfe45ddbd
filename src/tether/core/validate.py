"""Import validation (SPEC §1): check everything, repair nothing, stop at the first fault.

Linear in the snapshot's size: one pass to index ids, one pass per node that
canonicalises its payload once and recomputes its identity.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NoReturn

from . import strict_json
from .canonical import CanonicalError, canonical_json
from .errors import InvalidNode, InvalidSnapshot
from .graph import (
    ID_PATTERN,
    KINDS,
    SNAPSHOT_VERSION,
    CausalNode,
    Limits,
    _identity,
    check_semantic_payload,
    semantic_key,
)
from .vocab import Vocabulary

_NODE_KEYS = frozenset({"id", "kind", "parents", "payload", "createdAt", "sequence"})
_NODE_KEYS_RK = _NODE_KEYS | {"resourceKey"}


def _fail(
    code: str, message: str, index: int | None = None, node_id: str | None = None
) -> NoReturn:
    where = "" if index is None else f" (node {index}{'' if node_id is None else ', ' + node_id})"
    raise InvalidSnapshot(message + where, code=code, index=index, node_id=node_id)


def parse_snapshot_json(data: bytes | str, limits: Limits) -> Any:
    """Parse snapshot bytes within the size limit. Raises InvalidSnapshot."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if not isinstance(data, bytes | bytearray | memoryview):
        _fail("shape", f"a snapshot is JSON bytes, not {type(data).__name__}")
    if len(data) > limits.max_snapshot_bytes:
        _fail("too_large", f"snapshot is {len(data)} bytes, over {limits.max_snapshot_bytes}")
    try:
        # Depth is checked per payload when it is canonicalised (every other field has a
        # fixed shape); nesting past the interpreter's limit is refused here as too_large.
        return strict_json.loads(data)
    except CanonicalError as e:
        _fail(e.code, str(e))


def _valid_timestamp(s: str) -> bool:
    if not 10 <= len(s) <= 40 or not s[:4].isdigit():
        return False
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return False
    return dt.tzinfo is not None


def validate_snapshot(
    data: Any, *, limits: Limits, vocabulary: Vocabulary | None = None
) -> tuple[list[CausalNode], list[str]]:
    """Validate a decoded snapshot; return its nodes and frontier exactly as given."""
    if not isinstance(data, dict):
        _fail("shape", "a snapshot is an object {version, nodes, frontier}")
    if (
        "version" not in data
        or type(data["version"]) is not int
        or data["version"] != SNAPSHOT_VERSION
    ):
        if data.get("version") == 2 and type(data.get("version")) is int:
            _fail(
                "version",
                "a pruned snapshot (version 2) is read as JSON text or a file "
                "(tether.control.import_snapshot, check_snapshot_file), not as an AgentState",
            )
        _fail("version", f"unsupported snapshot version {data.get('version')!r}; expected 1")
    if set(data) != {"version", "nodes", "frontier"}:
        _fail(
            "shape",
            f"a snapshot has exactly version, nodes and frontier; got {sorted(map(str, data))}",
        )
    raw_nodes = data["nodes"]
    frontier = data["frontier"]
    if not isinstance(raw_nodes, list) or not isinstance(frontier, list):
        _fail("shape", "nodes and frontier must be lists")
    if len(raw_nodes) > limits.max_nodes:
        _fail("too_large", f"{len(raw_nodes)} nodes, over the limit of {limits.max_nodes}")

    # Pass 1: where each id first stands, so a parent can be told "later" from "missing".
    position: dict[str, int] = {}
    for i, raw in enumerate(raw_nodes):
        if isinstance(raw, dict):
            nid = raw.get("id")
            if isinstance(nid, str) and nid not in position:
                position[nid] = i

    checker = NodeChecker(limits=limits, vocabulary=vocabulary, position=position)
    nodes = [checker.check(raw) for raw in raw_nodes]
    return nodes, checker.check_frontier(frontier)


class Pruned:
    """What a pruned graph lacks (a snapshot's ``pruned`` object, version 2): the
    sequences cut, as ascending ``[first, last]`` ranges, and the ids of those a
    remaining node names as a parent."""

    __slots__ = ("_firsts", "parents", "ranges")

    def __init__(self, ranges: Sequence[tuple[int, int]] = (), parents: Iterable[str] = ()) -> None:
        self.ranges = tuple(ranges)
        self._firsts = [a for a, _ in self.ranges]
        self.parents = frozenset(parents)

    @classmethod
    def from_json(cls, data: Any, limits: Limits) -> Pruned:
        """A snapshot's ``pruned`` object, checked: ``{"sequences": [[first, last], ...],
        "parents": [id, ...]}``, ranges ascending and apart, ids well formed."""
        if not isinstance(data, dict) or set(data) != {"sequences", "parents"}:
            _fail("shape", "pruned is an object {sequences, parents}")
        seqs, parents = data["sequences"], data["parents"]
        if not isinstance(seqs, list) or not isinstance(parents, list):
            _fail("shape", "pruned sequences and parents are lists")
        if len(seqs) > limits.max_nodes or len(parents) > limits.max_nodes:
            _fail("too_large", f"pruned lists over {limits.max_nodes} entries")
        ranges: list[tuple[int, int]] = []
        end = 0
        for r in seqs:
            if (
                not isinstance(r, list)
                or len(r) != 2
                or any(type(x) is not int for x in r)
                or not 1 <= r[0] <= r[1]
                or (ranges and r[0] <= end + 1)  # ascending, apart (adjacent ones merge)
            ):
                _fail("shape", f"pruned sequences are ascending [first, last] ranges, got {r!r}")
            ranges.append((r[0], r[1]))
            end = r[1]
        for p in parents:
            if not isinstance(p, str) or not ID_PATTERN.fullmatch(p):
                _fail("shape", f"a pruned parent is a node id, got {p!r}")
        if len(set(parents)) != len(parents):
            _fail("duplicate_id", "a pruned parent appears twice")
        return cls(ranges, parents)

    def next_after(self, sequence: int) -> int:
        """The sequence of the node after ``sequence``: the next one not cut."""
        s = sequence + 1
        i = bisect_right(self._firsts, s) - 1
        if i >= 0 and self.ranges[i][0] <= s <= self.ranges[i][1]:
            return self.ranges[i][1] + 1
        return s

    def last(self) -> int | None:
        return self.ranges[-1][1] if self.ranges else None

    def __bool__(self) -> bool:
        return bool(self.ranges)


class NodeChecker:
    """Checks nodes one at a time, in sequence order, exactly as import validation does.

    Shared by ``validate_snapshot`` (a whole snapshot in memory) and the control
    plane's ``verify``, which streams a stored scope page by page. ``position``
    maps ids to their index when the whole snapshot is known, so a parent that
    comes later is told (``parent_order``) from one that is absent
    (``parent_missing``); a streaming caller without it sees ``parent_missing``.
    """

    def __init__(
        self,
        *,
        limits: Limits,
        vocabulary: Vocabulary | None = None,
        position: dict[str, int] | None = None,
        pruned: Pruned | None = None,
    ) -> None:
        self.limits = limits
        self.vocabulary = vocabulary
        self.position = position or {}
        self.seen: set[str] = set()
        self.count = 0
        self.total = 0
        # A pruned graph (tether.control.prune): these sequences are absent, and a
        # node may name one of these cut ids as a parent.
        self.pruned = pruned or Pruned()
        self.sequence = 0  # the sequence of the last node checked

    def check(self, raw: Any, *, erased: bool = False) -> CausalNode:
        """Check the next node (index ``self.count``); return it or raise InvalidSnapshot.

        ``erased``: the node's payload is gone (its data key was destroyed), so what
        depends on it (its size, a semantic payload, the identity) cannot be checked;
        everything else (shape, kind, sequence, parents, createdAt) is.
        """
        limits, vocabulary, seen, position = self.limits, self.vocabulary, self.seen, self.position
        i = self.count
        if not isinstance(raw, dict):
            _fail("shape", "a node is an object", i)
        nid = raw.get("id")
        if not isinstance(nid, str) or not ID_PATTERN.fullmatch(nid):
            _fail("shape", f"id {nid!r} is not cw_ + 24 hex digits", i)
        keys = raw.keys()
        if keys != _NODE_KEYS and keys != _NODE_KEYS_RK:
            _fail(
                "shape",
                f"node fields are {sorted(_NODE_KEYS_RK)}; got {sorted(map(str, keys))}",
                i,
                nid,
            )
        kind = raw["kind"]
        if not isinstance(kind, str) or kind not in KINDS:
            _fail("kind", f"kind {kind!r} is not one of {', '.join(sorted(KINDS))}", i, nid)
        seq = raw["sequence"]
        if type(seq) is not int:
            _fail("shape", "sequence must be an integer", i, nid)
        want = self.pruned.next_after(self.sequence)
        if seq != want:
            _fail("sequence", f"sequence {seq} where {want} was expected", i, nid)
        if nid in seen or nid in self.pruned.parents:
            _fail("duplicate_id", "id appears twice", i, nid)
        created = raw["createdAt"]
        if not isinstance(created, str):
            _fail("shape", "createdAt must be a string", i, nid)
        rk = raw.get("resourceKey")
        if "resourceKey" in raw and (
            not isinstance(rk, str) or not rk or len(rk) > limits.max_resource_key
        ):
            _fail("shape", "resourceKey must be a non-empty string", i, nid)
        parents = raw["parents"]
        if not isinstance(parents, list):
            _fail("shape", "parents must be a list", i, nid)
        if len(parents) > limits.max_parents:
            _fail("too_large", f"{len(parents)} parents, over {limits.max_parents}", i, nid)
        prev = ""
        for p in parents:
            if not isinstance(p, str):
                _fail("shape", "a parent is a node id string", i, nid)
            if p not in seen and p not in self.pruned.parents:
                if position.get(p, -1) >= i:
                    _fail("parent_order", f"parent {p} does not come earlier in sequence", i, nid)
                _fail("parent_missing", f"parent {p!r} is not in the snapshot", i, nid)
            if p <= prev:
                _fail("parent_order", "parents must be unique and sorted", i, nid)
            prev = p
        if not erased:
            try:
                payload_json = canonical_json(raw["payload"], max_depth=limits.max_depth)
            except CanonicalError as e:
                _fail(e.code, f"payload rejected: {e}", i, nid)
            if len(payload_json) > limits.max_payload_bytes:
                _fail(
                    "too_large",
                    f"payload is {len(payload_json)} bytes, over {limits.max_payload_bytes}",
                    i,
                    nid,
                )
            self.total += len(payload_json)
            if self.total > limits.max_snapshot_bytes:
                _fail("too_large", f"payloads exceed {limits.max_snapshot_bytes} bytes", i, nid)
            if kind == "semantic":
                try:
                    type_, key = check_semantic_payload(raw["payload"])
                    if vocabulary is not None:
                        vocabulary.check(type_)
                except InvalidNode as e:
                    _fail(e.code, e.message, i, nid)
                if rk != semantic_key(type_, key):
                    _fail(
                        "semantic_payload",
                        f"a semantic node's resourceKey must be {semantic_key(type_, key)!r}",
                        i,
                        nid,
                    )
            try:
                recomputed = _identity(kind, parents, payload_json, rk)
            except UnicodeEncodeError:
                _fail("shape", "resourceKey holds invalid Unicode", i, nid)
            if recomputed != nid:
                _fail("identity_mismatch", f"content hashes to {recomputed}", i, nid)
        if not _valid_timestamp(created):
            _fail(
                "created_at",
                f"createdAt {created!r} is not an ISO-8601 timestamp with a zone",
                i,
                nid,
            )
        seen.add(nid)
        self.count += 1
        self.sequence = seq
        return CausalNode(
            id=nid,
            kind=kind,
            parents=tuple(parents),
            payload=raw["payload"],
            created_at=created,
            sequence=seq,
            resource_key=rk,
        )

    def check_end(self) -> None:
        """After the last node: every sequence said to be pruned lies before it."""
        last = self.pruned.last()
        if last is not None and last > self.sequence:
            _fail("sequence", f"sequence {last} is said to be pruned, after the last node")

    def check_frontier(self, frontier: Any) -> list[str]:
        """Check a frontier against the nodes checked so far; return it as given."""
        if not isinstance(frontier, list):
            _fail("shape", "frontier must be a list")
        fseen: set[str] = set()
        for f in frontier:
            if not isinstance(f, str):
                _fail("frontier", "frontier entries are node ids")
            if f in fseen:
                _fail("frontier", f"{f} appears twice in the frontier", node_id=f)
            if f not in self.seen:
                _fail("frontier", f"frontier names {f!r}, which is not in the snapshot", node_id=f)
            fseen.add(f)
        return list(frontier)
