"""The causal graph: nodes, identity, append rules and the AgentState snapshot (SPEC §1).

Pure: no I/O. Stores and the runtime build on ``make_node`` and ``advance_frontier``
so that a node appended through a store is byte-for-byte the node an in-memory
``AgentState`` would append.
"""

from __future__ import annotations

import gc
import hashlib
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from json.encoder import encode_basestring
from typing import Any, Final

import orjson

from .canonical import CanonicalError, canonical_json
from .errors import InvalidNode
from .vocab import DEFAULT_VOCABULARY, TYPE_NAME, Vocabulary

KINDS: Final = frozenset(
    {
        "system",
        "goal",
        "inference",
        "semantic",
        "tool_call",
        "tool_result",
        "resource",
        "verification",
        "answer",
        "protocol_error",
    }
)
SNAPSHOT_VERSION: Final = 1
# A pruned scope's snapshot (tether.control.prune): version 1 plus what it lacks.
PRUNED_SNAPSHOT_VERSION: Final = 2
ID_PATTERN: Final = re.compile(r"^cw_[0-9a-f]{24}$")
MiB: Final = 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """Bounds that keep a hostile snapshot or write from exhausting memory or CPU."""

    max_payload_bytes: int = 8 * MiB
    max_snapshot_bytes: int = 256 * MiB
    max_nodes: int = 1_000_000
    max_parents: int = 1024
    max_depth: int = 64
    max_resource_key: int = 512


DEFAULT_LIMITS: Final = Limits()


@dataclass(frozen=True, kw_only=True, slots=True)
class CausalNode:
    """One immutable node of the graph. ``id`` is its content identity."""

    id: str
    kind: str
    parents: tuple[str, ...]
    payload: Any
    created_at: str
    sequence: int
    resource_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "parents": list(self.parents),
            "payload": self.payload,
            "createdAt": self.created_at,
            "sequence": self.sequence,
        }
        if self.resource_key is not None:
            d["resourceKey"] = self.resource_key
        return d


class _Unfrozen:
    """``CausalNode``'s slot layout with a plain ``__init__``: ``new_node`` builds one
    and relabels it a ``CausalNode`` (``__class__`` assignment, allowed between classes
    of the same layout). A plain ``__init__`` stores the seven fields in half the time
    of the frozen dataclass's slot setters, which is most of what a store spends per
    node on a long read."""

    __slots__ = ("created_at", "id", "kind", "parents", "payload", "resource_key", "sequence")

    def __init__(
        self,
        id: str,
        kind: str,
        parents: tuple[str, ...],
        payload: Any,
        created_at: str,
        sequence: int,
        resource_key: str | None,
    ) -> None:
        self.id = id
        self.kind = kind
        self.parents = parents
        self.payload = payload
        self.created_at = created_at
        self.sequence = sequence
        self.resource_key = resource_key


def _relabelled(
    id: str,
    kind: str,
    parents: tuple[str, ...],
    payload: Any,
    created_at: str,
    sequence: int,
    resource_key: str | None,
) -> CausalNode:
    n: Any = _Unfrozen(id, kind, parents, payload, created_at, sequence, resource_key)
    n.__class__ = CausalNode
    return n  # type: ignore[no-any-return]


_object_new = object.__new__


def _slot_setter(name: str) -> Callable[[CausalNode, Any], None]:
    setter: Callable[[CausalNode, Any], None] = getattr(CausalNode, name).__set__
    return setter


_set_id = _slot_setter("id")
_set_kind = _slot_setter("kind")
_set_parents = _slot_setter("parents")
_set_payload = _slot_setter("payload")
_set_created_at = _slot_setter("created_at")
_set_sequence = _slot_setter("sequence")
_set_resource_key = _slot_setter("resource_key")


def _set_slots(
    id: str,
    kind: str,
    parents: tuple[str, ...],
    payload: Any,
    created_at: str,
    sequence: int,
    resource_key: str | None,
) -> CausalNode:
    n = _object_new(CausalNode)
    _set_id(n, id)
    _set_kind(n, kind)
    _set_parents(n, parents)
    _set_payload(n, payload)
    _set_created_at(n, created_at)
    _set_sequence(n, sequence)
    _set_resource_key(n, resource_key)
    return n


def _relabelling_is_exact() -> bool:
    """Whether this interpreter takes the ``__class__`` assignment and it yields exactly
    the node the dataclass builds (same class, fields, equality, hash and repr)."""
    fields: dict[str, Any] = {
        "id": "cw_" + "0" * 24,
        "kind": "goal",
        "parents": ("cw_" + "1" * 24,),
        "payload": "payload",
        "created_at": "t",
        "sequence": 3,
        "resource_key": "rk",
    }
    try:
        n = _relabelled(**fields)
    except TypeError:  # an interpreter that refuses the assignment
        return False
    ref = CausalNode(**fields)
    return type(n) is CausalNode and n == ref and hash(n) == hash(ref) and repr(n) == repr(ref)


