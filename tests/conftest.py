"""Shared fixtures: real servers from environment variables, never mocks.

TETHER_TEST_POSTGRES_URL and TETHER_TEST_REDIS_URL name the servers. Without them
(a laptop), tests that need a server are skipped with a clear reason; with
TETHER_REQUIRE_SERVERS=1 (as .ci/run sets) a missing server fails the test.

``store`` is a store of each backend in turn and ``ns`` a namespace of the test's
own; a module that means one backend only defines its own ``store``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import tether


def server_url(var: str) -> str:
    url = os.environ.get(var)
    if url:
        return url
    if os.environ.get("TETHER_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{var} is not set but TETHER_REQUIRE_SERVERS=1: the server is required")
    pytest.skip(f"{var} not set: no server to test against (set it to run these tests)")


@pytest.fixture
def postgres_url() -> str:
    return server_url("TETHER_TEST_POSTGRES_URL")


@pytest.fixture
def redis_url() -> str:
    return server_url("TETHER_TEST_REDIS_URL")


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


# tests/test_docs.py counts the Markdown code blocks it ran and skipped here
DOCS_BLOCKS: pytest.StashKey[dict[str, Any]] = pytest.StashKey()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    tally = config.stash.get(DOCS_BLOCKS, None)
    if tally is None:
        return
    skipped: list[str] = tally["skipped"]
    terminalreporter.write_sep("-", "docs code blocks")
    terminalreporter.write_line(
        f"README.md and docs/*.md: {tally['run']} code blocks run, {len(skipped)} skipped"
    )
    for where in skipped:
        terminalreporter.write_line(f"  skipped {where}")
