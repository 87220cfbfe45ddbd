"""Agent turns in one process over the in-memory store: tools, approvals, parallel calls,
memory writes, context, failures, and the shape of what each step commits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tether
from tether.models import (
    MemoryWrite,
    ModelConnectionError,
    ModelRequest,
    ModelResponse,
    Rule,
    ScriptedModel,
    ToolCall,
    call,
    remember,
)
from tether.runtime import (
    Agent,
    ApprovalError,
    Edge,
    LLMNode,
    RunSuspendedError,
    Spec,
    StepResult,
    ToolNode,
    VarNode,
    VarSetNode,
    tool,
)
from tether.runtime.templates import environment
from tether.store import ScopeWrite, Store
from tether.store.in_memory import MemoryStore

NS = "default"


class FnModel:
    """A model whose response is computed by a function of the request."""

    def __init__(self, fn: Callable[[ModelRequest], ModelResponse]) -> None:
        self.fn = fn
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return self.fn(request)


class RecordingStore(MemoryStore):
    """Keeps every commit's writes, to check what one step commits."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: list[list[ScopeWrite]] = []

    async def commit(self, namespace: str, writes: Any) -> None:
        await super().commit(namespace, writes)
        self.commits.append(list(writes))


async def nodes(store: Store, scope: str) -> list[tether.CausalNode]:
    return await store.nodes(NS, scope, limit=10_000)


def own(graph: list[tether.CausalNode]) -> list[tether.CausalNode]:
    """The run's own nodes: without its index entries (``task:<run>`` resources)."""
    return [n for n in graph if not (n.resource_key or "").startswith("task:")]


async def everything(store: Store) -> list[tether.CausalNode]:
    out = []
    for s in await store.list_scopes(NS, limit=1000):
        out += await nodes(store, s.scope)
    return out


# -- tools ---------------------------------------------------------------------------


async def test_parallel_tool_calls_branch_the_frontier_and_join() -> None:
    started: list[str] = []
    both = asyncio.Event()

    @tool
    async def lookup(city: str) -> dict[str, Any]:
        started.append(city)
        if len(started) == 2:
            both.set()
        # Each call waits for the other to start: only concurrent execution finishes.
        await asyncio.wait_for(both.wait(), timeout=5)
        return {"city": city, "temp": len(city)}

    model = ScriptedModel(
        [
            Rule(
                match=r"compare (\w+) and (\w+)",
                tools=[call("lookup", city="{1}"), call("lookup", city="{2}")],
                then="{results[0][temp]} vs {results[1][temp]}",
            )
        ]
    )
    store = RecordingStore()
    agent = Agent(None, model, store=store, tools=[lookup])
    result = await agent.step("compare Paris and Rome", thread="t")
    assert result.status == "completed" and result.answer == "5 vs 4"
    assert sorted(started) == ["Paris", "Rome"]

    graph = await nodes(store, "thread:t")
    by_id = {n.id: n for n in graph}
    [inf1, inf2] = [n for n in graph if n.kind == "inference"]
    calls = [n for n in graph if n.kind == "tool_call"]
    results = [n for n in graph if n.kind == "tool_result"]
    assert len(calls) == 2 and len(results) == 2
    # Branch: both calls hang off the one inference.
    assert all(c.parents == (inf1.id,) for c in calls)
    # Each result hangs off its own call.
    assert {r.parents for r in results} == {(c.id,) for c in calls}
    # Join: the next inference has both results as parents.
    assert set(inf2.parents) == {r.id for r in results}
    assert {by_id[p].kind for p in inf2.parents} == {"tool_result"}
    # Each result was its own commit, made as it completed. The run's index entry (a
    # ``task:<run>`` resource) rides in the commits that change its status, in the
    # thread's own scope: no commit of the run touches another scope.
    assert {w.scope for c in store.commits for w in c} == {"thread:t"}
    thread_writes = [[n.kind for n in w.nodes] for c in store.commits for w in c]
    assert thread_writes == [
        ["goal", "resource"],
        ["inference", "tool_call", "tool_call"],
        ["tool_result"],
        ["tool_result"],
        ["inference", "answer", "resource"],  # a final answer with no edge ends the run
    ]
    entries = [n for n in graph if n.kind == "resource"]
    assert {n.resource_key for n in entries} == {f"task:{result.run_id}"}


