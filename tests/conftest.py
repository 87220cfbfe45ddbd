"""Shared fixtures: real servers from environment variables, never mocks.

TETHER_TEST_POSTGRES_URL and TETHER_TEST_REDIS_URL name the servers. Without them
(a laptop), tests that need a server are skipped with a clear reason; with
TETHER_REQUIRE_SERVERS=1 (as .ci/run sets) a missing server fails the test.
"""

from __future__ import annotations

import os

import pytest


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
