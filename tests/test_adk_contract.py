"""One ADK session contract, run on TetherSessionService and on ADK's own services.

Every scenario runs on five services in the same test: ``TetherSessionService`` on
``memory://`` and on SQLite, and ADK's ``InMemorySessionService``,
``SqliteSessionService`` and ``DatabaseSessionService`` (``sqlite+aiosqlite`` in
tmp_path). What each returns, raises and keeps is reduced to an observation, and
every service's observation must equal ``DatabaseSessionService``'s (the reference
issue #16 names: where ADK's own services disagree, tether follows it), except the
differences listed in ``DIFFERENCES`` with their reason; each listed difference must
still be one (the test fails if it disappears), so the list is exact. The same list,
with the same reasons, is in docs/adapters.md.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")
pytest.importorskip("sqlalchemy")
pytest.importorskip("aiosqlite")

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions import DatabaseSessionService, InMemorySessionService
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
)
from google.adk.sessions.session import Session
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from sqlalchemy.exc import IntegrityError

from tether.adapters.adk import TetherSessionService
from tether.store import open_store

APP = "contract"
SERVICES = ["tether_memory", "tether_sqlite", "adk_memory", "adk_sqlite", "adk_database"]
REFERENCE = "adk_database"

_MEMORY_DEDUPES = (
    "InMemorySessionService skips an event equal to one it holds (a retried call) and "
    "keeps a different event that reuses an id; ADK's database services refuse any "
    "event whose id the session holds (primary key)"
)
_MEMORY_NO_STALE = "InMemorySessionService has no stale-session check"
_SAME_EVENT_AGAIN = (
    "the same event appended again (a retried call) is a no-op, as in ADK's "
    "InMemorySessionService (ADK issue 5723); ADK's database services refuse it "
    "(primary key). Another event under a held id is refused by all three"
)
_APPEND_ORDER = (
    "returns events in append order; DatabaseSessionService orders them by (timestamp, id)"
)
_NO_CONTEXT_MANAGER = (
    "is not an async context manager; DatabaseSessionService (and tether's service) are"
)
_MEMORY_RAW_STATE = (
    "InMemorySessionService keeps state values as given (a datetime stays a datetime); "
    "the database services store their JSON form"
)

# (scenario, service) -> why it differs from DatabaseSessionService. Also in
# docs/adapters.md ("ADK: where the services differ").
DIFFERENCES: dict[tuple[str, str], str] = {
    ("duplicate_older_event", "adk_memory"): _MEMORY_DEDUPES,
    ("duplicate_newest_equal", "adk_memory"): _MEMORY_DEDUPES,
    ("duplicate_older_event", "tether_memory"): _SAME_EVENT_AGAIN,
    ("duplicate_older_event", "tether_sqlite"): _SAME_EVENT_AGAIN,
    ("duplicate_newest_equal", "tether_memory"): _SAME_EVENT_AGAIN,
    ("duplicate_newest_equal", "tether_sqlite"): _SAME_EVENT_AGAIN,
    ("tied_timestamps", "adk_memory"): "InMemorySessionService " + _APPEND_ORDER,
    ("tied_timestamps", "adk_sqlite"): "SqliteSessionService " + _APPEND_ORDER,
    ("stale_session", "adk_sqlite"): (
        "SqliteSessionService's StaleSessionError reads 'earlier than the update_time in "
        "storage', not DatabaseSessionService's 'modified in storage' (tether's reads as "
        "DatabaseSessionService's)"
    ),
    ("async_with", "adk_memory"): "InMemorySessionService " + _NO_CONTEXT_MANAGER,
    ("async_with", "adk_sqlite"): "SqliteSessionService " + _NO_CONTEXT_MANAGER,
    ("duplicate_newest_different", "adk_memory"): _MEMORY_DEDUPES,
    ("stale_session", "adk_memory"): _MEMORY_NO_STALE,
    ("datetime_state", "adk_memory"): _MEMORY_RAW_STATE,
    ("non_json_state", "adk_memory"): _MEMORY_RAW_STATE,
    ("non_json_state", "tether_memory"): (
        "a value with no JSON form (an arbitrary object): ADK's database services "
        "store str(value) and log a warning; tether raises InvalidStateValue "
        "(a TypeError) and writes nothing (exact, or a loud error)"
    ),
    ("non_json_state", "tether_sqlite"): "as tether_memory",
}


# -- services ------------------------------------------------------------------------


async def _open(name: str, tmp: Path) -> tuple[BaseSessionService, Callable[[], Awaitable[Any]]]:
    if name.startswith("tether_"):
        url = "memory://" if name == "tether_memory" else f"sqlite:///{tmp / 'tether.db'}"
        store = await open_store(url)
        return TetherSessionService(store), store.close
    if name == "adk_memory":
        return InMemorySessionService(), _noop
    if name == "adk_sqlite":
        return SqliteSessionService(str(tmp / "adk_sqlite.db")), _noop
    svc = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{tmp / 'adk_db.db'}")
    return svc, svc.close


async def _noop() -> None:
    return None


def _outcome(e: BaseException | None) -> str:
    """What an error means to a caller (the classes differ: sqlalchemy's, ADK's, tether's)."""
    if e is None:
        return "ok"
    if isinstance(e, AlreadyExistsError | IntegrityError | sqlite3.IntegrityError):
        return "refused: exists"
    if isinstance(e, StaleSessionError):
        # ADK's own tests match DatabaseSessionService's wording
        return "refused: stale" + (
            " (modified in storage)" if "modified in storage" in str(e) else ""
        )
    if isinstance(e, SessionNotFoundError):
        return "refused: not found"
    if isinstance(e, TypeError | ValueError):
        return "refused: value"
    return f"error {type(e).__name__}"


async def _try(aw: Awaitable[Any]) -> str:
    try:
        await aw
    except Exception as e:  # every service's own error, reduced by _outcome
        return _outcome(e)
    return "ok"


def _event(
    text: str, *, author: str = "user", delta: dict[str, Any] | None = None, eid: str = ""
) -> Event:
    ev = Event(
        invocation_id="inv-1",
        author=author,
        content=types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text=text)]
        ),
        actions=EventActions(state_delta=dict(delta or {})),
    )
    if eid:
        ev.id = eid
    return ev