async def test_tool_errors_and_unknown_tools_reach_the_model_as_error_results() -> None:
    @tool
    def divide(a: int, b: int) -> float:
        return a / b

    def respond(req: ModelRequest) -> ModelResponse:
        last = req.messages[-1]
        if last["role"] == "tool":
            results = [m for m in req.messages if m["role"] == "tool"]
            return ModelResponse(content=" | ".join(str(m["content"]) for m in results))
        return ModelResponse(
            tool_calls=[
                ToolCall(id="c1", name="divide", arguments={"a": 1, "b": 0}),
                ToolCall(id="c2", name="nope", arguments={}),
                ToolCall(id="c3", name="divide", arguments={"a": "x"}),
            ]
        )

    store = MemoryStore()
    agent = Agent(None, FnModel(respond), store=store, tools=[divide])
    result = await agent.step("go", thread="t")
    assert result.status == "completed"
    parts = result.answer.split(" | ")
    assert parts[0] == "ZeroDivisionError: division by zero"
    assert parts[1].startswith("Unknown tool 'nope'")
    assert parts[2].startswith("Invalid arguments for divide:")
    errs = [
        n.payload["is_error"] for n in await nodes(store, "thread:t") if n.kind == "tool_result"
    ]
    assert errs == [True, True, True]


async def test_idempotency_key_and_context_are_injected_not_in_schema() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    @tool
    def act(x: int, idempotency_key: str, context: dict[str, Any]) -> str:
        seen.append((idempotency_key, context))
        return "ok"

    assert set(act.parameters["properties"]) == {"x"}
    model = ScriptedModel([Rule(match="act", tools=[call("act", x=1)], then="{result}")])
    store = MemoryStore()
    agent = Agent(None, model, store=store, tools=[act])
    await agent.step("act", thread="t", context={"tenant": "acme"})
    [call_node] = [n for n in await nodes(store, "thread:t") if n.kind == "tool_call"]
    assert seen == [(call_node.id, {"tenant": "acme"})]


# -- approvals -----------------------------------------------------------------------


def pay_model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                match=r"pay (\d+)",
                tools=[call("pay", amount="{1}"), call("note", text="paying {1}")],
                then="{results}",
            ),
            Rule(match=None, answer="hello"),
        ]
    )


def pay_tools(log: list[str]) -> list[tether.runtime.Tool]:
    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        log.append(f"pay {amount}")
        return f"paid {amount}"

    @tool
    def note(text: str) -> str:
        log.append(f"note {text}")
        return "noted"

    return [pay, note]


async def test_approval_suspends_then_runs_and_other_calls_do_not_wait() -> None:
    log: list[str] = []
    store = MemoryStore()
    agent = Agent(None, pay_model(), store=store, tools=pay_tools(log))
    r = await agent.step("pay 5", thread="t")
    assert r.status == "suspended"
    [p] = r.pending_approvals
    assert (p.name, p.arguments) == ("pay", {"amount": "5"})
    assert log == ["note paying 5"]  # the call that needs no approval already ran
    assert await agent.pending_approvals("t") == [p]

    with pytest.raises(RunSuspendedError) as e:
        await agent.step("hi", thread="t")
    assert e.value.details["pending"][0]["call_id"] == p.call_id
    with pytest.raises(ApprovalError):
        await agent.approve("t", "no-such-call")

    done = await agent.approve("t", p.node_id, reason="ok by finance")
    assert done.status == "completed" and done.run_id == r.run_id
    assert log == ["note paying 5", "pay 5"]
    with pytest.raises(ApprovalError, match="already approved"):
        await agent.approve("t", p.call_id)
    [ver] = [n for n in await nodes(store, "thread:t") if n.kind == "verification"]
    assert ver.payload["decision"] == "approved" and ver.payload["reason"] == "ok by finance"
    assert ver.parents == (p.node_id,)
    assert (await agent.step("hi", thread="t")).answer == "hello"


