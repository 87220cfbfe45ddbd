"""The append rules of SPEC §1 on the in-memory graph."""

from __future__ import annotations

from typing import Any

import pytest

from tether import AgentState, CausalNode, InvalidNode, NodeType, Vocabulary, node_id
from tether.core.graph import make_node


def test_identity_ignores_parent_order_and_duplicates() -> None:
    a, b = "cw_" + "a" * 24, "cw_" + "b" * 24
    assert node_id("goal", [b, a, b], {"x": 1}) == node_id("goal", [a, b], {"x": 1})
    assert node_id("goal", [a], {"x": 1}) != node_id("goal", [b], {"x": 1})
    assert node_id("goal", [], {"x": 1}, "r") != node_id("goal", [], {"x": 1})


def test_goal_takes_frontier_and_sequence_is_contiguous() -> None:
    s = AgentState()
    sys_ = s.append("system", {"content": "be brief"})
    g1 = s.append("goal", {"input": "hi"})
    assert g1.parents == (sys_.id,)
    ans = s.append("answer", {"output": "hello"})
    g2 = s.append("goal", {"input": "again"})
    assert g2.parents == (ans.id,)
    assert [n.sequence for n in s] == [1, 2, 3, 4]
    assert s.frontier == [g2.id]
    for n in s:
        for p in n.parents:
            parent = s.get(p)
            assert parent is not None and parent.sequence < n.sequence


def test_parallel_tool_calls_branch_and_join() -> None:
    s = AgentState()
    s.append("goal", {"input": "weather in Paris and Rome"})
    inf = s.append("inference", {"tool_calls": ["paris", "rome"]})
    c1 = s.append("tool_call", {"city": "Paris"}, parents=[inf.id])
    c2 = s.append("tool_call", {"city": "Rome"}, parents=[inf.id])
    assert set(s.frontier) == {c1.id, c2.id}
    r1 = s.append("tool_result", {"t": 20}, parents=[c1.id])
    r2 = s.append("tool_result", {"t": 25}, parents=[c2.id])
    assert set(s.frontier) == {r1.id, r2.id}
    join = s.append("inference", {"content": "20 and 25"})
    assert set(join.parents) == {r1.id, r2.id}
    assert s.frontier == [join.id]
    assert s.ancestors(join.id) >= {c1.id, c2.id, inf.id}
    assert s.descendants(inf.id) == {c1.id, c2.id, r1.id, r2.id, join.id}


def test_resource_versions_chain() -> None:
    s = AgentState()
    v1 = s.append("resource", {"value": 1}, resource_key="var:count")
    other = s.append("goal", {"input": "x"}, parents=[])
    v2 = s.append("resource", {"value": 2}, resource_key="var:count", parents=[other.id])
    assert v1.id in v2.parents and other.id in v2.parents
    head = s.head("var:count")
    assert head is not None and head.payload == {"value": 2}
    assert [n.payload["value"] for n in s.versions("var:count")] == [1, 2]
    assert set(s.heads("var:")) == {"var:count"}


def test_semantic_supersession_by_type_and_key() -> None:
    s = AgentState()
    a = s.semantic("preference", "tone", "formal")
    b = s.semantic("preference", "tone", "casual")
    c = s.semantic("memory", "tone", "unrelated")
    assert a.id in b.parents
    assert b.resource_key == "semantic:preference:tone"
    assert s.memory() == {"preference:tone": "casual", "memory:tone": "unrelated"}
    assert c.resource_key == "semantic:memory:tone"


def test_reappend_is_a_noop() -> None:
    s = AgentState()
    g = s.append("goal", {"input": "hi"}, parents=[])
    before = (s.to_json(), s.frontier)
    again = s.append("goal", {"input": "hi"}, parents=[])
    assert again is g
    assert (s.to_json(), s.frontier) == before


def test_vocabulary() -> None:
    s = AgentState(vocabulary=Vocabulary([NodeType(name="decision", description="A decision.")]))
    s.semantic("decision", "db", "sqlite")
    with pytest.raises(InvalidNode) as e:
        s.semantic("memory", "x", 1)  # not in this product's vocabulary
    assert e.value.code == "semantic_type"
    dyn = AgentState(vocabulary=Vocabulary(allow_dynamic=True))
    dyn.semantic("my-type_2", "k", 1)
    for bad in ("Upper", "1digit", "x" * 49, "sp ace", ""):
        with pytest.raises(InvalidNode) as e:
            dyn.semantic(bad, "k", 1)
        assert e.value.code in ("semantic_type", "semantic_payload")
    assert len(s) == 1 and len(dyn) == 1


