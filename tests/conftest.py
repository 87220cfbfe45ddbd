"""Shared fixtures: real servers from environment variables, never mocks.

TETHER_TEST_POSTGRES_URL and TETHER_TEST_REDIS_URL name the servers. Without them
(a laptop), tests that need a server are skipped with a clear reason; with
TETHER_REQUIRE_SERVERS=1 (as .ci/run sets) a missing server fails the test.

``store`` is a store of each backend in turn and ``ns`` a namespace of the test's
own; a module that means one backend only defines its own ``store``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import tether

try:  # this conftest also serves venvs of other projects' versions, without hypothesis
    from hypothesis import settings
except ImportError:  # pragma: no cover
    pass
else:
    # A test never fails because the machine is slow (speed is measured by benchmarks/):
    # no property test has a per-example deadline, whatever else its own settings say.
    settings.register_profile("tether", deadline=None)
    settings.load_profile("tether")

# Bytecode outside the tree. Many tests start Python processes (the CLI, helper
# processes, other projects' suites) that import tether afresh; under
# PYTHONDONTWRITEBYTECODE (set on these machines) each one recompiled every module of a
# fresh clone's src/ it imports. They keep their bytecode under the test cache instead
# (``TETHER_TEST_CACHE``, as tests/_sdist.py), never in the tree. Only they: with a prefix
# Python reads no __pycache__, so pytest's own processes (xdist's too, which start with
# this process's environment), importing most dependencies while collecting, keep the
# .pyc files pip wrote for them. Hence a fixture (it runs where the tests run), not a
# module-level setting.
PYCACHE = (
    Path(os.environ.get("TETHER_TEST_CACHE", Path.home() / ".cache" / "tether-tests")) / "pycache"
)


def _prune(prefix: Path, depth: int = 3) -> None:
    """Drop the bytecode of trees that are gone (a clone removed after its CI run), so the
    cache holds only what some existing checkout or installation can still use."""
    level = [prefix] if prefix.is_dir() else []
    for _ in range(depth):
        below = []
        for folder in level:
            for child in folder.iterdir():
                if not child.is_dir():
                    continue
                if (Path("/") / child.relative_to(prefix)).exists():
                    below.append(child)
                else:
                    shutil.rmtree(child, ignore_errors=True)
        level = below


@pytest.fixture(scope="session", autouse=True)
def _subprocess_bytecode_outside_the_tree() -> Iterator[None]:
    with contextlib.suppress(OSError):  # another xdist worker pruning the same folders
        _prune(PYCACHE)
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPYCACHEPREFIX", str(PYCACHE))
    mp.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    yield
    mp.undo()


def server_url(var: str) -> str:
    url = os.environ.get(var)
    if url:
        return url
    if os.environ.get("TETHER_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{var} is not set but TETHER_REQUIRE_SERVERS=1: the server is required")
    pytest.skip(f"{var} not set: no server to test against (set it to run these tests)")


async def drop_pg_schema(url: str, schema: str) -> None:
    """Drop a test's own PostgreSQL schema (its tables with it), on a connection of its own."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
def postgres_url() -> str:
    return server_url("TETHER_TEST_POSTGRES_URL")


@pytest.fixture
def redis_url() -> str:
    return server_url("TETHER_TEST_REDIS_URL")


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[Any]:
    """A local Redis Cluster (3 masters, 1 replica each) on loopback ports, started once
    per session (per xdist worker) and stopped at its end. Skipped where redis-server is
    not installed; where it is, a cluster that cannot start fails under
    TETHER_REQUIRE_SERVERS=1 (and skips with the reason otherwise)."""
    from _private_servers import RedisCluster, redis_missing

    why = redis_missing()
    if why:
        pytest.skip(why)
    for attempt in range(3):  # a port taken meanwhile by another process: new ports
        cluster = RedisCluster()
        try:
            cluster.start()
            break
        except Exception as e:  # reported as the reason
            if attempt < 2:
                continue
            if os.environ.get("TETHER_REQUIRE_SERVERS") == "1":
                pytest.fail(f"redis-server is installed but a local cluster did not start: {e}")
            pytest.skip(f"a local Redis Cluster did not start: {e}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster_url(redis_cluster: Any) -> str:
    """A plain URL to one node of the local cluster: the store detects the cluster."""
    url: str = redis_cluster.url
    return url


@pytest.fixture
def ns() -> str:
    """A namespace no other test (or engineer) uses: the servers are shared."""
    return "ns-" + uuid.uuid4().hex[:12]


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tether.Store]:
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:  # real servers; every test uses its own uuid namespace
        pytest.importorskip(f"tether.store.{request.param}", reason="backend not in this tree")
        url = request.getfixturevalue(f"{request.param}_url")
    s = await tether.open_store(url)
    try:
        yield s
    finally:
        await s.close()


# Longest first (seconds on 2 cores, alone): with ``-n 2`` (make test) a worker that
# draws one of these has the whole rest of the run to overlap it, instead of starting it
# last while the other worker idles. The order of the rest is kept.
LONGEST_FIRST = [
    "tests/test_langgraph_pregel_suite.py::test_langgraph_suite_passes_on_postgres",  # ~80 s
    "tests/test_langgraph_pregel_suite.py::test_langgraph_suite_passes_on_redis",  # ~70 s
    "tests/test_langgraph_pregel_suite.py",  # ~45 s: LangGraph's own Pregel tests
    "tests/test_langgraph_sqlite_store_suite.py",  # ~25 s
    "tests/test_docs.py::test_readme_shell_blocks_run_in_order",  # ~25 s
    "tests/test_openai_agents_session_suite.py",  # ~15-20 s per backend
    "tests/test_mcp_reference.py",  # ~20 s: npm install, then both servers side by side
    "tests/test_cli_demo.py",  # ~14 + 8 + 3 s
    "tests/test_langgraph_store_suite.py",  # ~8-11 s per backend
    "tests/test_inspector_browser.py",
    "tests/test_store_processes.py",
    "tests/test_store_faults.py",  # ~12 s per private server
    "tests/test_exact_doors_property.py::test_hostile_step_bodies_over_http_are_refused",
    "tests/test_crypto_integration.py",
    "tests/test_seed_protolink.py",
    "tests/test_docs_site.py",
    "tests/test_bench_smoke.py",
]


def _rank(item: pytest.Item) -> int:
    for i, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return i
    return len(LONGEST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: the same order in every xdist worker


# tests/test_docs.py counts the Markdown code blocks it ran and skipped: each such test
# records its counts as a user property named ``DOCS_TALLY``, which reaches this
# process's reports from xdist workers too, and the terminal summary adds them up.
DOCS_TALLY = "docs_blocks"
_docs: dict[str, Any] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":  # the setup and teardown reports carry the same properties
        return
    for name, value in report.user_properties:
        if name == DOCS_TALLY:
            _docs["run"] = _docs.get("run", 0) + value["run"]
            _docs.setdefault("skipped", []).extend(value["skipped"])


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not _docs:
        return
    skipped: list[str] = _docs["skipped"]
    terminalreporter.write_sep("-", "docs code blocks")
    terminalreporter.write_line(
        f"README.md and docs/*.md: {_docs['run']} code blocks run, {len(skipped)} skipped"
    )
    for where in skipped:
        terminalreporter.write_line(f"  skipped {where}")