async def test_rejection_gives_the_model_an_error_result_and_never_runs_the_tool() -> None:
    log: list[str] = []
    store = MemoryStore()
    agent = Agent(None, pay_model(), store=store, tools=pay_tools(log))
    r = await agent.step("pay 7", thread="t")
    done = await agent.reject("t", r.pending_approvals[0].call_id, reason="too much")
    assert done.status == "completed"
    assert "A human rejected this call: too much." in done.answer
    assert log == ["note paying 7"]
    [res] = [
        n
        for n in await nodes(store, "thread:t")
        if n.kind == "tool_result" and n.payload["name"] == "pay"
    ]
    assert res.payload["is_error"] is True
    kinds = {n.id: n.kind for n in await nodes(store, "thread:t")}
    assert sorted(kinds[x] for x in res.parents) == ["tool_call", "verification"]


# -- memory written by the model -------------------------------------------------------


async def test_model_writes_memory_with_a_tool_call_in_one_response_and_one_commit() -> None:
    @tool
    def book(day: str) -> str:
        return f"booked {day}"

    model = ScriptedModel(
        [
            Rule(
                match=r"book (\w+), i like (\w+)",
                tools=[call("book", day="{1}")],
                remember=[remember("seat", "{2}", type="preference")],
                then="{result}",
            )
        ]
    )
    store = RecordingStore()
    agent = Agent(None, model, store=store, tools=[book])
    r = await agent.step("book monday, i like aisle", thread="t", user="u")
    assert r.answer == "booked monday"
    assert len(model.requests) == 2  # the call round and the follow-up: no extra call
    step = next(c for c in store.commits if any(n.kind == "inference" for w in c for n in w.nodes))
    assert {w.scope: [n.kind for n in w.nodes] for w in step} == {
        "thread:t": ["inference", "tool_call"],
        "user:u": ["semantic"],
    }
    # The next turn's model request carries the memory.
    await agent.step("book friday, i like window", thread="t2", user="u")
    assert model.requests[-2].memory == {"preference:seat": "aisle"}
    heads = await store.resource_heads(NS, "user:u")
    assert heads["semantic:preference:seat"].payload["content"] == "window"
    assert len(await store.versions(NS, "user:u", "semantic:preference:seat")) == 2


async def test_memory_types_follow_the_vocabulary() -> None:
    def respond(req: ModelRequest) -> ModelResponse:
        return ModelResponse(
            content="ok",
            memories=[
                MemoryWrite(type="memory", key="a", content=1),
                MemoryWrite(type="mood", key="b", content="calm"),
            ],
        )

    store = MemoryStore()
    strict = Agent(None, FnModel(respond), store=store)
    await strict.step("x", thread="t")  # no user: memories go to the thread scope
    mem = await store.resource_heads(NS, "thread:t", "semantic:")
    assert set(mem) == {"semantic:memory:a"}
    [inf] = [n for n in await nodes(store, "thread:t") if n.kind == "inference"]
    assert [r["type"] for r in inf.payload["memory_rejected"]] == ["mood"]

    dynamic = Agent(None, FnModel(respond), store=store, allow_dynamic_node_types=True)
    await dynamic.step("x", thread="t2")
    assert set(await store.resource_heads(NS, "thread:t2", "semantic:")) == {
        "semantic:memory:a",
        "semantic:mood:b",
    }
    custom = Agent(None, FnModel(respond), store=store, node_types=["mood"])
    await custom.step("x", thread="t3")
    assert set(await store.resource_heads(NS, "thread:t3", "semantic:")) == {"semantic:mood:b"}


# -- specs: variables, tool nodes, conditions, context ---------------------------------


