"""Storage backends, chosen by URL and imported lazily (SPEC §5)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, unquote

from ..core.errors import InvalidRequest, MissingKey
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
from .simple import LogBackend, LogSave, LogStore, ScopeLog

__all__ = [
    "DuplicateNodes",
    "Head",
    "JsonCodec",
    "LogBackend",
    "LogSave",
    "LogStore",
    "PayloadCodec",
    "ScopeInfo",
    "ScopeLog",
    "ScopeStats",
    "ScopeWrite",
    "Store",
    "open_store",
    "secure",
    "set_cipher_hook",
]

# How open_store(cipher=...) encrypts: set by tether.crypto when it is imported (a
# cipher is a tether.crypto object, so it is always set by the time one is passed).
# The store layer never imports the cipher: a plaintext store never loads it.
_cipher_hook: Callable[[Store, Any], Awaitable[Store]] | None = None


def set_cipher_hook(hook: Callable[[Store, Any], Awaitable[Store]]) -> None:
    """Register how ``open_store(url, cipher=...)`` wraps a store (``tether.crypto`` does)."""
    global _cipher_hook
    _cipher_hook = hook


async def open_store(url: str, **options: Any) -> Store:
    """Open a store by URL.

    ``memory://``, ``sqlite:///path/to/file.db`` (the embedded default; a bare
    path also means SQLite), ``postgresql://user@host/db`` (extra ``postgres``),
    ``redis://host:port/0`` (extra ``redis``), ``logdir:///path/to/dir`` (a
    ``LogStore`` over the ``DirectoryBackend`` example: a JSON Lines file per scope,
    shared by every process on the machine; ``?durable=false`` skips the fsyncs).
    Options go to the backend
    (``codec=``, ``durability=`` for SQLite, pool sizes for PostgreSQL...).

    ``cipher=`` (extra ``crypto``) encrypts payloads at rest: a
    ``tether.crypto.MasterKey``, a list of master keys (new first, during a
    rotation) or a ``tether.crypto.Cipher``; see docs/encryption.md. Without it, a
    store that was encrypted raises ``tether.crypto.MissingKey``.
    """
    cipher = options.pop("cipher", None)
    return await secure(await _open_backend(url, **options), cipher)


async def secure(store: Store, cipher: Any) -> Store:
    """What ``open_store`` does with a freshly opened backend: encrypt it with ``cipher``
    (a ``tether.crypto`` key or ``Cipher``), or, without one, refuse it with
    ``MissingKey`` if it holds keys (``Store.holds_keys``). On failure the store is
    closed, so nothing leaks."""
    try:
        if cipher is not None:
            if _cipher_hook is None:
                raise InvalidRequest(
                    f"cipher= takes a tether.crypto MasterKey, a list of them or a Cipher, "
                    f"got {type(cipher).__name__}",
                    field="cipher",
                )
            return await _cipher_hook(store, cipher)
        if await store.holds_keys():  # the backend's hook: no second connection, no cipher
            raise MissingKey(
                "this store is encrypted: open it with a master key, e.g. "
                "open_store(url, cipher=MasterKey.from_env())"
            )
        return store
    except BaseException:
        await store.close()
        raise


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
    if scheme == "logdir":
        from .examples import DirectoryBackend

        root, durable = _logdir(url)
        store = LogStore(DirectoryBackend(root, durable=durable), **options)
        store.url = url
        return store
    raise InvalidRequest(
        f"unknown store URL scheme {scheme!r}: use memory://, sqlite:///path, postgresql://, "
        "redis:// or logdir:///path"
    )


def _logdir(url: str) -> tuple[str, bool]:
    """``logdir:///rel/dir`` (relative), ``logdir:////abs/dir`` (absolute), as SQLite's
    URLs; ``?durable=false`` (or ``true``, the default) is the only option."""
    rest = url.split("://", 1)[1]
    path, _, query = rest.removeprefix("/").partition("?")
    path = unquote(path)
    if not path:
        raise InvalidRequest(
            f"logdir URL {url!r} names no directory: use logdir:///relative/dir or "
            "logdir:////abs/dir",
            field="store",
        )
    options = dict(parse_qsl(query, keep_blank_values=True))
    durable = options.pop("durable", "true").lower()
    if options or durable not in ("true", "false"):
        raise InvalidRequest(
            f"logdir URL {url!r}: the only option is durable=true|false",
            field="store",
        )
    return path, durable == "true"
