"""A pytest plugin that runs LangGraph's own tests (the sdist's ``tests/``) on TetherSaver.

Loaded by ``tests/test_langgraph_pregel_suite.py`` with ``-p tether_lg_plugin
--noconftest`` in a subprocess whose working directory is the unpacked sdist.
LangGraph's ``tests/conftest.py`` is not loaded (it imports psycopg and redis at
module level and parametrizes over PostgreSQL and Redis servers of its own); this
plugin provides the same fixtures, with tether's saver in place of LangGraph's
checkpointers:

* ``sync_checkpointer`` / ``async_checkpointer``: ``TetherSaver`` (``from_url`` /
  ``afrom_url``) on the backends named by ``TETHER_LG_SYNC`` / ``TETHER_LG_ASYNC``
  (comma-separated: ``memory``, ``sqlite``, ``postgres``, ``redis``; memory and SQLite
  by default). ``postgres`` gives each test its own schema on the server at
  ``$TETHER_TEST_POSTGRES_URL``, dropped after it; ``redis`` each test its own tether
  namespace on the server at ``$TETHER_TEST_REDIS_URL``;
* ``cache``: LangGraph's in-memory and SQLite caches (no Redis);
* ``sync_store`` / ``async_store``: ``TetherStore`` (tether's LangGraph ``Store``) on
  ``memory://``;
* ``durability``, ``deterministic_uuids``, ``anyio_backend``: as LangGraph's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

import pytest
from langgraph.cache.memory import InMemoryCache
from langgraph.cache.sqlite import SqliteCache

from tether.adapters.langgraph import TetherSaver
from tether.adapters.langgraph_store import TetherStore


def _backends(var: str) -> list[str]:
    return [b for b in os.environ.get(var, "memory,sqlite").split(",") if b]


def _url(backend: str, folder: str, schema: str) -> str:
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite:///{Path(folder) / 'lg.db'}"
    if backend == "postgres":
        server = os.environ.get("TETHER_TEST_POSTGRES_URL")
        if not server:
            raise RuntimeError("TETHER_LG_* names postgres but TETHER_TEST_POSTGRES_URL is not set")
        parts = urlsplit(server)
        query = "&".join(q for q in (parts.query, f"schema={schema}") if q)
        return urlunsplit(parts._replace(query=query))
    if backend == "redis":  # one server for every test: each has a namespace of its own
        server = os.environ.get("TETHER_TEST_REDIS_URL")
        if not server:
            raise RuntimeError("TETHER_LG_* names redis but TETHER_TEST_REDIS_URL is not set")
        return server
    raise ValueError(f"unknown backend {backend!r}")


def _namespace(backend: str, schema: str) -> dict[str, str]:
    """The saver's tether namespace: the test's own on a shared Redis server (its
    threads are LangGraph's test ids, "1", "2"...), the default elsewhere."""
    return {"namespace": schema} if backend == "redis" else {}


def _drop_schema(backend: str, schema: str) -> None:
    """Drop a test's PostgreSQL schema (a fresh connection: the saver's is closed)."""
    if backend != "postgres":
        return
    import asyncpg

    async def drop() -> None:
        conn = await asyncpg.connect(os.environ["TETHER_TEST_POSTGRES_URL"])
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()

    with contextlib.suppress(Exception):  # a leftover schema is only clutter
        asyncio.run(drop())


def _schema() -> str:
    return f"lg_{uuid.UUID(bytes=os.urandom(16)).hex}"


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
    backend, schema = str(request.param).removeprefix("tether_"), _schema()
    try:
        with (
            tempfile.TemporaryDirectory() as folder,
            TetherSaver.from_url(
                _url(backend, folder, schema), **_namespace(backend, schema)
            ) as saver,
        ):
            yield saver
    finally:
        _drop_schema(backend, schema)


@pytest.fixture(params=[f"tether_{b}" for b in _backends("TETHER_LG_ASYNC")])
async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[TetherSaver]:
    backend, schema = str(request.param).removeprefix("tether_"), _schema()
    try:
        with tempfile.TemporaryDirectory() as folder:
            url, named = _url(backend, folder, schema), _namespace(backend, schema)
            async with await TetherSaver.afrom_url(url, **named) as saver:
                yield saver
    finally:
        # asyncio.run cannot run inside this test's loop: a thread of its own
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(_drop_schema, backend, schema).result()
