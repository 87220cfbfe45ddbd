"""The control-plane operations: describe, reset (every target), and the dispatcher."""

from __future__ import annotations

import orjson
import pytest

import tether
from _control_helpers import add_turn, populate, remember, set_variable
from tether import control
from tether.control import StateOperationRequest
from tether.projections.conversation import load_conversation


def _report(result: control.StateOperationResult, name: str) -> control.StateStoreReport:
    (r,) = [r for r in result.stores if r.name == name]
    return r


async def test_describe_a_thread_reports_every_store(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=3)
    res = await control.describe(store, namespace=ns, thread="t1")
    head = await store.head(ns, "thread:t1")
    stats = await store.stats(ns, "thread:t1")
    graph = _report(res, "graph")
    assert graph.node_count == head.sequence == stats.nodes
    assert graph.size_bytes == stats.payload_bytes > 0
    assert graph.metadata["kinds"]["goal"] == 3
    assert _report(res, "variables").item_count == 2
    assert _report(res, "memory").item_count == 1
    ex = _report(res, "executions")
    assert ex.item_count == 3 and ex.metadata["status"] == {"completed": 3}
    conv = _report(res, "conversation")
    messages = await load_conversation(store, ns, "t1")
    assert conv.message_count == len(messages) > 0
    # No data unless asked for.
    assert all(r.data is None for r in res.stores)
    # Every store has something except the tools' own state, which this thread never got.
    assert res.missing == ("tools",)


async def test_describe_with_data_and_a_store_selection(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=1)
    res = await control.describe(
        store, namespace=ns, thread="t1", include_data=True, stores=["variables", "memory"]
    )
    assert [r.name for r in res.stores] == ["variables", "memory", "graph"]
    assert _report(res, "variables").data == {"cart": ["apple", "pear"], "count": 2}
    assert _report(res, "memory").data == {"memory:name": "Ada"}
    # The result crosses JSON intact.
    again = control.StateOperationResult.from_dict(orjson.loads(orjson.dumps(res.to_dict())))
    assert again == res


async def test_describe_user_and_app_scopes(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=1)
    user = await control.describe(store, namespace=ns, user="u1", include_data=True)
    assert _report(user, "memory").data == {"preference:units": "celsius"}
    conv = _report(user, "conversation")
    assert conv.enabled is False and conv.exists is False
    app = await control.describe(store, namespace=ns, app=True, include_data=True)
    assert _report(app, "variables").data == {"greeting": "hello"}


async def test_describe_a_namespace_lists_scopes(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=1)
    res = await control.describe(store, namespace=ns)
    assert sorted(r.scope or "" for r in res.stores) == ["app", "thread:t1", "user:u1"]
    assert res.metadata["scopes"] == 3
    assert res.metadata["nodes"] == sum(r.node_count or 0 for r in res.stores)


async def test_describe_a_missing_thread_says_so(store: tether.Store, ns: str) -> None:
    res = await control.describe(store, namespace=ns, thread="ghost")
    assert res.missing == ("thread:ghost",)
    assert _report(res, "graph").exists is False


async def test_reset_a_thread_leaves_every_other_scope(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=2)
    await add_turn(store, ns, "t2", "run_z", "other")
    keep = {s: await store.head(ns, s) for s in ("thread:t2", "user:u1", "app")}
    res = await control.reset(store, namespace=ns, thread="t1")
    assert res.cleared == ("thread:t1",)
    head = await store.head(ns, "thread:t1")
    assert head.sequence == 0 and head.generation == 1
    assert {s: await store.head(ns, s) for s in keep} == keep
    again = await control.reset(store, namespace=ns, thread="t1")
    assert again.cleared == () and again.missing == ("thread:t1",)


