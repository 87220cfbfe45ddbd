"""The OpenAI Agents SDK session: every rule of the Session contract, a real Runner loop.

Contract rules (the SDK's Session protocol and its reference sessions): limit
None returns everything, N > 0 the latest N oldest-first, 0 and negative
nothing; an explicit limit overrides ``session_settings.limit``; pop on an empty
session returns None; pop returns and removes the newest item; items come back
exactly as added, in order; clear empties the session; sessions are isolated.
A hypothesis state machine checks every sequence of operations against a list.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    ModelResponse,
    RunConfig,
    Runner,
    SQLiteSession,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session, SessionSettings
from agents.models.interface import Model
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from tether import InvalidRequest
from tether.adapters.openai_agents import InvalidItem, SessionClosed, TetherSession
from tether.store import Store, open_store
from tether.store.in_memory import MemoryStore


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{text}",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


@pytest.fixture
def session() -> TetherSession:
    return TetherSession(f"s-{uuid.uuid4().hex[:8]}", MemoryStore())


def test_is_an_sdk_session(session: TetherSession) -> None:
    assert isinstance(session, Session)


async def test_empty_session(session: TetherSession) -> None:
    assert await session.get_items() == []
    assert await session.get_items(3) == []
    assert await session.pop_item() is None


async def test_items_round_trip_exactly_in_order(session: TetherSession) -> None:
    items = [
        user("hi"),
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"x": 1.5}'},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        assistant("done"),
        {"type": "reasoning", "id": "r1", "summary": [], "encrypted_content": None},
        user("hi"),  # the same item twice is two items
    ]
    await session.add_items(items[:2])
    await session.add_items([])
    await session.add_items(items[2:])
    assert await session.get_items() == items


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (None, [0, 1, 2, 3, 4]),
        (2, [3, 4]),
        (1, [4]),
        (5, [0, 1, 2, 3, 4]),
        (9, [0, 1, 2, 3, 4]),
        (0, []),
        (-1, []),
        (-3, []),
    ],
)
async def test_limit(session: TetherSession, limit: int | None, expected: list[int]) -> None:
    await session.add_items([user(str(i)) for i in range(5)])
    assert await session.get_items(limit) == [user(str(i)) for i in expected]


async def test_session_settings_limit_and_explicit_override() -> None:
    s = TetherSession("set", MemoryStore(), session_settings=SessionSettings(limit=2))
    await s.add_items([user(str(i)) for i in range(4)])
    assert await s.get_items() == [user("2"), user("3")]
    assert await s.get_items(3) == [user("1"), user("2"), user("3")]
    assert await s.get_items(0) == []


async def test_pop_is_stack_order(session: TetherSession) -> None:
    await session.add_items([user("a"), user("b"), user("c")])
    assert await session.pop_item() == user("c")
    await session.add_items([user("d")])
    assert await session.pop_item() == user("d")
    assert await session.pop_item() == user("b")
    assert await session.get_items() == [user("a")]
    assert await session.get_items(1) == [user("a")]
    assert await session.pop_item() == user("a")
    assert await session.pop_item() is None
    assert await session.get_items() == []


async def test_clear_then_reuse(session: TetherSession) -> None:
    await session.add_items([user("a"), user("b")])
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.clear_session()  # clearing an empty session is fine
    await session.add_items([user("c")])
    assert await session.get_items() == [user("c")]


async def test_sessions_are_isolated() -> None:
    store = MemoryStore()
    a, b = TetherSession("a", store), TetherSession("b", store)
    await a.add_items([user("for a")])
    await b.add_items([user("for b")])
    await b.clear_session()
    assert await a.get_items() == [user("for a")]
    other_ns = TetherSession("a", store, namespace="tenant-2")
    assert await other_ns.get_items() == []


@pytest.mark.parametrize(
    "bad",
    [
        "not an item",
        {"role": "user", "content": float("nan")},
        {"role": "user", "content": object()},
        {"role": "user", "content": {1: "non-string key"}},
    ],
)
async def test_bad_item_is_a_type_error_and_writes_nothing(
    session: TetherSession, bad: Any
) -> None:
    await session.add_items([user("ok")])
    with pytest.raises(TypeError) as e:  # the SDK's sessions raise TypeError (json.dumps)
        await session.add_items([user("fine"), bad])
    assert isinstance(e.value, InvalidItem) and isinstance(e.value, InvalidRequest)
    assert e.value.code == "invalid_item"
    assert await session.get_items() == [user("ok")]


def test_session_settings_as_the_sdk_sessions() -> None:
    store = MemoryStore()
    default = TetherSession("d", store)
    assert default.session_settings == SessionSettings()  # never None, as SQLiteSession
    coerced = TetherSession("c", store, session_settings={"limit": 0})
    assert isinstance(coerced.session_settings, SessionSettings)
    assert coerced.session_settings.limit == 0
    with pytest.raises(TypeError):
        TetherSession("u", store, session_settings={"limitt": 1})
    sdk = SQLiteSession("sdk", session_settings={"limit": 3})
    assert TetherSession("t", store, session_settings={"limit": 3}).session_settings == (
        sdk.session_settings
    )
    sdk.close()


async def test_dict_settings_with_run_config_override() -> None:
    """A dict setting plus RunConfig(session_settings=...) once crashed Runner.run."""
    set_tracing_disabled(True)
    store = MemoryStore()
    session = TetherSession("rc", store, session_settings={"limit": 1})
    await session.add_items([user("one"), user("two"), user("three")])
    model = ScriptedModel([[_message("ok")]])
    agent = Agent(name="a", model=model)
    config = RunConfig(session_settings=SessionSettings(limit=2))
    await Runner.run(agent, "four", session=session, run_config=config)
    assert [i["content"] for i in model.inputs[-1]] == ["two", "three", "four"]


async def test_close_sync_and_async(tmp_path: Path) -> None:
    session = TetherSession.from_url("c", f"sqlite:///{tmp_path / 'c.db'}")
    await session.add_items([user("a")])
    session.close()  # sync, as SQLiteSession.close()
    with pytest.raises(RuntimeError) as e:
        await session.add_items([])
    assert isinstance(e.value, SessionClosed) and e.value.code == "session_closed"
    with pytest.raises(SessionClosed):
        await session.get_items()
    with pytest.raises(SessionClosed):
        await session.pop_item()
    await session.close()  # awaitable too (the SDK's Redis, MongoDB, async SQLite)
    reopened = TetherSession.from_url("c", f"sqlite:///{tmp_path / 'c.db'}")
    assert await reopened.get_items() == [user("a")]
    await reopened.close()


async def test_closed_error_reads_exactly_as_the_sdk() -> None:
    """The SDK's sessions raise RuntimeError("<class> is closed"), matched with ^...$."""

    class MongoDBSession(TetherSession):
        pass

    session = MongoDBSession("m", MemoryStore())
    await session.close()
    with pytest.raises(RuntimeError, match=r"^MongoDBSession is closed$") as e:
        await session.get_items()
    assert e.value.code == "session_closed"  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [None, 42, ["other"], {"$ne": None}])
