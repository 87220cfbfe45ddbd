"""The recall index's vectors in a Redis store's database, on the store's client.

Keys beside the namespace's own (same prefix and hash tag ``{namespace}``, so a
cluster keeps them in the namespace's slot):

* ``<stem>:recall:marks``: a hash, ``scope \\0 space`` -> ``generation:sequence``;
* ``<stem>:recall:v:<scope> \\0 <space>``: a hash, resource key -> node id, a zero
  byte, then the float32 vector.

Every process on the database shares one index; a restart embeds only what changed.
Only for plaintext stores (``EncryptedStore`` keeps the index out of the database).

Searching is an exact scan (``engine == "scan"``): a scope's vectors are read with one
``HGETALL`` into a numpy matrix, kept while the scope's mark does not move.

The search module (RediSearch, in Redis Stack and Redis 8): where ``MODULE LIST``
names it (and ``TETHER_RECALL_REDIS_SEARCH`` is not ``0``), ``engine`` is
"redis-search": each entry is also written as a hash document
``<stem>:recall:doc:<dim>:<part>:<key digest>`` (fields ``part``, ``key``, ``node``,
``vec``), one ``FT.CREATE ... SCHEMA part TAG vec VECTOR FLAT 6 TYPE FLOAT32 DIM <dim>
DISTANCE_METRIC COSINE`` index per namespace and dimension, and a search is
``FT.SEARCH idx "(@part:{<part>})=>[KNN $n @vec $q AS dist]" ... DIALECT 2`` (the
documented syntax); its candidates are rescored exactly, like every path. UNTESTED:
the module is not installable on the machines this was built on (Debian's
redis-redisearch is 1.2, without vectors; Redis Stack's module refuses Redis 7.0,
and its own server needs OpenSSL 1.1); the tests run the scan.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..core.errors import StoreError
from ._pools import check_loop, redis_error
from .vectors import Mark, VectorEntry, VectorHit, VectorTable, margin, rescore, scan


def _part(scope: str, space: str) -> bytes:
    return scope.encode() + b"\0" + space.encode()


class RedisVectorTable(VectorTable):
    def __init__(
        self,
        client: Any,
        stem: Callable[[str], bytes],
        *,
        use_search: bool | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._r = client
        self._loop = loop  # the event loop the client's connections belong to
        self._stem = stem
        if use_search is None:
            use_search = os.environ.get("TETHER_RECALL_REDIS_SEARCH", "1") != "0"
        self._want_search = use_search
        self.engine = "scan"  # "redis-search" once MODULE LIST names the search module
        self._probed = False
        self._indexes: set[bytes] = set()
        self._cache: dict[tuple[str, str, str], tuple[Mark, list[str], list[str], Any]] = {}

    async def _do(self, what: str, fn: Callable[[], Any]) -> Any:
        from redis.exceptions import RedisClusterException, RedisError

        check_loop(self._loop, "Redis")
        try:
            if not self._probed:
                await self._probe()
            return await fn()
        except (RedisError, RedisClusterException) as e:
            pool = getattr(self._r, "connection_pool", None)
            err = redis_error(e, f"recall index {what}", "", pool)
            if err.code != "store":  # pool_timeout, store_unavailable...
                raise err from e
            raise StoreError(f"Redis recall index {what} failed ({type(e).__name__}: {e})") from e

    async def _probe(self) -> None:
        from redis.exceptions import RedisError

        self._probed = True
        if not self._want_search:
            return
        try:
            modules = await self._r.execute_command("MODULE", "LIST")
        except RedisError:  # MODULE may be renamed or refused: no search module then
            return
        names = set()
        for m in modules or []:
            fields = dict(zip(m[::2], m[1::2], strict=False)) if isinstance(m, list) else m
            name = fields.get(b"name", fields.get("name", b""))
            names.add(name.decode() if isinstance(name, bytes) else str(name))
        if names & {"search", "ft", "searchlight"}:
            self.engine = "redis-search"

    def _marks(self, namespace: str) -> bytes:
        return self._stem(namespace) + b":recall:marks"

    def _vectors(self, namespace: str, scope: str, space: str) -> bytes:
        return self._stem(namespace) + b":recall:v:" + _part(scope, space)

    def _doc_prefix(self, namespace: str, dim: int) -> bytes:
        return self._stem(namespace) + b":recall:doc:%d:" % dim

    def _doc(self, namespace: str, scope: str, space: str, key: str, dim: int) -> bytes:
        part = hashlib.sha256(_part(scope, space)).hexdigest()[:32].encode()
        digest = hashlib.sha256(key.encode()).hexdigest()[:32].encode()
        return self._doc_prefix(namespace, dim) + part + b":" + digest

    async def close(self) -> None:
        self._cache.clear()

    async def mark(self, namespace: str, scope: str, space: str) -> Mark | None:
        raw = await self._do(
            "read", lambda: self._r.hget(self._marks(namespace), _part(scope, space))
        )
        if raw is None:
            return None
        g, _, s = raw.partition(b":")
        return Mark(generation=int(g), sequence=int(s))

    async def apply(
        self,
        namespace: str,
        scope: str,
        space: str,
        *,
        upserts: Sequence[VectorEntry],
        deletes: Sequence[str],
        mark: Mark,
        replace: bool = False,
    ) -> None:
        vkey = self._vectors(namespace, scope, space)

        async def tx() -> None:
            docs_gone: list[bytes] = []
            if self.engine == "redis-search":  # UNTESTED (see the module docstring)
                old = await self._r.hgetall(vkey) if replace else {}
                docs_gone = [
                    self._doc(
                        namespace, scope, space, k.decode(), (len(v) - v.index(b"\0") - 1) // 4
                    )
                    for k, v in old.items()
                ]
                for e in upserts:
                    await self._ensure_index(namespace, len(e.vector) // 4)
            async with self._r.pipeline(transaction=True) as p:
                if replace:
                    p.delete(vkey)
                    if docs_gone:
                        p.delete(*docs_gone)
                if deletes:
                    p.hdel(vkey, *deletes)
                for i in range(0, len(upserts), 1000):
                    p.hset(
                        vkey,
                        mapping={
                            e.key: e.node.encode() + b"\0" + e.vector for e in upserts[i : i + 1000]
                        },
                    )
                if self.engine == "redis-search":  # UNTESTED: the documents FT.SEARCH reads
                    part = hashlib.sha256(_part(scope, space)).hexdigest()[:32]
                    for e in upserts:
                        p.hset(
                            self._doc(namespace, scope, space, e.key, len(e.vector) // 4),
                            mapping={"part": part, "key": e.key, "node": e.node, "vec": e.vector},
                        )
                    for d in deletes:
                        for dim in self._dims(namespace):
                            p.delete(self._doc(namespace, scope, space, d, dim))
                p.hset(
                    self._marks(namespace),
                    _part(scope, space),
                    b"%d:%d" % (mark.generation, mark.sequence),
                )
                await p.execute()

        await self._do("write", tx)
        self._cache.pop((namespace, scope, space), None)

    def _dims(self, namespace: str) -> list[int]:
        stem = self._stem(namespace) + b":recall:idx:"
        return [int(i[len(stem) :]) for i in self._indexes if i.startswith(stem)]

    async def _ensure_index(self, namespace: str, dim: int) -> bytes:
        """``FT.CREATE`` the namespace's index for ``dim`` once (UNTESTED)."""
        from redis.exceptions import ResponseError

        name = self._stem(namespace) + b":recall:idx:%d" % dim
        if name in self._indexes:
            return name
        try:
            await self._r.execute_command(
                "FT.CREATE", name, "ON", "HASH", "PREFIX", 1, self._doc_prefix(namespace, dim),
                "SCHEMA", "part", "TAG", "vec", "VECTOR", "FLAT", 6, "TYPE", "FLOAT32",
                "DIM", dim, "DISTANCE_METRIC", "COSINE",
            )  # fmt: skip
        except ResponseError as e:
            if "already exists" not in str(e).lower():
                raise
        self._indexes.add(name)
        return name

    async def _rows(self, namespace: str, scope: str, space: str) -> list[tuple[str, str, bytes]]:
        raw = await self._do(
            "read", lambda: self._r.hgetall(self._vectors(namespace, scope, space))
        )
        rows = []
        for k, v in raw.items():
            node, _, vec = v.partition(b"\0")
            rows.append((k.decode(), node.decode(), vec))
        rows.sort(key=lambda r: r[0].encode())
        return rows

    async def search(
        self,
        namespace: str,
        scope: str,
        space: str,
        query: bytes,
        *,
        k: int,
        where: Callable[[str], bool] | None = None,
    ) -> list[VectorHit]:
        import numpy as np

        part_key = (namespace, scope, space)
        mark = await self.mark(namespace, scope, space)
        if mark is None or k < 1:
            return []
        if self.engine == "redis-search":
            hits: list[VectorHit] = await self._do(
                "search", lambda: self._ft_search(namespace, scope, space, query, k, where)
            )
            return hits
        cached = self._cache.get(part_key)
        if cached is None or cached[0] != mark:
            rows = await self._rows(namespace, scope, space)
            matrix = (
                np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), -1)
                if rows
                else None
            )
            cached = (mark, [r[0] for r in rows], [r[1] for r in rows], matrix)
            self._cache[part_key] = cached
        _, order, nodes, matrix = cached
        return scan(order, nodes, matrix, query, k=k, where=where)

    async def _ft_search(
        self,
        namespace: str,
        scope: str,
        space: str,
        query: bytes,
        k: int,
        where: Callable[[str], bool] | None,
    ) -> list[VectorHit]:
        """KNN in the search module; the rows within ``2 * margin`` of the ``k``-th best
        that pass ``where`` are rescored exactly. UNTESTED (see the module docstring)."""
        dim = len(query) // 4
        index = await self._ensure_index(namespace, dim)
        part = hashlib.sha256(_part(scope, space)).hexdigest()[:32]
        total = await self._r.hlen(self._vectors(namespace, scope, space))
        slack = 2 * margin(dim)
        n = k + 16
        while True:
            reply = await self._r.execute_command(
                "FT.SEARCH", index, f"(@part:{{{part}}})=>[KNN $n @vec $q AS dist]",
                "PARAMS", 4, "n", n, "q", query, "SORTBY", "dist", "ASC",
                "RETURN", 3, "key", "node", "dist", "LIMIT", 0, n, "DIALECT", 2,
            )  # fmt: skip
            found: list[tuple[str, str, float]] = []
            for fields in reply[2::2]:
                f = dict(zip(fields[::2], fields[1::2], strict=False))
                key = f[b"key"].decode()
                if where is None or where(key):
                    found.append((key, f[b"node"].decode(), 1.0 - float(f[b"dist"])))
            seen = len(reply[2::2])
            if len(found) >= k:
                floor = found[k - 1][2] - slack
                last = 1.0 - float(
                    dict(zip(reply[-1][::2], reply[-1][1::2], strict=False))[b"dist"]
                )
                if last < floor or seen < n:
                    found = [f for f in found if f[2] >= floor]
                    break
            elif seen < n or n >= total:
                break
            n *= 4
        if not found:
            return []
        vecs = await self._r.hmget(self._vectors(namespace, scope, space), [f[0] for f in found])
        return rescore(
            [(f[0], f[1], v.partition(b"\0")[2]) for f, v in zip(found, vecs, strict=True) if v],
            query,
            k=k,
        )

    async def entries(self, namespace: str, scope: str, space: str) -> dict[str, VectorEntry]:
        return {
            k: VectorEntry(key=k, node=n, vector=v)
            for k, n, v in await self._rows(namespace, scope, space)
        }

    async def drop(self, namespace: str, scope: str | None = None) -> int:
        marks = self._marks(namespace)

        async def tx() -> int:
            parts = [
                p
                for p in await self._r.hkeys(marks)
                if scope is None or p.split(b"\0")[0] == scope.encode()
            ]
            removed = 0
            for p in parts:
                s, _, sp = p.partition(b"\0")
                vkey = self._vectors(namespace, s.decode(), sp.decode())
                if self.engine == "redis-search":  # UNTESTED: the documents go too
                    raw = await self._r.hgetall(vkey)
                    docs = [
                        self._doc(
                            namespace,
                            s.decode(),
                            sp.decode(),
                            key.decode(),
                            (len(v) - v.index(b"\0") - 1) // 4,
                        )
                        for key, v in raw.items()
                    ]
                    if docs:
                        await self._r.delete(*docs)
                removed += int(await self._r.hlen(vkey))
                async with self._r.pipeline(transaction=True) as pipe:
                    pipe.delete(vkey)
                    pipe.hdel(marks, p)
                    await pipe.execute()
            return removed

        removed: int = await self._do("drop", tx)
        for key in [c for c in self._cache if c[0] == namespace and scope in (None, c[1])]:
            del self._cache[key]
        return removed

    async def indexed(self, namespace: str) -> list[tuple[str, str]]:
        parts = await self._do("read", lambda: self._r.hkeys(self._marks(namespace)))
        out = []
        for p in parts:
            s, _, sp = p.partition(b"\0")
            out.append((s.decode(), sp.decode()))
        return sorted(out, key=lambda x: (x[0].encode(), x[1].encode()))
