"""The pure planner: what a run has done and what comes next, from its nodes alone."""

from __future__ import annotations

from typing import Any

from tether import AgentState, CausalNode
from tether.models import Rule, ScriptedModel, call
from tether.runtime import Agent, Edge, LLMNode, Spec, ToolNode, VarNode, VarSetNode, tool
from tether.runtime.plan import (
    Fail,
    Finish,
    Infer,
    Route,
    RunCalls,
    RunView,
    Suspend,
    next_action,
    step_key,
)
from tether.store.in_memory import MemoryStore

LIMITS: dict[str, Any] = {"max_steps": 50, "max_tool_rounds": 20}


async def recorded_run() -> tuple[list[list[CausalNode]], list[CausalNode]]:
    """A run with parallel calls, an approval, a var_set and a tool node, commit by commit."""

    @tool
    def look(city: str) -> str:
        return f"{city} ok"

    @tool(needs_approval=True)
    def book(city: str) -> str:
        return f"booked {city}"

    spec = Spec(
        nodes=[
            LLMNode(name="agent", tools=["look", "book"]),
            VarNode(name="n", type="integer", default=0),
            VarSetNode(name="inc", var="n", value="{{ variables.n + 1 }}"),
            ToolNode(name="final", tool="look", arguments={"city": "{{ nodes.agent.output }}"}),
        ],
        edges=[Edge(src="agent", dst="inc"), Edge(src="inc", dst="final")],
        start="agent",
    )
    model = ScriptedModel(
        [
            Rule(
                match=r"trip (\w+)",
                tools=[call("look", city="{1}"), call("book", city="{1}")],
                then="{1}",
            )
        ]
    )

    class Recording(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.commits: list[list[CausalNode]] = []

        async def commit(self, namespace: str, writes: Any) -> None:
            await super().commit(namespace, writes)
            self.commits.append([n for w in writes if w.scope == "thread:t" for n in w.nodes])

    store = Recording()
    agent = Agent(spec, model, store=store, tools=[look, book])
    r = await agent.step("trip Oslo", thread="t")
    assert r.status == "suspended"
    r = await agent.approve("t", r.pending_approvals[0].call_id)
    assert r.status == "completed" and r.answer == "Oslo ok"
    return store.commits, await store.nodes("default", "thread:t")


def _entry(n: CausalNode) -> bool:
    return (n.resource_key or "").startswith("task:")


async def test_every_prefix_plans_exactly_the_next_commit() -> None:
    commits, graph = await recorded_run()
    goal = graph[0]
    expected = [
        # after the goal: enter the start node (an inference with its calls)
        (Route, ["inference", "tool_call", "tool_call"]),
        # the call needing no approval runs; the other waits
        (RunCalls, ["tool_result"]),
        # the approval (its verification) comes from outside; then the approved call runs
        (Suspend, ["verification"]),
        (RunCalls, ["tool_result"]),
        (Infer, ["inference"]),
        (Route, ["resource", "resource"]),  # the thread variable and var_set's step record
        (Route, ["tool_call"]),  # enter the tool node
        (RunCalls, ["tool_result"]),
        (Route, ["answer"]),
        (Finish, None),
    ]
    done: list[CausalNode] = list(commits[0])
    # The run's index entry rides in the commits that change its status; the planner
    # reads past it (it is in ``done``), so it is left out of the kinds compared only.
    assert [n.kind for n in commits[0]] == ["goal", "resource"]
    for i, (action_type, next_kinds) in enumerate(expected):
        view = RunView.derive(goal, done)
        action = next_action(view, **LIMITS)
        assert isinstance(action, action_type), (i, action)
        if next_kinds is None:
            break
        written = commits[i + 1]
        assert [n.kind for n in written if not _entry(n)] == next_kinds, i
        done += written
    assert done == graph


async def test_view_of_a_finished_run() -> None:
    _, graph = await recorded_run()
    view = RunView.derive(graph[0], graph)
    assert view.status == "completed" and view.finished
    assert [(v.node, v.kind, v.output) for v in view.visits] == [
        ("agent", "llm", "Oslo"),
        ("inc", "var", 1),
        ("final", "tool", "Oslo ok"),
    ]
    assert view.outputs() == {
        "agent": {"output": "Oslo"},
        "inc": {"output": 1},
        "final": {"output": "Oslo ok"},
    }
    [record] = [n for n in graph if n.kind == "resource" and "node" in n.payload]
    assert record.resource_key == step_key(view.run_id, "inc")
    call = next(iter(view.calls.values()))
    assert view.find_call(call.call_id) is call and view.find_call(call.node.id) is call


def test_statuses_and_limits_from_hand_built_graphs() -> None:
    g = AgentState()
    goal = g.append("goal", {"run": "r1", "input": "x", "llm": "a", "metadata": {"user": "u"}})
    view = RunView.derive(goal, g.nodes)
    assert view.user == "u" and view.status == "running"
    assert isinstance(next_action(view, **LIMITS), Route)

    inf = g.append(
        "inference",
        {
            "run": "r1",
            "llm": "a",
            "content": None,
            "tool_calls": [{"id": "c1", "name": "pay", "arguments": {}}],
            "usage": {},
        },
    )
    tc = g.append(
        "tool_call",
        {
            "run": "r1",
            "llm": "a",
            "call_id": "c1",
            "name": "pay",
            "arguments": {},
            "needs_approval": True,
        },
        parents=[inf.id],
    )
    view = RunView.derive(goal, g.nodes)
    assert view.status == "suspended"
    assert [c.call_id for c in view.pending()] == ["c1"]
    assert isinstance(next_action(view, **LIMITS), Suspend)
    # A limit of one model round: the visit may not ask the model again.
    g.append(
        "verification",
        {"run": "r1", "call_id": "c1", "tool_call": tc.id, "decision": "approved", "reason": None},
        parents=[tc.id],
    )
    view = RunView.derive(goal, g.nodes)
    assert view.status == "running" and isinstance(next_action(view, **LIMITS), RunCalls)
    g.append(
        "tool_result",
        {
            "run": "r1",
            "llm": "a",
            "call_id": "c1",
            "name": "pay",
            "content": "ok",
            "is_error": False,
        },
        parents=[tc.id],
    )
    view = RunView.derive(goal, g.nodes)
    assert isinstance(next_action(view, **LIMITS), Infer)
    limited = next_action(view, max_steps=50, max_tool_rounds=1)
    assert isinstance(limited, Fail) and limited.code == "step_limit"
    # Nodes of other runs are ignored; a protocol_error fails the run.
    g.append("goal", {"run": "r2", "input": "y", "llm": "a", "metadata": {}})
    g.append("protocol_error", {"run": "r1", "error": {"code": "x", "message": "boom"}})
    view = RunView.derive(goal, g.nodes)
    assert view.status == "failed" and view.run_error is not None
    assert view.run_error.message == "boom"
    assert isinstance(next_action(view, **LIMITS), Finish)
