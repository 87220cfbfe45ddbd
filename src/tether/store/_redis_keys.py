"""The key table of a Redis store, on the store's own client and key prefix.

Keys of one namespace carry the namespace's hash tag, like the store's own keys,
so on Redis Cluster a namespace's data keys share its slot and every script here
stays single-slot:

    <prefix>{<ns>}:ck:keys      hash  key id (16 bytes) -> record (JSON; "w": null once erased)
    <prefix>{<ns>}:ck:live      hash  owner -> the owner's live key id
    <prefix>{<ns>}:ck:owned     hash  owner -> every key id the owner ever had (16 bytes each)
    <prefix>{<ns>}:ck:threads   hash  thread id -> bound user id
    <prefix>{<ns>}:ck:tcount    hash  user id -> number of bound threads
    <prefix>crypto:checks       hash  master key id -> key-check value
    <prefix>crypto:namespaces   set   namespaces that hold keys (walked by rotation)

Erasure deletes the wrapped bytes from memory; copies in RDB/AOF files remain
until those are rewritten (see docs/encryption.md: rotate the master after an
erasure to make such copies useless).
"""

from __future__ import annotations

import asyncio
import base64
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, Final, ParamSpec, TypeVar

import orjson

from ..core.errors import StoreError
from ._pools import check_loop, redis_error
from .keys import KeyStore, WrappedKey

_LOAD: Final = """
local bound = ''
if ARGV[2] ~= '' then bound = redis.call('HGET', KEYS[3], ARGV[2]) or '' end
local owners = {ARGV[1]}
if bound ~= '' then table.insert(owners, 'user:' .. bound) end
local out = {bound}
for _, o in ipairs(owners) do
  local ids = redis.call('HGET', KEYS[2], o)
  if ids then
    for i = 1, #ids, 16 do
      local kid = string.sub(ids, i, i + 15)
      local rec = redis.call('HGET', KEYS[1], kid)
      if rec then table.insert(out, kid); table.insert(out, rec) end
    end
  end
end
return out
"""
_INSERT: Final = """
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then return {cur, redis.call('HGET', KEYS[1], cur)} end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local owned = redis.call('HGET', KEYS[3], ARGV[1]) or ''
redis.call('HSET', KEYS[3], ARGV[1], owned .. ARGV[2])
return {ARGV[2], ARGV[3]}
"""
_ERASE: Final = """
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""
_CAS: Final = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""
_BIND: Final = """
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then return cur end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
return ARGV[2]
"""
_ADD_CHECK: Final = """
if ARGV[3] == '1' and redis.call('HLEN', KEYS[1]) > 0 then
  return redis.call('HEXISTS', KEYS[1], ARGV[1])
end
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
return 1
"""
_REMOVE_CHECKS: Final = """
local gone = {}
for _, m in ipairs(redis.call('HKEYS', KEYS[1])) do
  if m ~= ARGV[1] then redis.call('HDEL', KEYS[1], m); table.insert(gone, m) end
