"""Stores built on a four-method ``LogBackend`` (``tether.store.LogStore``), in full.

``log-dict`` is ``LogStore(DictBackend())`` (one store, one process); ``log-dir`` is
``LogStore(DirectoryBackend(dir))``, every reopening within a test on the same directory
(two stores there are two processes on one target); ``encrypted-log-dir`` is that one
under ``tether.crypto.encrypt_store`` with a key table of its own (a ``LogBackend``
keeps none), shared by the test's reopenings as the directory is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tether.crypto import MasterKey, encrypt_store
from tether.store import Store
from tether.store.examples import DictBackend, DirectoryBackend
from tether.store.keys import MemoryKeyStore
from tether.store.simple import LogStore

from .backends import Backend, Context, register


@asynccontextmanager
async def _log_dict(ctx: Context, **options: Any) -> AsyncIterator[Store]:
    store = LogStore(DictBackend(), **options)
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def _log_dir(ctx: Context, **options: Any) -> AsyncIterator[Store]:
    store = LogStore(DirectoryBackend(ctx.tmp_path / "logs", durable=False), **options)
    try:
        yield store
    finally:
        await store.close()


_MASTER = MasterKey.generate()


@asynccontextmanager
async def _encrypted_log_dir(ctx: Context, **options: Any) -> AsyncIterator[Store]:
    keys = ctx.state.setdefault("log_keys", MemoryKeyStore())
    inner = LogStore(DirectoryBackend(ctx.tmp_path / "logs", durable=False), **options)
    store = await encrypt_store(inner, _MASTER, keystore=keys)
    try:
        yield store
    finally:
        await store.close()


register(Backend(name="log-dict", open=_log_dict, shared=False, persistent=False))
register(Backend(name="log-dir", open=_log_dir))
register(Backend(name="encrypted-log-dir", open=_encrypted_log_dir, accepts_codec=False))
