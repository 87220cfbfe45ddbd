"""The Redis backend (``redis://host:port/db``, ``rediss://`` for TLS; extra ``redis``).

Every write is one Lua script, so a commit that touches several scopes checks
each scope's head and writes all of it in one atomic step, and a reset bumps the
generation in the same step that deletes the nodes. Reads are indexed (hashes
and sorted sets); no code path uses KEYS. The key layout, the scripts and the
persistence settings tether needs are in docs/redis.md.

All keys of a namespace share the hash tag ``{namespace}`` so that, on Redis
Cluster, one namespace lives in one slot and its scripts stay single-slot.

**Redis Cluster**: a URL to any node of a cluster works. The store asks the node
(``INFO cluster``) and, on a cluster, opens redis-py's ``RedisCluster`` client, which
finds the other nodes and follows slot moves. ``?cluster=yes`` forces the cluster
client (no probe), ``?cluster=no`` the single-node one; the default is ``auto``.

Connections come from a ``BlockingConnectionPool``: ``max_connections`` (default
50) and ``pool_timeout`` (seconds, default 30) in the URL. At exhaustion a call
waits for a free connection, then raises ``StoreError(code="pool_timeout")`` with
nothing sent. On a cluster ``max_connections`` bounds each node's connections, and
at most that many calls run at once (a call waits up to ``pool_timeout`` for its
turn).

Failures are typed (``_pools.redis_error``): ``store_unavailable`` when the server
cannot be reached or refuses for now (a failover, a restart), ``commit_unknown`` when
a commit's connection failed after it was sent. Reads retry ``store_unavailable`` for
up to ``READ_RETRY`` seconds. A commit is never re-sent by the
client library: a second run of it would only report a ``Conflict`` with the first. The pool belongs to the event loop that opened the store: a call
from another loop raises ``StoreError(code="wrong_event_loop")`` at once (open one
store per thread there).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

try:
    import redis.asyncio as aioredis
    from redis.asyncio.cluster import RedisCluster
    from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("the Redis backend needs redis-py: pip install 'tether[redis]'") from e

from ..core.errors import InvalidRequest, StoreError
from ..core.graph import CausalNode, new_node
from . import _redis_lua as lua
from ._pools import (
    DEFAULT_POOL_TIMEOUT,
    check_loop,
    parse_timeout,
    pool_timeout_error,
    redis_error,
)
from .base import (
    DuplicateNodes,
    Head,
    PayloadCodec,
    ScopeInfo,
    ScopeStats,
    ScopeWrite,
    Store,
    conflict,
)
from .keys import KeyStore
from .vectors import VectorTable

DEFAULT_PREFIX: Final = "tether:"
# Scopes reset per script call in delete_namespace: bounds how long Redis blocks.
DELETE_BATCH: Final = 256
_SEQ_DIGITS: Final = 12
DEFAULT_MAX_CONNECTIONS: Final = 50
# Seconds a read goes on retrying while the server is unavailable.
READ_RETRY: Final = 5.0
_CLUSTER_MODES: Final = {
    "auto": "auto",
    "yes": "yes",
    "true": "yes",
    "1": "yes",
    "no": "no",
    "false": "no",
    "0": "no",
}
_REDIS_ERRORS: Final = (RedisError, RedisClusterException)
# Options forwarded to redis.asyncio.BlockingConnectionPool.from_url.
_CLIENT_OPTIONS: Final = frozenset(
    {
        "max_connections",
        "pool_timeout",
        "socket_timeout",
        "socket_connect_timeout",
        "health_check_interval",
        "client_name",
        "username",
        "password",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_certfile",
        "ssl_keyfile",
    }
)


def _tag(namespace: str) -> str:
    # Escape the hash-tag delimiters (and the escape itself) so the tag always spans
    # the whole namespace and two namespaces never share a key.
    return namespace.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def _check_prefix(prefix: object) -> str:
    if (
        not isinstance(prefix, str)
        or not prefix
        or len(prefix) > 128
        or any(c in prefix for c in "{}*?[]\\")
        or any(ord(c) < 33 or ord(c) == 127 for c in prefix)
    ):
        raise InvalidRequest(
            f"a Redis key prefix is 1-128 printable characters without spaces, braces "
            f"or glob characters (*?[]\\), got {prefix!r}",
            field="prefix",
        )
    return prefix


def _escape_key(key: str) -> bytes:
    # Resource keys may hold NUL; escaping it to NUL 0x01 makes NUL NUL an unambiguous
    # terminator, so the versions of "a" never share a lex range with those of "a\x00b".
    return key.encode().replace(b"\x00", b"\x00\x01") + b"\x00\x00"


def _prefix_range(prefix: bytes) -> tuple[bytes, bytes]:
    """ZRANGEBYLEX bounds of every member starting with ``prefix``.

    0xff never occurs in UTF-8, so every such member sorts below prefix + 0xff.
    """
    if not prefix:
        return b"-", b"+"
    return b"[" + prefix, b"(" + prefix + b"\xff"


async def _on_connect(conn: Any) -> None:
    """A new connection's handshake, then its server-side id (``CLIENT ID``), which
    settling a commit whose connection failed looks for (``RedisStore._settle``)."""
    await conn.on_connect()
    try:
        await conn.send_command("CLIENT", "ID")
        conn._tether_id = int(await conn.read_response())
    except ResponseError:  # CLIENT denied to this user: such commits stay unknown
        conn._tether_id = None


def _encode_node(node: CausalNode, payload: bytes) -> bytes:
    # The header is JSON without raw newlines, so the first newline ends it; the
    # payload bytes after it are the codec's (possibly binary, e.g. encrypted).
    header = orjson.dumps(
        [node.id, node.kind, list(node.parents), node.created_at, node.sequence, node.resource_key]
    )
    return header + b"\n" + payload


class RedisStore(Store):
    """tether's store on Redis. Open with ``await tether.open_store("redis://...")``.

    Options: ``prefix`` (key prefix, default ``tether:``; also ``?prefix=`` in the
    URL) so that several deployments or test runs share one database, ``codec``,
    and the client options ``max_connections``, ``socket_timeout``... of redis-py.
    """

    def __init__(
        self,
        client: aioredis.Redis | RedisCluster,
        *,
        url: str,
        prefix: str = DEFAULT_PREFIX,
        codec: PayloadCodec | None = None,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        super().__init__(codec=codec)
        self.url = url
        self.prefix = _check_prefix(prefix)
        self.cluster = isinstance(client, RedisCluster)
        self._r: Any = client
        # A cluster client fails at once when a node's connections are all busy: this
        # bounds the calls in flight instead, and makes the excess wait (pool_timeout).
        self._slots = asyncio.Semaphore(max_connections) if self.cluster else None
        self._pool_timeout = pool_timeout
        self._max_connections = max_connections
        self._p = prefix.encode()
        self._closed = False
        self._vectors: VectorTable | None = None  # the recall index, made on first use
        self._loop = asyncio.get_running_loop()  # the pool's connections belong to it
        self._commit = client.register_script(lua.COMMIT)
        self._reset = client.register_script(lua.RESET)
        self._prune = client.register_script(lua.PRUNE)
        self._delete_batch = client.register_script(lua.DELETE_BATCH)
        self._range = client.register_script(lua.RANGE)
        self._get = client.register_script(lua.GET)
        self._heads = client.register_script(lua.HEADS)
        self._versions = client.register_script(lua.VERSIONS)
        self._scopes = client.register_script(lua.SCOPES)

    @classmethod
    async def open(cls, url: str, **options: Any) -> RedisStore:
        """Connect, check the server answers, and return the store."""
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        prefix = options.pop("prefix", None)
        rest = []
        pool: dict[str, Any] = {}
        cluster = options.pop("cluster", None)
        for k, v in query:
            if k == "prefix":
                prefix = prefix if prefix is not None else v
            elif k == "cluster":
                cluster = cluster if cluster is not None else v
            elif k in ("max_connections", "pool_timeout"):
                pool[k] = v
            else:
                rest.append((k, v))
        for k in ("max_connections", "pool_timeout"):
            if k in options:
                pool[k] = options.pop(k)
        codec = options.pop("codec", None)
        unknown = set(options) - _CLIENT_OPTIONS
        if unknown:
            raise InvalidRequest(
                f"unknown Redis store option(s) {sorted(unknown)}; accepted: prefix, codec, "
                "cluster, " + ", ".join(sorted(_CLIENT_OPTIONS)),
                field="options",
            )
        mode = _CLUSTER_MODES.get(str("auto" if cluster is None else cluster).lower())
        if mode is None:
            raise InvalidRequest(
                f"cluster: 'auto', 'yes' or 'no', got {cluster!r}", field="cluster"
            )
        client_url = urlunsplit(parts._replace(query=urlencode(rest)))
        prefix = _check_prefix(DEFAULT_PREFIX if prefix is None else prefix)
        timeout = parse_timeout(pool.get("pool_timeout", DEFAULT_POOL_TIMEOUT))
        size = pool.get("max_connections", DEFAULT_MAX_CONNECTIONS)
        if isinstance(size, bool) or not str(size).isdigit() or int(size) < 1:
            raise InvalidRequest(
                f"max_connections: an integer >= 1, got {size!r}", field="max_connections"
            )
        sizes: dict[str, Any] = {"pool_timeout": timeout, "max_connections": int(size)}
        if mode == "yes":
            return await cls._open_cluster(url, client_url, prefix, codec, sizes, options)
        try:
            # Blocking: at exhaustion a call waits (pool_timeout) instead of failing.
            blocking = aioredis.BlockingConnectionPool.from_url(
                client_url,
                max_connections=int(size),
                timeout=timeout,
                decode_responses=False,
                redis_connect_func=_on_connect,
                **options,
            )
            client = aioredis.Redis.from_pool(blocking)
        except (ValueError, TypeError, RedisError) as e:
            raise InvalidRequest(f"invalid Redis URL {url!r}: {e}", field="url") from e
        store = cls(client, url=url, prefix=prefix, codec=codec, **sizes)
        try:
            async with store._errors("connect"):
                try:
                    if mode == "no":
                        await client.ping()
                        return store
                    info: dict[Any, Any] = await client.info("cluster")
                except ResponseError as e:
                    if "cluster mode" not in str(e):
                        raise
                    # SELECT of a database other than 0, refused by a cluster node.
                    raise InvalidRequest(
                        f"{url!r} names a Redis Cluster node, and a cluster has only "
                        "database 0: drop the database number from the URL",
                        field="url",
                    ) from e
        except BaseException:
            await store.close()
            raise
        if not int(info.get("cluster_enabled", 0)):
            return store
        await store.close()
        return await cls._open_cluster(url, client_url, prefix, codec, sizes, options)

    @classmethod
    async def _open_cluster(
        cls,
        url: str,
        client_url: str,
        prefix: str,
        codec: PayloadCodec | None,
        sizes: dict[str, Any],
        options: dict[str, Any],
    ) -> RedisStore:
        try:
            client = RedisCluster.from_url(
                client_url,
                max_connections=sizes["max_connections"],
                decode_responses=False,
                **options,
            )
        except (ValueError, TypeError, RedisError, RedisClusterException) as e:
            raise InvalidRequest(f"invalid Redis Cluster URL {url!r}: {e}", field="url") from e
        store = cls(client, url=url, prefix=prefix, codec=codec, **sizes)
        try:
            async with store._errors("connect"):
                await client.initialize()  # the nodes and who serves which slot
        except BaseException:
            await store.close()
            raise
        return store

    async def keystore(self) -> KeyStore:
        from ._redis_keys import RedisKeyStore

        # The store's own client (its pool, credentials and TLS settings) and prefix.
        return RedisKeyStore(self._r, self.prefix, loop=self._loop)

    async def holds_keys(self) -> bool:
        from ._redis_keys import RedisKeyStore

        return await RedisKeyStore(self._r, self.prefix, loop=self._loop).has_checks()

    def vector_table(self) -> VectorTable | None:
        if self._vectors is None:
            from ._redis_vectors import RedisVectorTable

            # Hashes beside the namespace's keys (same prefix and hash tag), same client.
            self._vectors = RedisVectorTable(self._r, self._stem, loop=self._loop)
        return self._vectors

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            vectors, self._vectors = self._vectors, None
            if vectors is not None:
                await vectors.close()
            await self._r.aclose()

    # -- keys ----------------------------------------------------------------------

    def _stem(self, namespace: str) -> bytes:
        return self._p + b"{" + _tag(namespace).encode() + b"}"

    def _scope_keys(self, namespace: str, scope: str) -> list[bytes]:
        """meta, nodes, ids, rkeys, rheads, versions: the order the scripts expect."""
        stem, s = self._stem(namespace), scope.encode()
        return [stem + t + s for t in (b":h:", b":n:", b":i:", b":r:", b":rh:", b":v:")]

    def _ns_keys(self, namespace: str) -> tuple[bytes, bytes]:
        """The namespace's non-empty scopes and every scope with a stored head."""
        stem = self._stem(namespace)
        return stem + b":scopes", stem + b":known"

    @property
    def _namespaces_key(self) -> bytes:
        # Outside every namespace's slot: maintained next to the scripts, not in them.
        return self._p + b"namespaces"

    @asynccontextmanager
    async def _errors(self, what: str, *, commit: bool = False) -> AsyncIterator[None]:
        if self._closed:
            raise StoreError("this Redis store is closed; open a new one with open_store")
        check_loop(self._loop, "Redis")
        if self._slots is not None:
            try:
                await asyncio.wait_for(self._slots.acquire(), self._pool_timeout)
            except TimeoutError:
                raise pool_timeout_error(
                    "Redis", self._pool_timeout, self._max_connections
                ) from None
        try:
            yield
        except _REDIS_ERRORS as e:
            pool = getattr(self._r, "connection_pool", None)
            raise redis_error(e, what, self.url, pool, commit=commit) from e
        finally:
            if self._slots is not None:
                self._slots.release()

    async def _read(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """``call()`` (one read), retried while the server is unavailable (a restart, a
        killed connection, a failover), for up to ``READ_RETRY`` seconds."""
        deadline = 0.0
        attempt = 0
        while True:
            try:
                async with self._errors(what):
                    return await call()
            except StoreError as e:
                if e.code != "store_unavailable" or self._closed:
                    raise
                now = time.monotonic()
                deadline = deadline or now + READ_RETRY
                if now > deadline:
                    raise
                attempt += 1
                await asyncio.sleep(min(0.5, 0.01 * 2**attempt))

    def _decode(self, namespace: str, scope: str, blob: bytes) -> CausalNode:
        header, _, payload = blob.partition(b"\n")
        nid, kind, parents, created_at, sequence, rk = orjson.loads(header)
        # new_node: the fields come from a record this store wrote (see _encode_node).
        return new_node(
            nid,
            kind,
            tuple(parents),
            self.codec.decode(namespace, scope, payload),
            created_at,
            sequence,
            rk,
        )

    # -- writing -------------------------------------------------------------------

    def _plan(self, namespace: str, w: ScopeWrite) -> list[bytes | str | int]:
        args: list[bytes | str | int] = [
            w.scope,
            w.expected_generation,
            w.expected_sequence,
            w.nodes[-1].sequence if w.nodes else w.expected_sequence,
            ",".join(w.frontier),
            len(w.nodes),
        ]
        resources: list[bytes | str | int] = []
        kinds: dict[str, int] = {}
        nbytes = 0
        for n in w.nodes:
            payload = self.codec.encode(namespace, w.scope, n.payload)
            nbytes += len(payload)
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
            args += [n.id, n.sequence, _encode_node(n, payload)]
            if n.resource_key is not None:
                member = _escape_key(n.resource_key) + str(n.sequence).zfill(_SEQ_DIGITS).encode()
                resources += [n.resource_key, n.sequence, member]
        args.append(len(resources) // 3)
        args += resources
        args += [nbytes, len(kinds)]
        for k, c in kinds.items():
            args += [k, c]
        return args

    async def _do_commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        if not writes:
            return
        keys = list(self._ns_keys(namespace))
        args: list[bytes | str | int] = [len(writes)]
        for w in writes:
            keys += self._scope_keys(namespace, w.scope)
            args += self._plan(namespace, w)
        # The namespace index lives in another cluster slot, so it is not in the script.
        # Adding it after the script means a concurrent delete_namespace either sees
        # this commit or re-adds it (_forget_if_empty).
        if self.cluster:
            async with self._errors("commit", commit=True):
                result = await self._commit_on_cluster(keys, args)
            await self._index(namespace)
        else:
            result = await self._commit_on_server(namespace, writes, keys, args)
        tag = result[0]
        if tag == b"ok":
            return
        w = writes[int(result[1]) - 1]
        if tag == b"conflict":
            raise conflict(
                namespace,
                w.scope,
                (w.expected_generation, w.expected_sequence),
                (int(result[2]), int(result[3])),
            )
        dup = [x.decode() for x in result[2:]]
        raise DuplicateNodes(
            f"scope {w.scope!r} already holds {len(dup)} of these nodes",
            namespace=namespace,
            scope=w.scope,
            ids=dup,
        )

    async def _commit_on_server(
        self, namespace: str, writes: Sequence[ScopeWrite], keys: list[bytes], args: list[Any]
    ) -> Any:
        """The commit script and the namespace index's ZADD, pipelined (one round trip),
        on a connection this store knows the server-side id of (``_on_connect``).

        The client never re-sends it (no retries). When the connection fails after
        sending it, the outcome is settled if it can be proven (``_settle``): applied
        (returns as if the reply had come), or not (``store_unavailable`` with
        ``committed=False``); else ``commit_unknown``.
        """
        client_id: int | None = None
        try:
            async with self._errors("commit", commit=True):
                # EVALSHA is queued by hand: a script object queued in a pipeline makes
                # redis-py ask the server (SCRIPT EXISTS) before every execute, a second
                # round trip. A server that lost the script (restarted, SCRIPT FLUSH)
                # answers NOSCRIPT before running anything: load it, send again.
                for attempt in range(2):
                    conn = await self._r.connection_pool.get_connection()
                    # Read now: once released, the object may be reconnected for another
                    # caller (a new server-side client, a new id).
                    client_id = getattr(conn, "_tether_id", None)
                    pipe = self._r.pipeline(transaction=False)
                    pipe.connection = conn  # released by the pipeline's reset
                    try:
                        async with pipe:
                            pipe.evalsha(self._commit.sha, len(keys), *keys, *args)
                            pipe.zadd(self._namespaces_key, {namespace.encode(): 0})
                            result, _ = await pipe.execute()
                            return result
                    except NoScriptError:
                        if attempt:
                            raise
                        self._commit.sha = await self._r.script_load(self._commit.script)
                raise AssertionError("unreachable")
        except StoreError as e:
            if e.code != "commit_unknown":
                raise
            landed = await self._settle(namespace, writes, client_id)
            if landed is None:
                raise
            if not landed:
                raise StoreError(
                    "Redis dropped the connection during the commit, and the commit was not "
                    "applied (its connection is gone from the server and its nodes are not "
                    f"stored); nothing was written, retry ({e.message})",
                    code="store_unavailable",
                    committed=False,
                ) from e
            await self._index(namespace)
            return [b"ok"]

    async def _index(self, namespace: str) -> None:
        """Add ``namespace`` to the namespace index after a commit the server ran.

        Retried while the index's node is unavailable (``_read``); if it still fails,
        the commit stands all the same (reporting a failure would make the caller run
        the turn again) and the namespace's next commit adds it. The index only serves
        ``list_namespaces``.
        """
        with contextlib.suppress(StoreError):
            await self._read(
                "commit (namespace index)",
                lambda: self._r.zadd(self._namespaces_key, {namespace.encode(): 0}),
            )

    async def _settle(
        self, namespace: str, writes: Sequence[ScopeWrite], client_id: int | None
    ) -> bool | None:
        """Whether a commit whose connection failed was applied: True, False, or None
        when that cannot be proven within ``READ_RETRY`` seconds.

        The proof: the server no longer lists the connection that sent it (Redis runs
        a client's commands as it reads them and drops what is left when it frees the
        client, so nothing of it can run later), and then every node of the commit is
        stored (applied: the script is atomic) or not all are (not applied).
        """
        if client_id is None:
            return None
        deadline = time.monotonic() + READ_RETRY
        while True:
            try:
                async with self._errors("commit (settle)"):
                    if not await self._r.client_list(client_id=[client_id]):
                        for w in writes:
                            idx = self._scope_keys(namespace, w.scope)[2]
                            got = await self._r.hmget(idx, [n.id for n in w.nodes])
                            if w.nodes and any(g is None for g in got):
                                return False
                        return True
            except StoreError:
                pass
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.05)

    async def _commit_on_cluster(self, keys: list[bytes], args: list[Any]) -> Any:
        """The commit script, sent once to the master of the namespace's slot.

        Naming the node turns off the cluster client's retries, which would run the
        script again after a connection failure (it may have run: ``commit_unknown``).
        A MOVED reply (the slot moved) is still followed, and NOSCRIPT (a node that
        never saw the script, or a promoted replica) loads it: both prove it did not run.
        """
        for attempt in range(3):
            node = self._r.get_node_from_key(keys[0])
            command = ("EVALSHA", self._commit.sha, len(keys), *keys, *args)
            try:
                return await self._r.execute_command(*command, target_nodes=node)
            except NoScriptError:
                if attempt == 2:
                    raise
                # Every master: the slot may have moved to one that never saw it.
                await self._r.execute_command(
                    "SCRIPT", "LOAD", lua.COMMIT, target_nodes=RedisCluster.PRIMARIES
                )
                self._commit.sha = hashlib.sha1(lua.COMMIT.encode()).hexdigest()
        raise AssertionError("unreachable")

    async def _forget_if_empty(self, namespace: str) -> None:
        """Drop an emptied namespace from the index, re-adding it if a commit raced in."""
        scopes, _ = self._ns_keys(namespace)
        name = namespace.encode()
        await self._r.zrem(self._namespaces_key, name)
        if await self._r.zcard(scopes):
            await self._r.zadd(self._namespaces_key, {name: 0})

    async def _do_reset_scope(self, namespace: str, scope: str) -> Head:
        return await self._reset_scope(namespace, scope, None)

    async def _do_reset_if(self, namespace: str, scope: str, expected: Head) -> Head:
        return await self._reset_scope(namespace, scope, expected)

    async def _reset_scope(self, namespace: str, scope: str, expected: Head | None) -> Head:
        fence: list[str | int] = (
            [] if expected is None else [expected.generation, expected.sequence]
        )
        async with self._errors("reset"):
            result = await self._reset(
                keys=[*self._scope_keys(namespace, scope), *self._ns_keys(namespace)],
                args=[scope, *fence],
            )
            if result[0] == b"conflict":
                assert expected is not None
                raise conflict(
                    namespace,
                    scope,
                    (expected.generation, expected.sequence),
                    (int(result[1]), int(result[2])),
                )
            gen, left = result
            if not left:
                await self._forget_if_empty(namespace)
        return Head(generation=int(gen))

    async def _do_prune(
        self, namespace: str, scope: str, expected: Head, cut: tuple[int, ...], write: ScopeWrite
    ) -> Head:
        keys = [*self._ns_keys(namespace), *self._scope_keys(namespace, scope)]
        args: list[bytes | str | int] = [expected.generation, expected.sequence, 0]
        nbytes, kinds = 0, dict[str, int]()
        async with self._errors("prune"):
            blobs: list[Any] = []
            for i in range(0, len(cut), 500):
                blobs += await self._r.hmget(keys[3], [str(s) for s in cut[i : i + 500]])
        removed = 0
        for seq, blob in zip(cut, blobs, strict=True):
            if not isinstance(blob, bytes):
                continue  # not there (a reset since): the script's head check tells
            header, _, payload = blob.partition(b"\n")
            nid, kind, _, _, _, rk = orjson.loads(header)
            member = b"" if rk is None else _escape_key(rk) + str(seq).zfill(_SEQ_DIGITS).encode()
            args += [seq, nid, member, "" if rk is None else rk]
            nbytes += len(payload)
            kinds[kind] = kinds.get(kind, 0) + 1
            removed += 1
        args[2] = removed
        args += [nbytes, len(kinds)]
        for kind, count in kinds.items():
            args += [kind, count]
        (record,) = write.nodes
        payload = self.codec.encode(namespace, scope, record.payload)
        assert record.resource_key is not None
        rk = record.resource_key
        args += [
            record.id,
            record.sequence,
            _encode_node(record, payload),
            rk,
            _escape_key(rk) + str(record.sequence).zfill(_SEQ_DIGITS).encode(),
            len(payload),
            ",".join(write.frontier),
        ]
        async with self._errors("prune"):
            result = await self._prune(keys=keys, args=args)
        if result[0] == b"conflict":
            raise conflict(
                namespace,
                scope,
                (expected.generation, expected.sequence),
                (int(result[1]), int(result[2])),
            )
        return Head(generation=int(result[1]), sequence=record.sequence, frontier=write.frontier)

    async def _do_delete_namespace(self, namespace: str) -> int:
        stem = self._stem(namespace)
        total = 0
        cursor = b"-"
        async with self._errors("delete_namespace"):
            # Batches keep each script short (Redis runs nothing else meanwhile); each
            # scope is still reset atomically, with its generation bumped.
            while True:
                count, last, _ = await self._delete_batch(
                    keys=list(self._ns_keys(namespace)), args=[stem, cursor, DELETE_BATCH]
                )
                total += int(count)
                if not last:
                    break
                cursor = b"(" + last
            await self._forget_if_empty(namespace)
        return total

    # -- reading -------------------------------------------------------------------

    async def head(self, namespace: str, scope: str) -> Head:
        meta = self._scope_keys(namespace, scope)[0]
        got: list[Any] = await self._read("head", lambda: self._r.hmget(meta, [b"g", b"s", b"f"]))
        g, s, f = got
        if g is None:
            return Head()
        return Head(
            generation=int(g),
            sequence=int(s or 0),
            frontier=tuple(f.decode().split(",")) if f else (),
        )

    async def nodes(
        self,
        namespace: str,
        scope: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> list[CausalNode]:
        if limit <= 0:
            return []
        keys = self._scope_keys(namespace, scope)[:2]
        args = [after, -1 if before is None else max(before, 0), limit, int(descending)]
        blobs = await self._read("nodes", lambda: self._range(keys=keys, args=args))
        return [self._decode(namespace, scope, b) for b in blobs if b is not None]

    async def get_nodes(
        self, namespace: str, scope: str, ids: Sequence[str]
    ) -> dict[str, CausalNode]:
        if not ids:
            return {}
        _, nodes, idx, *_ = self._scope_keys(namespace, scope)
        blobs = await self._read("get_nodes", lambda: self._get(keys=[idx, nodes], args=list(ids)))
        out = (self._decode(namespace, scope, b) for b in blobs if b is not None)
        return {n.id: n for n in out}

    async def _resource_range(
        self, namespace: str, scope: str, lo: bytes, hi: bytes
    ) -> dict[str, CausalNode]:
        _, nodes, _, rkeys, rheads, _ = self._scope_keys(namespace, scope)
        flat = await self._read(
            "resource_heads", lambda: self._heads(keys=[rkeys, rheads, nodes], args=[lo, hi])
        )
        return {
            flat[i].decode(): self._decode(namespace, scope, flat[i + 1])
            for i in range(0, len(flat), 2)
        }

    async def resource_head(self, namespace: str, scope: str, key: str) -> CausalNode | None:
        k = key.encode()
        return (await self._resource_range(namespace, scope, b"[" + k, b"[" + k)).get(key)

    async def resource_heads(
        self, namespace: str, scope: str, prefix: str = ""
    ) -> dict[str, CausalNode]:
        return await self._resource_range(namespace, scope, *_prefix_range(prefix.encode()))

    async def versions(
        self, namespace: str, scope: str, key: str, *, limit: int = 1000
    ) -> list[CausalNode]:
        if limit <= 0:
            return []
        _, nodes, *_, versions = self._scope_keys(namespace, scope)
        lo, hi = _prefix_range(_escape_key(key))
        blobs = await self._read(
            "versions", lambda: self._versions(keys=[versions, nodes], args=[lo, hi, limit])
        )
        return [self._decode(namespace, scope, b) for b in blobs if b is not None]

    async def list_namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        out: list[str] = []
        lo = b"-" if after is None else b"(" + after.encode()
        async with self._errors("list_namespaces"):
            # The index may hold a namespace emptied a moment ago (see _forget_if_empty):
            # keep only those that still hold a non-empty scope, and read on to fill the page.
            while len(out) < limit:
                want = limit - len(out)
                names: list[Any] = await self._r.zrangebylex(
                    self._namespaces_key, lo, b"+", 0, want
                )
                if not names:
                    break
                async with self._r.pipeline(transaction=False) as pipe:
                    for n in names:
                        pipe.zcard(self._ns_keys(n.decode())[0])
                    counts = await pipe.execute()
                out += [n.decode() for n, c in zip(names, counts, strict=True) if c]
                lo = b"(" + names[-1]
        return out

    async def list_scopes(
        self, namespace: str, *, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[ScopeInfo]:
        if limit <= 0:
            return []
        lo, hi = _prefix_range(prefix.encode())
        if after is not None and (lo == b"-" or after.encode() >= lo[1:]):
            lo = b"(" + after.encode()
        stem = self._stem(namespace) + b":h:"
        flat = await self._read(
            "list_scopes",
            lambda: self._scopes(keys=[self._ns_keys(namespace)[0]], args=[stem, lo, hi, limit]),
        )
        return [
            ScopeInfo(
                scope=flat[i].decode(), generation=int(flat[i + 1]), sequence=int(flat[i + 2])
            )
            for i in range(0, len(flat), 3)
        ]

    async def stats(self, namespace: str, scope: str) -> ScopeStats:
        meta = self._scope_keys(namespace, scope)[0]
        raw: dict[Any, Any] = await self._read("stats", lambda: self._r.hgetall(meta))
        kinds = {k[2:].decode(): int(v) for k, v in raw.items() if k.startswith(b"k:") and int(v)}
        return ScopeStats(
            nodes=int(raw.get(b"n", 0)), payload_bytes=int(raw.get(b"b", 0)), kinds=kinds
        )

    # -- administration ------------------------------------------------------------

    async def persistence(self) -> dict[str, str]:
        """The server settings that decide whether state survives (docs/redis.md).

        ``appendonly``, ``appendfsync``, ``save`` and ``maxmemory-policy`` (anything
        but ``noeviction`` lets Redis drop stored nodes under memory pressure).
        Values are ``"unknown"`` where CONFIG is disabled (many managed services).
        """
        out = {}
        async with self._errors("persistence"):
            for name in ("appendonly", "appendfsync", "save", "maxmemory-policy"):
                try:
                    got: dict[Any, Any] = await self._r.config_get(name)
                except RedisError:
                    got = {}
                v = got.get(name, got.get(name.encode(), "unknown"))
                out[name] = v.decode() if isinstance(v, bytes) else str(v)
        return out

    async def drop_prefix(self) -> int:
        """Delete every key under this store's prefix; return how many.

        For tests and teardown of a private prefix: uses SCAN (never KEYS), so it
        does not block the server, and touches nothing outside the prefix.
        """
        n = 0
        async with self._errors("drop_prefix"):
            batch: list[bytes] = []
            async for k in self._r.scan_iter(match=self._p + b"*", count=1000):
                batch.append(k)
                if len(batch) >= 500:
                    n += await self._r.unlink(*batch)
                    batch = []
            if batch:
                n += await self._r.unlink(*batch)
        return n
