"""Content-addressed values and lists for the framework adapters. Pure: no I/O.

A framework state value becomes tether nodes that depend only on its content,
so a value that did not change between two steps is never stored twice:

* a **value node** (kind ``resource``, no resource key, no parents) holds one
  serialized value; its id is the hash of its payload, so the same value always
  gets the same id;
* a **list** is a persistent tree of **seq nodes** over element nodes: leaves
  hold up to ``FANOUT`` element ids, upper levels up to ``FANOUT`` child ids, and
  each seq node's parents are its children (a Merkle DAG inside the causal
  graph). The tree of a list is a pure function of its element ids, chunked at
  fixed offsets, so appending k elements to a list of n leaves every full leaf
  and every full subtree unchanged: a step stores the k new elements, the last
  leaf and the right spine (at most ``FANOUT`` ids per level), never the n old
  elements again.

A full leaf (``FANOUT`` elements) may also carry its elements' serialized
forms (``v``, aligned with ``items``), when the adapter gives them: a leaf is
written once, so this costs the elements' bytes once more per ``FANOUT``
elements, and a cold read of a long list then reads ``n / FANOUT`` leaves
instead of ``n`` element nodes. Whether a leaf carries them is a function of
its items (the caller passes them for every element that has one), so the
tree stays a pure function of the element ids.

Reading a list walks the tree one level per round trip (``depth + 1`` batched
reads for the whole list).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..core.canonical import MAX_SAFE_INT
from ..core.graph import node_id

FANOUT = 32
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, kw_only=True, slots=True)
class Planned:
    """A node to append if the scope does not hold it yet (its id is known in advance)."""

    id: str
    kind: str
    payload: Any
    parents: tuple[str, ...]


class LRU(Generic[K, V]):
    """A small bounded mapping; the least recently used entries leave first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._d: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        v = self._d.get(key)
        if v is not None:
            self._d.move_to_end(key)
        return v

    def put(self, key: K, value: V) -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.size:
            self._d.popitem(last=False)

    def pop(self, key: K) -> None:
        self._d.pop(key, None)

    def clear(self) -> None:
        self._d.clear()

    def __len__(self) -> int:
        return len(self._d)


class ByteLRU(Generic[K]):
    """An LRU of byte strings bounded by their total size (large values, few entries)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.total = 0
        self._d: OrderedDict[K, bytes] = OrderedDict()

    def get(self, key: K) -> bytes | None:
        v = self._d.get(key)
        if v is not None:
            self._d.move_to_end(key)
        return v

    def put(self, key: K, value: bytes) -> None:
        if len(value) > self.max_bytes:
            return
        old = self._d.pop(key, None)
        if old is not None:
            self.total -= len(old)
        self._d[key] = value
        self.total += len(value)
        while self.total > self.max_bytes:
            _, dropped = self._d.popitem(last=False)
            self.total -= len(dropped)


def is_json_scalar(v: Any) -> bool:
    """A value whose JSON form is exact and whose canonical hash cannot collide with another.

    Strings, booleans, None and safe integers only: a float would hash like an
    int (RFC 8785 writes 1.0 as 1) and dict key order is lost in canonical form,
    so those go through the framework's serializer instead.
    """
    t = type(v)
    if t is str or t is bool or v is None:
        return True
    return t is int and bool(-MAX_SAFE_INT <= v <= MAX_SAFE_INT)


def is_plain_json(v: Any, depth: int = 0) -> bool:
    """True if ``v`` survives a JSON round trip exactly (types included).

    Used for payloads that are *not* deduplicated by content (checkpoint
    headers, metadata), where a float is fine as long as it is finite.
    """
    if depth > 48:
        return False
    t = type(v)
    if t is str or t is bool or v is None:
        return True
    if t is int:
        return bool(-MAX_SAFE_INT <= v <= MAX_SAFE_INT)
    if t is float:
        return math.isfinite(v)
    # Loops, not all(...) over a generator, and strings, booleans and None taken in
    # place while their depth is allowed: this walks every checkpoint's header and
    # metadata.
    if t is list:
        if depth >= 48:
            return all(is_plain_json(x, depth + 1) for x in v)
        for x in v:
            tx = type(x)
            if tx is str or tx is bool or x is None:
                continue
            if not is_plain_json(x, depth + 1):
                return False
        return True
    if t is dict:
        if depth >= 48:
            return all(type(k) is str and is_plain_json(x, depth + 1) for k, x in v.items())
        for k, x in v.items():
            if type(k) is not str:
                return False
            tx = type(x)
            if tx is str or tx is bool or x is None:
                continue
            if not is_plain_json(x, depth + 1):
                return False
        return True
    return False


def seq_payload(
    level: int, items: Sequence[str], forms: Sequence[str] | None = None
) -> dict[str, Any]:
    if forms is None:
        return {"lg": "seq", "lvl": level, "items": list(items)}
    return {"lg": "seq", "lvl": level, "items": list(items), "v": list(forms)}


class TreeBuilder:
    """Builds the canonical seq tree of a list of element ids, caching node ids."""

    def __init__(self, cache_size: int = 100_000) -> None:
        self._nodes: LRU[tuple[int, tuple[str, ...]], Planned] = LRU(cache_size)

    def _node(
        self, level: int, items: tuple[str, ...], forms: Sequence[str | None] | None = None
    ) -> Planned:
        planned = self._nodes.get((level, items))
        if planned is None:
            parents = tuple(sorted(set(items)))
            packed: list[str] | None = None
            if forms is not None and len(items) == FANOUT and all(f is not None for f in forms):
                packed = [f for f in forms if f is not None]
            payload = seq_payload(level, items, packed)
            nid = node_id("resource", parents, payload)
            planned = Planned(id=nid, kind="resource", payload=payload, parents=parents)
            self._nodes.put((level, items), planned)
        return planned

    def build(
        self, element_ids: Sequence[str], forms: Sequence[str | None] | None = None
    ) -> tuple[str | None, list[Planned]]:
        """Return (root id, every seq node bottom-up); (None, []) for an empty list.

        ``forms``: each element's serialized form where it has one (full leaves
        carry them); give them for every element or for none.
        """
        if not element_ids:
            return None, []
        out: list[Planned] = []
        level_ids: list[str] = list(element_ids)
        level = 0
        while True:
            nodes = [
                self._node(
                    level,
                    tuple(level_ids[i : i + FANOUT]),
                    forms[i : i + FANOUT] if level == 0 and forms is not None else None,
                )
                for i in range(0, len(level_ids), FANOUT)
            ]
            out.extend(nodes)
            if len(nodes) == 1:
                return nodes[0].id, out
            level_ids = [n.id for n in nodes]
            level += 1


def dedupe(planned: Iterable[Planned]) -> list[Planned]:
    """Keep the first of each id, in order (parents always come before children)."""
    seen: set[str] = set()
    out: list[Planned] = []
    for p in planned:
        if p.id not in seen:
            seen.add(p.id)
            out.append(p)
    return out
