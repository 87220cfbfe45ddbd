"""tether.adapters.pydantic_ai with the other version combination: the newest harness.

The ``pydantic-ai`` extra resolves to pydantic-ai-slim >= 2.66 (the core
``ConversationStore``) beside pydantic-ai-harness 0.36, the newest harness that accepts
such a slim (pyproject.toml says why). ``pip install pydantic-ai-harness`` alone gives
the newest harness, which pins slim to its own older version: the harness's newer
``StepStore`` and ``MemoryStore`` (its memory module rewritten, ``write_with_metadata``,
an async lexical search), and no ``ConversationStore``. This test runs
tests/test_adapter_pydantic_ai.py in a second virtual environment holding that pair
(created once under the test cache, ``~/.cache/tether-tests``, like tests/_sdist.py's
sdists, and reused; tether itself comes from this tree through ``PYTHONPATH``): every
StepStore and MemoryStore test passes there, on every backend, and the
ConversationStore tests skip, naming why.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import requires
from pathlib import Path

import pytest

from _sdist import CACHE
from conftest import server_url

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

HARNESS = "0.62.0"  # the newest pydantic-ai-harness; pins pydantic-ai-slim==2.62.0
ROOT = Path(__file__).resolve().parents[1]


def _venv() -> Path:
    venv = CACHE / f"pydantic-ai-harness-{HARNESS}-py{sys.version_info[0]}{sys.version_info[1]}"
    py = venv / "bin" / "python"
    if (venv / "ready").exists():
        return py
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    core = [r for r in requires("tether") or [] if "extra ==" not in r]
    tools = ["pytest>=8", "pytest-asyncio>=0.23", "pytest-timeout>=2.3", "asyncpg>=0.29"]
    subprocess.run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "-q",
            f"pydantic-ai-harness=={HARNESS}",
            "redis>=8.0,<9",
            *tools,
            *core,
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    (venv / "ready").touch()
    return py


def test_newest_harness_and_its_slim_pass_without_a_conversation_store() -> None:
    server_url("TETHER_TEST_POSTGRES_URL")
    server_url("TETHER_TEST_REDIS_URL")
    py = _venv()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run(
        [
            str(py),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            "tests/test_adapter_pydantic_ai.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=800,
    )
    tail = "\n".join((r.stdout + r.stderr).splitlines()[-40:])
    assert r.returncode == 0, tail
    versions = subprocess.run(
        [
            str(py),
            "-c",
            "import importlib.metadata as m; "
            "print(m.version('pydantic-ai-harness'), m.version('pydantic-ai-slim'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert versions == [HARNESS, "2.62.0"]
    passed = re.search(r"(\d+) passed", r.stdout)
    # the StepStore and MemoryStore tests pass on the 4 backends; what skips is exactly the
    # ConversationStore cases (and recall by meaning, without the recall extra's numpy)
    assert passed is not None and int(passed.group(1)) >= 44, tail
    reasons = re.findall(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", r.stdout, re.M)
    assert "this pydantic-ai-slim has no ConversationStore (< 2.66)" in reasons, tail
    assert set(reasons) <= {
        "this pydantic-ai-slim has no ConversationStore (< 2.66)",
        "recall's vectors need the recall extra (numpy)",
    }, tail