end
return gone
"""


def _tag(namespace: str) -> str:
    # The Redis backend's hash-tag escaping, so these keys land in the namespace's slot.
    return namespace.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def _record(key: WrappedKey) -> bytes:
    return orjson.dumps(
        {
            "o": key.owner,
            "m": key.master_id,
            "w": None if key.wrapped is None else base64.b64encode(key.wrapped).decode(),
            "c": key.created_at,
            "e": key.erased_at,
        }
    )


def _parse(namespace: str, key_id: bytes, raw: bytes) -> WrappedKey:
    d = orjson.loads(raw)
    return WrappedKey(
        namespace=namespace,
        owner=d["o"],
        key_id=bytes(key_id),
        master_id=d["m"],
        wrapped=None if d["w"] is None else base64.b64decode(d["w"]),
        created_at=d["c"],
        erased_at=d["e"],
    )


P = ParamSpec("P")
T = TypeVar("T")


def _redis_errors(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Report a failing Redis call as ``StoreError``, like the Redis backend does."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        from redis.exceptions import RedisClusterException, RedisError

        self = args[0]
        assert isinstance(self, RedisKeyStore)
        check_loop(self._loop, "Redis")
        try:
            return await fn(*args, **kwargs)
        except (RedisError, RedisClusterException) as e:
            pool = getattr(self._r, "connection_pool", None)
            err = redis_error(e, f"key table {fn.__name__}", "", pool)
            if err.code != "store":  # pool_timeout, store_unavailable...
                raise err from e
            raise StoreError(
                f"Redis key table failed in {fn.__name__} ({type(e).__name__}: {e})"
            ) from e

    return run


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class RedisKeyStore(KeyStore):
    def __init__(
        self, client: Any, prefix: str, *, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        self._r = client
        self._loop = loop  # the event loop the client's connections belong to
        self._p = prefix.encode()
        self._load = client.register_script(_LOAD)
        self._insert = client.register_script(_INSERT)
        self._erase = client.register_script(_ERASE)
        self._cas = client.register_script(_CAS)
        self._bind = client.register_script(_BIND)
        self._add_check = client.register_script(_ADD_CHECK)
        self._remove_checks = client.register_script(_REMOVE_CHECKS)

    def _k(self, namespace: str, what: bytes) -> bytes:
        return self._p + b"{" + _tag(namespace).encode() + b"}:ck:" + what

    @property
    def _checks_key(self) -> bytes:
        return self._p + b"crypto:checks"

    @property
    def _namespaces_key(self) -> bytes:
        return self._p + b"crypto:namespaces"

    @_redis_errors
    async def has_checks(self) -> bool:
        return bool(await self._r.exists(self._checks_key))

    @_redis_errors
    async def checks(self) -> dict[str, bytes]:
        raw = await self._r.hgetall(self._checks_key)
        return {_s(k): bytes(v) for k, v in raw.items()}

    @_redis_errors
    async def add_check(self, master_id: str, value: bytes, *, only_if_empty: bool) -> bool:
        got = await self._add_check(
            keys=[self._checks_key], args=[master_id, value, "1" if only_if_empty else "0"]
        )
        return bool(int(got))

    @_redis_errors
    async def remove_checks(self, *, keep: str) -> list[str]:
        gone = await self._remove_checks(keys=[self._checks_key], args=[keep])
        return [_s(m) for m in gone]

    @_redis_errors
    async def load(
        self, namespace: str, owner: str, *, thread: str | None = None
    ) -> tuple[str | None, list[WrappedKey]]:
        out = await self._load(
            keys=[
                self._k(namespace, b"keys"),
                self._k(namespace, b"owned"),
                self._k(namespace, b"threads"),
            ],
            args=[owner, thread or ""],
        )
        bound = _s(out[0]) or None
        rows = [_parse(namespace, out[i], out[i + 1]) for i in range(1, len(out), 2)]
        return bound, rows

    @_redis_errors
    async def by_ids(self, namespace: str, key_ids: Sequence[bytes]) -> list[WrappedKey]:
        ids = list(key_ids)
        if not ids:
            return []
        raw = await self._r.hmget(self._k(namespace, b"keys"), ids)
        return [_parse(namespace, k, v) for k, v in zip(ids, raw, strict=True) if v is not None]

    @_redis_errors
    async def insert(self, key: WrappedKey) -> WrappedKey:
        # Registered before the key exists, so a rotation never misses a namespace.
        await self._r.sadd(self._namespaces_key, key.namespace)
        kid, rec = await self._insert(
            keys=[
                self._k(key.namespace, b"keys"),
                self._k(key.namespace, b"live"),
                self._k(key.namespace, b"owned"),
            ],
            args=[key.owner, key.key_id, _record(key)],
        )
        return _parse(key.namespace, kid, rec)

    @_redis_errors
    async def erase(self, namespace: str, owner: str, *, erased_at: str) -> list[bytes]:
        keys, live = self._k(namespace, b"keys"), self._k(namespace, b"live")
        while True:
            kid = await self._r.hget(live, owner)
            if kid is None:
                return []
            rec = await self._r.hget(keys, kid)
            if rec is None:  # a live pointer without its record: drop the pointer
                await self._r.hdel(live, owner)
                return []
            row = _parse(namespace, kid, rec)
            tomb = WrappedKey(
                namespace=namespace,
                owner=owner,
                key_id=row.key_id,
                master_id=row.master_id,
                wrapped=None,
                created_at=row.created_at,
                erased_at=erased_at,
            )
            if int(await self._erase(keys=[keys, live], args=[owner, kid, _record(tomb)])):
                return [bytes(kid)]

    @_redis_errors
    async def rewrap(self, key: WrappedKey, *, wrapped: bytes, master_id: str) -> bool:
        new = WrappedKey(
            namespace=key.namespace,
            owner=key.owner,
            key_id=key.key_id,
            master_id=master_id,
            wrapped=wrapped,
            created_at=key.created_at,
            erased_at=key.erased_at,
        )
        got = await self._cas(
            keys=[self._k(key.namespace, b"keys")], args=[key.key_id, _record(key), _record(new)]
        )
        return bool(int(got))

    async def wrapped_elsewhere(self, master_id: str) -> AsyncIterator[WrappedKey]:
        from redis.exceptions import RedisClusterException, RedisError

        try:
            namespaces = [_s(n) async for n in self._r.sscan_iter(self._namespaces_key, count=100)]
            for namespace in namespaces:
                async for kid, rec in self._r.hscan_iter(self._k(namespace, b"keys"), count=256):
                    row = _parse(namespace, kid, rec)
                    if row.wrapped is not None and row.master_id != master_id:
                        yield row
        except (RedisError, RedisClusterException) as e:
            pool = getattr(self._r, "connection_pool", None)
            err = redis_error(e, "key table rotation scan", "", pool)
            if err.code != "store":
                raise err from e
            raise StoreError(f"Redis key table failed in a rotation scan: {e}") from e

    @_redis_errors
    async def bind(self, namespace: str, thread: str, user: str) -> str:
        got = await self._bind(
            keys=[self._k(namespace, b"threads"), self._k(namespace, b"tcount")],
            args=[thread, user],
        )
        return _s(got)

    @_redis_errors
    async def count_threads(self, namespace: str, user: str) -> int:
        got = await self._r.hget(self._k(namespace, b"tcount"), user)
        return 0 if got is None else int(got)