def _events(s: Session | None) -> list[tuple[str, str, str]]:
    if s is None:
        return []
    return [
        (
            e.id,
            e.author,
            "".join(p.text or "" for p in (e.content.parts or [])) if e.content else "",
        )
        for e in s.events
    ]


async def _get(svc: BaseSessionService, user: str, sid: str, **kw: Any) -> Session | None:
    return await svc.get_session(app_name=APP, user_id=user, session_id=sid, **kw)


async def _view(svc: BaseSessionService, user: str, sid: str) -> dict[str, Any]:
    s = await _get(svc, user, sid)
    return {"exists": s is not None, "events": _events(s), "state": s.state if s else None}


# -- scenarios -------------------------------------------------------------------------


async def create_and_get(svc: BaseSessionService) -> dict[str, Any]:
    state = {"app:currency": "EUR", "user:name": "Ada", "cart": [1, 2], "temp:scratch": 1}
    s = await svc.create_session(app_name=APP, user_id="u", state=state, session_id="s1")
    again = await svc.create_session(app_name=APP, user_id="v", session_id="s2")
    return {
        "created": (s.id, s.user_id, s.state, s.events),
        "other user sees app state": again.state,
        "duplicate id": await _try(svc.create_session(app_name=APP, user_id="u", session_id="s1")),
        "get": await _view(svc, "u", "s1"),
        "missing": await _get(svc, "u", "nope"),
    }


