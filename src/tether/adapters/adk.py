"""A Google ADK session service on any tether store: ``TetherSessionService``.

    from tether.adapters.adk import TetherSessionService

    runner = Runner(agent=agent, app_name="shop", session_service=TetherSessionService(store))

Needs the ``adk`` extra; the core never imports ADK.

Where ADK's state goes (docs/adapters.md):

* an ADK app is a tether **namespace** (``namespace_prefix + app_name``), so apps
  never see each other's state;
* a session is the thread ``thread:<user>/<session id>`` (``/`` and ``%`` in the
  user id are percent-encoded, so two users may use the same session id);
* state keys map onto tether's scopes by ADK's prefixes: ``app:k`` is the
  variable ``var:k`` of the ``app`` scope, ``user:k`` of the ``user:<user>``
  scope, a plain key of the session's thread, and ``temp:k`` lives in the call
  scope only: the in-memory session of the current invocation, never stored;
* each event is one node of the thread keeping ADK's event JSON (``event``)
  beside the graph-encoding fields: a user event is a ``goal``, a model event an
  ``inference`` (its function calls as ``tool_calls``), a function response a
  ``tool_result``; ``run`` is ADK's invocation id. An event and the state it
  changes (in up to three scopes) commit in one transaction.

``append_event`` follows ADK's database services: it refuses a session object
older than the stored session (``StaleSessionError``, with their message) and
stores state values in their JSON form (a datetime as its ISO string). An event
whose id the session already holds is a no-op when it is the same event (a
retried call, ADK issue 5723, as ``InMemorySessionService``) and refused when it
is another one (``DuplicateEventId``, an ADK ``AlreadyExistsError``). Events come
back ordered by timestamp, then id, as ``DatabaseSessionService`` orders them.
The service is an async context manager (``async with``), as
``DatabaseSessionService`` is; ``close()`` closes only a store it opened. The empty
user id is accepted, as every ADK service accepts it. Where ADK's own services
differ, docs/adapters.md lists it (tests/test_adk_contract.py runs them side by side).
"""

from __future__ import annotations

import heapq
import time
import uuid
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Final

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from pydantic_core import to_jsonable_python

from ..core import scopes
from ..core.errors import InvalidRequest
from ..core.graph import CausalNode
from ..store import Store, open_store
from ..store.txn import Transaction, transact

__all__ = ["DuplicateEventId", "InvalidStateValue", "TetherSessionService"]


class DuplicateEventId(InvalidRequest, AlreadyExistsError):
    """Another event under an id the session already holds (the same event again is a
    no-op). Nothing is written: ADK's database services refuse it too (the event id
    is part of their primary key). An ``AlreadyExistsError``, as ADK raises for a
    session id that is taken."""

    default_code = "duplicate_event_id"


class InvalidStateValue(InvalidRequest, TypeError):
    """A state value with no JSON form (not even pydantic's: datetimes, enums, models
    and bytes have one). ADK's database service stores ``str(value)`` with a warning;
    tether refuses it and writes nothing. A ``TypeError``, as ``json.dumps`` raises."""

    default_code = "invalid_state_value"


_PAGE: Final = 256
_FIRST: Final = 8
_SESSION_KEY: Final = "adk:session"
_KEY_PREFIX: Final = "adk:event:"  # + the event id: an event node's resource key
_ID: Final = "@id"  # a hole (_punch) filled from the node's resource key: the event id
# ADK's own text (database_session_service._STALE_SESSION_ERROR_MESSAGE), which its
# tests match ("modified in storage")
_STALE: Final = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)


def _quote_user(user_id: str) -> str:
    # "%" alone (never the quoting of a non-empty id) is the empty user id.
    return user_id.replace("%", "%25").replace("/", "%2F") if user_id else "%"


def _user_scope(user_id: str) -> str:
    """``user:<id>``; the empty id (ADK accepts it) is ``user:%`` and a leading ``%`` is
    quoted (``%25``), so the mapping stays one-to-one."""
    if not isinstance(user_id, str):
        raise InvalidRequest("an ADK user_id is a string", field="user_id")
    if not user_id:
        return scopes.user("%")
    return scopes.user("%25" + user_id[1:] if user_id.startswith("%") else user_id)