def routing_spec() -> Spec:
    return Spec(
        nodes=[
            LLMNode(name="agent", system="You serve {{ context.org }}.", tools=[]),
            VarNode(name="city", type="string", scope="thread", default="nowhere"),
            VarNode(name="visits", type="integer", scope="user", default=0),
            VarSetNode(name="save_city", var="city", value="{{ output_city(input) }}"),
            ToolNode(name="forecast", tool="forecast", arguments={"city": "{{ variables.city }}"}),
            VarSetNode(name="count", var="visits", value="{{ variables.visits + 1 }}"),
        ],
        edges=[
            Edge(src="agent", dst="save_city", condition="'city:' in output"),
            Edge(src="save_city", dst="forecast"),
            Edge(src="forecast", dst="count", condition="{{ context.count }}"),
        ],
        start="agent",
    )


async def test_spec_with_variables_tool_node_and_conditions() -> None:
    environment().globals["output_city"] = lambda s: s.split(":")[1]
    seen: list[dict[str, Any]] = []

    @tool
    def forecast(city: str, context: dict[str, Any]) -> dict[str, Any]:
        seen.append(context)
        return {"city": city, "sky": "clear"}

    model = ScriptedModel([Rule(match=r"go to (\w+)", answer="city:{1}"), Rule(answer="hm")])
    store = MemoryStore()
    agent = Agent(routing_spec(), model, store=store, tools=[forecast])
    r = await agent.step("go to Oslo", thread="t", user="u", context={"org": "acme", "count": True})
    assert r.status == "completed"
    # The answer is the last node's output: the stored (coerced) counter.
    assert r.answer == 1
    assert model.requests[0].messages[0] == {"role": "system", "content": "You serve acme."}
    assert seen == [{"org": "acme", "count": True}]
    city = await store.resource_head(NS, "thread:t", "var:city")
    assert city is not None and city.payload["value"] == "Oslo"
    visits = await store.resource_head(NS, "user:u", "var:visits")
    assert visits is not None and visits.payload["value"] == 1

    # Without context.count the forecast is the last node: its output is the answer.
    r2 = await agent.step("go to Rome", thread="t", user="u", context={"org": "acme", "count": 0})
    assert r2.answer == {"city": "Rome", "sky": "clear"}
    # No edge matches: the LLM's answer is the run's answer.
    r3 = await agent.step("hello", thread="t", user="u", context={"org": "acme", "count": 0})
    assert r3.answer == "hm"


async def test_context_is_never_persisted() -> None:
    secret = "s3cr3t-token-9f2"
    environment().globals["output_city"] = lambda s: s.split(":")[1]

    @tool
    def forecast(city: str, context: dict[str, Any]) -> str:
        assert context["token"] == secret
        return "sunny"

    model = ScriptedModel([Rule(match=r"go to (\w+)", answer="city:{1}")])
    store = MemoryStore()
    spec = routing_spec()
    spec = Spec(
        nodes=[
            LLMNode(name="agent", system="Token {{ context.token }} for {{ context.org }}."),
            *spec.nodes[1:],
        ],
        edges=spec.edges,
        start="agent",
    )
    agent = Agent(spec, model, store=store, tools=[forecast])
    ctx = {"org": "acme", "count": True, "token": secret}
    r = await agent.step("go to Oslo", thread="t", user="u", context=ctx)
    assert r.status == "completed"
    assert model.requests[0].context == ctx
    assert secret in model.requests[0].messages[0]["content"]
    stored = [n.to_dict() for n in await everything(store)]
    assert stored and secret not in repr(stored)


