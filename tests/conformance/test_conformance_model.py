"""Property: a store driven through transactions holds exactly what ``AgentState`` would.

Random programs of appends (default or explicit parents, resource keys, semantic
memory, exact repeats), commit boundaries and resets run against the backend and
against one in-memory ``AgentState`` per scope; afterwards both must agree on every
node (id, kind, parents, payload, sequence, resource key), the frontier, the resource
heads and the versions of every key.

Repeats stay inside one transaction, and every other payload is unique: a re-append
of content stored by an *earlier* commit is resolved lazily by ``Transaction`` (see
``test_reappend_then_explicit_child`` in test_conformance_txn.py), so the node it
returns at append time is not yet the stored one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import AgentState, Transaction
from tether.store import Store

SCOPES = ("thread:t", "user:u")
KEYS = ("var:a", "var:ab", "var:b")
MEMORY_KEYS = ("x", "y")


@dataclass(frozen=True)
class Append:
    scope: int
    kind: str
    payload: Any
    parents: tuple[int, ...] | None  # indices into the scope's nodes (mod its size)
    key: str | None


@dataclass(frozen=True)
class Repeat:
    index: int  # repeat an Append of the open transaction exactly (same resolved parents)


@dataclass(frozen=True)
class Commit:
    pass


@dataclass(frozen=True)
class Reset:
    scope: int


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def appends(draw: st.DrawFn) -> Append:
    kind = draw(
        st.sampled_from(["goal", "inference", "tool_call", "answer", "resource", "semantic"])
    )
    parents = draw(st.none() | st.lists(st.integers(0, 50), max_size=3).map(tuple))
    key = None
    if kind == "resource":
        key = draw(st.sampled_from(KEYS))
        payload: Any = {"value": draw(json_value)}
    elif kind == "semantic":
        payload = {
            "type": "memory",
            "key": draw(st.sampled_from(MEMORY_KEYS)),
            "content": draw(json_value),
        }
    else:
        payload = {"v": draw(json_value)}
    return Append(draw(st.integers(0, len(SCOPES) - 1)), kind, payload, parents, key)


programs = st.lists(
    st.one_of(
        appends(),
        appends(),
        appends(),
        st.builds(Repeat, st.integers(0, 50)),
        st.just(Commit()),
        st.builds(Reset, st.integers(0, len(SCOPES) - 1)),
    ),
    max_size=25,
)


def _parents(model: AgentState, picks: tuple[int, ...] | None) -> list[str] | None:
    if picks is None:
        return None
    ids = [n.id for n in model.nodes]
    if not ids:
        return []
    return list(dict.fromkeys(ids[i % len(ids)] for i in picks))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=programs)
async def test_store_matches_the_in_memory_graph(store: Store, program: list[Any]) -> None:
    ns = f"model-{uuid.uuid4().hex}"
    models = {s: AgentState() for s in SCOPES}
    generations = dict.fromkeys(SCOPES, 0)
    txn = Transaction(store, ns)
    done: list[tuple[Append, list[str] | None]] = []  # appends of the open transaction

    for i, op in enumerate([*program, Commit()]):
        if isinstance(op, Repeat):
            if not done:
                continue
            op, resolved = done[op.index % len(done)]
            await _append(txn, models, op, resolved)
        elif isinstance(op, Append):
            op = _unique(op, i)
            resolved = _parents(models[SCOPES[op.scope]], op.parents)
            await _append(txn, models, op, resolved)
            done.append((op, resolved))
        elif isinstance(op, Commit):
            await txn.commit()
            txn, done = Transaction(store, ns), []
        else:
            await txn.commit()
            scope = SCOPES[op.scope]
            head = await store.reset_scope(ns, scope)
            generations[scope] += 1
            assert head.generation == generations[scope]
            models[scope] = AgentState()
            txn, done = Transaction(store, ns), []

    for scope, model in models.items():
        stored = await store.nodes(ns, scope, limit=10_000)
        assert [_shape(n) for n in stored] == [_shape(n) for n in model.nodes]
        head = await store.head(ns, scope)
        assert head.sequence == len(model)
        assert head.generation == generations[scope]
        assert list(head.frontier) == model.frontier
        heads = await store.resource_heads(ns, scope)
        assert {k: n.id for k, n in heads.items()} == {k: n.id for k, n in model.heads().items()}
        for key in {n.resource_key for n in model.nodes if n.resource_key}:
            versions = await store.versions(ns, scope, key)
            assert [n.id for n in versions] == [n.id for n in model.versions(key)]
        by_id = await store.get_nodes(ns, scope, [n.id for n in model.nodes])
        assert set(by_id) == {n.id for n in model.nodes}


async def _append(
    txn: Transaction, models: dict[str, AgentState], op: Append, parents: list[str] | None
) -> None:
    scope = SCOPES[op.scope]
    want = models[scope].append(op.kind, op.payload, parents=parents, resource_key=op.key)
    got = await txn.append(scope, op.kind, op.payload, parents=parents, resource_key=op.key)
    assert got.id == want.id
    assert got.sequence == want.sequence


def _unique(op: Append, i: int) -> Append:
    payload = dict(op.payload)
    if op.kind == "semantic":
        payload["content"] = {"c": payload["content"], "op": i}
    else:
        payload["op"] = i
    return Append(op.scope, op.kind, payload, op.parents, op.key)


def _shape(n: Any) -> tuple[Any, ...]:
    return (n.id, n.kind, n.parents, n.payload, n.sequence, n.resource_key)