def _json_deltas(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """ADK's state deltas in their JSON form, as ADK's database services store them
    (``to_jsonable_python``: a datetime becomes its ISO string); a value with no JSON
    form raises ``InvalidStateValue``."""
    deltas = _session_util.extract_state_delta(state)
    try:
        safe: dict[str, dict[str, Any]] = to_jsonable_python(deltas)
    except Exception as e:  # pydantic_core's PydanticSerializationError and kin
        raise InvalidStateValue(f"a state value has no JSON form: {e}", field="state") from e
    return safe


def _event_key(event_id: str) -> str:
    return f"{_KEY_PREFIX}{event_id}"


def _var(name: str, value: Any) -> dict[str, Any]:
    """A tether variable write (docs/graph-encoding.md) holding one ADK state value."""
    return {"name": name, "type": "json", "value": value, "coerced": False, "error": None}


def _event_node(event: Event, llm: str) -> tuple[str, dict[str, Any]]:
    """The kind and payload of one event: ADK's event JSON (``event``) beside the
    graph-encoding fields, each value stored once: where the event's id, its
    invocation id, its text or its function response is also the node's resource key
    or a graph field, the event keeps ``null`` in its place and ``h`` lists the holes
    (``_event_data`` fills them, exactly): ``"i"`` the id (from the resource key),
    ``"r"`` the invocation id (``run``), ``n`` (an int) the text of part ``n`` (the
    graph field ``input`` of a goal, ``content`` of an inference), ``"f"`` the
    response of part 0's function response (``content`` of a tool result)."""
    data = event.model_dump(mode="json", exclude_none=True)
    base: dict[str, Any] = {"adk": "event", "run": event.invocation_id, "event": data}
    holes: list[str | int] = ["i", "r"]
    parts = event.content.parts if event.content and event.content.parts else []
    said = [i for i, p in enumerate(parts) if p.text and not p.thought]
    text = "".join(parts[i].text or "" for i in said)
    calls = [p.function_call for p in parts if p.function_call]
    responses = [p.function_response for p in parts if p.function_response]
    if responses:
        r = responses[0]
        first = data["content"]["parts"][0].get("function_response", {})
        payload = {
            **base,
            "llm": llm,
            "call_id": r.id,
            "name": r.name,
            "content": first.get("response"),
            "is_error": False,
        }
        kind = "tool_result"
        holes.append("f")
    elif event.author == "user":
        payload = {**base, "input": text, "llm": llm, "metadata": {"source": "adk"}}
        kind = "goal"
        holes.extend(said[:1] if len(said) == 1 else [])
    elif text or calls:
        # empty tool_calls and usage are left out (readers treat a missing one as empty)
        payload = {**base, "llm": llm, "content": text}
        if calls:
            payload["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.args or {}} for c in calls
            ]
        kind = "inference"
        holes.extend(said[:1] if len(said) == 1 else [])
    else:
        payload, kind = {**base, "author": event.author}, "resource"
    return kind, _punch(kind, payload, holes, event.id)


_TEXT_FIELD: Final = {"goal": "input", "inference": "content"}


def _hole(kind: str, hole: str | int) -> tuple[str, list[Any]]:
    """Where a hole's value comes from (a payload field, or ``_ID``) and its path in
    the event."""
    if hole == "i":
        return _ID, ["id"]
    if hole == "r":
        return "run", ["invocation_id"]
    if hole == "f":
        return "content", ["content", "parts", 0, "function_response", "response"]
    return _TEXT_FIELD[kind], ["content", "parts", hole, "text"]


def _at(data: dict[str, Any], path: list[Any]) -> tuple[Any, Any]:
    """The container of ``path``'s last step in ``data`` (containers copied along the
    way: ``data`` is a fresh top-level copy the caller may change) and that step."""
    at: Any = data
    for key in path[:-1]:
        at[key] = at[key].copy()
        at = at[key]
    return at, path[-1]


def _punch(
    kind: str, payload: dict[str, Any], holes: list[str | int], event_id: str
) -> dict[str, Any]:
    """``payload`` with each value of its event that ``holes`` names set to ``null``,
    only where the event holds exactly the value its source holds."""
    data = {**payload["event"]}
    kept: list[str | int] = []
    for hole in holes:
        source, path = _hole(kind, hole)
        value = event_id if source == _ID else payload.get(source)
        at, key = _at(data, path)
        if isinstance(value, str | dict) and type(at.get(key)) is type(value) and at[key] == value:
            at[key] = None
            kept.append(hole)
    return {**payload, "event": data, "h": kept} if kept else payload


def _event_data(node: CausalNode) -> dict[str, Any]:
    """The event JSON a node stores, with the values ``_punch`` took out put back."""
    p = node.payload
    holes = p.get("h")
    data = {**p["event"]}
    for hole in holes or ():
        source, path = _hole(node.kind, hole)
        at, key = _at(data, path)
        at[key] = (node.resource_key or "")[len(_KEY_PREFIX) :] if source == _ID else p[source]
    return data


class TetherSessionService(BaseSessionService):
    """ADK's ``BaseSessionService`` over a tether store."""

    def __init__(self, store: Store, *, namespace_prefix: str = "", llm: str = "agent") -> None:
        self.store = store
        self.namespace_prefix = namespace_prefix
        self.llm = llm
        self._owns_store = False

    @classmethod
    async def afrom_url(cls, url: str, **kw: Any) -> TetherSessionService:
        """Open a store by URL; the service owns it: ``close()`` (or leaving
        ``async with``) closes it, as ``DatabaseSessionService(db_url)`` disposes the
        engine it made."""
        service = cls(await open_store(url), **kw)
        service._owns_store = True
        return service

    async def close(self) -> None:
        """Close the store if ``afrom_url`` opened it; a store passed in stays open
        (as ``DatabaseSessionService`` leaves a caller's engine)."""
        if self._owns_store:
            self._owns_store = False
            await self.store.close()

    async def __aenter__(self) -> TetherSessionService:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- names -------------------------------------------------------------------

    def _ns(self, app_name: str) -> str:
        return self.namespace_prefix + app_name

    @staticmethod
    def _thread(user_id: str, session_id: str) -> str:
        if not isinstance(user_id, str):
            raise InvalidRequest("an ADK user_id is a string", field="user_id")
        return scopes.thread(f"{_quote_user(user_id)}/{session_id}")

    # -- reading -----------------------------------------------------------------

    async def _vars(self, ns: str, scope: str) -> dict[str, Any]:
        heads = await self.store.resource_heads(ns, scope, prefix="var:")
        return {n.payload["name"]: n.payload["value"] for n in heads.values()}

    async def _state(self, ns: str, user_id: str, thread: str) -> dict[str, Any]:
        state = await self._vars(ns, thread)
        for k, v in (await self._vars(ns, scopes.APP)).items():
            state[State.APP_PREFIX + k] = v
        for k, v in (await self._vars(ns, _user_scope(user_id))).items():
            state[State.USER_PREFIX + k] = v
        return state

    async def _events_back(
        self, ns: str, thread: str, before: int | None = None, first: int = _PAGE
    ) -> AsyncIterator[CausalNode]:
        """Event nodes of a session, newest first. ``first``: the size of the first page
        (small when only the newest event is wanted: the newest nodes of a session are
        its last event and the state it changed, so a few nodes reach it)."""
        size = first
        while True:
            page = await self.store.nodes(ns, thread, before=before, limit=size, descending=True)
            for n in page:
                if isinstance(n.payload, dict) and n.payload.get("adk") == "event":
                    yield n
            if len(page) < size:
                return
            before = page[-1].sequence
            size = _PAGE

    async def _ordered_events(
        self, ns: str, thread: str, recent: int | None, after: float | None
    ) -> list[CausalNode]:
        """The session's event nodes ordered as ``DatabaseSessionService`` orders its
        rows: by timestamp, then id; ``recent``: the last N of that order; ``after``:
        only those at or after it. The walk goes newest first (append order) and
        stops once no older event can qualify: each event carries the largest
        timestamp appended up to it (``m``, kept only where it exceeds the event's
        own), so an event with a timestamp older than one before it never hides."""
        chosen: list[tuple[float, str, CausalNode]] = []
        top: list[tuple[float, str]] = []  # min-heap of the best ``recent`` keys
        async for n in self._events_back(ns, thread):
            ts = float(n.payload["event"]["timestamp"])
            most = float(n.payload.get("m", ts))
            if after is not None and most < after:
                break  # every older event is at most ``most``
            if recent is not None and len(top) >= recent and most < top[0][0]:
                break  # no older event reaches the recent ones
            if after is not None and ts < after:
                continue
            eid = (n.resource_key or "")[len(_KEY_PREFIX) :]
            chosen.append((ts, eid, n))
            if recent is not None:
                if len(top) < recent:
                    heapq.heappush(top, (ts, eid))
                elif (ts, eid) > top[0]:
                    heapq.heapreplace(top, (ts, eid))
        chosen.sort(key=lambda c: (c[0], c[1]))
        if recent is not None:
            chosen = chosen[-recent:]
        return [n for _, _, n in chosen]

    async def _last_update(self, ns: str, thread: str, record: CausalNode) -> float:
        async for n in self._events_back(ns, thread, first=_FIRST):
            return float(n.payload["event"]["timestamp"])
        return float(record.payload["created"])

    # -- the service -----------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = (session_id.strip() if session_id else None) or str(uuid.uuid4())
        ns, thread = self._ns(app_name), self._thread(user_id, session_id)
        deltas = _json_deltas(state or {})
        created = time.time()

        async def fn(txn: Transaction) -> None:
            if await txn.resource_head(thread, _SESSION_KEY) is not None:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.")
            await txn.append(
                thread,
                "resource",
                {
                    "adk": "session",
                    "app": app_name,
                    "user": user_id,
                    "id": session_id,
                    "created": created,
                },
                resource_key=_SESSION_KEY,
            )
            await self._write_state(txn, user_id, thread, deltas)

        await transact(self.store, ns, fn)
        return Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._state(ns, user_id, thread),
            last_update_time=created,
        )

    async def _write_state(
        self, txn: Transaction, user_id: str, thread: str, deltas: dict[str, dict[str, Any]]
    ) -> None:
        for scope, delta in (
            (scopes.APP, deltas["app"]),
            (_user_scope(user_id), deltas["user"]),
            (thread, deltas["session"]),
        ):
            for k, v in delta.items():
                await txn.append(scope, "resource", _var(k, v), resource_key=f"var:{k}")

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        session_id = session_id.strip() if session_id else session_id
        ns, thread = self._ns(app_name), self._thread(user_id, session_id)
        record = await self.store.resource_head(ns, thread, _SESSION_KEY)
        if record is None:
            return None
        recent = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        events: list[Event] = []
        if recent != 0:
            events = [
                Event.model_validate(_event_data(n))
                for n in await self._ordered_events(ns, thread, recent, after)
            ]
        last = await self._last_update(ns, thread, record)
        return Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._state(ns, user_id, thread),
            events=events,
            last_update_time=last,
        )

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        ns = self._ns(app_name)
        prefix = "thread:" if user_id is None else f"thread:{_quote_user(user_id)}/"
        sessions: list[Session] = []
        after: str | None = None
        while True:
            page = await self.store.list_scopes(ns, prefix=prefix, after=after, limit=100)
            for info in page:
                record = await self.store.resource_head(ns, info.scope, _SESSION_KEY)
                if record is None:
                    continue
                uid = record.payload["user"]
                sessions.append(
                    Session(
                        id=record.payload["id"],
                        app_name=app_name,
                        user_id=uid,
                        state=await self._state(ns, uid, info.scope),
                        last_update_time=await self._last_update(ns, info.scope, record),
                    )
                )
            if len(page) < 100:
                break
            after = page[-1].scope
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        session_id = session_id.strip() if session_id else session_id
        ns, thread = self._ns(app_name), self._thread(user_id, session_id)
        if (await self.store.head(ns, thread)).sequence:
            await self.store.reset_scope(ns, thread)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self._vars(self._ns(app_name), _user_scope(user_id))

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        # temp: state reaches this invocation's in-memory session, never the store
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        ns, thread = self._ns(session.app_name), self._thread(session.user_id, session.id)
        deltas = _json_deltas(event.actions.state_delta if event.actions else {})
        kind, payload = _event_node(event, self.llm)

        data = event.model_dump(mode="json", exclude_none=True)

        async def fn(txn: Transaction) -> bool:
            record = await txn.resource_head(thread, _SESSION_KEY)
            if record is None:
                raise SessionNotFoundError(f"Session {session.id} not found.")
            head = await txn.head(thread)
            most = event.timestamp
            async for last in self._events_back(ns, thread, before=head.sequence + 1, first=_FIRST):
                stored = float(last.payload["event"]["timestamp"])
                if stored > session.last_update_time:
                    raise StaleSessionError(_STALE)
                most = max(most, float(last.payload.get("m", stored)))
                break
            held = await txn.resource_head(thread, _event_key(event.id))
            if held is not None:
                # The same event again (a retried call) is a no-op, as in ADK's
                # InMemorySessionService (its issue 5723); another event under that id
                # is refused, as ADK's database services refuse it (primary key).
                if held.payload.get("adk") == "event" and _event_data(held) == data:
                    return False
                raise DuplicateEventId(
                    f"session {session.id!r} already holds another event with id {event.id!r}",
                    field="event.id",
                )
            await self._write_state(txn, session.user_id, thread, deltas)
            node = payload if most == event.timestamp else {**payload, "m": most}
            await txn.append(thread, kind, node, resource_key=_event_key(event.id))
            return True

        if not await transact(self.store, ns, fn):
            return event
        session.last_update_time = event.timestamp
        self._commit_event_to_session(session, event)
        return event
