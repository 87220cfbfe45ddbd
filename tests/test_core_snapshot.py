"""Snapshots: exact round trips, and every corruption rejected with its code (SPEC §1)."""

from __future__ import annotations

import contextlib
import copy
import random
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tether import AgentState, InvalidSnapshot, Limits, node_id
from tether.core.canonical import MAX_SAFE_INT, canonical_json

leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    leaf,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)
PLAIN_KINDS = ["goal", "inference", "tool_call", "tool_result", "answer", "system", "verification"]


@st.composite
def graphs(draw: st.DrawFn, min_nodes: int = 1) -> AgentState:
    s = AgentState()
    n = draw(st.integers(min_value=min_nodes, max_value=14))
    for _ in range(n):
        choice = draw(st.integers(0, 9))
        ids = [x.id for x in s]
        if choice <= 5 or not ids:
            parents = None
            if ids and draw(st.booleans()):
                parents = draw(st.lists(st.sampled_from(ids), max_size=3))
            s.append(draw(st.sampled_from(PLAIN_KINDS)), {"v": draw(json_values)}, parents=parents)
        elif choice <= 7:
            s.append(
                "resource",
                {"v": draw(json_values)},
                resource_key=draw(st.sampled_from(["var:a", "var:b"])),
            )
        else:
            s.semantic(
                draw(st.sampled_from(["memory", "preference"])),
                draw(st.sampled_from(["k1", "k2"])),
                draw(json_values),
            )
    return s


def _code(data: Any, **kw: Any) -> str:
    with pytest.raises(InvalidSnapshot) as e:
        AgentState.from_dict(data, **kw)
    return e.value.code


@given(graphs())
def test_export_import_export_is_byte_identical(s: AgentState) -> None:
    data = s.to_json()
    again = AgentState.from_json(data)
    assert again.to_json() == data
    assert again.frontier == s.frontier
    assert [n.id for n in again] == [n.id for n in s]


@given(json_values, st.randoms(use_true_random=False))
def test_identity_independent_of_key_order(payload: Any, rnd: random.Random) -> None:
    def shuffled(v: Any) -> Any:
        if isinstance(v, dict):
            items = list(v.items())
            rnd.shuffle(items)
            return {k: shuffled(x) for k, x in items}
        if isinstance(v, list):
            return [shuffled(x) for x in v]
        return v

    parents = ["cw_" + f"{i:024x}" for i in range(4)]
    rev = list(reversed(parents))
    assert node_id("goal", parents, payload) == node_id("goal", rev, shuffled(payload))


def _plain_indexes(d: dict[str, Any]) -> list[int]:
    return [i for i, n in enumerate(d["nodes"]) if n["kind"] != "semantic"]


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(graphs(min_nodes=2), st.data())
def test_every_mutation_is_rejected_with_its_code(s: AgentState, data: st.DataObject) -> None:
    base = s.to_dict()
    n = len(base["nodes"])
    assume(n >= 2)  # identical appends collapse into one node
    pick = lambda xs: data.draw(st.sampled_from(xs))  # noqa: E731

    def mutated() -> dict[str, Any]:
        return copy.deepcopy(base)

    # a byte of a payload changed
    d = mutated()
    i = pick(range(n))
    node = d["nodes"][i]
    if node["kind"] == "semantic":
        node["payload"]["content"] = [node["payload"]["content"], "x"]
    else:
        node["payload"]["v"] = [node["payload"]["v"], "x"]
    assert _code(d) == "identity_mismatch"

    # nodes reordered
    d = mutated()
    i, j = sorted(data.draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True)))
    d["nodes"][i], d["nodes"][j] = d["nodes"][j], d["nodes"][i]
    assert _code(d) == "sequence"

    # a parent dropped
    with_parents = [i for i, x in enumerate(base["nodes"]) if x["parents"]]
    if with_parents:
        d = mutated()
        node = d["nodes"][pick(with_parents)]
        node["parents"].pop(data.draw(st.integers(0, len(node["parents"]) - 1)))
        assert _code(d) == "identity_mismatch"

    # a parent invented
    d = mutated()
    node = d["nodes"][pick(range(n))]
    node["parents"] = sorted([*node["parents"], "cw_" + "f" * 23 + "e"])
    assert _code(d) == "parent_missing"

    # a parent that exists but comes later
    d = mutated()
    node = d["nodes"][0]
    node["parents"] = [d["nodes"][-1]["id"]]
    assert _code(d) == "parent_order"

    # parents not sorted
    multi = [i for i, x in enumerate(base["nodes"]) if len(x["parents"]) >= 2]
    if multi:
        d = mutated()
        d["nodes"][pick(multi)]["parents"].reverse()
        assert _code(d) == "parent_order"

    # a node duplicated
    d = mutated()
    dup = copy.deepcopy(d["nodes"][pick(range(n))])
    dup["sequence"] = n + 1
    d["nodes"].append(dup)
    assert _code(d) == "duplicate_id"

    # a sequence broken
    d = mutated()
    d["nodes"][pick(range(n))]["sequence"] += data.draw(st.sampled_from([1, -1, 100]))
    assert _code(d) == "sequence"

    # a frontier id added, or duplicated
    d = mutated()
    d["frontier"].append("cw_" + "0" * 24)
    assert _code(d) == "frontier"
    d = mutated()
    d["frontier"].append(d["frontier"][0])
    assert _code(d) == "frontier"

    # a kind changed: to an unknown kind, or to another valid kind
    d = mutated()
    d["nodes"][pick(range(n))]["kind"] = "thought"
    assert _code(d) == "kind"
    plain = _plain_indexes(base)
    if plain:
        d = mutated()
        node = d["nodes"][pick(plain)]
        node["kind"] = "answer" if node["kind"] != "answer" else "goal"
        assert _code(d) == "identity_mismatch"

    # NaN or Infinity in a payload (as a Python value and as JSON text)
    d = mutated()
    d["nodes"][pick(range(n))]["payload"] = {
        "v": data.draw(st.sampled_from([float("nan"), float("inf"), -float("inf")]))
    }
    assert _code(d) == "non_finite"
    text = orjson.dumps(mutated()).replace(b'"createdAt"', b'"x":NaN,"createdAt"', 1)
    with pytest.raises(InvalidSnapshot) as e:
        AgentState.from_json(text)
    assert e.value.code == "non_finite"

    # an invalid createdAt
    d = mutated()
    d["nodes"][pick(range(n))]["createdAt"] = pick(
        ["yesterday", "2026-13-01T00:00:00Z", "2026-01-01T00:00:00"]
    )
    assert _code(d) == "created_at"

    # oversized and too deeply nested
    assert _code(base, limits=Limits(max_nodes=n - 1)) == "too_large"
    biggest = max(len(canonical_json(x["payload"])) for x in base["nodes"])
    assume(biggest > 2)
    assert _code(base, limits=Limits(max_payload_bytes=biggest - 1)) == "too_large"
    d = mutated()
    deep: Any = 1
    for _ in range(70):
        deep = [deep]
    d["nodes"][pick(range(n))]["payload"] = deep
    assert _code(d) == "too_large"
    with pytest.raises(InvalidSnapshot) as e:
        AgentState.from_json(s.to_json(), limits=Limits(max_snapshot_bytes=10))
    assert e.value.code == "too_large"


