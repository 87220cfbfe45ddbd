"""Import validation (SPEC §1): check everything, repair nothing, stop at the first fault.

Linear in the snapshot's size: one pass to index ids, one pass per node that
canonicalises its payload once and recomputes its identity.
"""

from __future__ import annotations

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
    ) -> None:
        self.limits = limits
        self.vocabulary = vocabulary
        self.position = position or {}
        self.seen: set[str] = set()
        self.count = 0
        self.total = 0

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
        if seq != i + 1:
            _fail("sequence", f"sequence {seq} where {i + 1} was expected", i, nid)
        if nid in seen:
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
            if p not in seen:
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
        return CausalNode(
            id=nid,
            kind=kind,
            parents=tuple(parents),
            payload=raw["payload"],
            created_at=created,
            sequence=seq,
            resource_key=rk,
        )

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