async def test_condition_error_fails_the_run_with_a_clear_error() -> None:
    spec = Spec(
        nodes=[LLMNode(name="a"), LLMNode(name="b")],
        edges=[Edge(src="a", dst="b", condition="{{ variables.missing > 1 }}")],
        start="a",
    )
    store = MemoryStore()
    agent = Agent(spec, ScriptedModel([Rule(answer="x")]), store=store)
    r = await agent.step("hi", thread="t")
    assert r.status == "failed"
    assert r.error is not None and r.error.code == "condition"
    assert "variables.missing" in r.error.message and "missing" in r.error.message
    [err] = [n for n in await nodes(store, "thread:t") if n.kind == "protocol_error"]
    assert err.payload == {"run": r.run_id, "error": r.error.to_dict()}
    # A failed run does not block the thread.
    assert (await agent.step("again", thread="t")).status == "failed"


async def test_template_errors_and_step_limits_fail_the_run() -> None:
    bad = Spec.single(system="Hello {{ context.name }}")
    agent = Agent(bad, ScriptedModel([Rule(answer="x")]))
    r = await agent.step("hi")
    assert r.status == "failed" and r.error is not None and r.error.code == "template"
    assert (await agent.step("hi", context={"name": "Al"})).status == "completed"

    loop = Spec(
        nodes=[LLMNode(name="a"), LLMNode(name="b")],
        edges=[Edge(src="a", dst="b"), Edge(src="b", dst="a")],
        start="a",
    )
    agent = Agent(loop, ScriptedModel([Rule(answer="x")]), max_steps=5)
    r = await agent.step("hi")
    assert r.status == "failed" and r.error is not None and r.error.code == "step_limit"

    @tool
    def again() -> str:
        return "more"

    forever = ScriptedModel([Rule(tools=[call("again")], then="never")])
    forever_fn = FnModel(
        lambda req: ModelResponse(
            tool_calls=[ToolCall(id=f"c{len(req.messages)}", name="again", arguments={})]
        )
    )
    del forever
    agent = Agent(None, forever_fn, tools=[again], max_tool_rounds=3)
    r = await agent.step("hi")
    assert r.status == "failed" and r.error is not None and r.error.code == "step_limit"
    assert len(forever_fn.requests) == 3


async def test_model_errors_fail_the_run() -> None:
    def boom(req: ModelRequest) -> ModelResponse:
        raise ModelConnectionError("server down")

    store = MemoryStore()
    r = await Agent(None, FnModel(boom), store=store).step("hi", thread="t")
    assert r.status == "failed" and r.error is not None
    assert r.error.code == "model_connection"
    assert [n.kind for n in own(await nodes(store, "thread:t"))] == ["goal", "protocol_error"]


async def test_second_llm_node_gets_its_input_and_its_own_history() -> None:
    spec = Spec(
        nodes=[
            LLMNode(name="writer"),
            LLMNode(name="critic", input="Review: {{ input }} (for {{ nodes.writer.output }})"),
        ],
        edges=[Edge(src="writer", dst="critic")],
        start="writer",
    )

    def respond(req: ModelRequest) -> ModelResponse:
        return ModelResponse(content=f"{len(req.messages)}:{req.messages[-1]['content']}")

    model = FnModel(respond)
    agent = Agent(spec, model)
    r = await agent.step("draft", thread="t")
    assert r.answer == "1:Review: 1:draft (for 1:draft)"
    r = await agent.step("draft 2", thread="t")
    # Each LLM node sees only its own history: writer 2 turns, critic 2 turns.
    assert [len(q.messages) for q in model.requests] == [1, 1, 3, 3]


# -- runs, resume and results -------------------------------------------------------


async def test_resume_and_results() -> None:
    store = MemoryStore()
    agent = Agent(None, ScriptedModel([Rule(answer="hi")]), store=store)
    with pytest.raises(tether.NotFound):
        await agent.resume("t")
    r = await agent.step("hello", thread="t")
    assert await agent.resume("t") == r  # a finished run is reported, nothing is written
    assert len(own(await nodes(store, "thread:t"))) == 3
    assert StepResult.from_dict(r.to_dict()) == r