WRONG_TYPES: list[tuple[str, Any, str]] = [
    ("id", 123, "shape"),
    ("id", "cw_short", "shape"),
    ("kind", 7, "kind"),
    ("parents", "cw_x", "shape"),
    ("parents", [1], "shape"),
    ("sequence", "1", "shape"),
    ("sequence", True, "shape"),
    ("createdAt", 5, "shape"),
    ("resourceKey", 5, "shape"),
    ("extra", 1, "shape"),
]


@pytest.mark.parametrize(("field", "value", "code"), WRONG_TYPES)
def test_wrong_types_in_nodes(field: str, value: Any, code: str) -> None:
    s = AgentState()
    s.append("goal", {"input": "hi"})
    d = s.to_dict()
    d["nodes"][0][field] = value
    assert _code(d) == code


@pytest.mark.parametrize(
    ("doc", "code"),
    [
        ([], "shape"),
        ({"version": 2, "nodes": [], "frontier": []}, "version"),
        ({"version": "1", "nodes": [], "frontier": []}, "version"),
        ({"version": 1, "nodes": {}, "frontier": []}, "shape"),
        ({"version": 1, "nodes": [], "frontier": "x"}, "shape"),
        ({"version": 1, "nodes": [], "frontier": [], "extra": 1}, "shape"),
        ({"version": 1, "nodes": [1], "frontier": []}, "shape"),
        ({"version": 1, "nodes": [], "frontier": [3]}, "frontier"),
    ],
)
def test_wrong_top_level(doc: Any, code: str) -> None:
    assert _code(doc) == code


def test_semantic_payload_checked_on_import() -> None:
    s = AgentState()
    s.semantic("memory", "name", "Alice")
    d = s.to_dict()
    del d["nodes"][0]["resourceKey"]
    assert _code(d) == "semantic_payload"
    d = s.to_dict()
    d["nodes"][0]["payload"] = {"type": "memory", "content": 1}
    assert _code(d) == "semantic_payload"


@given(json_values)
def test_garbage_only_raises_invalid_snapshot(garbage: Any) -> None:
    for doc in (
        garbage,
        {"version": 1, "nodes": [garbage], "frontier": []},
        {"version": 1, "nodes": garbage, "frontier": garbage},
    ):
        with contextlib.suppress(InvalidSnapshot):
            AgentState.from_dict(doc)


@given(graphs(), st.binary(min_size=1, max_size=3), st.integers(min_value=0))
def test_byte_corruption_only_raises_invalid_snapshot(
    s: AgentState, junk: bytes, where: int
) -> None:
    data = bytearray(s.to_json())
    pos = where % len(data)
    data[pos : pos + len(junk)] = junk
    with contextlib.suppress(InvalidSnapshot):
        AgentState.from_json(bytes(data))


def test_exact_bytes_and_created_at_kept() -> None:
    s = AgentState()
    s.append("goal", {"input": "hi"}, created_at="2026-01-02T03:04:05+02:00")
    data = s.to_json()
    assert b"2026-01-02T03:04:05+02:00" in data
    assert AgentState.from_json(data).to_json() == data
