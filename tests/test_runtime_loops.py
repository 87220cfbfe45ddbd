"""Loops (seed 004's while_loop): LoopNode, loop_index, one committed record per iteration,
and a crash anywhere in a loop resumes at the iteration it was in."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import tether
from _proc_helpers import kill_when, log_lines, run_json
from test_runtime_recovery import Died, DyingStore
from tether.models import Rule, ScriptedModel
from tether.runtime import (
    Agent,
    Edge,
    LLMNode,
    LoopNode,
    Spec,
    SpecError,
    StepResult,
    ToolNode,
    VarNode,
    VarSetNode,
    tool,
)
from tether.store.in_memory import MemoryStore

NS = "default"


class Work:
    """A tool node's tool that records (iteration argument, idempotency key) per invocation."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []

        @tool
        async def work(i: int, idempotency_key: str) -> str:
            self.calls.append((i, idempotency_key))
            return f"did {i}"

        self.tool = work


def counting_spec(*, condition: str = "{{ loop_index < 4 }}", max_iterations: int = 10) -> Spec:
    return Spec(
        nodes=[
            LoopNode(name="loop", body="work", condition=condition, max_iterations=max_iterations),
            ToolNode(name="work", tool="work", arguments={"i": "{{ loop_index }}"}),
            VarNode(name="total", type="integer", scope="thread", default=0),
            VarSetNode(name="tally", var="total", value="{{ variables.total + 1 }}"),
        ],
        edges=[Edge(src="loop", dst="tally")],
        start="loop",
    )


def loop_records(nodes: list[tether.CausalNode]) -> list[dict[str, Any]]:
    return [
        n.payload["loop"]
        for n in nodes
        if n.kind == "resource" and isinstance(n.payload, dict) and "loop" in n.payload
    ]


async def test_a_loop_runs_its_body_while_the_condition_holds() -> None:
    store, w = MemoryStore(), Work()
    agent = Agent(counting_spec(), ScriptedModel.demo(), store=store, tools=[w.tool])
    r = await agent.step("go", thread="t")
    assert r.status == "completed"
    assert r.answer == 1  # the loop's edge ran once, after the loop ended
    assert [i for i, _ in w.calls] == [0, 1, 2, 3]
    nodes = await store.nodes(NS, "thread:t")
    # One record per iteration before its body, and one that ends the loop.
    assert loop_records(nodes) == [
        {"iteration": 0, "done": False},
        {"iteration": 1, "done": False},
        {"iteration": 2, "done": False},
        {"iteration": 3, "done": False},
        {"iteration": 4, "done": True},
    ]
    # Every iteration's call is its own node, so its own idempotency key.
    assert len({k for _, k in w.calls}) == 4
    # The body is fed the loop's input, then each iteration's output.
    starts = [n.payload["output"] for n in nodes if n.kind == "resource" and "loop" in n.payload]
    assert starts == ["go", "did 0", "did 1", "did 2", "did 3"]


async def test_max_iterations_bounds_the_loop_and_a_false_condition_runs_nothing() -> None:
    w = Work()
    agent = Agent(
        counting_spec(condition="true", max_iterations=3),
        ScriptedModel.demo(),
        store=MemoryStore(),
        tools=[w.tool],
    )
    assert (await agent.step("go", thread="t")).status == "completed"
    assert [i for i, _ in w.calls] == [0, 1, 2]

    w2 = Work()
    store = MemoryStore()
    agent = Agent(
        counting_spec(condition="input == 'never'"),
        ScriptedModel.demo(),
        store=store,
        tools=[w2.tool],
    )
    r = await agent.step("go", thread="t")
    assert r.status == "completed" and w2.calls == []
    assert loop_records(await store.nodes(NS, "thread:t")) == [{"iteration": 0, "done": True}]