async def test_reset_one_variable_writes_a_tombstone(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=1)
    before = await store.head(ns, "thread:t1")
    res = await control.reset(store, namespace=ns, thread="t1", variable="cart")
    assert res.cleared == ("thread:t1/var:cart",)
    node = await store.resource_head(ns, "thread:t1", "var:cart")
    assert node is not None and node.payload == {"name": "cart", "type": "json", "deleted": True}
    # History stays; the other variable is untouched.
    assert len(await store.versions(ns, "thread:t1", "var:cart")) == 3
    assert (await store.head(ns, "thread:t1")).sequence == before.sequence + 1
    d = await control.describe(
        store, namespace=ns, thread="t1", include_data=True, stores=["variables"]
    )
    assert _report(d, "variables").data == {"count": 2}
    res2 = await control.reset(store, namespace=ns, thread="t1", variable="cart")
    assert res2.missing == ("thread:t1/var:cart",) and res2.cleared == ()


async def test_reset_a_run_ends_it_and_drops_it_from_the_view(store: tether.Store, ns: str) -> None:
    await add_turn(store, ns, "t1", "run_a", "keep me", tool=False)
    await add_turn(store, ns, "t1", "run_b", "forget me", tool=False)
    before = await load_conversation(store, ns, "t1")
    assert any(m["content"] == "forget me" for m in before)
    res = await control.reset(store, namespace=ns, thread="t1", run="run_b")
    assert res.cleared == ("thread:t1/run:run_b",)
    after = await load_conversation(store, ns, "t1")
    assert [m["content"] for m in after] == ["keep me", "re: keep me"]
    d = await control.describe(
        store, namespace=ns, thread="t1", include_data=True, stores=["executions"]
    )
    runs = {r["run"]: r for r in _report(d, "executions").data}
    assert runs["run_b"]["status"] == "failed" and runs["run_b"]["reset"] is True
    assert runs["run_a"]["status"] == "completed"
    again = await control.reset(store, namespace=ns, thread="t1", run="run_b")
    assert again.missing == ("thread:t1/run:run_b",)
    ghost = await control.reset(store, namespace=ns, thread="t1", run="run_nope")
    assert ghost.missing == ("thread:t1/run:run_nope",)


async def test_reset_a_run_keeps_completed_tool_calls(store: tether.Store, ns: str) -> None:
    await add_turn(store, ns, "t1", "run_a", "paid", tool=True, answer=False)
    await control.reset(store, namespace=ns, thread="t1", run="run_a")
    view = await load_conversation(store, ns, "t1")
    assert [m["role"] for m in view] == ["user", "assistant", "tool"]  # the receipt stays


async def test_reset_stores_of_a_scope_keeps_the_rest(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=2)
    res = await control.reset(store, namespace=ns, thread="t1", stores=["variables", "memory"])
    assert set(res.cleared) == {"thread:t1/variables", "thread:t1/memory"}
    d = await control.describe(store, namespace=ns, thread="t1")
    assert _report(d, "variables").item_count == 0
    assert _report(d, "memory").item_count == 0
    assert (
        _report(d, "conversation").message_count
        == len(await load_conversation(store, ns, "t1"))
        > 0
    )
    assert _report(d, "executions").item_count == 2


async def test_reset_the_conversation_keeps_variables_and_memory(
    store: tether.Store, ns: str
) -> None:
    await populate(store, ns, turns=2)
    res = await control.reset(store, namespace=ns, thread="t1", stores=["conversation"])
    assert res.cleared == ("thread:t1/conversation",)
    assert await load_conversation(store, ns, "t1") == []
    d = await control.describe(store, namespace=ns, thread="t1")
    assert _report(d, "variables").item_count == 2 and _report(d, "memory").item_count == 1
    await add_turn(store, ns, "t1", "run_new", "fresh start", tool=False)
    assert [m["content"] for m in await load_conversation(store, ns, "t1")] == [
        "fresh start",
        "re: fresh start",
    ]


async def test_reset_executions_ends_only_unfinished_runs(store: tether.Store, ns: str) -> None:
    await add_turn(store, ns, "t1", "run_done", "done", tool=False)
    await add_turn(store, ns, "t1", "run_open", "stuck", tool=False, answer=False)
    res = await control.reset(store, namespace=ns, thread="t1", stores=["executions"])
    assert _report(res, "executions").metadata["runs"] == ["run_open"]