async def test_step_finishes_an_interrupted_run_before_starting_the_next() -> None:
    class Crash(BaseException):
        pass

    calls: list[str] = []
    crash = True

    @tool
    def work(idempotency_key: str) -> str:
        calls.append(idempotency_key)
        if crash:
            raise Crash()
        return "done"

    model = ScriptedModel(
        [Rule(match="work", tools=[call("work")], then="{result}"), Rule(answer="hey")]
    )
    store = MemoryStore()
    agent = Agent(None, model, store=store, tools=[work])
    with pytest.raises(Crash):
        await agent.step("work", thread="t")
    crash = False
    r = await agent.step("hey there", thread="t")
    assert r.answer == "hey"
    graph = own(await nodes(store, "thread:t"))
    assert [n.kind for n in graph] == [
        "goal",
        "inference",
        "tool_call",
        "tool_result",
        "inference",
        "answer",
        "goal",
        "inference",
        "answer",
    ]
    assert calls == [graph[2].id, graph[2].id]


async def test_step_sync_on_a_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    model = ScriptedModel.demo()

    def script() -> list[StepResult]:
        agent = Agent(None, model, store=url)
        return [
            agent.step_sync("My name is Ada.", thread="t", user="u"),
            agent.step_sync("What is my name?", thread="t2", user="u"),
        ]

    def in_memory() -> list[StepResult]:
        agent = Agent(None, model)  # memory:// by default: kept between *_sync calls
        return [
            agent.step_sync("My name is Ada.", thread="t"),
            agent.step_sync("What is my name?", thread="t"),
        ]

    first, second = await asyncio.to_thread(script)
    assert first.completed and second.answer == "Your name is Ada."
    assert (await asyncio.to_thread(in_memory))[1].answer == "Your name is Ada."
    with pytest.raises(tether.runtime.AgentError):
        Agent(None, model).step_sync("inside a loop")


async def test_yaml_spec_directory(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "chat.yaml").write_text(
        "kind: llm\nname: chat\nstart: true\nsystem: 'Be brief.'\n"
        "edges:\n  - to: keep\n    when: \"{{ 'Paris' in output }}\"\n"
    )
    (specs / "vars.yaml").write_text(
        "- kind: var\n  name: last\n  type: string\n"
        "- kind: var_set\n  name: keep\n  var: last\n  value: '{{ input | upper }}'\n"
    )
    store = MemoryStore()
    agent = Agent(specs, ScriptedModel([Rule(match="(.*)", answer="{1}!")]), store=store)
    assert agent.spec.start == "chat"
    assert (await agent.step("Paris", thread="t")).answer == "PARIS!"
    assert (await agent.step("Rome", thread="t")).answer == "Rome!"
    last = await store.resource_head(NS, "thread:t", "var:last")
    assert last is not None and last.payload["value"] == "PARIS!"


async def test_agent_memory_tools_edit_and_receipt_commit_together() -> None:
    from tether.runtime import MemoryTools

    def respond(req: ModelRequest) -> ModelResponse:
        if req.messages[-1]["role"] == "tool":
            return ModelResponse(content=str(req.messages[-1]["content"]))
        text = req.messages[-1]["content"]
        if text.startswith("remember "):
            key, value = text.removeprefix("remember ").split("=")
            args: dict[str, Any] = {"key": key, "value": value}
            return ModelResponse(tool_calls=[ToolCall(id="m1", name="notes_store", arguments=args)])
        return ModelResponse(
            tool_calls=[ToolCall(id="m2", name="notes_recall", arguments={"key": text})]
        )

    model = FnModel(respond)
    store = RecordingStore()
    agent = Agent(
        None,
        model,
        store=store,
        agent_memory=MemoryTools(name="notes", scope="user", initial={"tone": "brief"}),
    )
    await agent.step("tone", thread="t", user="u")
    offered = {t.name for t in model.requests[0].tools}
    assert offered == {"notes_store", "notes_delete", "notes_clear", "notes_recall"}
    assert "brief" in model.requests[-1].messages[-1]["content"]
    r = await agent.step("remember city=Oslo", thread="t", user="u")
    assert r.status == "completed"
    edit = next(c for c in store.commits if any(w.scope == "user:u" for w in c) and len(c) == 2)
    assert {w.scope: sorted({n.kind for n in w.nodes}) for w in edit} == {
        "thread:t": ["tool_result"],
        "user:u": ["resource", "semantic"],
    }
    recalled = await agent.step("city", thread="t2", user="u")
    assert "Oslo" in recalled.answer
    # Without a user, a user-scoped memory reports an error result, not a crash.
    anon = await agent.step("city", thread="t3")
    assert anon.status == "completed" and "no user" in anon.answer


