"""Small builders for conformance tests: nodes and writes made by the core rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.core.graph import CausalNode, advance_frontier, make_node
from tether.store import Head, ScopeWrite, Store


def node(
    kind: str,
    payload: Any,
    parents: Sequence[str] = (),
    *,
    seq: int,
    rk: str | None = None,
    created_at: str | None = None,
) -> CausalNode:
    return make_node(kind, payload, parents, sequence=seq, resource_key=rk, created_at=created_at)


def write(scope: str, head: Head, nodes: Sequence[CausalNode]) -> ScopeWrite:
    """A write of ``nodes`` (already sequenced) after ``head``; frontier by the core rule."""
    frontier = list(head.frontier)
    for n in nodes:
        frontier = advance_frontier(frontier, n)
    return ScopeWrite(
        scope=scope,
        expected_generation=head.generation,
        expected_sequence=head.sequence,
        nodes=tuple(nodes),
        frontier=tuple(frontier),
    )


def linear(head: Head, payloads: Sequence[Any], kind: str = "goal") -> list[CausalNode]:
    """Nodes continuing ``head``: each takes the whole frontier so far as its parents."""
    out: list[CausalNode] = []
    frontier = list(head.frontier)
    seq = head.sequence
    for p in payloads:
        seq += 1
        n = node(kind, p, frontier, seq=seq)
        frontier = advance_frontier(frontier, n)
        out.append(n)
    return out


async def append(
    store: Store, ns: str, scope: str, payloads: Sequence[Any], kind: str = "goal"
) -> list[CausalNode]:
    """Append a linear run of nodes to ``scope`` in one commit; return them."""
    head = await store.head(ns, scope)
    nodes = linear(head, payloads, kind)
    await store.commit(ns, [write(scope, head, nodes)])
    return nodes


def same(a: CausalNode, b: CausalNode) -> bool:
    """Equal as stored: every field, payload compared by value."""
    return a.to_dict() == b.to_dict()
