"""Every store backend the conformance suite runs against, in one registry.

A backend is a name and an async context manager factory ``open(ctx, **options)``
yielding an open ``Store``; ``options`` go to the store (the suite passes ``codec=``).
Opening twice with the same ``ctx`` must reach the same data when ``shared`` is
true (two processes on one file or database), and data must survive a close when
``persistent`` is true.

To add a backend (Redis, an encrypting codec over SQLite...), create a module
``tests/conformance/backend_<name>.py`` that calls ``register(...)``: it is
imported automatically, so this file needs no edit. Every test of the suite then
runs against it in full.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import pkgutil
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tether.store import Store, open_store
from tether.store.in_memory import MemoryStore


@dataclass
class Context:
    """What a factory may use: a per-test directory and the pytest request."""

    tmp_path: Path
    request: pytest.FixtureRequest
    state: dict[str, Any] = field(default_factory=dict)  # per test, shared by reopenings


Factory = Callable[..., AbstractAsyncContextManager[Store]]


@dataclass(frozen=True)
class Backend:
    name: str
    open: Factory
    marks: tuple[Any, ...] = ()
    shared: bool = True  # two opens with one Context see the same data
    persistent: bool = True  # data survives close + reopen
    accepts_codec: bool = True  # open(ctx, codec=...) is honoured


BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    if backend.name in BACKENDS:
        raise ValueError(f"backend {backend.name!r} is registered twice")
    BACKENDS[backend.name] = backend
    return backend


# --- memory ------------------------------------------------------------------------------


@asynccontextmanager
async def _memory(ctx: Context, **options: Any) -> AsyncIterator[Store]:
    store = MemoryStore(**options)
    try:
        yield store
    finally:
        await store.close()


register(Backend(name="memory", open=_memory, shared=False, persistent=False))


# --- SQLite ------------------------------------------------------------------------------


@asynccontextmanager
async def _sqlite(ctx: Context, **options: Any) -> AsyncIterator[Store]:
    store = await open_store(f"sqlite:///{ctx.tmp_path / 'conformance.db'}", **options)
    try:
        yield store
    finally:
        await store.close()


register(Backend(name="sqlite", open=_sqlite))


@asynccontextmanager
async def _sqlite_offload(ctx: Context, **options: Any) -> AsyncIterator[Store]:
    url = f"sqlite:///{ctx.tmp_path / 'conformance.db'}"
    store = await open_store(url, offload=True, durability="normal", **options)
    try:
        yield store
    finally:
        await store.close()


# The same backend with its calls on a worker thread (and synchronous=NORMAL).
register(Backend(name="sqlite-offload", open=_sqlite_offload))


# --- PostgreSQL --------------------------------------------------------------------------

# One schema for the whole session (tests isolate by namespace), dropped at its end
# by ``drop_postgres_schemas`` (tests/conformance/conftest.py).
PG_SCHEMA = f"tether_conformance_{os.getpid()}_{uuid.uuid4().hex[:8]}"
PG_SCHEMAS_USED: set[tuple[str, str]] = set()


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


@asynccontextmanager
async def _postgres(ctx: Context, **options: Any) -> AsyncIterator[Store]:
    url = ctx.request.getfixturevalue("postgres_url")
    PG_SCHEMAS_USED.add((url, PG_SCHEMA))
    store = await open_store(with_schema(url, PG_SCHEMA), max_size=4, **options)
    try:
        yield store
    finally:
        await store.close()


register(Backend(name="postgres", open=_postgres, marks=(pytest.mark.postgres,)))


async def drop_schemas(pairs: set[tuple[str, str]]) -> None:
    import asyncpg

    for url, schema in pairs:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


def drop_postgres_schemas() -> None:
    if PG_SCHEMAS_USED:
        asyncio.run(drop_schemas(set(PG_SCHEMAS_USED)))
        PG_SCHEMAS_USED.clear()


# --- plug-ins: tests/conformance/backend_*.py --------------------------------------------

for _mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
    if _mod.name.startswith("backend_"):
        importlib.import_module(f"{__package__}.{_mod.name}" if __package__ else _mod.name)
