"""Fixtures of the conformance suite: ``store`` is parametrized over every backend."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from tether.store import Store

from .backends import BACKENDS, Backend, Context, drop_postgres_schemas


@pytest.fixture(scope="session", autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    yield
    drop_postgres_schemas()


@pytest.fixture(
    params=[pytest.param(b, marks=b.marks, id=b.name) for b in BACKENDS.values()],
)
def backend(request: pytest.FixtureRequest) -> Backend:
    b: Backend = request.param
    return b


@pytest.fixture
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> Context:
    return Context(tmp_path=tmp_path, request=request)


@pytest.fixture
async def open_backend(
    backend: Backend, ctx: Context
) -> AsyncIterator[Callable[..., AbstractAsyncContextManager[Store]]]:
    """``async with open_backend(**options) as store``: another store on the same target."""

    def opener(**options: Any) -> AbstractAsyncContextManager[Store]:
        return backend.open(ctx, **options)

    yield opener


@pytest.fixture
async def store(backend: Backend, ctx: Context) -> AsyncIterator[Store]:
    async with AsyncExitStack() as stack:
        yield await stack.enter_async_context(backend.open(ctx))


@pytest.fixture
def ns() -> str:
    """A namespace no other test (or engineer) uses: the servers are shared."""
    return f"ns-{uuid.uuid4().hex}"
