"""A pytest plugin that runs LangGraph's own tests (the sdist's ``tests/``) on TetherSaver.

Loaded by ``tests/test_langgraph_pregel_suite.py`` with ``-p tether_lg_plugin
--noconftest`` in a subprocess whose working directory is the unpacked sdist.
LangGraph's ``tests/conftest.py`` is not loaded (it imports psycopg and redis at
module level and parametrizes over PostgreSQL and Redis servers of its own); this
plugin provides the same fixtures, with tether's saver in place of LangGraph's
checkpointers:

* ``sync_checkpointer`` / ``async_checkpointer``: ``TetherSaver`` (``from_url`` /
  ``afrom_url``) on the backends named by ``TETHER_LG_SYNC`` / ``TETHER_LG_ASYNC``
  (comma-separated: ``memory``, ``sqlite``; both by default);
* ``cache``: LangGraph's in-memory and SQLite caches (no Redis);
* ``sync_store`` / ``async_store``: ``TetherStore`` (tether's LangGraph ``Store``) on
  ``memory://``;
* ``durability``, ``deterministic_uuids``, ``anyio_backend``: as LangGraph's.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langgraph.cache.memory import InMemoryCache
from langgraph.cache.sqlite import SqliteCache

from tether.adapters.langgraph import TetherSaver
from tether.adapters.langgraph_store import TetherStore


def _backends(var: str) -> list[str]:
    return [b for b in os.environ.get(var, "memory,sqlite").split(",") if b]


def _url(backend: str, folder: str) -> str:
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite:///{Path(folder) / 'lg.db'}"
    raise ValueError(f"unknown backend {backend!r}")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture()
def deterministic_uuids(mocker: Any) -> Any:
    side_effect = (UUID(f"00000000-0000-4000-8000-{i:012}", version=4) for i in range(10000))
    return mocker.patch("uuid.uuid4", side_effect=side_effect)


@pytest.fixture(params=["sync", "async", "exit"])
def durability(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sqlite", "memory"])
def cache(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "sqlite":
        yield SqliteCache(path=":memory:")
    else:
        yield InMemoryCache()


@pytest.fixture(params=["tether_store"])
def sync_store() -> Iterator[Any]:
    store = TetherStore.from_url("memory://")
    yield store
    store.close()


@pytest.fixture(params=["tether_store"])
async def async_store() -> AsyncIterator[Any]:
    store = await TetherStore.afrom_url("memory://")
    yield store
    await store.aclose()


@pytest.fixture(params=[f"tether_{b}" for b in _backends("TETHER_LG_SYNC")])
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[TetherSaver]:
    with tempfile.TemporaryDirectory() as folder:
        backend = str(request.param).removeprefix("tether_")
        with TetherSaver.from_url(_url(backend, folder)) as saver:
            yield saver


@pytest.fixture(params=[f"tether_{b}" for b in _backends("TETHER_LG_ASYNC")])
async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[TetherSaver]:
    with tempfile.TemporaryDirectory() as folder:
        backend = str(request.param).removeprefix("tether_")
        async with await TetherSaver.afrom_url(_url(backend, folder)) as saver:
            yield saver
