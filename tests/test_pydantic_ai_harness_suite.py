"""pydantic-ai-harness's own store tests, run on tether's Pydantic AI stores.

The harness ships its tests in its sdist: the test downloads the sdist of the installed
pydantic-ai-harness (tests/_sdist.py, cached outside the repository) and runs, in a
subprocess with tests/pydantic_ai_harness/tether_pai_plugin.py in place of the harness's
``conftest.py``:

* ``tests/memory/test_stores.py``, the memory stores' contract tests
  (``-k local_store``: compare-and-set, versions that never repeat, read and listing
  bounds, operation receipts, scoped bounded search and its snippets, unsafe paths,
  non-positive bounds), every one on ``TetherMemoryStore`` over SQLite, PostgreSQL
  and Redis (the harness's three local stores' slots). Left out: the tests of the
  harness's own file, SQLite and PostgreSQL backends (their journals, schemas and
  connections);
* ``tests/step_persistence/test_step_persistence.py`` with every ``InMemoryStepStore()``
  a ``TetherStepStore`` on SQLite: the ``StepPersistence`` capability's runs, events,
  snapshots, resume and tool-effect ledger. Left out (``-k "not memory_backend"``):
  three tests that build the harness's in-memory backend from a spec and check its
  class. Pydantic AI's deprecation of ``RetryPromptPart`` (slim 2.78, newer than the
  harness 0.36 these tests were written for) is not an error here.

Any failure fails this test, and its output names the failing harness tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _sdist import sdist
from conftest import server_url

pytest.importorskip("pydantic_ai_harness")
pytest.importorskip("anyio")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PLUGIN_DIR = Path(__file__).resolve().parent / "pydantic_ai_harness"


def _run(suite: str, *args: str) -> subprocess.CompletedProcess[str]:
    root = sdist("pydantic-ai-harness", "tests/memory/test_stores.py")
    path = [str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "TETHER_PAI_SUITE": suite,
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(root / "pyproject.toml"),
            "--rootdir",
            str(root),
            "-p",
            "tether_pai_plugin",
            "--noconftest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:asyncio",
            "-o",
            "filterwarnings=error\nignore::pydantic_ai._warnings.PydanticAIDeprecationWarning",
            "-q",
            *args,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=550,
    )


def _check(r: subprocess.CompletedProcess[str], at_least: int) -> None:
    tail = "\n".join((r.stdout + r.stderr).splitlines()[-60:])
    summary = re.search(r"(\d+) passed", r.stdout)
    assert r.returncode == 0, tail
    assert summary is not None and int(summary.group(1)) >= at_least, tail
    assert " failed" not in r.stdout.splitlines()[-1], tail


@pytest.mark.postgres
@pytest.mark.redis
def test_harness_memory_store_contract_on_sqlite_postgres_and_redis() -> None:
    server_url("TETHER_TEST_POSTGRES_URL")
    server_url("TETHER_TEST_REDIS_URL")
    # 13 contract tests x the three slots (SQLite, PostgreSQL, Redis), unsafe paths x5
    _check(_run("memory", "-k", "local_store", "tests/memory/test_stores.py"), 39)


def test_harness_step_persistence_tests_on_tether_step_store() -> None:
    _check(
        _run(
            "steps",
            "-k",
            "not memory_backend",
            "tests/step_persistence/test_step_persistence.py",
        ),
        130,
    )