async def events_and_state(svc: BaseSessionService) -> dict[str, Any]:
    s = await svc.create_session(app_name=APP, user_id="u", session_id="s")
    delta = {"count": 1, "user:seen": True, "app:version": 2, "temp:x": 1}
    await svc.append_event(s, _event("hello", delta=delta, eid="e1"))
    await svc.append_event(s, _event("hi", author="agent", delta={"count": 2}, eid="e2"))
    partial = _event("typing", author="agent", eid="e3")
    partial.partial = True
    await svc.append_event(s, partial)
    recent = await _get(svc, "u", "s", config=GetSessionConfig(num_recent_events=1))
    none = await _get(svc, "u", "s", config=GetSessionConfig(num_recent_events=0))
    return {
        "in memory": (_events(s), s.state),
        "get": await _view(svc, "u", "s"),
        "recent 1": _events(recent),
        "recent 0": _events(none),
        "user state elsewhere": (
            await svc.create_session(app_name=APP, user_id="u", session_id="t")
        ).state,
    }


async def duplicate_older_event(svc: BaseSessionService) -> dict[str, Any]:
    s = await svc.create_session(app_name=APP, user_id="u", session_id="s")
    e1 = _event("one", delta={"a": 1}, eid="e1")
    await svc.append_event(s, e1)
    await svc.append_event(s, _event("two", delta={"a": 2}, eid="e2"))
    again = await _try(svc.append_event(s, e1))
    return {"again": again, "get": await _view(svc, "u", "s")}


async def duplicate_newest_equal(svc: BaseSessionService) -> dict[str, Any]:
    s = await svc.create_session(app_name=APP, user_id="u", session_id="s")
    e1 = _event("one", delta={"a": 1}, eid="e1")
    await svc.append_event(s, e1)
    again = await _try(svc.append_event(s, e1))
    return {"again": again, "get": await _view(svc, "u", "s")}


async def duplicate_newest_different(svc: BaseSessionService) -> dict[str, Any]:
    s = await svc.create_session(app_name=APP, user_id="u", session_id="s")
    await svc.append_event(s, _event("one", delta={"a": 1}, eid="e1"))
    other = await _try(svc.append_event(s, _event("other", delta={"b": 1}, eid="e1")))
    return {"other": other, "get": await _view(svc, "u", "s")}


async def stale_session(svc: BaseSessionService) -> dict[str, Any]:
    s = await svc.create_session(app_name=APP, user_id="u", session_id="s")
    await svc.append_event(s, _event("one", eid="e1"))
    copy = await _get(svc, "u", "s")
    assert copy is not None
    await svc.append_event(s, _event("two", eid="e2"))
    late = await _try(svc.append_event(copy, _event("late", delta={"x": 1}, eid="e3")))
    return {"late": late, "get": await _view(svc, "u", "s")}


async def tied_timestamps(svc: BaseSessionService) -> dict[str, Any]:
    """Events sharing a timestamp, appended in reverse id order, then one earlier than
    them (ADK's database service orders by timestamp, then id)."""
    s = await svc.create_session(app_name=APP, user_id="u", session_id="s")
    for eid in ("e_z", "e_m", "e_a"):
        ev = _event(eid, eid=eid)
        ev.timestamp = 100.0
        await svc.append_event(s, ev)
    early = _event("early", eid="e_0")
    early.timestamp = 50.0
    await svc.append_event(s, early)
    recent = await _get(svc, "u", "s", config=GetSessionConfig(num_recent_events=2))
    after = await _get(svc, "u", "s", config=GetSessionConfig(after_timestamp=60.0))
    return {
        "get": await _view(svc, "u", "s"),
        "recent 2": _events(recent),
        "after 60": _events(after),
    }


async def async_with(svc: BaseSessionService) -> dict[str, Any]:
    """``async with service``, as ADK's tests open DatabaseSessionService."""
    try:
        async with svc as entered:  # type: ignore[attr-defined]
            s = await entered.create_session(app_name=APP, user_id="u", session_id="s")
            return {"entered is service": entered is svc, "created": s.id}
    except (TypeError, AttributeError) as e:
        return {"refused": type(e).__name__}


