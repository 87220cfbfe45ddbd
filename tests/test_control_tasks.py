"""Task and flow state (seed 002's task and flow modules): run metadata, status history,
the namespace's run index (Python and CLI), and the task / flow / tools stores."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tether
from tether import control
from tether.cli import main
from tether.models import Rule, ScriptedModel, call
from tether.runtime import (
    Agent,
    Edge,
    LoopNode,
    Spec,
    ToolNode,
    VarNode,
    VarSetNode,
    tool,
)
from tether.store.in_memory import MemoryStore
from tether.store.txn import Transaction

NS = "default"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay (a human approves)."""
    return f"paid {amount}"


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(match=r"pay (\d+)", tools=[call("pay", amount="{1}")], then="{result}"),
            Rule(match=r"look (\w+)", tools=[call("lookup", q="{1}")], then="{result}"),
            Rule(match=r"hi", answer="hello"),
        ]
    )


def agent(store: tether.Store, **kw: Any) -> Agent:
    return Agent(None, model(), store=store, tools=[lookup, pay], **kw)


class ReadCounter(MemoryStore):
    """Records which scopes had their nodes read, to prove a listing reads no thread."""

    def __init__(self) -> None:
        super().__init__()
        self.node_reads: list[str] = []

    async def nodes(self, namespace: str, scope: str, **kw: Any) -> list[tether.CausalNode]:
        self.node_reads.append(scope)
        return await super().nodes(namespace, scope, **kw)

    async def get_nodes(
        self, namespace: str, scope: str, ids: Sequence[str]
    ) -> dict[str, tether.CausalNode]:
        self.node_reads.append(scope)
        return await super().get_nodes(namespace, scope, ids)


async def test_a_run_carries_metadata_and_its_status_history() -> None:
    a = agent(MemoryStore())
    r = await a.step("pay 5", thread="t", user="ann", metadata={"ticket": "T-9"})
    assert r.status == "suspended"
    task = await a.task("t")
    assert task.metadata == {"ticket": "T-9", "user": "ann"}
    assert [h.status for h in task.history] == ["running", "suspended"]
    await a.approve("t", r.pending_approvals[0].call_id)
    task = await a.task("t", r.run_id)
    assert task.status == "completed" and task.input == "pay 5"
    assert [h.status for h in task.history] == ["running", "suspended", "running", "completed"]
    times = [h.at for h in task.history]
    assert times == sorted(times) and task.updated_at == times[-1]
    store = await a._get_store()
    kinds = {n.id: n.kind for n in await store.nodes(NS, "thread:t")}
    assert [kinds[h.node] for h in task.history] == ["goal", "tool_call", "verification", "answer"]
    assert control.TaskState.from_dict(orjson.loads(orjson.dumps(task.to_dict()))) == task
    with pytest.raises(tether.NotFound):
        await a.task("t", "run_nope")


async def test_runs_are_listed_across_the_namespace_by_status_without_reading_threads() -> None:
    store = ReadCounter()
    a = agent(store)
    waiting = []
    for i in range(3):
        r = await a.step(f"pay {i + 1}", thread=f"w{i}", user="ann" if i else "bob")
        waiting.append(r.run_id)
    for i in range(4):
        await a.step(f"look x{i}", thread=f"d{i}")
    failed = await Agent(
        Spec(nodes=[ToolNode(name="t", tool="lookup", arguments={"q": "{{ nope }}"})]),
        model(),
        store=store,
        tools=[lookup],
    ).step("x", thread="f")
    assert failed.status == "failed"

    store.node_reads.clear()
    listing = await control.runs(store, namespace=NS, status="suspended")
    assert store.node_reads == []  # only the app scope's resource heads were read
    assert [r.run for r in listing.runs] == waiting
    assert {r.thread for r in listing.runs} == {"w0", "w1", "w2"}
    assert all(r.pending[0]["name"] == "pay" for r in listing.runs)
    assert listing.counts == {"completed": 4, "failed": 1, "suspended": 3}
    assert listing.runs[0].metadata["user"] == "bob"
    assert [r.thread for r in (await a.runs(status="suspended", user="ann")).runs] == ["w1", "w2"]
    both = await a.runs(status=["failed", "completed"])
    assert sorted(r.thread for r in both.runs) == ["d0", "d1", "d2", "d3", "f"]
    assert [r.thread for r in (await a.runs(thread="d2")).runs] == ["d2"]
    assert control.RunList.from_dict(orjson.loads(orjson.dumps(listing.to_dict()))) == listing

    # Paging: oldest first, a cursor to continue, None on the last page.
    seen: list[str] = []
    after = None
    while True:
        page = await a.runs(limit=3, after=after)
        seen += [r.run for r in page.runs]
        if page.next_after is None:
            break
        after = page.next_after
    assert len(seen) == len(set(seen)) == 8
    with pytest.raises(tether.InvalidRequest) as ei:
        await a.runs(status="sleeping")
    assert ei.value.details["field"] == "status"
    with pytest.raises(tether.InvalidRequest):
        await a.runs(after="task:nope")

    # Deciding moves the run out of "suspended" in the same commit.
    await a.approve("w0", listing.runs[0].pending[0]["call_id"], resume=False)
    assert [r.thread for r in (await a.runs(status="suspended")).runs] == ["w1", "w2"]
    assert [r.status for r in (await a.runs(thread="w0")).runs] == ["running"]
    await a.resume("w0")
    assert [r.status for r in (await a.runs(thread="w0")).runs] == ["completed"]