#: A ``CausalNode`` from trusted fields (id, kind, parents, payload, created_at,
#: sequence, resource_key), without the frozen dataclass's ``__init__``: for
#: ``make_node`` (which has just validated them) and for stores decoding their own
#: rows. The generated ``__init__`` calls ``object.__setattr__`` per field; building the
#: same slots through a plain class and relabelling it (``_Unfrozen``) costs under half
#: of that, the slot setters a third less. Equal to ``CausalNode(id=..., ...)`` in every
#: way. Bound to the builder itself: the hot loop of a long read makes one call a node.
new_node: Final[Callable[[str, str, tuple[str, ...], Any, str, int, str | None], CausalNode]] = (
    _relabelled if _relabelling_is_exact() else _set_slots
)


_now_second: tuple[int, str] = (-1, "")
_now_ms: tuple[int, str] = (-1, "")


def now_iso() -> str:
    """UTC now as ISO-8601 with milliseconds and a Z, like JavaScript's toISOString."""
    global _now_second, _now_ms
    ms = time.time_ns() // 1_000_000
    last = _now_ms  # one read: another thread may replace it meanwhile
    if last[0] == ms:  # the nodes of one commit mostly share a millisecond
        return last[1]
    sec, frac = divmod(ms, 1000)
    cached = _now_second
    if cached[0] != sec:
        # Formatting the date and time is most of the cost; it changes once a second.
        cached = _now_second = (sec, datetime.fromtimestamp(sec, UTC).isoformat()[:19])
    text = f"{cached[1]}.{frac:03d}Z"
    _now_ms = (ms, text)
    return text


# '{"kind":"<kind>","parents":[' for every kind (kinds need no JSON escaping).
_BODY_HEAD: Final = {k: f'{{"kind":"{k}","parents":['.encode() for k in KINDS}


def _identity(
    kind: str, parents: Sequence[str], payload_json: bytes, resource_key: str | None
) -> str:
    # The body {"kind","parents","payload","resourceKey"} in RFC 8785 form, assembled
    # from parts: the keys are already in code point order, and the payload was
    # canonicalised once (and size-checked) by the caller.
    head = _BODY_HEAD.get(kind)
    if head is None:
        head = b'{"kind":' + encode_basestring(kind).encode() + b',"parents":['
    if parents:
        # Ids are cw_ + hex: nothing to escape.
        try:
            head += ('"' + '","'.join(parents) + '"').encode()
        except TypeError:
            bad = next(p for p in parents if not isinstance(p, str))
            raise InvalidNode(f"parent {bad!r} is not a node id", code="shape") from None
    if resource_key is None:
        body = b"".join((head, b'],"payload":', payload_json, b"}"))
    else:
        rk = encode_basestring(resource_key).encode("utf-8", "strict")
        body = b"".join((head, b'],"payload":', payload_json, b',"resourceKey":', rk, b"}"))
    return "cw_" + hashlib.sha256(body).hexdigest()[:24]


