"""LangGraph's own store tests, run against tether's ``TetherStore``.

The test downloads the sdist of the installed ``langgraph-checkpoint`` from the
package index (``pip download --no-deps --no-binary :all:``) into
``~/.cache/tether-tests`` (tests/_sdist.py) (outside the repository; reused by
later runs) and runs its ``tests/test_store.py`` in a subprocess with a plugin
(written here into a temporary directory) that puts ``TetherStore.from_url(url,
**kwargs)`` wherever that file builds an ``InMemoryStore(**kwargs)``: every
``put``, ``get``, ``delete``, ``search`` (filters, vector queries, pagination) and
``list_namespaces`` of those tests goes through tether, once on ``memory://`` and
once on SQLite. Tests of LangGraph alone (text paths, op validation, batching
helpers) run too; they pass either way.

``langgraph-checkpoint-sqlite``'s store tests (sync, async and TTL) run on TetherStore
too, in tests/test_langgraph_sqlite_store_suite.py, less those about SqliteStore's own
SQL; the Pregel tests that take a store run on it in tests/test_langgraph_pregel_suite.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from _sdist import sdist

pytest.importorskip("langgraph.store.memory")
pytest.importorskip("pytest_mock")

pytestmark = [pytest.mark.timeout(900)]


PLUGIN = r"""
import os, tempfile, pytest
from tether.adapters.langgraph_store import TetherStore

_opened = []

class _TetherStore(TetherStore):
    # Built like InMemoryStore(**kwargs), on the store named by TETHER_LG_STORE_URL.

    def __init__(self, **kwargs):
        url = os.environ["TETHER_LG_STORE_URL"]
        if url == "sqlite":
            url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "store.db")
        opened = TetherStore.from_url(url)
        super().__init__(opened.store, loop=False, **kwargs)
        self._bridge, self._owns_store = opened._bridge, True
        _opened.append(self)
        with open(os.environ["TETHER_LG_STORE_COUNT"], "a") as f:
            f.write("built\n")

@pytest.fixture(autouse=True)
def _tether_store(request, monkeypatch):
    if hasattr(request.module, "InMemoryStore"):
        monkeypatch.setattr(request.module, "InMemoryStore", _TetherStore)
    yield
    while _opened:
        s = _opened.pop()
        try:
            s.close()
        except Exception:
            pass
"""


def _sdist() -> Path:
    return sdist("langgraph-checkpoint", "tests/test_store.py")


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_langgraph_store_tests_pass_on_tether_store(url: str) -> None:
    src = _sdist()
    with tempfile.TemporaryDirectory() as tmp:
        plugin = Path(tmp) / "tether_lg_store_plugin.py"
        plugin.write_text(PLUGIN)
        env = {
            **os.environ,
            "TETHER_LG_STORE_URL": url,
            "TETHER_LG_STORE_COUNT": str(Path(tmp) / "built.txt"),
            "PYTHONPATH": os.pathsep.join(
                [str(src), tmp, *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "tether_lg_store_plugin",
                "-p",
                "no:cacheprovider",
                "-o",
                "asyncio_mode=auto",
                "-o",
                "filterwarnings=",
                "--rootdir",
                str(src),
                "-c",
                os.devnull,
                "tests/test_store.py",
            ],
            cwd=src,
            env=env,
            capture_output=True,
            text=True,
            timeout=850,
        )
        counted = Path(tmp) / "built.txt"
        built = counted.read_text().count("built") if counted.exists() else 0
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    last = r.stdout.strip().splitlines()[-1]
    print(f"langgraph-checkpoint tests/test_store.py on TetherStore ({url}): {last}")
    assert " passed" in last and "failed" not in last and "error" not in last, last
    # the tests really ran on TetherStore: one per test that builds an InMemoryStore
    assert built >= 60, built