async def test_templates_see_loop_index_and_variables_loop_index_and_nested_loops() -> None:
    seen: list[tuple[int, int, str]] = []

    @tool
    def mark(outer: int, inner: int, label: str) -> str:
        seen.append((outer, inner, label))
        return f"{outer}.{inner}"

    spec = Spec(
        nodes=[
            LoopNode(name="rows", body="cols", condition="loop_index < 2", max_iterations=5),
            LoopNode(name="cols", body="cell", condition="loop_index < 3", max_iterations=5),
            ToolNode(
                name="cell",
                tool="mark",
                arguments={
                    "outer": "{{ loops.rows.index }}",
                    "inner": "{{ loop_index }}",
                    "label": "n{{ variables.loop_index }}",
                },
            ),
        ],
        start="rows",
    )
    agent = Agent(spec, ScriptedModel.demo(), store=MemoryStore(), tools=[mark], max_steps=100)
    r = await agent.step("go", thread="t")
    assert r.status == "completed", r
    assert seen == [(o, i, f"n{i}") for o in range(2) for i in range(3)]
    assert r.answer == "1.2"


async def test_outside_a_loop_loop_index_is_undefined() -> None:
    @tool
    def echo(x: str) -> str:
        return x

    spec = Spec(nodes=[ToolNode(name="e", tool="echo", arguments={"x": "{{ loop_index }}"})])
    r = await Agent(spec, ScriptedModel.demo(), store=MemoryStore(), tools=[echo]).step("go")
    assert r.status == "failed" and r.error is not None and "loop_index" in r.error.message


async def test_an_llm_body_and_an_edge_back_to_the_loop() -> None:
    model = ScriptedModel([Rule(match=r"round (\d+)", answer="answered {1}")])
    spec = Spec(
        nodes=[
            LoopNode(name="loop", body="ask", condition="loop_index < 3"),
            LLMNode(name="ask", input="round {{ loop_index }}", tools=[]),
            VarNode(name="last", type="string", scope="run"),
            VarSetNode(name="keep", var="last"),
        ],
        edges=[Edge(src="ask", dst="keep"), Edge(src="keep", dst="loop")],
        start="loop",
    )
    store = MemoryStore()
    r = await Agent(spec, model, store=store).step("go", thread="t")
    assert r.status == "completed" and r.answer == "answered 2"
    nodes = await store.nodes(NS, "thread:t")
    assert [n.payload["input"] for n in nodes if n.kind == "inference"] == [
        "round 0",
        "round 1",
        "round 2",
    ]


def test_loop_spec_errors() -> None:
    with pytest.raises(SpecError, match="body 'nope' is not a node"):
        Spec(nodes=[LoopNode(name="l", body="nope"), LLMNode(name="a")], start="l")
    with pytest.raises(SpecError, match="from outside"):
        Spec(
            nodes=[LLMNode(name="a"), LoopNode(name="l", body="b"), LLMNode(name="b")],
            edges=[Edge(src="a", dst="l"), Edge(src="a", dst="b")],
            start="a",
        )
    with pytest.raises(SpecError, match="start node 'b' is in the body"):
        Spec(nodes=[LoopNode(name="l", body="b"), LLMNode(name="b")], start="b")
    with pytest.raises(SpecError, match="max_iterations"):
        LoopNode(name="l", body="b", max_iterations=-1)
    with pytest.raises(SpecError, match="does not parse"):
        Spec(nodes=[LoopNode(name="l", body="b", condition="((("), LLMNode(name="b")], start="l")


def test_loops_in_yaml_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        """
start: loop
nodes:
  - kind: while_loop
    name: loop
    body: work
    condition: "{{ loop_index < 2 }}"
    max_iterations: 5
    next: done
  - kind: tool
    name: work
    arguments: {i: "{{ loop_index }}"}
  - kind: llm
    name: done
""",
        encoding="utf-8",
    )
    spec = Spec.from_yaml(path)
    loop = spec.node("loop")
    assert isinstance(loop, LoopNode) and loop.max_iterations == 5 and loop.body == "work"
    assert spec.loop_of("work") == "loop" and spec.loop_of("done") is None
    assert Spec.from_dict(spec.to_dict()) == spec
    (tmp_path / "bad.yaml").write_text("kind: loop\nname: l\n", encoding="utf-8")
    with pytest.raises(SpecError, match="names its body"):
        Spec.from_yaml(tmp_path / "bad.yaml")


# -- crashes -----------------------------------------------------------------------------


