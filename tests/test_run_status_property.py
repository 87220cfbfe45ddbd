"""Property test: every reader of a run agrees on its status (SPEC §3, "Execution state").

Random run histories are written the way the runtime commits them (an inference with
its tool calls in one commit, then results, approvals and rejections one by one, an
answer or a protocol_error) and cut at any point, as a crash would: between two
results of one round, after an approval but before its call ran, after a rejection's
verification but before its error result. Each run's expected status comes from the
rule itself, applied to the generator's own record of what it wrote; then every reader
must say the same:

* the runtime's planner (``RunView`` + ``next_action``: ``Suspend`` is suspended,
  ``Finish`` completed or failed, anything else running), and ``StepResult``;
* the views: ``list_runs``, ``execution_view`` (the executor tree's root);
* the operations: ``task`` / ``task_states`` (the status history's last entry),
  ``flow_states``, ``pending_approvals`` and the run index after ``reindex``.

The crash window the rule settles: a round with one call waiting for approval and one
runnable call not yet run is ``running`` (resuming runs the runnable call without
anyone's decision, and only then suspends).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_helpers import Thread
from tether import Transaction, control, transact
from tether.control.flow import flow_states
from tether.core import scopes
from tether.projections import execution_view, list_runs
from tether.projections.runs import RunView, run_views
from tether.runtime.plan import Finish, Suspend, next_action
from tether.store.in_memory import MemoryStore

LIMITS: dict[str, Any] = {"max_steps": 1000, "max_tool_rounds": 1000}


@dataclass
class Sim:
    """What the generator wrote for one run, to compute the expected status."""

    run: str
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)  # current round's calls
    answered: bool = False
    failed: bool = False

    def expected(self) -> str:
        if self.failed:
            return "failed"
        if self.answered:
            return "completed"
        open_calls = [c for c in self.calls.values() if not c["result"]]
        waiting = [c for c in open_calls if c["approval"] and c["decision"] is None]
        return "suspended" if waiting and len(waiting) == len(open_calls) else "running"


# One run: a list of (choice, payload) draws; the simulation interprets them against
# what is possible at that point, and "stop" cuts the history there (a crash).
run_plan = st.lists(
    st.tuples(st.integers(0, 9), st.lists(st.booleans(), min_size=0, max_size=3)),
    max_size=12,
)


async def write(
    store: MemoryStore, ns: str, plans: list[list[tuple[int, list[bool]]]]
) -> list[Sim]:
    t = Thread(store, ns, "t")
    sims: list[Sim] = []
    for r, plan in enumerate(plans):
        sim = Sim(run=f"run_{r}")
        sims.append(sim)
        await t.goal(sim.run, f"q{r}")
        final = False  # the model answered without calls: the answer node comes next
        for rnd, (choice, flags) in enumerate(plan):
            open_calls = [c for c in sim.calls.values() if not c["result"]]
            if choice == 0:  # the process dies here
                break
            if choice == 1:  # the run fails (a protocol_error), wherever it stands
                await t.error(sim.run)
                sim.failed = True
                break
            if final:
                await t.answer(sim.run, "done")
                sim.answered = True
                break
            if not open_calls:  # the next round: an inference and its calls, one commit
                calls = [(f"c{rnd}_{i}", "pay" if a else "look", {}) for i, a in enumerate(flags)]
                sim.calls = {
                    cid: {"id": cid, "approval": a, "decision": None, "result": False}
                    for (cid, _, _), a in zip(calls, flags, strict=True)
                }
                await _infer(t, sim.run, calls, flags)
                final = not calls
                continue
            c = open_calls[choice % len(open_calls)]
            if c["approval"] and c["decision"] is None:
                decision = "rejected" if choice >= 7 else "approved"
                await t.verify(sim.run, c["id"], decision)
                c["decision"] = decision
            else:  # its result (the error result, if it was rejected)
                rejected = c["decision"] == "rejected"
                await t.result(sim.run, c["id"], "x", name="pay", is_error=rejected)
                c["result"] = True
    return sims


async def _infer(
    t: Thread, run: str, calls: list[tuple[str, str, dict[str, Any]]], flags: list[bool]
) -> None:
    """One inference with its calls in one commit (``Thread.inference`` marks all of a
    round's calls alike; here each call needs approval or not on its own)."""

    async def fn(txn: Transaction) -> None:
        inf = await txn.append(
            t.scope,
            "inference",
            {
                "run": run,
                "llm": "agent",
                "content": None if calls else "done",
                "tool_calls": [{"id": c, "name": n, "arguments": a} for c, n, a in calls],
                "usage": {},
            },
        )
        for (cid, name, args), approval in zip(calls, flags, strict=True):
            tc = await txn.append(
                t.scope,
                "tool_call",
                {
                    "run": run,
                    "llm": "agent",
                    "call_id": cid,
                    "name": name,
                    "arguments": args,
                    "needs_approval": approval,
                },
                parents=[inf.id],
            )
            t.calls[(run, "agent", cid)] = tc.id

    await transact(t.store, t.ns, fn)


async def readers(store: MemoryStore, ns: str, sims: list[Sim]) -> None:
    nodes = await store.nodes(ns, scopes.thread("t"), limit=100_000)
    views = run_views(nodes)
    expected = {s.run: s.expected() for s in sims}
    assert {r: v.status for r, v in views.items()} == expected

    for run, view in views.items():
        derived = RunView.derive(view.goal, nodes)
        action = next_action(derived, **LIMITS)
        planner = (
            "suspended"
            if isinstance(action, Suspend)
            else derived.status
            if isinstance(action, Finish)
            else "running"
        )
        assert planner == expected[run], (run, action)
        if expected[run] != "running":
            assert derived.result("t").status == expected[run]
        tree = await execution_view(store, ns, "t", run)
        assert tree.status == expected[run], run

    assert {i.run: i.status for i in await list_runs(store, ns, "t")} == expected
    states = await control.task_states(store, ns, "t")
    assert {s.run: s.status for s in states} == expected
    assert {s.run: s.history[-1].status for s in states} == expected
    assert {f.run: f.status for f in flow_states(nodes, {})} == expected

    latest = sims[-1]
    waiting = await control.pending_approvals(store, ns, "t")
    if expected[latest.run] == "suspended":
        assert waiting and {p.call_id for p in waiting} <= set(latest.calls)
    assert (await control.task(store, ns, "t")).status == expected[latest.run]

    await control.reindex(store, ns)
    index = await control.runs(store, namespace=ns)
    assert {r.run: r.status for r in index.runs} == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=st.lists(run_plan, min_size=1, max_size=3))
def test_every_reader_agrees_on_run_status(plans: list[list[tuple[int, list[bool]]]]) -> None:
    async def go() -> None:
        store = MemoryStore()
        sims = await write(store, "ns", plans)
        await readers(store, "ns", sims)

    asyncio.run(go())


async def test_crash_window_with_a_waiting_call_is_running() -> None:
    """One approval-gated call and one runnable call not yet run: running, everywhere."""
    store = MemoryStore()
    t = Thread(store, "ns", "t")
    sim = Sim(run="run_0")
    await t.goal(sim.run, "q")
    await _infer(t, sim.run, [("a", "pay", {}), ("b", "look", {})], [True, False])
    sim.calls = {
        "a": {"id": "a", "approval": True, "decision": None, "result": False},
        "b": {"id": "b", "approval": False, "decision": None, "result": False},
    }
    assert sim.expected() == "running"
    await readers(store, "ns", [sim])
    # Once the runnable call has its result, only a human can move it: suspended.
    await t.result(sim.run, "b", "ok", name="look")
    sim.calls["b"]["result"] = True
    assert sim.expected() == "suspended"
    await readers(store, "ns", [sim])
