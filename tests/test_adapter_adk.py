"""The Google ADK session service: BaseSessionService's contract and a real Runner loop.

Contract rules (ADK's BaseSessionService and its reference services): create
returns the merged state, generates an id when none is given, strips it and
refuses a duplicate; get returns None for a missing session and applies
GetSessionConfig (num_recent_events N and 0, after_timestamp); list returns
sessions without events, per user or for all users, oldest update first;
delete removes one session; append_event skips partial events, keeps temp:
state out of storage, shares app: state across the app and user: state across
a user's sessions, and refuses a stale session object.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from tether.adapters.adk import DuplicateEventId, InvalidStateValue, TetherSessionService
from tether.core.errors import StoreError
from tether.store import Store, open_store
from tether.store.in_memory import MemoryStore

APP = "shop"


@pytest.fixture
def service() -> TetherSessionService:
    return TetherSessionService(MemoryStore())


def _event(
    text: str, *, author: str = "user", ts: float | None = None, delta: dict[str, Any] | None = None
) -> Event:
    ev = Event(
        invocation_id="inv-1",
        author=author,
        content=types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text=text)]
        ),
        actions=EventActions(state_delta=dict(delta or {})),
    )
    if ts is not None:
        ev.timestamp = ts
    return ev


def _texts(session: Any) -> list[str]:
    return [e.content.parts[0].text for e in session.events]


async def test_create_merges_scoped_state(service: TetherSessionService) -> None:
    s = await service.create_session(
        app_name=APP,
        user_id="u1",
        state={"app:currency": "EUR", "user:name": "Ada", "cart": [1, 2], "temp:scratch": 1},
    )
    assert s.id and s.app_name == APP and s.user_id == "u1" and s.events == []
    assert s.state == {"app:currency": "EUR", "user:name": "Ada", "cart": [1, 2]}
    again = await service.get_session(app_name=APP, user_id="u1", session_id=s.id)
    assert again is not None and again.state == s.state


async def test_create_ids(service: TetherSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u1", session_id="  s1 ")
    assert s.id == "s1"
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=APP, user_id="u1", session_id="s1")
    other = await service.create_session(app_name=APP, user_id="u/2", session_id="s1")
    assert other.id == "s1"  # another user may reuse the id
    a = await service.create_session(app_name=APP, user_id="u1")
    b = await service.create_session(app_name=APP, user_id="u1")
    assert a.id != b.id


async def test_get_missing_and_config(service: TetherSessionService) -> None:
    assert await service.get_session(app_name=APP, user_id="u", session_id="nope") is None
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    for i in range(5):
        await service.append_event(s, _event(f"m{i}", ts=100.0 + i))
    full = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert full is not None and _texts(full) == ["m0", "m1", "m2", "m3", "m4"]
    recent = await service.get_session(
        app_name=APP, user_id="u", session_id="s", config=GetSessionConfig(num_recent_events=2)
    )
    assert recent is not None and _texts(recent) == ["m3", "m4"]
    none = await service.get_session(
        app_name=APP, user_id="u", session_id="s", config=GetSessionConfig(num_recent_events=0)
    )
    assert none is not None and none.events == []
    after = await service.get_session(
        app_name=APP, user_id="u", session_id="s", config=GetSessionConfig(after_timestamp=102.0)
    )
    assert after is not None and _texts(after) == ["m2", "m3", "m4"]
    both = await service.get_session(
        app_name=APP,
        user_id="u",
        session_id="s",
        config=GetSessionConfig(num_recent_events=4, after_timestamp=103.0),
    )
    assert both is not None and _texts(both) == ["m3", "m4"]
    assert full.last_update_time == 104.0
    assert full.events[2] == _event("m2", ts=102.0).model_copy(update={"id": full.events[2].id})


async def test_list_and_delete(service: TetherSessionService) -> None:
    a = await service.create_session(app_name=APP, user_id="u1", session_id="a", state={"k": 1})
    await service.create_session(app_name=APP, user_id="u1", session_id="b")
    await service.create_session(app_name=APP, user_id="u2", session_id="c")
    await service.create_session(app_name="other", user_id="u1", session_id="d")
    await service.append_event(a, _event("latest"))
    mine = (await service.list_sessions(app_name=APP, user_id="u1")).sessions
    assert [s.id for s in mine] == ["b", "a"]  # a was updated last
    assert all(s.events == [] for s in mine) and mine[1].state == {"k": 1}
    everyone = (await service.list_sessions(app_name=APP)).sessions
    assert sorted(s.id for s in everyone) == ["a", "b", "c"]
    assert (await service.list_sessions(app_name=APP, user_id="nobody")).sessions == []
    await service.delete_session(app_name=APP, user_id="u1", session_id="a")
    await service.delete_session(app_name=APP, user_id="u1", session_id="missing")
    assert await service.get_session(app_name=APP, user_id="u1", session_id="a") is None
    assert [s.id for s in (await service.list_sessions(app_name=APP)).sessions] == ["b", "c"]


async def test_append_event_scopes(service: TetherSessionService) -> None:
    s1 = await service.create_session(app_name=APP, user_id="u1", session_id="s1")
    s2 = await service.create_session(app_name=APP, user_id="u1", session_id="s2")
    s3 = await service.create_session(app_name=APP, user_id="u2", session_id="s3")
    ev = _event("hi", delta={"app:v": 2, "user:lang": "fr", "step": 1, "temp:t": "x"})
    await service.append_event(s1, ev)
    assert s1.state["temp:t"] == "x"  # the invocation sees temp state...
    assert "temp:t" not in ev.actions.state_delta  # ...but the event does not carry it
    got = {
        s.id: (await service.get_session(app_name=APP, user_id=s.user_id, session_id=s.id)).state  # type: ignore[union-attr]
        for s in (s1, s2, s3)
    }
    assert got["s1"] == {"app:v": 2, "user:lang": "fr", "step": 1}
    assert got["s2"] == {"app:v": 2, "user:lang": "fr"}
    assert got["s3"] == {"app:v": 2}
    assert await service.get_user_state(app_name=APP, user_id="u1") == {"lang": "fr"}
    assert await service.get_user_state(app_name=APP, user_id="u2") == {}


async def test_partial_events_are_not_stored(service: TetherSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    partial = _event("stream", author="agent").model_copy(update={"partial": True})
    assert await service.append_event(s, partial) is partial
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None and got.events == []


async def test_stale_and_missing_sessions(service: TetherSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    old = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert old is not None
    await service.append_event(s, _event("one", ts=s.last_update_time + 5))
    with pytest.raises(StaleSessionError):
        await service.append_event(old, _event("two", ts=s.last_update_time + 6))
    fresh = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert fresh is not None
    await service.append_event(fresh, _event("two", ts=s.last_update_time + 6))
    await service.delete_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(SessionNotFoundError):
        await service.append_event(fresh, _event("three"))


async def test_concurrent_appends_to_one_session_serialize() -> None:
    service = TetherSessionService(MemoryStore())
    await service.create_session(app_name=APP, user_id="u", session_id="s")
    sessions = [
        await service.get_session(app_name=APP, user_id="u", session_id="s") for _ in range(4)
    ]
    results = await asyncio.gather(
        *(service.append_event(s, _event(f"e{i}")) for i, s in enumerate(sessions) if s),
        return_exceptions=True,
    )
    stale = [r for r in results if isinstance(r, StaleSessionError)]
    stored = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert stored is not None and len(stored.events) == 4 - len(stale) >= 1


async def test_events_are_conversation_nodes() -> None:
    store = MemoryStore()
    service = TetherSessionService(store)
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    e1 = await service.append_event(s, _event("hello"))
    e2 = await service.append_event(s, _event("hi there", author="agent"))
    nodes = await store.nodes(APP, "thread:u/s")
    kinds = [(n.kind, n.resource_key) for n in nodes]
    # an event's id is its node's resource key: a second event with that id is refused
    assert ("goal", f"adk:event:{e1.id}") in kinds
    assert ("inference", f"adk:event:{e2.id}") in kinds
    goal = next(n.payload for n in nodes if n.kind == "goal")
    assert goal["input"] == "hello" and goal["run"] == "inv-1"


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
async def test_event_text_is_stored_once_and_events_come_back_equal(
    url: str, tmp_path: Path
) -> None:
    store = await open_store(url if url == "memory://" else f"sqlite:///{tmp_path / 't.db'}")
    try:
        service = TetherSessionService(store)
        s = await service.create_session(app_name=APP, user_id="u", session_id="s")
        call = types.FunctionCall(id="c1", name="weather", args={"city": "Oslo"})
        reply = types.FunctionResponse(id="c1", name="weather", response={"sky": "rain", "t": 1})
        model = "model"
        events = [
            _event("hello " * 40),
            _event("it rains", author="agent"),
            Event(
                invocation_id="i",
                author="agent",
                content=types.Content(
                    role=model,
                    parts=[
                        types.Part(text="thinking", thought=True),
                        types.Part(text="answer"),
                    ],
                ),
            ),
            Event(
                invocation_id="i",
                author="agent",
                content=types.Content(
                    role=model,
                    parts=[
                        types.Part(text="two "),
                        types.Part(text="parts"),
                    ],
                ),
            ),
            Event(
                invocation_id="i",
                author="agent",
                content=types.Content(
                    role=model,
                    parts=[
                        types.Part(text="let me look"),
                        types.Part(function_call=call),
                    ],
                ),
            ),
            Event(
                invocation_id="i",
                author="user",
                content=types.Content(
                    role="user",
                    parts=[
                        types.Part(function_response=reply),
                    ],
                ),
            ),
            Event(
                invocation_id="i",
                author="agent",
                content=types.Content(
                    role=model,
                    parts=[
                        types.Part(text=""),
                    ],
                ),
            ),
            Event(invocation_id="i", author="agent"),
        ]
        for ev in events:
            await service.append_event(s, ev)
        got = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None
        assert [e.model_dump(mode="json") for e in got.events] == [
            e.model_dump(mode="json") for e in events
        ]
        nodes = [n for n in await store.nodes(APP, "thread:u/s") if n.payload.get("adk") == "event"]
        by_text = {
            n.payload.get("input") or n.payload.get("content"): n.payload
            for n in nodes
            if n.kind in ("goal", "inference")
        }
        # the text sits in the graph field only; the event keeps null in its place
        goal = by_text["hello " * 40]
        assert goal["event"]["content"]["parts"][0]["text"] is None
        assert goal["h"] == ["i", "r", 0]
        assert "hello" not in str(goal["event"]) and goal["event"]["id"] is None
        result = next(n.payload for n in nodes if n.kind == "tool_result")
        assert result["content"] == {"sky": "rain", "t": 1}
        assert result["event"]["content"]["parts"][0]["function_response"]["response"] is None
        # two text parts: the event keeps both (the graph field is their join)
        assert by_text["two parts"]["h"] == ["i", "r"]
        thought = by_text["answer"]
        assert thought["event"]["content"]["parts"][0]["text"] == "thinking"
        assert thought["h"] == ["i", "r", 1]
        inference = by_text["let me look"]
        assert inference["tool_calls"] == [
            {"id": "c1", "name": "weather", "arguments": {"city": "Oslo"}}
        ]
        assert "tool_calls" not in by_text["it rains"] and "usage" not in by_text["it rains"]
    finally:
        await store.close()


# -- a real Runner loop, scripted model, no network ----------------------------------


class ScriptedLlm(BaseLlm):
    """Returns scripted responses; records what it was sent."""

    script: list[LlmResponse]
    seen: list[LlmRequest]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append(llm_request)
        yield self.script.pop(0)


def _reply(text: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


async def _runner_loop(store: Store) -> None:
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"rain in {city}"

    llm = ScriptedLlm(
        model="scripted",
        script=[
            LlmResponse(
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(
                            function_call=types.FunctionCall(
                                id="c1", name="get_weather", args={"city": "Oslo"}
                            )
                        )
                    ],
                )
            ),
            _reply("It rains in Oslo."),
            _reply("You asked about Oslo."),
        ],
        seen=[],
    )
    agent = LlmAgent(
        name="helper",
        model=llm,
        instruction="Be brief.",
        tools=[get_weather],
        output_key="last_answer",
    )
    service = TetherSessionService(store)
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await service.create_session(
        app_name=APP, user_id="u", session_id="chat", state={"user:tz": "CET"}
    )

    async def turn(text: str) -> str:
        final = ""
        async for ev in runner.run_async(
            user_id="u",
            session_id="chat",
            new_message=types.Content(role="user", parts=[types.Part(text=text)]),
        ):
            if ev.is_final_response() and ev.content and ev.content.parts:
                final = ev.content.parts[0].text or ""
        return final

    assert await turn("Weather in Oslo?") == "It rains in Oslo."
    assert await turn("What did I ask?") == "You asked about Oslo."
    # the last model call saw the whole first turn, read back from tether
    contents = llm.seen[-1].contents
    assert contents[0].parts and contents[0].parts[0].text == "Weather in Oslo?"
    assert any(p.function_response for c in contents for p in c.parts or [])
    session = await service.get_session(app_name=APP, user_id="u", session_id="chat")
    assert session is not None
    assert session.state["last_answer"] == "You asked about Oslo."
    assert session.state["user:tz"] == "CET"
    kinds = [
        n.kind for n in await store.nodes(APP, "thread:u/chat") if n.payload.get("adk") == "event"
    ]
    assert kinds == ["goal", "inference", "tool_result", "inference", "goal", "inference"]


async def test_runner_end_to_end_memory() -> None:
    await _runner_loop(MemoryStore())


async def test_runner_end_to_end_sqlite(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / f'{uuid.uuid4().hex}.db'}")
    try:
        await _runner_loop(store)
    finally:
        await store.close()


async def test_duplicate_ids_and_non_json_state_are_refused_with_nothing_written(
    service: TetherSessionService,
) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    first = await service.append_event(s, _event("one", delta={"a": 1}))
    other = _event("other", delta={"a": 2})
    other.id = first.id
    with pytest.raises(DuplicateEventId) as e:
        await service.append_event(s, other)
    assert isinstance(e.value, AlreadyExistsError) and e.value.code == "duplicate_event_id"
    with pytest.raises(InvalidStateValue) as bad:
        await service.append_event(s, _event("x", delta={"f": object()}))
    assert isinstance(bad.value, TypeError) and bad.value.code == "invalid_state_value"
    stored = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert stored is not None and _texts(stored) == ["one"] and stored.state == {"a": 1}


async def test_the_same_event_again_is_a_no_op(service: TetherSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    ev = _event("once", delta={"n": 1, "user:k": "v"})
    await service.append_event(s, ev)
    before = await service.store.head(APP, "thread:u/s")
    assert await service.append_event(s, ev) is ev
    await service.append_event(s, ev.model_copy(deep=True))
    assert (await service.store.head(APP, "thread:u/s")).sequence == before.sequence
    assert _texts(s) == ["once"]  # the session object holds it once too
    stored = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert stored is not None and _texts(stored) == ["once"]
    assert stored.state == {"n": 1, "user:k": "v"}


async def test_afrom_url_and_async_with_close_only_an_owned_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'adk.db'}"
    async with await TetherSessionService.afrom_url(url) as svc:
        await svc.create_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(StoreError, match="closed"):  # the store it opened is closed
        await svc.get_session(app_name=APP, user_id="u", session_id="s")
    store = await open_store(url)
    try:
        async with TetherSessionService(store) as mine:
            pass
        got = await mine.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None  # a store passed in stays open
    finally:
        await store.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    stamps=st.lists(st.sampled_from([10.0, 20.0, 20.0, 30.0, 5.0]), min_size=1, max_size=12),
    recent=st.none() | st.integers(min_value=1, max_value=6),
    after=st.none() | st.sampled_from([5.0, 15.0, 20.0, 31.0]),
)
async def test_events_come_back_ordered_by_timestamp_then_id(
    stamps: list[float], recent: int | None, after: float | None
) -> None:
    """As DatabaseSessionService's ORDER BY timestamp, id (with LIMIT for
    num_recent_events), whatever order the timestamps were appended in."""
    service = TetherSessionService(MemoryStore())
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    for i, ts in enumerate(stamps):
        ev = _event(f"e{i}", ts=ts)
        ev.id = f"id-{(i * 7) % 13:02d}-{i}"
        await service.append_event(s, ev)
    keys = sorted((e.timestamp, e.id) for e in s.events)
    if after is not None:
        keys = [k for k in keys if k[0] >= after]
    if recent is not None:
        keys = keys[-recent:]
    got = await service.get_session(
        app_name=APP,
        user_id="u",
        session_id="s",
        config=GetSessionConfig(num_recent_events=recent, after_timestamp=after),
    )
    assert got is not None and [(e.timestamp, e.id) for e in got.events] == keys
