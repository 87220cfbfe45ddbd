"""pytest plugin: pydantic-ai-harness's own store tests on tether's Pydantic AI stores.

Loaded by tests/test_pydantic_ai_harness_suite.py into a pytest run of the harness's
tests (from its sdist), with ``TETHER_PAI_SUITE`` naming which:

* ``memory``: ``tests/memory/test_stores.py``. Its contract tests take a store from
  ``_local_stores(tmp_path)[index]``, ``index`` in 0..2 (the harness's in-memory, file
  and SQLite stores); here ``_local_stores`` hands out ``TetherMemoryStore``s instead:
  index 0 on SQLite, 1 on PostgreSQL, 2 on Redis (``$TETHER_TEST_POSTGRES_URL``,
  ``$TETHER_TEST_REDIS_URL``), each test on its own namespace, the stores opened and
  closed by an async fixture in the test's own event loop.
* ``steps``: ``tests/step_persistence/test_step_persistence.py``, where every
  ``InMemoryStepStore()`` the tests make is a ``TetherStepStore`` on SQLite (inline
  SQLite belongs to no event loop, so a plain fixture opens it).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.adapters.pydantic_ai import TetherMemoryStore, TetherStepStore
from tether.store import Store, open_store

SUITE = os.environ.get("TETHER_PAI_SUITE", "memory")
_OPEN: list[Store] = []


if SUITE == "memory":

    @pytest.fixture(autouse=True)
    async def _tether_stores(tmp_path: Path, anyio_backend: str) -> AsyncIterator[None]:
        for url in (
            f"sqlite:///{tmp_path / 'tether.db'}",
            os.environ["TETHER_TEST_POSTGRES_URL"],
            os.environ["TETHER_TEST_REDIS_URL"],
        ):
            _OPEN.append(await open_store(url))
        try:
            yield
        finally:
            while _OPEN:
                await _OPEN.pop().close()

else:

    @pytest.fixture(autouse=True)
    def _tether_sqlite(tmp_path: Path) -> Iterator[None]:
        _OPEN.append(asyncio.run(open_store(f"sqlite:///{tmp_path / 'tether.db'}")))
        try:
            yield
        finally:
            while _OPEN:
                asyncio.run(_OPEN.pop().close())


def _local_stores(tmp_path: Path) -> list[Any]:
    ns = "pai-" + uuid.uuid4().hex[:12]
    return [TetherMemoryStore(s, namespace=ns) for s in _OPEN]


def _step_store(**_: Any) -> TetherStepStore:
    return TetherStepStore(_OPEN[0], namespace="pai-" + uuid.uuid4().hex[:12])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SUITE == "memory":
        import tests.memory.test_stores as contract

        contract._local_stores = _local_stores  # type: ignore[attr-defined]
    else:
        import tests.step_persistence.test_step_persistence as steps

        steps.InMemoryStepStore = _step_store  # type: ignore[attr-defined]
