"""Every backend again with encryption at rest on (``tether.crypto``).

``encrypted-<base>`` opens the base backend as the suite does, adding ``cipher=``
to ``open_store`` (a memory store is wrapped with ``encrypt_store``), so every
payload is sealed with AES-256-GCM under one master key for the session
(PostgreSQL tests share a schema, their own: a schema is encrypted or it is not).
The base is looked up when a test runs, so backends registered by plug-ins
imported after this one (Redis) are covered too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tether.crypto import EncryptedStore, MasterKey, encrypt_store
from tether.store import Store

from .backends import BACKENDS, PG_SCHEMA, PG_SCHEMAS_USED, Backend, Context, register

# base backend -> the marks its tests need (known here because the base may register later)
_BASES: dict[str, tuple[Any, ...]] = {
    "memory": (),
    "sqlite": (),
    "postgres": (pytest.mark.postgres,),
    "redis": (pytest.mark.redis,),
    "redis-cluster": (pytest.mark.redis,),  # the key table's scripts on a cluster too
}


# One master key for the session: the PostgreSQL schema below is shared by every test
# (they isolate by namespace), and a store has one master key.
_MASTER = MasterKey.generate()
# Not the plain backend's schema: a schema is either encrypted or not.
_PG_SCHEMA = f"{PG_SCHEMA}_enc"


def _pg_schema(ctx: Context) -> str:
    PG_SCHEMAS_USED.add((ctx.request.getfixturevalue("postgres_url"), _PG_SCHEMA))
    return _PG_SCHEMA


def _encrypted(base_name: str) -> Any:
    @asynccontextmanager
    async def open_(ctx: Context, **options: Any) -> AsyncIterator[Store]:
        base = BACKENDS.get(base_name)
        if base is None:
            pytest.skip(f"backend {base_name!r} is not registered")
        master = _MASTER
        if base_name == "memory":  # a MemoryStore is built directly, not by open_store
            async with base.open(ctx, **options) as inner:
                store = await encrypt_store(inner, master)
                try:
                    yield store
                finally:
                    await store.close()
        else:  # what a user writes: open_store(url, cipher=...)
            if base_name == "postgres":
                options = {"schema": _pg_schema(ctx), **options}
            async with base.open(ctx, cipher=master, **options) as store:
                assert isinstance(store, EncryptedStore)
                yield store

    return open_


for _name, _marks in _BASES.items():
    # shared/persistent follow the base (memory: neither); the cipher is the codec.
    register(
        Backend(
            name=f"encrypted-{_name}",
            open=_encrypted(_name),
            marks=_marks,
            shared=_name != "memory",
            persistent=_name != "memory",
            accepts_codec=False,
        )
    )
