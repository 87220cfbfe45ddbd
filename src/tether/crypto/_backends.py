"""Which key store serves which backend: the key table lives in the store's own database.

Each key store is imported only when its backend is in use, like the backends.
"""

from __future__ import annotations

from ..store.base import Store
from ._keystore import KeyStore, MemoryKeyStore
from .errors import CipherError

_ATTR = "_tether_keystore"


def _attached(store: Store, *, create: bool) -> MemoryKeyStore | None:
    # For stores that live in this process only (memory://, sqlite :memory:): the
    # keys live on the store object, exactly as long as the data they open.
    ks = getattr(store, _ATTR, None)
    if ks is None and create:
        ks = MemoryKeyStore()
        setattr(store, _ATTR, ks)
    assert ks is None or isinstance(ks, MemoryKeyStore)
    return ks


def _kind(store: Store) -> str:
    name = type(store).__name__
    return {
        "MemoryStore": "memory",
        "SQLiteStore": "sqlite",
        "PostgresStore": "postgres",
        "RedisStore": "redis",
    }.get(name, name)


async def keystore_for(store: Store) -> KeyStore:
    """A key store in the same database as ``store``."""
    kind = _kind(store)
    if kind == "memory" or (kind == "sqlite" and getattr(store, "path", "") == ":memory:"):
        ks = _attached(store, create=True)
        assert ks is not None
        return ks
    if kind == "sqlite":
        from ._keystore_sqlite import SQLiteKeyStore

        return SQLiteKeyStore(str(store.path), busy_timeout=float(store.busy_timeout))  # type: ignore[attr-defined]
    if kind == "postgres":
        from ._keystore_postgres import PostgresKeyStore

        return await PostgresKeyStore.for_store(store)
    if kind == "redis":
        from ._keystore_redis import RedisKeyStore

        return RedisKeyStore.for_store(store)
    raise CipherError(
        f"encryption does not know where {type(store).__name__} keeps keys: "
        "pass keystore= to encrypt_store",
        code="cipher_unsupported",
    )


async def is_encrypted(store: Store) -> bool:
    """Whether the store's database holds a key-check value (it was opened with a cipher)."""
    kind = _kind(store)
    if kind == "memory" or (kind == "sqlite" and getattr(store, "path", "") == ":memory:"):
        ks = _attached(store, create=False)
        return ks is not None and bool(await ks.checks())
    if kind == "sqlite":
        from ._keystore_sqlite import has_checks

        return has_checks(str(store.path))  # type: ignore[attr-defined]
    if kind == "postgres":
        from ._keystore_postgres import PostgresKeyStore

        return await PostgresKeyStore.store_has_checks(store)
    if kind == "redis":
        from ._keystore_redis import RedisKeyStore

        return await RedisKeyStore.for_store(store).has_checks()
    return False
