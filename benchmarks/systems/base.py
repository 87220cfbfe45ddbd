"""The tiny interface every benchmarked system implements.

A system module under ``benchmarks/systems/`` defines a subclass of :class:`System`
and exposes it as ``SYSTEM = MySystem``. ``benchmarks/worker.py`` drives it in its own
process, one phase per process:

    sys = SYSTEM()
    await sys.setup(workdir, fresh=True)        # (A) and (B): empty store in workdir
    await sys.write_turn(thread, i, user, asst)  # many times; durable on return
    await sys.close()
    n = await sys.bytes_on_disk()                # after close: checkpoint WAL, measure

    sys = SYSTEM()                               # (C): a new process
    await sys.setup(workdir, fresh=False)        # reopen what (A) wrote
    msgs = await sys.load(thread)                # every message text, in order
    await sys.close()

A module imports its library at module level: the worker times that import apart
from ``setup``, and an ImportError there reports the system as skipped.

All methods are coroutines so sync and async libraries share one driver; a sync
system just does its work inside ``async def`` (no thread hop, no hidden cost).

``durability()`` reports what the system was set to, measured from the live
connection where possible (e.g. ``PRAGMA synchronous``), so the output says where the
strongest setting could be set and where it could not.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any, ClassVar


class SkipSystem(Exception):
    """Raised by ``setup`` (or at import) when a system cannot run here; the message
    is shown in the results instead of figures."""


class System:
    #: short id, same as the module name (label and interpreter: systems/__init__.py)
    name: ClassVar[str] = ""

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        """Open the store in ``workdir`` (create it empty when ``fresh``), with the
        strongest durability the system allows."""
        raise NotImplementedError

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        """Append one user message and one assistant message to ``thread``.

        ``turn`` counts from 0 within the thread. On return both messages must be
        durable (committed and synced as far as the system allows)."""
        raise NotImplementedError

    async def load(self, thread: str) -> list[str]:
        """Every message text of ``thread``, oldest first."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release connections. Called before ``bytes_on_disk``."""

    async def bytes_on_disk(self) -> int:
        """Bytes the stored data takes, measured after ``close``."""
        raise NotImplementedError

    async def cleanup(self, workdir: Path) -> None:
        """Drop what the runs stored outside ``workdir`` (server-side tables); the driver
        deletes ``workdir`` itself. Called in its own process, without ``setup``."""

    def durability(self) -> dict[str, Any]:
        """``{"setting": str, "strongest": bool, "note": str}`` plus any measured values."""
        return {"setting": "unknown", "strongest": False, "note": ""}

    def versions(self) -> dict[str, str]:
        """Library versions that matter for this system."""
        return {}

    def remarks(self) -> list[str]:
        """How the system was driven and what shapes its figures (shown under the table)."""
        return []

    def bytes_by_object(self) -> dict[str, int]:
        """Bytes per table and index after ``bytes_on_disk`` (SQLite: ``dbstat``)."""
        return {}


# --- helpers shared by the SQLite-backed systems ----------------------------------------


def sqlite_pragmas(conn: Any) -> dict[str, Any]:
    """journal_mode, synchronous and wal_autocheckpoint of a live DB-API sqlite connection."""
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    pages = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    return {
        "journal_mode": str(journal).upper(),
        "synchronous": names.get(sync, str(sync)),
        "wal_autocheckpoint": int(pages),
    }


def sqlite_bytes(workdir: Path) -> int:
    """Checkpoint every SQLite database in ``workdir`` (TRUNCATE, so the WAL's content
    moves into the main file) and return the size of all files there, WAL included."""
    for p in workdir.iterdir():
        if p.suffix in {".db", ".sqlite"} and p.is_file():
            conn = sqlite3.connect(p)
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()
    return sum(p.stat().st_size for p in workdir.rglob("*") if p.is_file())


def sqlite_objects(workdir: Path) -> dict[str, int]:
    """Bytes (whole pages) per table and index of every SQLite database in ``workdir``,
    from the ``dbstat`` virtual table; empty when this SQLite lacks it."""
    out: dict[str, int] = {}
    for p in sorted(workdir.iterdir()):
        if p.suffix in {".db", ".sqlite"} and p.is_file():
            conn = sqlite3.connect(p)
            try:
                rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
                out.update({str(name): int(size) for name, size in rows})
            except sqlite3.Error:
                return {}
            finally:
                conn.close()
    return out


def reset_dir(workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    for p in workdir.iterdir():
        if p.is_file():
            p.unlink()


def pkg_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "missing"


POSTGRES_URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
