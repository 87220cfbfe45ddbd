"""A pytest plugin that runs the OpenAI Agents SDK's own session tests on TetherSession.

Loaded by ``tests/test_openai_agents_session_suite.py`` with ``-p tether_oa_plugin``
in a subprocess whose working directory is the unpacked openai-agents sdist (the
SDK's own ``tests/conftest.py`` and pytest settings stay in force). In every test
module it puts a ``TetherSession`` where the module builds its session:

* ``SQLiteSession(session_id, db_path, ..., session_settings=...)`` and
  ``AsyncSQLiteSession(...)`` (same signature): a ``TetherSession`` subclass of the
  same name (so its "<class> is closed" errors read as the SDK's do);
* ``_create_test_session(session_id)`` / ``_create_redis_session(session_id)`` of the
  Redis tests and ``_make_session(session_id)`` of the MongoDB tests, when called with
  no backend-specific option (TTL, key prefix, client).

The store is the one ``TETHER_OA_BACKEND`` names: ``memory`` (one ``memory://`` store
per database path, so two sessions on one path share it as they share a file) or
``sqlite`` (``sqlite:///<db_path>``; ``:memory:`` and the helpers get a file of the
test's own). Which tests run is decided by the calling test (``TETHER_OA_SELECT``,
JSON: per file, ``{"exclude": [names]}`` or ``{"only": [names]}``); a listed name that
no longer exists is an error, so the lists cannot go stale silently.

At the end the plugin writes ``TETHER_OA_REPORT`` (JSON): the tests that passed,
failed or were skipped, and the tests that built a TetherSession.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tether.adapters._sync import LoopBridge
from tether.adapters.openai_agents import TetherSession, _loop_free
from tether.store import Store, open_store

_state: dict[str, Any] = {"test": "", "built": set(), "outcomes": {}}
_stores: dict[str, tuple[Store, LoopBridge]] = {}  # memory backend: path -> shared store
_sessions: list[TetherSession] = []
_tmp: list[tempfile.TemporaryDirectory[str]] = []


def _folder() -> Path:
    if not _tmp:
        _tmp.append(tempfile.TemporaryDirectory())
    return Path(_tmp[0].name)


def _init(self: TetherSession, session_id: str, where: str, settings: Any) -> None:
    """Build ``self`` as a TetherSession on the backend's store for ``where``."""
    _state["built"].add(_state["test"])
    backend = os.environ["TETHER_OA_BACKEND"]
    if backend == "memory":
        if where == ":memory:":  # SQLiteSession(":memory:"): a database of its own
            where = f":memory:{len(_sessions)}"
        if where not in _stores:
            bridge = LoopBridge(private=True, inline=True)
            _stores[where] = (bridge.run_sync(lambda: open_store("memory://")), bridge)
        TetherSession.__init__(self, session_id, _stores[where][0], session_settings=settings)
    else:
        if where == ":memory:":
            where = str(_folder() / f"own-{len(_sessions)}.db")
        url = f"sqlite:///{where}"
        bridge = LoopBridge(private=True, inline=_loop_free(url))
        store = bridge.run_sync(lambda: open_store(url))
        TetherSession.__init__(self, session_id, store, session_settings=settings)
        self._bridge, self._owns_store = bridge, True
    _sessions.append(self)


class SQLiteSession(TetherSession):
    """``agents.SQLiteSession``'s constructor, building a TetherSession."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        where = db_path if db_path == ":memory:" else str(Path(db_path).resolve())
        _init(self, session_id, str(where), session_settings)


class AsyncSQLiteSession(SQLiteSession):
    """``agents.extensions.memory.AsyncSQLiteSession``'s constructor (the same)."""


class RedisSession(TetherSession):
    pass


class MongoDBSession(TetherSession):
    pass


def _helper_session(cls: type[TetherSession], session_id: str) -> TetherSession:
    s = cls.__new__(cls)
    _init(s, session_id, str(_folder() / "shared.db"), None)
    return s


@pytest.fixture(autouse=True)
def _tether_sessions(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    _state["test"] = request.node.nodeid
    module = request.module
    for name, cls in (("SQLiteSession", SQLiteSession), ("AsyncSQLiteSession", AsyncSQLiteSession)):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, cls)
    if hasattr(module, "_create_test_session"):  # the Redis tests

        async def create_test(session_id: str | None = None) -> TetherSession:
            return _helper_session(RedisSession, session_id or "test_session")

        original = module._create_redis_session

        async def create_redis(
            session_id: str, key_prefix: str = "test:", ttl: int | None = None
        ) -> Any:
            if key_prefix != "test:" or ttl is not None:
                return await original(session_id, key_prefix, ttl)
            return _helper_session(RedisSession, session_id)

        monkeypatch.setattr(module, "_create_test_session", create_test)
        monkeypatch.setattr(module, "_create_redis_session", create_redis)
    if hasattr(module, "_make_session"):  # the MongoDB tests
        make = module._make_session

        def make_session(session_id: str = "test-session", **kwargs: Any) -> Any:
            if kwargs:
                return make(session_id, **kwargs)
            return _helper_session(MongoDBSession, session_id)

        monkeypatch.setattr(module, "_make_session", make_session)
    yield
    while _sessions:
        s = _sessions.pop()
        if not s._closed:
            s.close()
    while _stores:
        store, bridge = _stores.popitem()[1]
        bridge.run_sync(store.close)
        bridge.stop()
    while _tmp:
        _tmp.pop().cleanup()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    select: dict[str, dict[str, list[str]]] = json.loads(os.environ["TETHER_OA_SELECT"])
    seen: dict[str, set[str]] = {}
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        name = getattr(item, "originalname", item.name)
        seen.setdefault(path, set()).add(name)
        rule = select.get(path, {})
        if ("only" in rule and name not in rule["only"]) or name in rule.get("exclude", []):
            drop.append(item)
        else:
            keep.append(item)
    stale = [
        f"{path}::{name}"
        for path, rule in select.items()
        for name in rule.get("only", []) + rule.get("exclude", [])
        if name not in seen.get(path, set())
    ]
    if stale:
        raise pytest.UsageError(f"listed tests that do not exist: {stale}")
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or report.outcome != "passed":
        previous = _state["outcomes"].get(report.nodeid)
        if previous in (None, "passed"):
            _state["outcomes"][report.nodeid] = report.outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("TETHER_OA_REPORT")
    if out:
        outcomes = _state["outcomes"]
        Path(out).write_text(
            json.dumps(
                {
                    "outcomes": outcomes,
                    "built": sorted(t for t in _state["built"] if t),
                }
            )
        )
