"""What seed 000 (Liman) and seed 004 (the visual platform) users rely on in the runtime:
runs with no thread, the session scope, failures that end a run and not the thread,
an LLM actor's whole history, and resuming an execution by its id."""

from __future__ import annotations

import pytest

from tether.core.errors import InvalidRequest, NotFound
from tether.models import ModelRequest, ModelResponse, Rule, ScriptedModel, call
from tether.projections import VarDecl, execution_view
from tether.runtime import (
    Agent,
    ChatHistoryNode,
    Edge,
    LLMNode,
    Spec,
    SpecError,
    VarNode,
    VarSetNode,
    tool,
)
from tether.runtime.executor import MODEL_RAISED
from tether.store.in_memory import MemoryStore

NS = "default"


class Flaky:
    """A model that raises ``error`` on its first ``fails`` calls, then answers as ``inner``."""

    def __init__(self, error: BaseException, fails: int = 1) -> None:
        self.error, self.fails = error, fails
        self.inner = ScriptedModel.demo()
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls <= self.fails:
            raise self.error
        return await self.inner.complete(request)


class Died(BaseException):
    """The process is gone (nothing in the runtime catches it)."""


async def test_a_run_with_no_thread_is_its_own_thread() -> None:
    store = MemoryStore()
    agent = Agent(None, ScriptedModel.demo(), store=store)
    a = await agent.step("Hello, my name is Ada.")
    b = await agent.step("What is my name?")
    assert a.status == b.status == "completed"
    assert a.thread == a.run_id and b.thread == b.run_id and a.thread != b.thread
    # Nothing is shared: the second run does not see the first one's conversation.
    assert "Ada" not in str(b.answer)
    assert (await store.head(NS, "thread:default")).sequence == 0
    assert (await store.head(NS, f"thread:{a.run_id}")).sequence > 0


async def test_an_agent_session_as_limans_agent_keeps_one() -> None:
    """`Agent(default_thread=True)`: this Agent object's own fresh session, as Liman's
    agent keeps one: its steps without a thread continue it; another Agent object (on
    the same store: another user's, another process's) starts its own; the id
    continues it anywhere, as Liman's execution id does."""
    store = MemoryStore()
    agent = Agent(None, ScriptedModel.demo(), store=store, default_thread=True)
    a = await agent.step("My name is Alice.")
    b = await agent.step("What is my name?")
    assert a.thread == b.thread == agent.default_thread
    assert agent.default_thread is not None and agent.default_thread.startswith("session_")
    assert a.thread != a.run_id and b.answer == "Your name is Alice."
    other = Agent(None, ScriptedModel.demo(), store=store, default_thread=True)
    assert other.default_thread != agent.default_thread
    assert (await other.step("What is my name?")).answer == "I don't know your name yet."
    # After a restart: the saved id continues the session (Liman's ExecutorInput).
    restarted = Agent(None, ScriptedModel.demo(), store=store, default_thread=a.thread)
    assert (await restarted.step("What is my name?")).answer == "Your name is Alice."
    with pytest.raises(InvalidRequest):
        Agent(None, ScriptedModel.demo(), store=store, default_thread="")


async def test_session_scope_is_the_run() -> None:
    assert VarDecl(name="n", type="integer", scope="session").scope == "run"
    with pytest.raises(InvalidRequest, match="session, seed 004's name for run"):
        VarDecl(name="n", type="integer", scope="galaxy")
    spec = Spec(
        nodes=[
            LLMNode(name="agent"),
            VarNode(name="seen", type="integer", scope="session", default=0),
            VarSetNode(name="bump", var="seen", value="{{ variables.seen + 1 }}"),
        ],
        edges=[Edge(src="agent", dst="bump")],
        start="agent",
    )
    assert Spec.from_dict(spec.to_dict()).to_dict() == spec.to_dict()  # the name is kept
    agent = Agent(spec, ScriptedModel.demo())
    first = await agent.step("hi", thread="t")
    second = await agent.step("hi", thread="t")
    # Each run (seed 004's session) starts from the default: 0 + 1 both times.
    assert first.answer == second.answer == 1


async def test_a_model_that_raises_fails_the_run_and_the_thread_goes_on() -> None:
    store = MemoryStore()
    model = Flaky(RuntimeError("the router fell over"))
    agent = Agent(None, model, store=store)
    failed = await agent.step("hello", thread="t")
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.code == MODEL_RAISED
    assert "RuntimeError: the router fell over" in failed.error.message
    errors = [n for n in await store.nodes(NS, "thread:t") if n.kind == "protocol_error"]
    assert [e.payload["run"] for e in errors] == [failed.run_id]
    assert errors[0].payload["error"]["code"] == MODEL_RAISED
    ok = await agent.step("Hello, my name is Ada.", thread="t")
    assert ok.status == "completed" and ok.run_id != failed.run_id
    assert model.calls == 2  # the failed run was not retried by the next step
    assert [r.status for r in (await agent.runs(thread="t")).runs] == ["failed", "completed"]