async def missing_session(svc: BaseSessionService) -> dict[str, Any]:
    ghost = Session(id="ghost", app_name=APP, user_id="u")
    return {"append": await _try(svc.append_event(ghost, _event("hi", eid="e1")))}


async def datetime_state(svc: BaseSessionService) -> dict[str, Any]:
    when = dt.datetime(2026, 12, 1, 18, 30, tzinfo=dt.UTC)
    day = dt.date(2026, 12, 1)
    s = await svc.create_session(app_name=APP, user_id="u", session_id="s", state={"created": when})
    await svc.append_event(
        s, _event("at", delta={"at": when, "user:day": day, "app:t": when}, eid="e1")
    )
    return {"get": await _view(svc, "u", "s")}


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


async def non_json_state(svc: BaseSessionService) -> dict[str, Any]:
    s = await svc.create_session(app_name=APP, user_id="u", session_id="s")
    outcome = await _try(svc.append_event(s, _event("x", delta={"thing": _Opaque()}, eid="e1")))
    return {"append": outcome, "get": await _view(svc, "u", "s")}


async def empty_user_id(svc: BaseSessionService) -> dict[str, Any]:
    s = await svc.create_session(
        app_name=APP, user_id="", session_id="s", state={"user:k": 1, "n": 0}
    )
    await svc.append_event(s, _event("hi", delta={"user:k": 2}, eid="e1"))
    other = await svc.create_session(app_name=APP, user_id="%", session_id="s")
    listed = await svc.list_sessions(app_name=APP, user_id="")
    return {
        "get": await _view(svc, "", "s"),
        "user '%' is another user": other.state,
        "listed": sorted((x.user_id, x.id) for x in listed.sessions),
    }


async def list_and_delete(svc: BaseSessionService) -> dict[str, Any]:
    for user, sid in (("u", "a"), ("u", "b"), ("v", "a")):
        await svc.create_session(app_name=APP, user_id=user, session_id=sid, state={"k": sid})
    by_u = await svc.list_sessions(app_name=APP, user_id="u")
    everyone = await svc.list_sessions(app_name=APP)
    await svc.delete_session(app_name=APP, user_id="u", session_id="a")
    return {
        "u": sorted((x.id, x.events == []) for x in by_u.sessions),
        "all": sorted((x.user_id, x.id) for x in everyone.sessions),
        "after delete": await _get(svc, "u", "a"),
        "v untouched": await _view(svc, "v", "a"),
    }


SCENARIOS: dict[str, Callable[[BaseSessionService], Awaitable[dict[str, Any]]]] = {
    f.__name__: f
    for f in (
        create_and_get,
        events_and_state,
        duplicate_older_event,
        duplicate_newest_equal,
        duplicate_newest_different,
        stale_session,
        tied_timestamps,
        async_with,
        missing_session,
        datetime_state,
        non_json_state,
        empty_user_id,
        list_and_delete,
    )
}


def test_differences_name_real_scenarios_and_services() -> None:
    for scenario, service in DIFFERENCES:
        assert scenario in SCENARIOS and service in SERVICES and service != REFERENCE


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_adk_contract(scenario: str, tmp_path: Path) -> None:
    observed: dict[str, Any] = {}
    for name in SERVICES:
        folder = tmp_path / name
        folder.mkdir()
        svc, close = await _open(name, folder)
        try:
            observed[name] = await SCENARIOS[scenario](svc)
        finally:
            await close()
    ref = observed[REFERENCE]
    report = "\n".join(f"{k}: {v}" for k, v in observed.items())
    for name in SERVICES:
        if name == REFERENCE:
            continue
        if (scenario, name) in DIFFERENCES:
            assert observed[name] != ref, f"listed difference is gone: {name}\n{report}"
        else:
            assert observed[name] == ref, f"{name} differs from {REFERENCE}\n{report}"
