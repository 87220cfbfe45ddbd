"""Storage backends, chosen by URL and imported lazily (SPEC §5)."""

from __future__ import annotations

from typing import Any

from ..core.errors import InvalidRequest
from .base import (
    DuplicateNodes,
    Head,
    JsonCodec,
    PayloadCodec,
    ScopeInfo,
    ScopeStats,
    ScopeWrite,
    Store,
)

__all__ = [
    "DuplicateNodes",
    "Head",
    "JsonCodec",
    "PayloadCodec",
    "ScopeInfo",
    "ScopeStats",
    "ScopeWrite",
    "Store",
    "open_store",
]


async def open_store(url: str, **options: Any) -> Store:
    """Open a store by URL.

    ``memory://``, ``sqlite:///path/to/file.db`` (the embedded default; a bare
    path also means SQLite), ``postgresql://user@host/db`` (extra ``postgres``),
    ``redis://host:port/0`` (extra ``redis``). Options go to the backend
    (``codec=``, ``durability=`` for SQLite, pool sizes for PostgreSQL...).

    ``cipher=`` (extra ``crypto``) encrypts payloads at rest: a
    ``tether.crypto.MasterKey``, a list of master keys (new first, during a
    rotation) or a ``tether.crypto.Cipher``; see docs/encryption.md. Without it, a
    store that was encrypted raises ``tether.crypto.MissingKey``.
    """
    cipher = options.pop("cipher", None)
    store = await _open_backend(url, **options)
    from ..crypto._store import secure  # needs no cryptography unless cipher is given

    return await secure(store, cipher)


async def _open_backend(url: str, **options: Any) -> Store:
    if not isinstance(url, str) or not url:
        raise InvalidRequest(f"a store URL is a non-empty string, got {url!r}")
    scheme = url.split("://", 1)[0].lower() if "://" in url else "sqlite"
    if scheme == "memory":
        from .in_memory import MemoryStore

        return MemoryStore(url, **options)
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        return await SQLiteStore.open(url, **options)
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresStore

        return await PostgresStore.open(url, **options)
    if scheme in ("redis", "rediss"):
        from .redis import RedisStore

        return await RedisStore.open(url, **options)
    raise InvalidRequest(
        f"unknown store URL scheme {scheme!r}: use memory://, sqlite:///path, postgresql:// or redis://"
    )
