"""SQLITE_BUSY, retried: the one retry loop of every SQLite connection tether opens.

Below the SQLite store (``sqlite.py``), its key table (``_sqlite_keys.py``) and its
recall index (``_sqlite_vectors.py``), which each open a connection of their own on
the same file and import this module, never each other.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..core.errors import StoreError

T = TypeVar("T")


def is_busy(e: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED (and their extended codes)."""
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (5, 6)
    msg = str(e).lower()
    return "locked" in msg or "busy" in msg


def failed(e: sqlite3.Error, path: str, what: str = "SQLite") -> StoreError:
    """The StoreError of a SQLite error that is not SQLITE_BUSY."""
    return StoreError(f"{what} failed on {path!r}: {e}")


async def retry_busy(
    attempt: Callable[[], Awaitable[T]], *, path: str, busy_timeout: float, what: str = "SQLite"
) -> T:
    """``await attempt()``, retrying SQLITE_BUSY with a jittered backoff for up to
    ``busy_timeout`` seconds (then ``StoreError(code="busy")``); any other SQLite error
    is a ``StoreError``."""
    deadline = 0.0
    delay = 0.0002
    while True:
        try:
            return await attempt()
        except sqlite3.Error as e:
            if not is_busy(e):
                raise failed(e, path, what) from e
            now = time.monotonic()
            if not deadline:
                deadline = now + busy_timeout
            elif now >= deadline:
                raise StoreError(
                    f"{path!r} stayed locked by another connection for "
                    f"{busy_timeout:g} s; raise busy_timeout or find the process "
                    "holding a long write transaction",
                    code="busy",
                ) from e
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, 0.02)