async def test_reset_user_memory_only(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=1)
    await remember(store, ns, "user:u1", "memory", "city", "Paris")
    res = await control.reset(store, namespace=ns, user="u1", stores=["memory", "conversation"])
    assert res.cleared == ("user:u1/memory",)
    assert res.errors and res.errors[0]["store"] == "conversation"
    assert await store.resource_heads(ns, "user:u1", "semantic:") != {}
    d = await control.describe(store, namespace=ns, user="u1")
    assert _report(d, "memory").item_count == 0


async def test_reset_whole_namespace_touches_no_other(store: tether.Store, ns: str) -> None:
    await populate(store, ns, turns=1)
    other = ns + "-other"
    await populate(store, other, turns=1)
    res = await control.reset(store, namespace=ns, whole_namespace=True)
    assert res.cleared == (f"namespace:{ns}",) and res.metadata["scopes"] == 3
    assert await store.list_scopes(ns) == []
    assert len(await store.list_scopes(other)) == 3


async def test_reset_needs_a_target(store: tether.Store, ns: str) -> None:
    with pytest.raises(tether.InvalidRequest) as ei:
        await control.reset(store, namespace=ns)
    assert ei.value.details["field"] == "thread"
    with pytest.raises(tether.InvalidRequest) as ei:
        await control.reset(store, namespace=ns, variable="cart")
    assert ei.value.details["field"] == "variable"


async def test_a_late_writer_cannot_resurrect_a_reset_thread(store: tether.Store, ns: str) -> None:
    await add_turn(store, ns, "t1", "run_a", "x", tool=False)
    txn = tether.Transaction(store, ns)
    await txn.append("thread:t1", "goal", {"run": "run_late", "input": "late"})
    await control.reset(store, namespace=ns, thread="t1")
    with pytest.raises(tether.Conflict):
        await txn.commit()
    assert (await store.head(ns, "thread:t1")).sequence == 0


async def test_operations_through_execute_and_json(store: tether.Store, ns: str) -> None:
    ids = await add_turn(store, ns, "t1", "run_a", "hello")
    await set_variable(store, ns, "thread:t1", "x", 1)
    exported = await control.execute(store, "export", {"namespace": ns, "thread": "t1"})
    snap = exported.snapshot
    assert snap is not None and exported.metadata["nodes"] == len(snap["nodes"])
    imported = await control.execute(
        store, "import", {"namespace": ns, "thread": "copy", "snapshot": snap}
    )
    assert imported.created == "thread:copy" and imported.metadata["nodes"] == len(snap["nodes"])
    verified = await control.execute(store, "verify", {"namespace": ns})
    # The import indexed the copy's run in the copy itself: nothing was written to app.
    assert verified.ok and {c.scope for c in verified.checks} == {"thread:t1", "thread:copy"}
    forked = await control.execute(
        store, "fork", {"namespace": ns, "thread": "t1", "node": ids["goal"], "new_thread": "f"}
    )
    assert forked.created == "thread:f" and forked.metadata["nodes"] == 1
    page = await control.execute(store, "history", {"namespace": ns, "thread": "t1", "limit": 2})
    assert [n["sequence"] for n in page.nodes] == [1, 2] and page.next_after == 2
    assert control.ops.nodes_of(page)[0].id == ids["goal"]
    with pytest.raises(tether.InvalidRequest) as ei:
        await control.execute(store, "destroy", {})
    assert ei.value.details["field"] == "operation"
    with pytest.raises(tether.InvalidRequest):
        await control.execute(store, "history", {"namespace": ns})


async def test_verify_a_tampered_snapshot_request(store: tether.Store, ns: str) -> None:
    await add_turn(store, ns, "t1", "run_a", "hello")
    snap = (await control.export(store, StateOperationRequest(namespace=ns, thread="t1"))).snapshot
    assert snap is not None
    snap["nodes"][0]["payload"]["input"] = "evil"
    res = await control.verify(store, namespace=ns, snapshot=snap)
    assert not res.ok
    assert (res.checks[0].code, res.checks[0].index) == ("identity_mismatch", 0)