async def test_the_index_follows_resets_imports_forks_and_reindex(tmp_path: Path) -> None:
    store = await tether.open_store(f"sqlite:///{tmp_path / 'i.db'}")
    try:
        a = agent(store)
        s1 = await a.step("pay 1", thread="a")
        await a.step("pay 2", thread="b")
        await a.step("look q", thread="c")
        # A run ended through the control plane is failed in the index too.
        await control.reset(store, namespace=NS, thread="a", run=s1.run_id)
        assert [r.status for r in (await a.runs(thread="a")).runs] == ["failed"]
        # A reset thread's runs leave the index.
        await control.reset(store, namespace=NS, thread="b")
        assert {r.thread for r in (await a.runs()).runs} == {"a", "c"}
        # Import and fork index the runs they bring (a fork of a suspended run can be approved).
        snap = (await control.export(store, namespace=NS, thread="c")).snapshot
        await control.import_(store, namespace=NS, thread="c2", snapshot=snap)
        await a.step("pay 3", thread="p")
        goal = next(n for n in await store.nodes(NS, "thread:p") if n.kind == "tool_call")
        await control.fork(store, namespace=NS, thread="p", node=goal.id, new_thread="p2")
        suspended = await a.runs(status="suspended")
        assert sorted(r.thread for r in suspended.runs) == ["p", "p2"]
        assert {r.thread for r in (await a.runs()).runs} == {"a", "c", "c2", "p", "p2"}
        # The index lives in the threads: resetting the app scope leaves it whole, and
        # reindex rebuilds it from the threads (nothing to do: it is in line).
        before = (await a.runs()).to_dict()["runs"]
        await control.reset(store, namespace=NS, app=True)
        assert (await a.runs()).to_dict()["runs"] == before
        assert await control.reindex(store, NS) == 0
        # Taken out of a thread, an entry comes back with reindex.
        p_entries = await store.resource_heads(NS, "thread:p", "task:")
        txn = Transaction(store, NS)
        await control.tasks.drop_entries(txn, "thread:p", p_entries)
        await txn.commit()
        assert {r.thread for r in (await a.runs()).runs} == {"a", "c", "c2", "p2"}
        assert await control.reindex(store, NS) == 1
        rebuilt = (await a.runs()).to_dict()["runs"]
        assert [(r["thread"], r["run"], r["status"]) for r in rebuilt] == [
            (r["thread"], r["run"], r["status"]) for r in before
        ]
        # The app's task store reports the namespace's index (read across the threads).
        d = await control.describe(store, namespace=NS, app=True, stores=["task"])
        assert d.stores[0].item_count == 5 and d.stores[0].metadata["status"]["suspended"] == 2
        # No run commit touched app.
        assert (await store.head(NS, "app")).sequence == 0
        assert (await store.head(NS, "thread:p")).sequence > 0
    finally:
        await store.close()


async def test_a_users_runs_leave_the_index_on_request() -> None:
    """For erasure: the index holds copies of run metadata under the namespace's key."""
    store = MemoryStore()
    a = agent(store)
    await a.step("pay 1", thread="x1", user="gone", metadata={"email": "g@example.org"})
    await a.step("look z", thread="x2", user="gone")
    await a.step("look z", thread="x3", user="stays")
    assert await control.tasks.unindex_user(store, NS, "gone") == 2
    assert [r.thread for r in (await a.runs()).runs] == ["x3"]
    heads = await store.resource_heads_across(NS, "task:", scope_prefix="")
    assert "g@example.org" not in str([n.payload for _, _, n in heads])
    assert await control.tasks.unindex_user(store, NS, "gone") == 0


