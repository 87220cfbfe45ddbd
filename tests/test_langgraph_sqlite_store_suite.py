"""langgraph-checkpoint-sqlite's store tests, run against tether's ``TetherStore``.

The test downloads the sdist of the installed ``langgraph-checkpoint-sqlite`` from the
package index (``pip download --no-deps --no-binary :all:``) into
``~/.cache/tether-tests/`` (outside the repository; reused by later runs) and runs its
``tests/test_store.py``, ``tests/test_async_store.py`` and ``tests/test_ttl.py`` in a
subprocess with a plugin (written here into a temporary directory) that puts
``TetherStore`` wherever those files build a ``SqliteStore`` or ``AsyncSqliteStore``:
``from_conn_string(":memory:", index=..., ttl=...)`` opens ``memory://``, a file path
opens tether's SQLite store on that file; ``setup()`` has nothing to do; on the async
class, ``sweep_ttl``, ``start_ttl_sweeper`` and ``stop_ttl_sweeper`` are TetherStore's
``asweep_ttl``, ``astart_ttl_sweeper`` and ``astop_ttl_sweeper`` (AsyncSqliteStore
has them as coroutines under the sync names).

Deselected, each for the reason given in ``NOT_ABOUT_TETHER``: the tests of
SqliteStore's own SQL and helpers (migrations, its glob escaping and namespace
patterns, the SQL it generates, its connection), of ``AsyncSqliteStore``'s refusal
of sync calls on its own event loop (TetherStore answers sync calls from any thread,
its loop is its own), and two where LangGraph's stores disagree with each other and
TetherStore answers as ``InMemoryStore`` and ``BaseStore``'s documentation do.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path

import pytest

from _sdist import xdist_args

pytest.importorskip("langgraph.store.sqlite")
pytest.importorskip("langchain_core")

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

CACHE = Path(os.environ.get("TETHER_TEST_CACHE", Path.home() / ".cache" / "tether-tests"))

NOT_ABOUT_TETHER = {
    "tests/test_store.py::test_nonnull_migrations": "SqliteStore's migration SQL",
    "tests/test_store.py::test_escape_glob_literal": "SqliteStore's GLOB escaping helper",
    "tests/test_store.py::test_namespace_match_pattern": "SqliteStore's GLOB pattern helper",
    "tests/test_store.py::test_list_namespaces_prefix_uses_indexable_condition": (
        "the SQL condition BaseSqliteStore generates"
    ),
    "tests/test_store.py::test_vector_store_initialization": (
        "reads SqliteStore's connection (store.conn) and its vector tables"
    ),
    "tests/test_store.py::test_sql_injection_vulnerability": (
        "SqliteStore refuses filter keys it cannot put in its SQL (ValueError); TetherStore"
        " builds no SQL from filters, such a key matches nothing"
    ),
    # Where LangGraph's own stores disagree, TetherStore answers as InMemoryStore
    # (its reads are InMemoryStore's) and as BaseStore documents:
    "tests/test_store.py::test_filter_keys_with_hyphens_and_digits": (
        "SqliteStore reads a dotted filter key as a nested path; InMemoryStore (and"
        " TetherStore) as a top-level key"
    ),
    "tests/test_ttl.py::test_ttl_override_default": (
        "SqliteStore refreshes TTLs on read only when refresh_on_read is set; BaseStore"
        " documents (and InMemoryStore, TetherStore do) a refresh by default"
    ),
    "tests/test_async_store.py::test_no_running_loop": (
        "AsyncSqliteStore refuses sync calls on its own loop; TetherStore serves them"
    ),
}

PLUGIN = r"""
import contextlib, os, pytest
from tether.adapters.langgraph_store import TetherStore

def _url(conn):
    return "memory://" if conn == ":memory:" else "sqlite:///" + os.path.abspath(conn)

class _Sync(TetherStore):
    @classmethod
    @contextlib.contextmanager
    def from_conn_string(cls, conn, *, index=None, ttl=None, **kw):
        store = TetherStore.from_url(_url(conn), index=index, ttl=ttl)
        store.__class__ = cls
        with open(os.environ["TETHER_LG_STORE_COUNT"], "a") as f:
            f.write("built\n")
        try:
            yield store
        finally:
            store.close()

    def setup(self):
        pass

class _Async(TetherStore):
    @classmethod
    @contextlib.asynccontextmanager
    async def from_conn_string(cls, conn, *, index=None, ttl=None, **kw):
        store = await TetherStore.afrom_url(_url(conn), index=index, ttl=ttl)
        store.__class__ = cls
        with open(os.environ["TETHER_LG_STORE_COUNT"], "a") as f:
            f.write("built\n")
        try:
            yield store
        finally:
            await store.aclose()

    async def setup(self):
        pass

    # AsyncSqliteStore's TTL methods are coroutines under the sync names;
    # TetherStore (one class for both) names them asweep_ttl, astart_ttl_sweeper...
    async def sweep_ttl(self):
        return await self.asweep_ttl()

    async def start_ttl_sweeper(self, sweep_interval_minutes=None):
        return await self.astart_ttl_sweeper(sweep_interval_minutes)

    async def stop_ttl_sweeper(self, timeout=None):
        return await self.astop_ttl_sweeper(timeout)

@pytest.fixture(autouse=True)
def _tether_store(request, monkeypatch):
    if hasattr(request.module, "SqliteStore"):
        monkeypatch.setattr(request.module, "SqliteStore", _Sync)
    if hasattr(request.module, "AsyncSqliteStore"):
        monkeypatch.setattr(request.module, "AsyncSqliteStore", _Async)
    yield
"""


def _sdist(dist: str) -> Path:
    ver = version(dist)
    root = CACHE / f"{dist}-{ver}"
    unpacked = root / f"{dist.replace('-', '_')}-{ver}"
    if (unpacked / "tests" / "test_store.py").exists():
        return unpacked
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
         f"{dist}=={ver}", "-d", str(root)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (archive,) = root.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return unpacked


def test_langgraph_sqlite_store_tests_pass_on_tether_store() -> None:
    src = _sdist("langgraph-checkpoint-sqlite")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tether_lg_sqlite_plugin.py").write_text(PLUGIN)
        env = {
            **os.environ,
            "TETHER_LG_STORE_COUNT": str(Path(tmp) / "built.txt"),
            "PYTHONPATH": os.pathsep.join(
                [str(src), tmp, *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        deselect = [a for t in NOT_ABOUT_TETHER for a in ("--deselect", t)]
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "tether_lg_sqlite_plugin",
             "-p", "no:cacheprovider", "-o", "asyncio_mode=auto", "-o", "filterwarnings=",
             "-o", "asyncio_default_fixture_loop_scope=function",
             "--rootdir", str(src), "-c", os.devnull, *deselect,
             *xdist_args(3),  # ~45 s serially, ~38 s of it its TTL tests' sleeps
             "tests/test_store.py", "tests/test_async_store.py", "tests/test_ttl.py"],
            cwd=src,
            env=env,
            capture_output=True,
            text=True,
            timeout=850,
        )  # fmt: skip
        counted = Path(tmp) / "built.txt"
        built = counted.read_text().count("built") if counted.exists() else 0
    Path(os.environ.get("TETHER_LG_SUITE_LOG", os.devnull)).write_text(r.stdout)
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-3000:]
    last = r.stdout.strip().splitlines()[-1]
    print(f"langgraph-checkpoint-sqlite store tests on TetherStore: {last}")
    assert " passed" in last and "failed" not in last and "error" not in last, last
    # the tests really ran on TetherStore: one per test that builds a store
    assert built >= 100, built
