"""LangGraph's own tests, run with tether's ``TetherSaver`` as the checkpointer.

The test downloads the sdist of the installed langgraph from the package index
(``pip download --no-deps --no-binary :all: langgraph==X``) into
``~/.cache/tether-tests`` (tests/_sdist.py) (outside the repository; reused by later
runs), and runs its ``tests/`` in a subprocess with
``tests/langgraph_pregel/tether_lg_plugin.py`` in place of LangGraph's
``conftest.py``: every test that takes LangGraph's ``sync_checkpointer`` or
``async_checkpointer`` fixture runs on a ``TetherSaver`` (``-k tether_``). Any
failure fails this test, and its output names the failing LangGraph tests.

What runs, and why (about 650 tests per backend, every durability mode):

* **SQLite runs the sync tests** (``sync_checkpointer``: ``graph.invoke`` on
  ``TetherSaver.from_url("sqlite:///...")``, the common deployment and the path
  where sync calls run inline) and **memory:// the async tests**
  (``async_checkpointer``: ``ainvoke`` on ``afrom_url("memory://")``). Both
  variants on both backends take twice as long (~4 min on 2 busy cores) for little
  more coverage: the saver's code above the store is the same for every backend
  and the store contract is tested on every backend by tests/conformance.
  ``TETHER_LG_SUITE=full`` runs both variants on both backends.
* **PostgreSQL runs both** (``test_langgraph_suite_passes_on_postgres``, with the
  server at ``$TETHER_TEST_POSTGRES_URL``; each LangGraph test gets its own schema,
  dropped after it): a pooled store is where a step's concurrent tasks really write
  at once (``test_max_concurrency`` found the saver's own writes racing each
  other), and where sync calls cross to the saver's loop thread.
* **Redis runs both** (``test_langgraph_suite_passes_on_redis``, the server at
  ``$TETHER_TEST_REDIS_URL``; each LangGraph test a tether namespace of its own), so
  the saver's layout is held to LangGraph's own tests on every backend it ships for.
* Files that take no checkpointer fixture are not collected (they test LangGraph
  alone). Excluded on purpose:

  - ``test_prune_postgres.py``: LangGraph's PostgreSQL saver against its own
    PostgreSQL server (``langgraph-checkpoint-postgres``); not about TetherSaver.
  - ``test_remote_graph.py``: the RemoteGraph HTTP client; it imports LangGraph's
    conftest (psycopg, redis at module level) and takes no checkpointer.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _sdist import sdist, xdist_args
from conftest import server_url

pytest.importorskip("langgraph.graph")
pytest.importorskip("pytest_mock")
pytest.importorskip("syrupy")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PLUGIN_DIR = Path(__file__).resolve().parent / "langgraph_pregel"

# LangGraph's test files that take a checkpointer fixture (langgraph 1.2.x).
FILES = [
    "test_checkpoint_migration.py",
    "test_delta_channel_exit_mode.py",
    "test_delta_channel_fork.py",
    "test_delta_channel_parallel_order.py",
    "test_delta_channel_subgraph.py",
    "test_delta_channel_to_plain.py",
    "test_delta_channel_update_state.py",
    "test_interrupt_state.py",
    "test_interruption.py",
    "test_large_cases.py",
    "test_large_cases_async.py",
    "test_pregel.py",
    "test_pregel_async.py",
    "test_pydantic.py",
    "test_strict_resume.py",
    "test_subgraph_persistence.py",
    "test_subgraph_persistence_async.py",
    "test_time_travel.py",
    "test_time_travel_async.py",
]


def _sdist() -> Path:
    """The unpacked sdist of the installed langgraph, downloaded once into the cache."""
    return sdist("langgraph", "tests/conftest.py")


def _run(
    sdist: Path, sync: str, async_: str, only: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    path = [str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "TETHER_LG_SYNC": sync,
        "TETHER_LG_ASYNC": async_,
    }  # bytecode goes to the test cache (tests/conftest.py), not into the sdist
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(sdist / "pyproject.toml"),
            "--rootdir",
            str(sdist),
            "-p",
            "tether_lg_plugin",
            "--noconftest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-k",
            "tether_",
            *(xdist_args(3) if only is None else []),  # ~80-140 s serially
            *(only if only is not None else [f"tests/{f}" for f in FILES]),
        ],
        cwd=sdist,
        env=env,
        capture_output=True,
        text=True,
        timeout=1700,
    )


# LangGraph tests whose expected stream order is set by wall-clock sleeps between
# concurrent tasks (``test_imp_nested``: ``mapper`` sleeps ``input / 100`` s so that
# task 0 reports before task 1): on a loaded machine the 10 ms gap can close, with any
# checkpointer. A failure of one of these alone is run once more, by itself; a second
# failure fails the suite. Any other failure fails it at once.
TIMED = ("test_imp_nested[",)


def _check(
    r: subprocess.CompletedProcess[str],
    at_least: int,
    rerun: tuple[Path, str, str] | None = None,
) -> None:
    tail = "\n".join((r.stdout + r.stderr).splitlines()[-60:])
    summary = re.search(r"(\d+) passed", r.stdout)
    failed = re.findall(r"^FAILED (\S+)", r.stdout, re.M)
    if (
        r.returncode != 0
        and rerun is not None
        and failed
        and all(any(t in f.split("::")[-1] for t in TIMED) for f in failed)
    ):
        again = _run(*rerun, only=failed)
        again_tail = "\n".join((again.stdout + again.stderr).splitlines()[-60:])
        assert again.returncode == 0, f"{tail}\n-- run again alone:\n{again_tail}"
        assert f"{len(failed)} passed" in again.stdout, again_tail
        print(f"timing-dependent LangGraph tests passed when run again alone: {failed}")
        assert summary is not None and int(summary.group(1)) + len(failed) >= at_least, tail
        return
    assert r.returncode == 0, tail
    assert summary is not None and int(summary.group(1)) >= at_least, tail
    assert " failed" not in r.stdout.splitlines()[-1], tail


def test_langgraph_suite_passes_on_tether_saver() -> None:
    sdist = _sdist()
    if os.environ.get("TETHER_LG_SUITE") == "full":
        backends = ("memory,sqlite", "memory,sqlite")
    else:  # sync tests on SQLite, async tests on memory:// (see the module docstring)
        backends = ("sqlite", "memory")
    _check(_run(sdist, *backends), 500, (sdist, *backends))


@pytest.mark.postgres
def test_langgraph_suite_passes_on_postgres() -> None:
    server_url("TETHER_TEST_POSTGRES_URL")  # a clear skip without the server (a failure in CI)
    sdist = _sdist()
    _check(_run(sdist, "postgres", "postgres"), 500, (sdist, "postgres", "postgres"))


@pytest.mark.redis
def test_langgraph_suite_passes_on_redis() -> None:
    server_url("TETHER_TEST_REDIS_URL")  # a clear skip without the server (a failure in CI)
    sdist = _sdist()
    _check(_run(sdist, "redis", "redis"), 500, (sdist, "redis", "redis"))