async def _reference() -> tuple[int, Counter[str], Any]:
    w = Work()
    counting = DyingStore(MemoryStore(), at=10**9, after=False)
    r = await Agent(counting_spec(), ScriptedModel.demo(), store=counting, tools=[w.tool]).step(
        "go", thread="t"
    )
    assert r.status == "completed"
    graph = await counting.inner.nodes(NS, "thread:t", limit=10_000)
    return counting.count, Counter(n.kind for n in graph), r.answer


@pytest.mark.parametrize("after", [False, True], ids=["before-write", "after-write"])
async def test_a_crash_anywhere_in_a_loop_resumes_at_its_iteration(after: bool) -> None:
    commits, ref_kinds, ref_answer = await _reference()
    # goal, 5 loop records, 4 x (call, result), the var_set step, the answer
    assert commits == 1 + 5 + 8 + 1 + 1
    for k in range(2, commits + 1):
        inner = MemoryStore()
        first = Work()
        agent = Agent(
            counting_spec(),
            ScriptedModel.demo(),
            store=DyingStore(inner, at=k, after=after),
            tools=[first.tool],
        )
        with pytest.raises(Died):
            await agent.step("go", thread="t")
        before = await inner.nodes(NS, "thread:t", limit=10_000)
        started = [r["iteration"] for r in loop_records(before) if not r["done"]]
        second = Work()
        resumed: StepResult = await Agent(
            counting_spec(), ScriptedModel.demo(), store=inner, tools=[second.tool]
        ).resume("t")
        assert resumed.status == "completed" and resumed.answer == ref_answer, k
        graph = await inner.nodes(NS, "thread:t", limit=10_000)
        assert [n.to_dict() for n in graph[: len(before)]] == [n.to_dict() for n in before], k
        assert Counter(n.kind for n in graph) == ref_kinds, k
        # The new process went on from the iteration the graph was in: it never ran an
        # iteration that had completed, and never skipped one.
        done_before = {
            n.payload["arguments"]["i"]
            for n in before
            if n.kind == "tool_call"
            and any(r.kind == "tool_result" and n.id in r.parents for r in before)
        }
        assert [i for i, _ in second.calls] == [i for i in range(4) if i not in done_before], k
        if started:
            # It did not start over from iteration 0.
            assert loop_records(graph)[: len(started)] == [
                {"iteration": i, "done": False} for i in started
            ], k
        # A call interrupted mid-flight is re-issued with its original key.
        keys = {n.id for n in graph if n.kind == "tool_call"}
        assert all(key in keys for _, key in first.calls + second.calls), k
        assert len(loop_records(graph)) == 5
        versions = await inner.versions(NS, "thread:t", "var:total")
        assert [v.payload["value"] for v in versions] == [1], k


@pytest.mark.slow
async def test_sigkill_inside_a_loop_then_resume_in_a_new_process(tmp_path: Path) -> None:
    helper = str(Path(__file__).with_name("seed_proc.py"))
    db, log = tmp_path / "loop.db", tmp_path / "work.log"
    env = {
        **os.environ,
        "SEED_PROC_LOG": str(log),
        "SEED_PROC_SLOW_AT": "2",
        "SEED_PROC_SLEEP": "60",
    }
    code = kill_when(
        helper,
        str(db),
        "step",
        "t",
        env=env,
        ready=lambda: any(x["i"] == 2 for x in log_lines(log)),
        what="iteration 2 never started",
    )
    assert code == -signal.SIGKILL
    killed = log_lines(log)
    assert [x["i"] for x in killed] == [0, 1, 2]

    env["SEED_PROC_SLOW_AT"] = "-1"
    assert run_json(helper, str(db), "resume", "t", env=env)["answer"] == "did 4"
    calls = log_lines(log)
    # Iterations 0 and 1 were not run again; 2 was re-issued with its key; 3 and 4 followed.
    assert [x["i"] for x in calls] == [0, 1, 2, 2, 3, 4]
    assert calls[2]["key"] == calls[3]["key"] and calls[2]["pid"] != calls[3]["pid"]
    store = await tether.open_store(f"sqlite:///{db}")
    try:
        records = loop_records(await store.nodes(NS, "thread:t", limit=10_000))
    finally:
        await store.close()
    assert records == [{"iteration": i, "done": i == 5} for i in range(6)]