async def test_task_and_flow_stores_of_a_thread() -> None:
    @tool
    def work(i: int) -> str:
        return f"did {i}"

    spec = Spec(
        nodes=[
            LoopNode(name="loop", body="work", condition="loop_index < 2"),
            ToolNode(name="work", tool="work", arguments={"i": "{{ loop_index }}"}),
            VarNode(name="note", type="string", scope="run"),
            VarSetNode(name="keep", var="note", value="kept {{ input }}"),
            ToolNode(name="pay", tool="pay", arguments={"amount": 1}),
        ],
        edges=[Edge(src="loop", dst="keep"), Edge(src="keep", dst="pay")],
        start="loop",
    )
    store = MemoryStore()
    a = Agent(spec, model(), store=store, tools=[work, pay])
    r = await a.step("go", thread="t", metadata={"source": "cron"})
    assert r.status == "suspended"
    d = await control.describe(store, namespace=NS, thread="t", include_data=True)
    by = {rep.name: rep for rep in d.stores}
    (flow,) = by["flow"].data
    assert flow["path"] == ["work", "work", "keep", "pay"]
    assert flow["current"] == "pay" and flow["status"] == "suspended"
    assert flow["loops"] == {"loop": {"iteration": 2, "done": True}}
    assert flow["variables"] == {"note": "kept did 1"}
    (task,) = by["task"].data
    assert task["metadata"] == {"source": "cron", "user": None}
    assert [h["status"] for h in task["history"]] == ["running", "suspended"]
    assert by["task"].metadata["status"] == {"suspended": 1}
    assert by["tools"].exists is False

    # Resetting flow deletes the run's variables and ends the unfinished run, nothing else.
    res = await control.reset(store, namespace=NS, thread="t", stores=["flow"])
    (rep,) = res.stores
    assert rep.cleared and rep.metadata["runs"] == [r.run_id]
    assert rep.metadata["variables"] == [f"run:{r.run_id}:var:note"]
    after = await control.describe(store, namespace=NS, thread="t", include_data=True)
    flow_after = next(x for x in after.stores if x.name == "flow").data
    assert flow_after[0]["variables"] == {} and flow_after[0]["status"] == "failed"
    assert [x.status for x in (await a.runs(thread="t")).runs] == ["failed"]
    # The next step starts the spec afresh (the conversation and thread remain).
    assert (await a.step("again", thread="t")).status == "suspended"
    res = await control.reset(store, namespace=NS, thread="t", stores=["task", "flow"])
    assert [x.name for x in res.stores] == ["task", "flow"]
    assert res.stores[0].metadata["runs"] == res.stores[1].metadata["runs"]  # ended once
    errors = [
        n for n in await store.nodes(NS, "thread:t", limit=1000) if n.kind == "protocol_error"
    ]
    assert len(errors) == 2
    # User scopes have no flow or task stores: reported, not failed.
    u = await control.describe(store, namespace=NS, user="u", stores=["flow", "task", "tools"])
    assert [(x.name, x.enabled) for x in u.stores[:-1]] == [
        ("flow", False),
        ("task", False),
        ("tools", True),
    ]


async def test_compact_accepts_store_names_and_reports_each() -> None:
    a = agent(MemoryStore())
    for i in range(12):
        await a.step(f"hi {i}", thread="t")
    res = await a.compact_state(
        "t", strategy="recent", max_messages=4, stores=["conversation", "tools", "flow"]
    )
    assert [r.name for r in res.stores] == ["conversation", "tools", "flow"]
    assert res.compacted == ("conversation",)
    assert "only the conversation" in res.stores[1].metadata["reason"]
    with pytest.raises(tether.InvalidRequest):
        await a.compact_state("t", stores=["tasks"])