def test_non_string_session_id_is_a_type_error(bad: Any) -> None:
    """As the SDK's MongoDBSession: TypeError("session_id must be a string")."""
    with pytest.raises(TypeError, match=r"^session_id must be a string$") as e:
        TetherSession(bad, MemoryStore())
    assert isinstance(e.value, InvalidRequest)


def _hashed(session_id: str) -> str:
    import hashlib

    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return "thread:%" + digest.ljust(200, "%")


async def test_empty_and_percent_session_ids_are_distinct_sessions() -> None:
    """The empty id is accepted (as by the SDK's sessions); every id a scope name holds
    keeps the thread tether has always given it, so "", "%", "%25", "x" and "%x" are
    five sessions, four of them named as before."""
    store = MemoryStore()
    ids = ["", "%", "%25", "x", "%x"]
    sessions = [TetherSession(i, store) for i in ids]
    for i, s in zip(ids, sessions, strict=True):
        await s.add_items([user(f"in {i!r}")])
    for i, s in zip(ids, sessions, strict=True):
        assert s.session_id == i
        assert await s.get_items() == [user(f"in {i!r}")]
    assert [s.scope for s in sessions] == [
        _hashed(""),
        "thread:%",
        "thread:%25",
        "thread:x",
        "thread:%x",
    ]