@pytest.mark.parametrize(
    ("kind", "payload", "code"),
    [
        ("thought", {}, "kind"),
        ("goal", {"x": float("nan")}, "non_finite"),
        ("goal", {"x": float("inf")}, "non_finite"),
        ("goal", {"x": 2**60}, "number_range"),
        ("goal", {"x": object()}, "shape"),
        ("semantic", {"type": "memory", "key": "k"}, "semantic_payload"),
        ("semantic", {"type": "memory", "key": "", "content": 1}, "semantic_payload"),
    ],
)
def test_bad_writes_rejected_and_nothing_written(kind: str, payload: object, code: str) -> None:
    s = AgentState()
    g = s.append("goal", {"input": "keep"})
    with pytest.raises(InvalidNode) as e:
        s.append(kind, payload)
    assert e.value.code == code
    assert len(s) == 1 and s.frontier == [g.id]


def test_parent_must_exist_and_payload_limit() -> None:
    from tether import Limits

    s = AgentState(limits=Limits(max_payload_bytes=100))
    with pytest.raises(InvalidNode) as e:
        s.append("goal", {}, parents=["cw_" + "0" * 24])
    assert e.value.code == "parent_missing"
    with pytest.raises(InvalidNode) as e:
        s.append("goal", {"x": "y" * 200})
    assert e.value.code == "too_large"
    assert len(s) == 0


def test_trailing_newline_is_not_a_valid_name_or_id() -> None:
    dyn = AgentState(vocabulary=Vocabulary(allow_dynamic=True))
    with pytest.raises(InvalidNode) as e:
        dyn.semantic("memory\n", "k", 1)
    assert e.value.code == "semantic_type"
    with pytest.raises(InvalidNode):
        node_id("goal", ["cw_" + "a" * 24 + "\n"], {})


def test_new_node_is_an_ordinary_causal_node() -> None:
    # The fast constructor used by make_node and the stores builds the same object.
    import copy
    import dataclasses
    import pickle

    from tether.core.graph import new_node

    fields: dict[str, Any] = {
        "id": "cw_" + "a" * 24,
        "kind": "goal",
        "parents": ("cw_" + "b" * 24,),
        "payload": {"x": [1, "y"]},
        "created_at": "2026-01-02T03:04:05.678Z",
        "sequence": 7,
        "resource_key": "var:x",
    }
    fast = new_node(**fields)
    slow = CausalNode(**fields)
    assert type(fast) is CausalNode
    assert fast == slow and repr(fast) == repr(slow) and hash(fast.id) == hash(slow.id)
    assert dataclasses.asdict(fast) == dataclasses.asdict(slow)
    assert pickle.loads(pickle.dumps(fast)) == slow and copy.copy(fast) == slow
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.sequence = 8  # type: ignore[misc]
    # Both builders new_node may pick give that same node, down to its memory layout.
    from tether.core.graph import _relabelled, _set_slots

    for build in (_relabelled, _set_slots):
        n = build(*fields.values())
        assert type(n) is CausalNode and n == slow and repr(n) == repr(slow)
        assert n.__sizeof__() == slow.__sizeof__() and not hasattr(n, "__dict__")
        with pytest.raises(dataclasses.FrozenInstanceError):
            n.payload = None  # type: ignore[misc]


def test_created_at_texts_memo_is_created_at_text() -> None:
    from tether.store._sql import CreatedAtTexts, created_at_text

    texts = CreatedAtTexts()
    for v in (0, 1796173053679, 1796173053679, 1796173053680, "2026-01-02T03:04:05Z", -1):
        assert texts[v] == created_at_text(v)
    assert len(texts) == 5


def test_now_iso_is_javascript_to_iso_string() -> None:
    import re
    from datetime import UTC, datetime, timedelta

    from tether.core.graph import now_iso

    before = datetime.now(UTC) - timedelta(milliseconds=1)
    for _ in range(3):  # the second is cached: the result must still track the clock
        s = now_iso()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", s)
        t = datetime.fromisoformat(s.replace("Z", "+00:00"))
        assert before <= t <= datetime.now(UTC)


@pytest.mark.parametrize("parents", [[7], ["cw_" + "a" * 24, 7], [["cw_" + "a" * 24]]])
def test_make_node_rejects_a_parent_that_is_not_a_string(parents: list[Any]) -> None:
    with pytest.raises(InvalidNode) as e:
        make_node("goal", {}, parents, sequence=1)
    assert e.value.code == "shape"
