"""Export, import, verify, fork and history of stored scopes, on memory:// and SQLite."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tether
from _control_helpers import add_turn, populate, set_variable
from tether import control
from tether.store import ScopeWrite


async def test_export_is_the_agent_state_bytes(store: tether.Store, ns: str) -> None:
    await populate(store, ns)
    data = await control.export_snapshot(store, ns, "thread:t1")
    state = tether.AgentState.from_json(data)  # valid by the import rules
    assert state.to_json() == data
    head = await store.head(ns, "thread:t1")
    assert [n.sequence for n in state.nodes] == list(range(1, head.sequence + 1))
    assert state.frontier == list(head.frontier)


async def test_export_streams_in_pages_and_reports_progress(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=5)
    seen: list[tuple[int, int]] = []
    chunks = [
        c
        async for c in control.export_chunks(
            store, ns, "thread:t1", page=3, progress=lambda d, t: seen.append((d, t))
        )
    ]
    total = (await store.head(ns, "thread:t1")).sequence
    assert len(chunks) == 2 + -(-total // 3)
    assert seen[-1] == (total, total) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert b"".join(chunks) == await control.export_snapshot(store, ns, "thread:t1")


async def test_export_of_an_empty_scope_is_an_empty_snapshot(store: tether.Store, ns: str) -> None:
    data = await control.export_snapshot(store, ns, "thread:none")
    assert orjson.loads(data) == {"version": 1, "nodes": [], "frontier": []}


async def test_import_then_export_returns_the_same_bytes(store: tether.Store, ns: str) -> None:
    await populate(store, ns)
    data = await control.export_snapshot(store, ns, "thread:t1")
    await control.import_snapshot(store, ns, "thread:copy", data)
    assert await control.export_snapshot(store, ns, "thread:copy") == data
    # The copy is a working graph: resource heads, frontier and appends behave.
    head = await store.resource_head(ns, "thread:copy", "var:cart")
    assert head is not None and head.payload["value"] == ["apple", "pear"]
    await add_turn(store, ns, "copy", "run_new", "more")
    assert (await control.verify_scope(store, ns, "thread:copy")).ok


async def test_import_keeps_foreign_created_at_strings(store: tether.Store, ns: str) -> None:
    s = tether.AgentState()
    s.append("goal", {"input": "hi"}, created_at="2024-01-02T03:04:05.123456+02:00")
    s.append("answer", {"output": "yo"}, created_at="2024-01-02T03:04:06Z")
    data = s.to_json()
    await control.import_snapshot(store, ns, "app", data)
    assert await control.export_snapshot(store, ns, "app") == data


async def test_import_into_a_non_empty_scope_is_refused(store: tether.Store, ns: str) -> None:
    await populate(store, ns)
    data = await control.export_snapshot(store, ns, "thread:t1")
    before = await store.head(ns, "thread:t1")
    with pytest.raises(tether.Conflict) as ei:
        await control.import_snapshot(store, ns, "thread:t1", data)
    assert ei.value.code == "scope_not_empty"
    assert await store.head(ns, "thread:t1") == before


async def test_import_replace_resets_then_writes(store: tether.Store, ns: str) -> None:
    await populate(store, ns)
    await add_turn(store, ns, "other", "run_x", "other thread")
    data = await control.export_snapshot(store, ns, "thread:other")
    before = await store.head(ns, "thread:t1")
    await control.import_snapshot(store, ns, "thread:t1", data, replace=True)
    after = await store.head(ns, "thread:t1")
    assert after.generation == before.generation + 1
    assert await control.export_snapshot(store, ns, "thread:t1") == data


async def test_import_into_a_reset_scope_restarts_sequences(store: tether.Store, ns: str) -> None:
    await populate(store, ns)
    data = await control.export_snapshot(store, ns, "thread:t1")
    await store.reset_scope(ns, "thread:t1")
    await control.import_snapshot(store, ns, "thread:t1", data)
    head = await store.head(ns, "thread:t1")
    assert head.generation == 1
    assert await control.export_snapshot(store, ns, "thread:t1") == data


def _tamper(data: bytes, how: str) -> bytes:
    snap = orjson.loads(data)
    nodes = snap["nodes"]
    if how == "payload":
        nodes[2]["payload"]["input"] = "tampered"
    elif how == "sequence":
        nodes[3]["sequence"] = 9
    elif how == "drop":  # a node cut out, the sequences made to look right again
        del nodes[1]
        for i, n in enumerate(nodes, 1):
            n["sequence"] = i
    elif how == "frontier":
        snap["frontier"] = ["cw_" + "0" * 24]
    elif how == "kind":
        nodes[0]["kind"] = "thought"
    return orjson.dumps(snap)


@pytest.mark.parametrize(
    ("how", "code", "index"),
    [
        ("payload", "identity_mismatch", 2),
        ("sequence", "sequence", 3),
        ("drop", "parent_missing", 1),
        ("frontier", "frontier", None),
        ("kind", "kind", 0),
    ],
)
async def test_a_tampered_snapshot_writes_nothing(
    store: tether.Store, ns: str, how: str, code: str, index: int | None
) -> None:
    await add_turn(store, ns, "t1", "run_1", "hello")
    bad = _tamper(await control.export_snapshot(store, ns, "thread:t1"), how)
    with pytest.raises(tether.InvalidSnapshot) as ei:
        await control.import_snapshot(store, ns, "thread:fresh", bad)
    assert ei.value.code == code and ei.value.index == index
    assert await store.head(ns, "thread:fresh") == tether.Head()
    check = control.verify_snapshot(bad)
    assert not check.ok and check.code == code


async def test_verify_passes_a_clean_scope_and_counts_nodes(store: tether.Store, ns: str) -> None:
    await populate(store, ns)
    check = await control.verify_scope(store, ns, "thread:t1", page=4)
    assert check.ok and check.code is None
    assert check.checked == (await store.head(ns, "thread:t1")).sequence


async def _write_raw(
    store: tether.Store,
    ns: str,
    scope: str,
    nodes: list[tether.CausalNode],
    frontier: tuple[str, ...],
) -> None:
    head = await store.head(ns, scope)
    await store.commit(
        ns,
        [
            ScopeWrite(
                scope=scope,
                expected_generation=head.generation,
                expected_sequence=0,
                nodes=tuple(nodes),
                frontier=frontier,
            )
        ],
    )


async def test_verify_names_the_first_bad_node_in_a_store(store: tether.Store, ns: str) -> None:
    # A store only keeps what it is given: write a graph whose fourth node lies
    # about its content, as a corrupted disk or a buggy writer would.
    await populate(store, ns, turns=2)
    good = await store.nodes(ns, "thread:t1", limit=10_000)
    import dataclasses

    bad = [
        dataclasses.replace(good[3], payload={"forged": True}) if i == 3 else n
        for i, n in enumerate(good)
    ]
    head = await store.head(ns, "thread:t1")
    await _write_raw(store, ns, "thread:bad", bad, head.frontier)
    check = await control.verify_scope(store, ns, "thread:bad", page=2)
    assert not check.ok
    assert (check.code, check.index, check.node_id, check.checked) == (
        "identity_mismatch",
        3,
        good[3].id,
        3,
    )


async def test_verify_sees_a_parent_stored_after_its_child(store: tether.Store, ns: str) -> None:
    s = tether.AgentState()
    a = s.append("goal", {"input": "a"})
    b = s.append("answer", {"output": "b"})
    import dataclasses

    swapped = [dataclasses.replace(b, sequence=1), dataclasses.replace(a, sequence=2)]
    await _write_raw(store, ns, "thread:swap", swapped, (b.id,))
    check = await control.verify_scope(store, ns, "thread:swap")
    assert (check.code, check.index, check.node_id) == ("parent_order", 0, b.id)


async def test_verify_checks_the_stored_frontier(store: tether.Store, ns: str) -> None:
    s = tether.AgentState()
    a = s.append("goal", {"input": "a"})
    await _write_raw(store, ns, "thread:f", [a], ("cw_" + "1" * 24,))
    check = await control.verify_scope(store, ns, "thread:f")
    assert check.code == "frontier"


async def test_fork_copies_the_causal_closure_with_the_same_ids(
    store: tether.Store, ns: str
) -> None:
    first = await add_turn(store, ns, "t1", "run_a", "first")
    await add_turn(store, ns, "t1", "run_b", "second")
    await set_variable(store, ns, "thread:t1", "cart", 1)
    src = await control.export_snapshot(store, ns, "thread:t1")
    nodes = await control.fork_thread(store, ns, "thread:t1", first["answer"], "thread:f1")
    state = tether.AgentState.from_json(await control.export_snapshot(store, ns, "thread:f1"))
    assert state.frontier == [first["answer"]]
    full = tether.AgentState.from_json(src)
    assert {n.id for n in state.nodes} == full.ancestors(first["answer"]) | {first["answer"]}
    assert [n.id for n in nodes] == [n.id for n in state.nodes]
    # The source is untouched and the fork is a live thread of its own.
    assert await control.export_snapshot(store, ns, "thread:t1") == src
    await add_turn(store, ns, "f1", "run_c", "branch")
    assert (await control.verify_scope(store, ns, "thread:f1")).ok
    assert await store.resource_head(ns, "thread:f1", "var:cart") is None


async def test_fork_from_a_missing_node_or_into_a_used_thread_fails(
    store: tether.Store, ns: str
) -> None:
    ids = await add_turn(store, ns, "t1", "run_a", "first")
    with pytest.raises(tether.NotFound):
        await control.fork_thread(store, ns, "thread:t1", "cw_" + "2" * 24, "thread:f")
    await add_turn(store, ns, "busy", "run_b", "x")
    with pytest.raises(tether.Conflict) as ei:
        await control.fork_thread(store, ns, "thread:t1", ids["goal"], "thread:busy")
    assert ei.value.code == "scope_not_empty"


async def test_history_pages_cover_every_node_once(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=4)
    total = (await store.head(ns, "thread:t1")).sequence
    seqs: list[int] = []
    after = 0
    while True:
        page, cursor = await control.history_page(store, ns, "thread:t1", after=after, limit=4)
        seqs += [n.sequence for n in page]
        if cursor is None:
            break
        after = cursor
    assert seqs == list(range(1, total + 1))
    down: list[int] = []
    before: int | None = None
    while True:
        page, cursor = await control.history_page(
            store, ns, "thread:t1", before=before, limit=5, descending=True
        )
        down += [n.sequence for n in page]
        if cursor is None:
            break
        before = cursor
    assert down == list(range(total, 0, -1))


ops = st.lists(
    st.tuples(st.sampled_from(["goal", "answer", "var", "mem", "branch"]), st.integers(0, 3)),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=ops)
async def test_export_import_export_is_identity_for_any_graph(ops: list[Any]) -> None:
    async with await tether.open_store("memory://") as store:
        ns = "prop"
        txn = tether.Transaction(store, ns)
        made: list[str] = []
        for kind, k in ops:
            if kind == "goal":
                n = await txn.append("thread:p", "goal", {"run": f"r{k}", "input": k})
            elif kind == "answer":
                n = await txn.append("thread:p", "answer", {"run": f"r{k}", "output": k})
            elif kind == "var":
                n = await txn.append(
                    "thread:p", "resource", {"name": "v", "value": k}, resource_key="var:v"
                )
            elif kind == "mem":
                n = await txn.semantic("thread:p", "memory", f"k{k % 2}", k)
            else:
                parents = [made[k % len(made)]] if made else None
                n = await txn.append(
                    "thread:p", "tool_call", {"k": k, "n": len(made)}, parents=parents
                )
            made.append(n.id)
        await txn.commit()
        data = await control.export_snapshot(store, ns, "thread:p")
        await control.import_snapshot(store, ns, "thread:q", data)
        assert await control.export_snapshot(store, ns, "thread:q") == data
        assert (await control.verify_scope(store, ns, "thread:q")).ok
        last = made[-1]
        await control.fork_thread(store, ns, "thread:p", last, "thread:f")
        assert (await control.verify_scope(store, ns, "thread:f")).ok