async def test_any_string_is_a_session_id(tmp_path: Path) -> None:
    """The SDK's sessions take any string. One no scope name can hold as it is (too long;
    control, format or bidirectional characters, a lone surrogate) is its SHA-256, padded
    past the 200 characters of any other id: its own session, the same one after
    reopening, apart from an id that looks like a digest."""
    odd = ["x" * 201, "a\nb", "tab\there", "\u202eevil", "\ud800", "%" + "y" * 300]
    url = f"sqlite:///{tmp_path / 'ids.db'}"
    store = await open_store(url)
    try:
        for i in odd:
            await TetherSession(i, store).add_items([user(f"in {i!r}")])
        # an ordinary id that looks like a digest stays apart
        lookalike = _hashed("a\nb")[len("thread:") : len("thread:") + 200]
        await TetherSession(lookalike, store).add_items([user("lookalike")])
    finally:
        await store.close()
    store = await open_store(url)
    try:
        for i in odd:
            s = TetherSession(i, store)
            assert s.scope == _hashed(i) and len(s.scope) == len("thread:") + 201
            assert s.session_id == i
            assert await s.get_items() == [user(f"in {i!r}")]
        q = TetherSession(lookalike, store)
        assert q.scope == "thread:" + lookalike != _hashed("a\nb")
        assert await q.get_items() == [user("lookalike")]
    finally:
        await store.close()


