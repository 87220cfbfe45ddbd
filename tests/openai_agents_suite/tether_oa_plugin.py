"""A pytest plugin that runs the OpenAI Agents SDK's own session tests on TetherSession.

Loaded by ``tests/test_openai_agents_session_suite.py`` with ``-p tether_oa_plugin``
in a subprocess whose working directory is the unpacked openai-agents sdist (the
SDK's own ``tests/conftest.py`` and pytest settings stay in force). In every test
module it puts a ``TetherSession`` where the module builds its session:

* ``SQLiteSession(session_id, db_path, ..., session_settings=...)`` and
  ``AsyncSQLiteSession(...)`` (same signature): a ``TetherSession`` subclass of the
  same name (so its "<class> is closed" errors read as the SDK's do);
* ``RedisSession(session_id, redis_client=fake_redis, key_prefix="test:",
  session_settings=...)``: the Redis tests' shared in-memory Redis (``fake_redis``, with
  ``USE_FAKE_REDIS`` set: fakeredis need not be installed) is the plugin's store, so
  their helpers ``_create_test_session``/``_create_redis_session`` and the tests that
  build a session on it run unchanged; ``_create_owned_redis_session`` (it patches
  redis-py) builds the same. Another client, key prefix or a TTL raises;
* ``MongoDBSession(session_id, client=..., database=..., session_settings=...)``: one
  store per client object and database (the tests' ``_make_session`` and ``session``
  fixture run unchanged); ``MongoDBSession.from_uri`` gets a store of its own.

A test that needs what a TetherSession does not have (a Redis command on
``session._redis``, a TTL, MongoDB's collections) fails loudly: the calling test lists
every such test in ``EXCLUDE`` with its reason.

The store is the one ``TETHER_OA_BACKEND`` names: ``memory`` (one ``memory://`` store
per database path, so two sessions on one path share it as they share a file) or
``sqlite`` (``sqlite:///<db_path>``; ``:memory:`` and the helpers get a file of the
test's own). Every test of the files given runs but those ``TETHER_OA_EXCLUDE`` lists
(JSON: file -> names); an excluded name a collected file lacks is an error, so the list
cannot go stale silently.

At the end the plugin writes ``TETHER_OA_REPORT`` (JSON): the tests that passed,
failed or were skipped (with the skip's reason), and the tests that built a
TetherSession.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tether.adapters._sync import LoopBridge
from tether.adapters.openai_agents import TetherSession, _loop_free
from tether.store import Store, open_store

_state: dict[str, Any] = {"test": "", "built": set(), "outcomes": {}, "places": {}, "skipped": {}}
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
        try:
            TetherSession.__init__(self, session_id, store, session_settings=settings)
        except BaseException:  # a refused session id or settings: nothing is left open
            bridge.run_sync(store.close)
            bridge.stop()
            raise
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


class _SharedRedis:
    """What the Redis tests' ``fake_redis`` becomes: the one Redis the module's tests
    share, which the plugin serves from its store. It has no Redis command, so a test
    that drives the client (``session._redis.pipeline``...) fails loudly."""


_REDIS = _SharedRedis()


class RedisSession(TetherSession):
    """``RedisSession(session_id, redis_client=fake_redis, key_prefix="test:",
    session_settings=...)``, building a TetherSession on the shared store. Any other
    client, key prefix or a TTL is an option TetherSession has no counterpart of: it
    raises, so a new test that needs one fails until EXCLUDE lists it."""

    def __init__(
        self,
        session_id: str,
        *,
        redis_client: Any,
        key_prefix: str = "agents:session",
        ttl: int | None = None,
        session_settings: Any = None,
    ) -> None:
        if redis_client is not _REDIS or key_prefix != "test:" or ttl is not None:
            raise _Unsupported(
                f"RedisSession(redis_client={redis_client!r}, key_prefix={key_prefix!r}, "
                f"ttl={ttl!r})"
            )
        _init(self, session_id, str(_folder() / "redis.db"), session_settings)
        self._redis = redis_client  # another RedisSession on it shares the store


class MongoDBSession(TetherSession):
    """``MongoDBSession(session_id, client=..., database=..., session_settings=...)``,
    building a TetherSession on the store of that client and database (sessions built on
    one client share it, as they share its database); ``from_uri`` gets a store of its
    own, as it gets a client of its own."""

    # The tests clear MongoDBSession's per-client index cache before building one.
    _init_state: ClassVar[dict[Any, Any]] = {}

    def __init__(
        self,
        session_id: str,
        *,
        client: Any,
        database: str = "agents",
        sessions_collection: str = "agent_sessions",
        messages_collection: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        where = _place("mongo", client, database, sessions_collection, messages_collection)
        _init(self, session_id, where, session_settings)

    @classmethod
    def from_uri(
        cls,
        session_id: str,
        *,
        uri: str,
        database: str = "agents",
        client_kwargs: dict[str, Any] | None = None,
        session_settings: Any = None,
        **kwargs: Any,
    ) -> MongoDBSession:
        return cls(
            session_id,
            client=object(),
            database=database,
            session_settings=session_settings,
            **kwargs,
        )


class _Unsupported(NotImplementedError):
    def __init__(self, what: str) -> None:
        super().__init__(
            f"{_state['test']} builds {what}: TetherSession has no counterpart of that "
            "option; if the test does not apply, list it in EXCLUDE with the reason"
        )


def _place(*key: Any) -> str:
    """The database file (a store key on memory://) of a client: one per distinct
    client object (kept alive for the test) and database."""
    places: dict[tuple[Any, ...], tuple[Any, str]] = _state["places"]
    k = (key[0], id(key[1]), *key[2:])
    if k not in places:
        places[k] = (key[1], str(_folder() / f"{key[0]}-{len(places)}.db"))
    return places[k][1]


@pytest.fixture(autouse=True)
def _tether_sessions(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    _state["test"] = request.node.nodeid
    module = request.module
    for cls in (SQLiteSession, AsyncSQLiteSession, RedisSession, MongoDBSession):
        if hasattr(module, cls.__name__):
            monkeypatch.setattr(module, cls.__name__, cls)
    if hasattr(module, "USE_FAKE_REDIS"):
        # The Redis tests' in-memory Redis (fakeredis, when installed) is the plugin's
        # store: their helpers build RedisSession(redis_client=fake_redis, ...).
        monkeypatch.setattr(module, "USE_FAKE_REDIS", True)
        monkeypatch.setattr(module, "fake_redis", _REDIS)
    if hasattr(module, "_create_owned_redis_session"):  # it patches redis.from_url

        def owned(session_id: str) -> TetherSession:
            return RedisSession(session_id, redis_client=_REDIS, key_prefix="test:")

        monkeypatch.setattr(module, "_create_owned_redis_session", owned)
    yield
    while _sessions:
        s = _sessions.pop()
        if not s._closed:
            s.close()
    while _stores:
        store, bridge = _stores.popitem()[1]
        bridge.run_sync(store.close)
        bridge.stop()
    _state["places"].clear()
    while _tmp:
        _tmp.pop().cleanup()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    exclude: dict[str, list[str]] = json.loads(os.environ["TETHER_OA_EXCLUDE"])
    seen: dict[str, set[str]] = {}
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        name = getattr(item, "originalname", item.name)
        seen.setdefault(path, set()).add(name)
        (drop if name in exclude.get(path, []) else keep).append(item)
    # (the calling test also checks the lists against the files' source, which holds
    # for a file skipped whole at import, whose tests are never collected)
    stale = [
        f"{path}::{name}"
        for path, names in exclude.items()
        if path in seen
        for name in names
        if name not in seen[path]
    ]
    if stale:
        raise pytest.UsageError(f"excluded tests that do not exist: {stale}")
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or report.outcome != "passed":
        previous = _state["outcomes"].get(report.nodeid)
        if previous in (None, "passed"):
            _state["outcomes"][report.nodeid] = report.outcome
    if report.skipped:
        longrepr = report.longrepr
        why = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        _state["skipped"][report.nodeid] = why


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("TETHER_OA_REPORT")
    if out:
        Path(out).write_text(
            json.dumps(
                {
                    "outcomes": _state["outcomes"],
                    "skipped": _state["skipped"],
                    "built": sorted(t for t in _state["built"] if t),
                }
            )
        )