async def test_a_tool_that_raises_is_an_error_result_and_the_thread_goes_on() -> None:
    @tool
    def lookup(q: str) -> str:
        """Always broken."""
        raise ValueError(f"no index for {q}")

    model = ScriptedModel(
        [Rule(match=r"find (\w+)", tools=[call("lookup", q="{1}")], then="got: {result}")]
    )
    agent = Agent(None, model, tools=[lookup])
    r = await agent.step("find cats", thread="t")
    # The model sees the failure and answers; the run completes and the thread goes on.
    assert r.status == "completed" and "ValueError: no index for cats" in str(r.answer)
    assert (await agent.step("find dogs", thread="t")).status == "completed"


async def test_an_llm_actor_holds_the_nodes_whole_history() -> None:
    store = MemoryStore()
    agent = Agent(None, ScriptedModel.demo(), store=store)
    first = await agent.step("Hello, my name is Ada.", thread="t")
    second = await agent.step("What is my name?", thread="t")
    view = await execution_view(store, NS, "t", second.run_id)
    assert view.actor is not None
    said = [(m["role"], m["content"]) for m in view.actor.node_state["messages"]]
    assert said[0] == ("user", "Hello, my name is Ada.")
    assert said[2] == ("user", "What is my name?") and len(said) == 4
    # An earlier run's actor holds what the node knew then, not what came after.
    early = await execution_view(store, NS, "t", first.run_id)
    assert early.actor is not None and len(early.actor.node_state["messages"]) == 2


async def test_resume_an_execution_by_its_id() -> None:
    store = MemoryStore()
    crashing = Agent(None, Flaky(Died()), store=store)
    with pytest.raises(Died):
        await crashing.step("Hello, my name is Ada.", thread="t")
    (open_run,) = (await crashing.runs(thread="t")).runs
    assert open_run.status == "running"
    later = Agent(None, ScriptedModel.demo(), store=store)
    # By its id alone: the run index says where it is.
    done = await later.resume(run=open_run.run)
    assert done.status == "completed" and done.run_id == open_run.run and done.thread == "t"
    newer = await later.step("What is my name?", thread="t")
    # Not only the latest run: an earlier one is reported as it ended.
    again = await later.resume("t", run=open_run.run)
    assert again.run_id == open_run.run and again.answer == done.answer != newer.answer
    # A run started without a thread is found under its own id.
    solo = await later.step("hi")
    assert (await later.resume(run=solo.run_id)).answer == solo.answer
    with pytest.raises(NotFound):
        await later.resume(run="run_nope")
    with pytest.raises(NotFound):
        await later.resume("t", run=solo.run_id)
    with pytest.raises(InvalidRequest):
        await later.resume()