def test_from_url_in_sync_code_and_another_loop(tmp_path: Path) -> None:
    """Runner.run_sync drives the session from a thread with a loop of its own."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    session = TetherSession.from_url("x", url)
    asyncio.run(session.add_items([user("from loop 1")]))
    asyncio.run(session.add_items([user("from loop 2")]))
    assert asyncio.run(session.get_items()) == [user("from loop 1"), user("from loop 2")]
    session.close()


async def test_concurrent_writers_lose_nothing() -> None:
    store = MemoryStore()
    sessions = [TetherSession("shared", store) for _ in range(8)]
    await asyncio.gather(
        *(s.add_items([user(f"{i}-{j}") for j in range(3)]) for i, s in enumerate(sessions))
    )
    got = await sessions[0].get_items()
    assert sorted(x["content"] for x in got) == sorted(
        f"{i}-{j}" for i in range(8) for j in range(3)
    )
    popped = await asyncio.gather(*(s.pop_item() for s in sessions))
    assert (
        len({p["content"] for p in popped if p is not None}) == 8
    )  # eight different items, none twice
    assert len(await sessions[0].get_items()) == 16


async def test_items_are_conversation_nodes() -> None:
    store = MemoryStore()
    s = TetherSession("conv", store, llm="helper")
    await s.add_items(
        [
            user("weather?"),
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "weather",
                "arguments": '{"city": "Oslo"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "rain"},
            assistant("It rains."),
        ]
    )
    nodes = await store.nodes("default", "thread:conv")
    assert [n.kind for n in nodes] == ["goal", "tool_call", "tool_result", "inference"]
    goal, call, result, inference = (n.payload for n in nodes)
    assert goal["input"] == "weather?" and goal["llm"] == "helper"
    assert call["arguments"] == {"city": "Oslo"} and call["name"] == "weather"
    assert result["content"] == "rain" and inference["content"] == "It rains."


@pytest.mark.parametrize(
    "raw",
    [
        "{not json",  # a model's broken JSON
        '{"amount": 1, "amount": 1000000}',  # two parsers, two amounts
        '{"n": 18446744073709551617}',  # an integer no double holds
        '["a", "list"]',  # JSON, but not an object
    ],
)
async def test_function_call_arguments_that_are_not_one_exact_object_are_kept_as_text(
    raw: str,
) -> None:
    """The graph's tool_call shows the model's text as it was, never an invented ``{}``
    nor one of two readings; the item itself comes back exactly."""
    store = MemoryStore()
    s = TetherSession("args", store)
    item = {"type": "function_call", "call_id": "c1", "name": "pay", "arguments": raw}
    await s.add_items([user("pay"), item])
    (call,) = [n for n in await store.nodes("default", "thread:args") if n.kind == "tool_call"]
    assert call.payload["arguments"] == raw
    assert (await s.get_items())[-1] == item


async def test_persists_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = await open_store(url)
    try:
        await TetherSession("p", store).add_items([user("a"), user("b")])
        await TetherSession("p", store).pop_item()
    finally:
        await store.close()
    store = await open_store(url)
    try:
        assert await TetherSession("p", store).get_items() == [user("a")]
    finally:
        await store.close()


# -- every sequence of operations behaves like a list ------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.integers(0, 99), max_size=4)),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("get"), st.one_of(st.none(), st.integers(-2, 8))),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_matches_a_list_model(sequence: list[tuple[str, Any]]) -> None:
    async def run() -> None:
        s = TetherSession("model", MemoryStore())
        model: list[dict[str, Any]] = []
        for op, arg in sequence:
            if op == "add":
                items = [user(str(x)) for x in arg]
                await s.add_items(items)
                model.extend(items)
            elif op == "pop":
                assert await s.pop_item() == (model.pop() if model else None)
            elif op == "clear":
                await s.clear_session()
                model.clear()
            else:
                want = model if arg is None else (model[-arg:] if arg > 0 else [])
                assert await s.get_items(arg) == want
        assert await s.get_items() == model

    asyncio.run(run())


# -- a real Runner loop, scripted model, no network ----------------------------------


class ScriptedModel(Model):
    """Answers from a script; records the input of every call."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = script
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *a: Any, **kw: Any
    ) -> ModelResponse:
        self.inputs.append(input)
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    async def stream_response(self, *a: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError
        yield


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{uuid.uuid4().hex[:6]}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


async def _runner_loop(store: Store) -> None:
    set_tracing_disabled(True)

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"rain in {city}"

    model = ScriptedModel(
        [
            [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id="c1",
                    name="get_weather",
                    arguments='{"city": "Oslo"}',
                    id="fc_1",
                    status="completed",
                )
            ],
            [_message("It rains in Oslo.")],
            [_message("You asked about Oslo.")],
        ]
    )
    agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[get_weather])
    session = TetherSession("runner", store)
    first = await Runner.run(agent, "Weather in Oslo?", session=session)
    assert first.final_output == "It rains in Oslo."
    second = await Runner.run(agent, "What did I ask?", session=TetherSession("runner", store))
    assert second.final_output == "You asked about Oslo."
    # the second run's model call saw the whole first run, read back from tether
    seen = model.inputs[-1]
    assert [i.get("type", "message") for i in seen] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    assert seen[0]["content"] == "Weather in Oslo?" and seen[-1]["content"] == "What did I ask?"
    items = await session.get_items()
    assert len(items) == 6 and items[-1]["content"][0]["text"] == "You asked about Oslo."
    kinds = [n.kind for n in await store.nodes("default", "thread:runner")]
    assert kinds == ["goal", "tool_call", "tool_result", "inference", "goal", "inference"]


async def test_runner_end_to_end_memory() -> None:
    await _runner_loop(MemoryStore())


async def test_runner_end_to_end_sqlite(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        await _runner_loop(store)
    finally:
        await store.close()


async def test_items_come_back_exactly_whatever_their_shape(tmp_path: Path) -> None:
    # The text an item shares with its graph field is stored once and put back on read:
    # key order, list parts and other fields must come back byte for byte.
    items: list[Any] = [
        {"role": "user", "content": "hi"},
        {"content": "hi again", "role": "user"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": ""},
        {"role": "user", "content": "x", "extra": 1},
        {
            "id": "msg_1",
            "content": [{"annotations": [], "text": "answer", "type": "output_text"}],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        },
        {"role": "assistant", "content": [{"type": "output_text", "text": "a"}, {"text": "b"}]},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "reasoning", "summary": []},
    ]
    session = TetherSession.from_url("exact", f"sqlite:///{tmp_path / 's.db'}")
    try:
        await session.add_items(items)
        got = await session.get_items()
        assert json.dumps(got) == json.dumps(items)
        assert json.dumps(await session.pop_item()) == json.dumps(items[-1])
        assert json.dumps(await session.get_items(3)) == json.dumps(items[-4:-1])
    finally:
        session.close()