async def test_user_variables_without_a_user_only_fail_templates_that_use_them() -> None:
    spec = Spec(
        nodes=[
            LLMNode(name="a", system="Thread plan: {{ variables.plan }}"),
            VarNode(name="plan", default="free"),
            VarNode(name="tier", scope="user", default="gold"),
            LLMNode(name="b", system="Tier: {{ variables.tier }}"),
        ],
        edges=[Edge(src="a", dst="b", condition="input == 'go on'")],
        start="a",
    )
    model = FnModel(lambda req: ModelResponse(content=req.messages[0]["content"]))
    agent = Agent(spec, model)
    assert (await agent.step("hi")).answer == "Thread plan: free"
    assert (await agent.step("go on", user="u")).answer == "Tier: gold"
    r = await agent.step("go on")
    assert r.status == "failed" and r.error is not None
    assert r.error.code == "template" and "tier" in r.error.message


@pytest.mark.parametrize("value", ["{{ output }}", "{{ output | default('x') ~ '' }}"])
async def test_output_outside_a_condition_is_an_unknown_name(value: str) -> None:
    """Only conditions see `output`; a var_set value naming it fails like any unknown name
    (it never renders None), and nothing is written to the variable."""
    spec = Spec(
        nodes=[
            LLMNode(name="a"),
            VarNode(name="city", type="string", default="none"),
            VarSetNode(name="keep", var="city", value=value),
        ],
        edges=[Edge(src="a", dst="keep", condition="{{ output != '' }}")],
        start="a",
    )
    store = MemoryStore()
    agent = Agent(spec, ScriptedModel([Rule(answer="Oslo")]), store=store)
    r = await agent.step("hi", thread="t")
    if "default" in value:  # jinja's `default` filter is how a template tests for a name
        assert r.status == "completed"
        return
    assert r.status == "failed" and r.error is not None and r.error.code == "template"
    assert "'output' is undefined" in r.error.message
    kinds = [n.kind for n in own(await nodes(store, "thread:t"))]
    assert kinds == ["goal", "inference", "protocol_error"]  # no variable write (resource)
    # in the edge's condition (above) `output` is the node's output, as documented
    ok = Spec(
        nodes=(*spec.nodes[:2], VarSetNode(name="keep", var="city", value="{{ input }}")),
        edges=spec.edges,
        start="a",
    )
    done = await Agent(ok, ScriptedModel([Rule(answer="Oslo")]), store=MemoryStore()).step("hi")
    assert done.status == "completed"


# -- where a step starts -------------------------------------------------------------