def test_cli_runs_lists_suspended_runs(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"

    async def fill() -> None:
        async with agent(await tether.open_store(str(db))) as a:
            await a.step("pay 7", thread="waiting", metadata={"ticket": 1})
            await a.step("look y", thread="done")
            await a.close()

    asyncio.run(fill())
    runner = CliRunner()
    r = runner.invoke(main, ["--store", str(db), "--json", "runs", "--status", "suspended"])
    assert r.exit_code == 0, r.output
    data = orjson.loads(r.stdout)
    assert [x["thread"] for x in data["runs"]] == ["waiting"]
    assert data["runs"][0]["pending"][0]["name"] == "pay"
    assert data["counts"] == {"completed": 1, "suspended": 1}
    table = runner.invoke(main, ["--store", str(db), "runs"])
    assert table.exit_code == 0 and "waiting" in table.stdout and "done" in table.stdout
    assert "pay" in table.stdout and "suspended 1" in table.stdout
    bad = runner.invoke(main, ["--store", str(db), "runs", "--status", "asleep"])
    assert bad.exit_code == 2
    again = runner.invoke(main, ["--store", str(db), "--json", "runs", "--reindex"])
    assert again.exit_code == 0 and len(orjson.loads(again.stdout)["runs"]) == 2


# -- the index never disagrees with the threads ---------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["pay", "look", "approve", "reject", "park", "resume", "reset_run", "reset"]
        ),
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_the_index_agrees_with_the_threads(ops: list[tuple[str, int]]) -> None:
    async def go() -> None:
        store = MemoryStore()
        a = agent(store)
        for op, i in ops:
            t = f"t{i}"
            pending = await a.pending_approvals(t) if await store.head(NS, f"thread:{t}") else []
            try:
                if op in ("pay", "look"):
                    await a.step(f"{op} {i + 1}", thread=t)
                elif op in ("approve", "reject", "park") and pending:
                    if op == "reject":
                        await a.reject(t, pending[0].call_id)
                    else:
                        await a.approve(t, pending[0].call_id, resume=op == "approve")
                elif op == "resume":
                    await a.resume(t)
                elif op == "reset_run":
                    last = await a.runs(thread=t)
                    if last.runs:
                        await control.reset(store, namespace=NS, thread=t, run=last.runs[-1].run)
                elif op == "reset":
                    await control.reset(store, namespace=NS, thread=t)
            except (tether.RunSuspendedError, tether.NotFound):
                pass
        indexed = {(r.thread, r.run): r.status for r in (await a.runs(limit=10_000)).runs}
        derived = {}
        for i in range(3):
            for st_ in await control.task_states(store, NS, f"t{i}"):
                derived[(st_.thread, st_.run)] = st_.status
        assert indexed == derived

    asyncio.run(go())


async def test_the_index_keeps_each_runs_own_times_after_import_fork_and_reindex(
    tmp_path: Path,
) -> None:
    """An entry written after the fact (import, fork, reindex) carries the time of the
    run's last status change, as the thread's task history says, not the time it was
    written."""
    store = await tether.open_store(f"sqlite:///{tmp_path / 't.db'}")
    try:
        a = agent(store)
        await a.step("look q", thread="c")
        await a.step("pay 3", thread="p")

        async def own(thread: str) -> list[tuple[str, str]]:
            return [
                (t.started_at, t.updated_at) for t in await control.task_states(store, NS, thread)
            ]

        async def indexed(thread: str) -> list[tuple[str, str]]:
            return [(r.started_at, r.updated_at) for r in (await a.runs(thread=thread)).runs]

        assert await indexed("c") == await own("c") and await indexed("p") == await own("p")
        await asyncio.sleep(0.05)  # later commits get later times
        snap = (await control.export(store, namespace=NS, thread="c")).snapshot
        await control.import_(store, namespace=NS, thread="c2", snapshot=snap)
        call_node = next(n for n in await store.nodes(NS, "thread:p") if n.kind == "tool_call")
        await control.fork(store, namespace=NS, thread="p", node=call_node.id, new_thread="p2")
        assert await indexed("c2") == await own("c2") == await own("c")
        assert await indexed("p2") == await own("p2") == await own("p")
        for t in ("c", "c2", "p", "p2"):  # the entries out, then rebuilt from the threads
            txn = Transaction(store, NS)
            await control.tasks.drop_entries(
                txn, f"thread:{t}", await store.resource_heads(NS, f"thread:{t}", "task:")
            )
            await txn.commit()
        await asyncio.sleep(0.05)
        assert await control.reindex(store, NS) == 4
        for thread in ("c", "c2", "p", "p2"):
            assert await indexed(thread) == await own(thread), thread
    finally:
        await store.close()


def test_cli_import_indexes_the_runs_it_brings(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"

    async def fill() -> None:
        async with agent(await tether.open_store(str(db))) as a:
            await a.step("pay 7", thread="waiting")
            await a.close()

    asyncio.run(fill())
    runner = CliRunner()
    snap = tmp_path / "w.json"
    out = runner.invoke(main, ["--store", str(db), "export", "-t", "waiting", "-o", str(snap)])
    assert out.exit_code == 0, out.output
    r = runner.invoke(main, ["--store", str(db), "import", str(snap), "--new-thread", "copy"])
    assert r.exit_code == 0, r.output
    listed = orjson.loads(runner.invoke(main, ["--store", str(db), "--json", "runs"]).stdout)
    runs = {x["thread"]: x for x in listed["runs"]}
    assert set(runs) == {"waiting", "copy"}  # no --reindex needed
    assert runs["copy"]["status"] == "suspended"
    for key in ("started_at", "updated_at", "pending"):
        assert runs["copy"][key] == runs["waiting"][key], key