class Recorder:
    """A model that answers how many user and assistant messages it was sent."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        roles = [m["role"] for m in request.messages]
        return ModelResponse(content=f"{roles.count('user')}u{roles.count('assistant')}a")


@pytest.mark.parametrize(
    ("scope", "second_turn", "second_pass"),
    [
        ("thread", "2u1a", None),  # the whole history of the node in the thread
        ("session", "1u0a", "2u1a"),  # this run's messages only
        ("call", "1u0a", "1u0a"),  # this execution of the node only
    ],
)
async def test_llm_memory_scopes(scope: str, second_turn: str, second_pass: str | None) -> None:
    model = Recorder()
    agent = Agent(Spec(nodes=[LLMNode(name="chat", memory_scope=scope)]), model)
    await agent.step("hello", thread="t")
    r = await agent.step("again", thread="t")
    assert r.answer == second_turn
    spec = Spec(nodes=[LLMNode(name="chat", memory_scope=scope)])
    assert Spec.from_dict(spec.to_dict()) == spec
    if second_pass is None:
        return
    # A node executed twice in one run: session keeps the first pass, call does not.
    looped = Spec(
        nodes=[LLMNode(name="chat", memory_scope=scope)],
        edges=[Edge(src="chat", dst="chat", condition="input == 'go'")],
        start="chat",
    )
    r = await Agent(looped, Recorder()).step("go", thread="l")
    assert r.answer == second_pass, r


@pytest.mark.parametrize(
    ("scope", "last", "expected"),
    [
        (
            "thread",
            None,
            [("user", "hello"), ("assistant", "1u0a"), ("user", "again"), ("assistant", "2u1a")],
        ),
        ("session", None, [("user", "again"), ("assistant", "2u1a")]),
        ("run", 1, [("assistant", "2u1a")]),
        ("thread", 0, []),
    ],
)
async def test_chat_history_node_outputs_the_conversation(
    scope: str, last: int | None, expected: list[tuple[str, str]]
) -> None:
    spec = Spec(
        nodes=[
            LLMNode(name="chat"),
            ChatHistoryNode(name="hist", llm="chat", scope=scope, last=last),
        ],
        edges=[Edge(src="chat", dst="hist")],
        start="chat",
    )
    assert Spec.from_dict(spec.to_dict()) == spec
    agent = Agent(spec, Recorder())
    await agent.step("hello", thread="t")
    r = await agent.step("again", thread="t")
    assert r.status == "completed"
    assert [(m["role"], m["content"]) for m in r.answer] == expected


def test_chat_history_node_is_checked() -> None:
    with pytest.raises(SpecError, match="not an llm node of the spec; llm nodes: chat"):
        Spec(
            nodes=[LLMNode(name="chat"), ChatHistoryNode(name="hist", llm="other")],
            edges=[Edge(src="chat", dst="hist")],
            start="chat",
        )
    with pytest.raises(SpecError, match="scope is one of thread, session, run"):
        ChatHistoryNode(name="hist", scope="call")
    with pytest.raises(SpecError, match="last is a whole number"):
        ChatHistoryNode(name="hist", last=-1)
    spec = Spec.from_dict(
        {
            "start": "chat",
            "nodes": [
                {"kind": "llm", "name": "chat", "next": "hist"},
                {"kind": "chat_history", "name": "hist", "llm": "chat", "last": 2},
            ],
        }
    )
    assert spec.node("hist") == ChatHistoryNode(name="hist", llm="chat", last=2)


def _probe_spec(probe: str, mode: str) -> Spec:
    return Spec.from_dict(
        {
            "start": "chat",
            "template_variables": mode,
            "nodes": [
                {"kind": "llm", "name": "chat", "next": "keep"},
                {"kind": "var", "name": "last_answer", "type": "string", "scope": "thread"},
                {
                    "kind": "var",
                    "name": "turns",
                    "type": "integer",
                    "scope": "session",
                    "default": 0,
                },
                {"kind": "var", "name": "seen", "type": "string", "scope": "session"},
                {"kind": "var_set", "name": "keep", "var": "last_answer", "next": "count"},
                {
                    "kind": "var_set",
                    "name": "count",
                    "var": "turns",
                    "value": "{{ variables.turns + 1 }}",
                    "next": "last_answer",
                },
                {"kind": "var_set", "name": "probe", "var": "seen", "value": probe},
            ],
            "edges": [{"from": "last_answer", "to": "probe"}],
        }
    )


@pytest.mark.parametrize(
    ("mode", "names"), [("all", "last_answer,seen,turns"), ("session", "seen,turns")]
)
async def test_template_variables_as_the_platform_scopes_them(mode: str, names: str) -> None:
    """`template_variables="session"` is seed 004's namespace: `{{ variables }}` holds the
    session (run) variables and loop_index; a thread variable is read through its var
    node's output. The default, "all", holds every declared variable."""
    listing = "{{ variables | list | sort | join(',') }}"
    agent = Agent(_probe_spec(listing, mode), ScriptedModel.demo(), store=MemoryStore())
    r = await agent.step("hello", thread="t")
    assert (r.status, r.answer) == ("completed", names)
    assert agent.spec.template_variables == mode
    assert Spec.from_dict(agent.spec.to_dict()) == agent.spec  # the mode round-trips
    via_node = "{{ nodes.last_answer.output }}"
    r = await Agent(_probe_spec(via_node, mode), ScriptedModel.demo(), store=MemoryStore()).step(
        "hello", thread="t"
    )
    assert r.answer == "Hello! How can I help?"
    direct = "{{ variables.last_answer }}"
    r = await Agent(_probe_spec(direct, mode), ScriptedModel.demo(), store=MemoryStore()).step(
        "hello", thread="t"
    )
    if mode == "all":
        assert r.answer == "Hello! How can I help?"
    else:  # not in the namespace: the template fails loudly, never renders empty
        assert r.status == "failed" and r.error is not None and r.error.code == "template"


def test_template_variables_is_checked() -> None:
    with pytest.raises(SpecError, match="template_variables"):
        Spec(nodes=[LLMNode(name="chat")], template_variables="thread")
    with pytest.raises(SpecError, match="template_variables"):
        Spec.from_dict({"nodes": [{"kind": "llm"}], "template_variables": "everything"})