class ReadCountingStore(MemoryStore):
    """Records the name of every read and commit, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def head(self, namespace: str, scope: str) -> Any:
        self.calls.append("head")
        return await super().head(namespace, scope)

    async def nodes(self, namespace: str, scope: str, **kw: Any) -> Any:
        self.calls.append("nodes")
        return await super().nodes(namespace, scope, **kw)

    async def resource_head(self, namespace: str, scope: str, key: str) -> Any:
        self.calls.append("resource_head")
        return await super().resource_head(namespace, scope, key)

    async def commit(self, namespace: str, writes: Any) -> None:
        self.calls.append("commit")
        await super().commit(namespace, writes)


async def test_a_step_after_a_finished_run_starts_from_its_head_without_reading() -> None:
    store = ReadCountingStore()
    agent = Agent(None, ScriptedModel([Rule(answer="hi")]), store=store)
    await agent.step("one", thread="t")
    first = store.calls[: store.calls.index("commit")]
    store.calls.clear()
    r = await agent.step("two", thread="t")
    assert r.answer == "hi"
    # the first step read the thread's head before its goal; the second commits its
    # goal first: the head its own run left is where it starts
    assert first == ["head"]
    assert store.calls[0] == "commit"
    # nor does its model call read the head: the run's own commits left it
    assert "head" not in store.calls
    graph = own(await nodes(store, "thread:t"))
    assert [n.kind for n in graph] == ["goal", "inference", "answer"] * 2


async def test_a_thread_moved_by_another_writer_is_read_again_before_the_next_run() -> None:
    """The head a step starts from is checked by its goal's commit: another process's
    write since (here a run that crashed after its goal) is a conflict, and the step
    reads the thread, finishes that run first, then runs its own, as without it."""
    store = MemoryStore()
    model = ScriptedModel([Rule(answer="hi")])
    agent = Agent(None, model, store=store)
    await agent.step("one", thread="t")
    head = await store.head(NS, "thread:t")
    txn = tether.Transaction(store, NS)
    txn.seed("thread:t", head)
    await txn.append("thread:t", "goal", {"run": "run_other", "input": "two", "llm": "agent"})
    await txn.commit()  # that process crashed here: its run has a goal and nothing else
    r = await agent.step("three", thread="t")
    assert r.answer == "hi"
    kinds = [(n.kind, n.payload.get("run")) for n in own(await nodes(store, "thread:t"))]
    runs = [run for kind, run in kinds if kind == "goal"]
    assert runs[1] == "run_other" and len(runs) == 3
    # the interrupted run was finished (its answer) before the new run's goal
    assert kinds.index(("answer", "run_other")) < kinds.index(("goal", runs[2]))


async def test_a_run_superseded_by_another_runs_goal_leaves_no_starting_head() -> None:
    """While a run is driven, another process starts a run in the same thread; the
    first run finishes after that goal. Its head is then no place to start from (the
    thread's latest run is the other one, unfinished): the next step reads the thread
    and finishes the other run first."""
    store = MemoryStore()
    started: list[str] = []

    @tool
    async def work() -> str:
        if not started:
            started.append("x")
            # another process starts a run in this thread while this tool runs
            txn = tether.Transaction(store, NS)
            await txn.append("thread:t", "goal", {"run": "run_other", "input": "b", "llm": "agent"})
            await txn.commit()
        return "done"

    model = ScriptedModel(
        [Rule(match="work", tools=[call("work")], then="{result}"), Rule(answer="hi")]
    )
    agent = Agent(None, model, store=store, tools=[work])
    await agent.step("work", thread="t")
    r = await agent.step("c", thread="t")
    assert r.answer == "hi"
    graph = own(await nodes(store, "thread:t"))
    goals = [n for n in graph if n.kind == "goal"]
    assert [g.payload["run"] for g in goals][1] == "run_other" and len(goals) == 3
    answers = [n.payload.get("run") for n in graph if n.kind == "answer"]
    assert "run_other" in answers  # finished before the third run started
    third = goals[2]
    assert graph.index(third) > max(
        i for i, n in enumerate(graph) if n.payload.get("run") == "run_other"
    )


async def test_an_agent_remembers_where_to_start_for_a_bounded_number_of_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tether.runtime import executor

    monkeypatch.setattr(executor, "_TIPS", 2)
    store = ReadCountingStore()
    agent = Agent(None, ScriptedModel([Rule(answer="hi")]), store=store)
    for t in ("a", "b", "c"):
        await agent.step("one", thread=t)
    assert list(agent._tips) == ["thread:b", "thread:c"]  # the oldest went first
    store.calls.clear()
    await agent.step("two", thread="a")  # forgotten: read again
    assert store.calls[0] == "head"
    store.calls.clear()
    await agent.step("two", thread="c")
    assert store.calls[0] == "commit"