def canonical_payload(payload: Any, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """Canonical bytes of a payload, or InvalidNode (non_finite, number_range, too_large, shape)."""
    try:
        data = canonical_json(payload, max_depth=limits.max_depth)
    except CanonicalError as e:
        raise InvalidNode(f"payload rejected: {e}", code=e.code) from None
    if len(data) > limits.max_payload_bytes:
        raise InvalidNode(
            f"payload is {len(data)} bytes, over the limit of {limits.max_payload_bytes}",
            code="too_large",
        )
    return data


def node_id(
    kind: str,
    parents: Iterable[str],
    payload: Any,
    resource_key: str | None = None,
) -> str:
    """The content identity of a node: ``cw_`` + sha256(JCS(body))[:24] (SPEC §1)."""
    ps = sorted(set(parents))
    for p in ps:
        if not isinstance(p, str) or not ID_PATTERN.fullmatch(p):
            raise InvalidNode(f"parent {p!r} is not a node id", code="shape")
    return _identity(kind, ps, canonical_payload(payload), resource_key)


def semantic_key(type_: str, key: str) -> str:
    return f"semantic:{type_}:{key}"


def check_semantic_payload(payload: Any) -> tuple[str, str]:
    """Return (type, key) of a semantic payload, or raise InvalidNode(code=semantic_payload)."""
    if (
        not isinstance(payload, dict)
        or set(payload) != {"type", "key", "content"}
        or not isinstance(payload["type"], str)
        or not isinstance(payload["key"], str)
        or not payload["key"]
    ):
        raise InvalidNode(
            'a semantic payload is exactly {"type": str, "key": non-empty str, "content": any}',
            code="semantic_payload",
        )
    if not TYPE_NAME.fullmatch(payload["type"]):
        raise InvalidNode(
            f"semantic type {payload['type']!r} must match {TYPE_NAME.pattern}",
            code="semantic_type",
        )
    return payload["type"], payload["key"]


def make_node(
    kind: str,
    payload: Any,
    parents: Iterable[str],
    *,
    sequence: int,
    resource_key: str | None = None,
    created_at: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    vocabulary: Vocabulary | None = DEFAULT_VOCABULARY,
) -> CausalNode:
    """Validate and build one node. ``parents`` must already include any resource head.

    Raises InvalidNode with a snapshot code; never writes anything.
    """
    if kind not in KINDS:
        raise InvalidNode(
            f"unknown kind {kind!r}; allowed: {', '.join(sorted(KINDS))}", code="kind"
        )
    if kind == "semantic":
        type_, key = check_semantic_payload(payload)
        if vocabulary is not None:
            vocabulary.check(type_)
        expected = semantic_key(type_, key)
        if resource_key is None:
            resource_key = expected
        elif resource_key != expected:
            raise InvalidNode(
                f"a semantic node's resource key is {expected!r}, not {resource_key!r}",
                code="semantic_payload",
            )
    if resource_key is not None and (
        not isinstance(resource_key, str)
        or not resource_key
        or len(resource_key) > limits.max_resource_key
    ):
        raise InvalidNode(f"invalid resource key {resource_key!r}", code="shape")
    try:
        ps = sorted(set(parents))
    except TypeError:  # unhashable or mixed types: not a list of ids
        raise InvalidNode(f"parents must be node ids, got {parents!r}", code="shape") from None
    if len(ps) > limits.max_parents:
        raise InvalidNode(
            f"{len(ps)} parents, over the limit of {limits.max_parents}", code="too_large"
        )
    payload_json = canonical_payload(payload, limits)
    return new_node(
        _identity(kind, ps, payload_json, resource_key),
        kind,
        tuple(ps),
        payload,
        created_at or now_iso(),
        sequence,
        resource_key,
    )


def advance_frontier(frontier: Sequence[str], node: CausalNode) -> list[str]:
    """The frontier after appending ``node``: its parents leave, it joins."""
    drop = set(node.parents)
    out = [f for f in frontier if f not in drop]
    out.append(node.id)
    return out


@dataclass(kw_only=True)
class AgentState:
    """An in-memory causal graph: the snapshot ``{version, nodes, frontier}`` of SPEC §1.

    >>> s = AgentState()
    >>> goal = s.append("goal", {"text": "hi"})
    >>> s.frontier == [goal.id]
    True
    """

    vocabulary: Vocabulary = field(default=DEFAULT_VOCABULARY)
    limits: Limits = field(default=DEFAULT_LIMITS)
    _nodes: list[CausalNode] = field(default_factory=list, init=False, repr=False)
    _by_id: dict[str, CausalNode] = field(default_factory=dict, init=False, repr=False)
    _frontier: dict[str, None] = field(default_factory=dict, init=False, repr=False)
    _heads: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _children: dict[str, list[str]] | None = field(default=None, init=False, repr=False)

    # -- writing -----------------------------------------------------------------

    def append(
        self,
        kind: str,
        payload: Any,
        *,
        parents: Iterable[str] | None = None,
        resource_key: str | None = None,
        created_at: str | None = None,
    ) -> CausalNode:
        """Append a node and return it; an identical node already present is returned as is.

        ``parents`` default to the whole frontier. A node with a resource key (every
        semantic node has one) also gets the previous head of that key as a parent.
        """
        if parents is None:
            ps = list(self._frontier)
        else:
            if isinstance(parents, str):
                raise InvalidNode("parents must be a list of node ids, not a string", code="shape")
            ps = list(parents)
            for p in ps:
                if p not in self._by_id:
                    raise InvalidNode(f"parent {p!r} is not in this graph", code="parent_missing")
        if kind == "semantic" and resource_key is None:
            type_, key = check_semantic_payload(payload)
            resource_key = semantic_key(type_, key)
        if resource_key is not None:
            prev = self._heads.get(resource_key)
            if prev is not None and prev not in ps:
                ps.append(prev)
        node = make_node(
            kind,
            payload,
            ps,
            sequence=len(self._nodes) + 1,
            resource_key=resource_key,
            created_at=created_at,
            limits=self.limits,
            vocabulary=self.vocabulary,
        )
        existing = self._by_id.get(node.id)
        if existing is not None:
            return existing
        if len(self._nodes) >= self.limits.max_nodes:
            raise InvalidNode(
                f"graph holds {self.limits.max_nodes} nodes, the limit", code="too_large"
            )
        self._add(node)
        return node

    def semantic(self, type_: str, key: str, content: Any, **kw: Any) -> CausalNode:
        """Write semantic memory: a successor of any earlier node of the same type and key."""
        return self.append("semantic", {"type": type_, "key": key, "content": content}, **kw)

    def _add(self, node: CausalNode) -> None:
        self._nodes.append(node)
        self._by_id[node.id] = node
        for p in node.parents:
            self._frontier.pop(p, None)
        self._frontier[node.id] = None
        if node.resource_key is not None:
            self._heads[node.resource_key] = node.id
        if self._children is not None:
            for p in node.parents:
                self._children.setdefault(p, []).append(node.id)

    # -- reading -----------------------------------------------------------------

    @property
    def nodes(self) -> Sequence[CausalNode]:
        return tuple(self._nodes)

    @property
    def frontier(self) -> list[str]:
        return list(self._frontier)

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[CausalNode]:
        return iter(self._nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._by_id

    def get(self, node_id: str) -> CausalNode | None:
        return self._by_id.get(node_id)

    def head(self, resource_key: str) -> CausalNode | None:
        """The newest node of a resource key: its current value."""
        nid = self._heads.get(resource_key)
        return None if nid is None else self._by_id[nid]

    def heads(self, prefix: str = "") -> dict[str, CausalNode]:
        """Current head of every resource key starting with ``prefix``."""
        return {k: self._by_id[v] for k, v in self._heads.items() if k.startswith(prefix)}

    def versions(self, resource_key: str) -> list[CausalNode]:
        """Every version of a resource key, oldest first."""
        return [n for n in self._nodes if n.resource_key == resource_key]

    def by_kind(self, kind: str) -> list[CausalNode]:
        return [n for n in self._nodes if n.kind == kind]

    def memory(self) -> dict[str, Any]:
        """Current semantic memory: ``{"<type>:<key>": content}``."""
        out: dict[str, Any] = {}
        for k, nid in self._heads.items():
            if k.startswith("semantic:"):
                p = self._by_id[nid].payload
                out[f"{p['type']}:{p['key']}"] = p["content"]
        return out

    def ancestors(self, node_id: str) -> set[str]:
        """Every node ``node_id`` causally depends on (not including itself)."""
        seen: set[str] = set()
        stack = list(self._require(node_id).parents)
        while stack:
            nid = stack.pop()
            if nid not in seen:
                seen.add(nid)
                stack.extend(self._by_id[nid].parents)
        return seen

    def descendants(self, node_id: str) -> set[str]:
        """Every node that causally depends on ``node_id``."""
        self._require(node_id)
        if self._children is None:
            self._children = {}
            for n in self._nodes:
                for p in n.parents:
                    self._children.setdefault(p, []).append(n.id)
        seen: set[str] = set()
        stack = list(self._children.get(node_id, ()))
        while stack:
            nid = stack.pop()
            if nid not in seen:
                seen.add(nid)
                stack.extend(self._children.get(nid, ()))
        return seen

    def _require(self, node_id: str) -> CausalNode:
        n = self._by_id.get(node_id)
        if n is None:
            from .errors import NotFound

            raise NotFound(f"no node {node_id!r} in this graph", node_id=node_id)
        return n

    # -- snapshots ---------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SNAPSHOT_VERSION,
            "nodes": [n.to_dict() for n in self._nodes],
            "frontier": list(self._frontier),
        }

    def to_json(self) -> bytes:
        """The snapshot as compact JSON bytes (deterministic for a given graph)."""
        return orjson.dumps(self.to_dict())

    @classmethod
    def from_dict(
        cls,
        data: Any,
        *,
        limits: Limits = DEFAULT_LIMITS,
        vocabulary: Vocabulary | None = None,
    ) -> AgentState:
        """Validate a snapshot and load it exactly as given. Raises InvalidSnapshot."""
        from .validate import validate_snapshot

        nodes, frontier = validate_snapshot(data, limits=limits, vocabulary=vocabulary)
        state = cls(vocabulary=vocabulary or DEFAULT_VOCABULARY, limits=limits)
        for n in nodes:
            state._nodes.append(n)
            state._by_id[n.id] = n
            if n.resource_key is not None:
                state._heads[n.resource_key] = n.id
        state._frontier = dict.fromkeys(frontier)
        return state

    @classmethod
    def from_json(
        cls,
        data: bytes | str,
        *,
        limits: Limits = DEFAULT_LIMITS,
        vocabulary: Vocabulary | None = None,
    ) -> AgentState:
        from .validate import parse_snapshot_json

        # Loading builds millions of small objects and no cycles; the cyclic GC would
        # rescan the growing heap again and again and make validation superlinear.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return cls.from_dict(
                parse_snapshot_json(data, limits), limits=limits, vocabulary=vocabulary
            )
        finally:
            if was_enabled:
                gc.enable()
