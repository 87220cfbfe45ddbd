"""Connection pools shared by a store's calls: the event-loop rule and waiting for a slot.

asyncpg and redis-py connections belong to the event loop that opened them: used
from another loop (another OS thread running its own loop, or a second
``asyncio.run``) they fail half-way, after a command may already have been sent.
So a PostgreSQL or Redis store refuses a call from another loop at once, before
anything is sent, with ``StoreError(code="wrong_event_loop")``: open one store per
thread (per event loop) instead. SQLite and ``memory://`` stores are safe to share.

At exhaustion a pool waits up to ``pool_timeout`` seconds (a URL option) for a
free connection, then raises ``StoreError(code="pool_timeout")``; nothing was sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from ..core.errors import InvalidRequest, StoreError

DEFAULT_POOL_TIMEOUT: Final = 30.0


def check_loop(owner: asyncio.AbstractEventLoop | None, backend: str) -> None:
    """Raise ``StoreError(code="wrong_event_loop")`` unless running on ``owner``."""
    if owner is None:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # pragma: no cover - every caller is a coroutine
        return
    if loop is not owner:
        raise StoreError(
            f"this {backend} store was opened on another event loop; its connections belong "
            "to that loop and cannot be used from this one (another thread's loop, or a new "
            "asyncio.run). Open one store per thread/event loop with tether.open_store "
            "(SQLite and memory:// stores may be shared across threads)",
            code="wrong_event_loop",
            backend=backend,
        )


def pool_timeout_error(backend: str, timeout: float | None, size: int | None) -> StoreError:
    return StoreError(
        f"no {backend} connection became free within pool_timeout={timeout:g} s "
        f"(pool size {size}); nothing was sent. Raise max_size/max_connections or "
        "pool_timeout in the store URL, or lower the concurrency",
        code="pool_timeout",
        backend=backend,
        timeout=timeout,
        pool_size=size,
    )


def parse_timeout(value: Any, field: str = "pool_timeout") -> float:
    """A pool timeout in seconds (> 0) from a URL option or keyword."""
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise InvalidRequest(f"{field}: a number of seconds, got {value!r}", field=field) from None
    if not t > 0 or t == float("inf"):
        raise InvalidRequest(f"{field}: a number of seconds > 0, got {value!r}", field=field)
    return t


# SQLSTATE classes after which a connection is not trusted again: connection exceptions
# (08), operator intervention (57: the backend was terminated, the server is shutting
# down or starting) and internal errors (XX).
_PG_BROKEN: Final = ("08", "57", "XX")


def pg_broken(e: BaseException) -> bool:
    """Whether the connection that raised ``e`` must be discarded, not reused.

    Only a plain SQL error (a constraint, a raise from PL/pgSQL, a serialization
    failure) leaves it usable: anything else (a lost or terminated backend, a timeout,
    a cancelled call, a driver in the middle of another operation) may leave a reply in
    flight on it, and the next caller would meet asyncpg's "another operation is in
    progress".
    """
    from ..core.errors import TetherError

    if isinstance(e, TetherError):  # raised by our code after a complete statement
        return False
    try:
        import asyncpg
    except ImportError:  # pragma: no cover - only the PostgreSQL backend calls this
        return True
    if isinstance(e, asyncpg.PostgresError):
        return str(getattr(e, "sqlstate", "") or "XX")[:2] in _PG_BROKEN
    return True


def pg_unavailable(e: BaseException) -> bool:
    """Whether ``e`` means PostgreSQL could not be reached or dropped the connection."""
    try:
        import asyncpg
    except ImportError:  # pragma: no cover
        return False
    if isinstance(e, asyncpg.PostgresError):
        return str(getattr(e, "sqlstate", "") or "")[:2] in ("08", "57")
    return isinstance(
        e, OSError | asyncpg.InterfaceError | asyncpg.InternalClientError
    ) and not isinstance(e, TimeoutError)


def pg_error(e: Exception, what: str) -> Exception:
    """The tether error a failed PostgreSQL call of ``what`` becomes (tether's own pass)."""
    from ..core.errors import TetherError

    if isinstance(e, TetherError):
        return e
    if isinstance(e, TimeoutError):
        return StoreError(f"PostgreSQL {what}: no answer within command_timeout", code="timeout")
    if pg_unavailable(e) or pg_broken(e):
        return StoreError(
            f"PostgreSQL {what}: the connection failed ({type(e).__name__}: {e}); retry later",
            code="store_unavailable",
        )
    return StoreError(f"PostgreSQL {what} failed: {e}")


@asynccontextmanager
async def pg_connection(pool: Any, timeout: float | None) -> AsyncIterator[Any]:
    """A connection of asyncpg ``pool``: on its loop, within ``timeout`` seconds.

    A failure to get one (the pool is exhausted, the server cannot be reached) is a
    ``StoreError`` that says nothing was sent (``committed=False``). A connection whose
    call failed other than with a plain SQL error is terminated before it goes back to
    the pool (``pg_broken``), so it is never handed out again.
    """
    check_loop(getattr(pool, "_loop", None), "PostgreSQL")
    try:
        conn = await pool.acquire(timeout=timeout)
    except TimeoutError as e:
        raise pool_timeout_error("PostgreSQL", timeout, pool.get_max_size()) from e
    except Exception as e:
        if not pg_unavailable(e):
            raise
        raise StoreError(
            f"cannot reach PostgreSQL ({type(e).__name__}: {e}); nothing was sent, retry later",
            code="store_unavailable",
            backend="PostgreSQL",
            committed=False,
        ) from e
    try:
        yield conn
    except BaseException as e:
        # A timed-out or cancelled call is asyncpg's own to undo: it cancels the
        # statement on the server and the release waits for that (closing the socket
        # instead would leave the statement running, e.g. waiting on a lock).
        if pg_broken(e) and not isinstance(e, TimeoutError | asyncio.CancelledError):
            conn.terminate()
        raise
    finally:
        await pool.release(conn)


# redis-py's message for a connection that could not be opened: nothing was sent on it.
_CONNECT_FAILED: Final = " connecting to "
# Replies that prove a command was not run, for now: the cluster is moving a slot or
# electing a master (CLUSTERDOWN, TRYAGAIN), the node is loading its data, or it is a
# replica refusing a write.
_NOT_RUN: Final = frozenset(
    {
        "ClusterDownError",
        "MasterDownError",
        "TryAgainError",
        "BusyLoadingError",
        "ReadOnlyError",
        "SlotNotCoveredError",
        "RedisClusterUnreachableError",
        "MaxClientsReachedError",
    }
)


def _redact(url: str) -> str:
    """``url`` without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def redis_error(
    e: Exception, what: str, url: str, pool: Any, *, commit: bool = False
) -> StoreError:
    """The ``StoreError`` a failing redis-py call becomes, with its code:

    * ``pool_timeout``: no free connection in time (nothing sent);
    * ``store_unavailable``: the server could not be reached or refused to run the
      command for now (a failover, a restart); ``committed=False`` when that proves a
      commit did not happen;
    * ``commit_unknown``: a commit was sent and its connection failed before the reply:
      it may or may not have been applied (``committed=None``);
    * ``store``: any other failure (a reply error).
    """
    name = type(e).__name__
    if name == "ConnectionError" and isinstance(e.__cause__, TimeoutError):
        return pool_timeout_error(
            "Redis", getattr(pool, "timeout", None), getattr(pool, "max_connections", None)
        )
    if name == "MaxConnectionsError":
        return StoreError(
            f"every Redis connection of this store is busy ({e}); nothing was sent. Raise "
            "max_connections in the store URL, or lower the concurrency",
            code="pool_timeout",
            backend="Redis",
        )
    from redis.exceptions import (
        AuthenticationError,
        AuthorizationError,
        ConnectionError,
    )
    from redis.exceptions import (
        TimeoutError as RedisTimeout,
    )

    url = _redact(url)
    detail = f"{name}: {e}"
    if name in ("MovedError", "AskError"):
        # Only a single-node client meets these (the cluster client follows them).
        return StoreError(
            f"Redis {what} failed: the server is a Redis Cluster node and the key lives on "
            f"another node ({detail}); nothing was applied. Open the store with "
            "cluster=auto (the default) or cluster=yes",
            operation=what,
            committed=False if commit else None,
        )
    if isinstance(e, AuthenticationError | AuthorizationError):
        return StoreError(
            f"Redis {what} failed: the server refused the credentials ({detail}); check "
            f"the user and password in the store URL ({url})",
            operation=what,
        )
    not_run = name in _NOT_RUN or (isinstance(e, ConnectionError) and _CONNECT_FAILED in str(e))
    if not_run:
        return StoreError(
            f"Redis {what} failed: the server is unavailable ({detail}); nothing was "
            f"applied, retry later. Server: {url}",
            code="store_unavailable",
            operation=what,
            committed=False if commit else None,
        )
    if isinstance(e, ConnectionError | RedisTimeout):
        if commit:
            return StoreError(
                f"Redis commit outcome unknown: the connection failed after the commit was "
                f"sent ({detail}). It may or may not have been applied: read the scope "
                "before committing again (its nodes are there, or nothing is)",
                code="commit_unknown",
                operation=what,
                committed=None,
            )
        return StoreError(
            f"Redis {what} failed: the connection failed ({detail}); check the server at {url}",
            code="store_unavailable",
            operation=what,
        )
    return StoreError(
        f"Redis {what} failed ({detail}); check the server at {url}",
        operation=what,
    )
