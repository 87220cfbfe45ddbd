"""tether on its embedded SQLite backend (one file); how it is driven: _tether.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, ClassVar

import tether.crypto._store

# Imported at module level, as the worker expects, so that import time is reported
# apart from setup/load: open_store imports the backend, the crypto hook and, to
# refuse an encrypted file opened without a key, the SQLite key-table check lazily.
import tether.store._sqlite_keys
import tether.store.sqlite  # noqa: F401

from ._tether import TetherBase
from .base import reset_dir, sqlite_bytes, sqlite_objects, sqlite_pragmas


class TetherSqlite(TetherBase):
    name = "tether_sqlite"
    # WAL + synchronous=FULL (every commit fsynced); "full" is also the default.
    store_options: ClassVar[dict[str, Any]] = {"durability": "full"}

    def url(self, workdir: Path) -> str:
        return f"sqlite:///{workdir / 'tether.db'}"

    async def reset(self, workdir: Path) -> None:
        reset_dir(workdir)

    async def bytes_on_disk(self) -> int:
        return sqlite_bytes(self.workdir)

    def bytes_by_object(self) -> dict[str, int]:
        return sqlite_objects(self.workdir)

    def durability(self) -> dict[str, Any]:
        d = super().durability()
        conn = getattr(getattr(self, "store", None), "_conn", None)
        if conn is not None:  # measured on the store's own connection, while it is open
            d.update(sqlite_pragmas(conn))
        d["strongest"] = d["strongest"] and d.get("synchronous") == "FULL"
        d["setting"] = (
            f"{d.get('journal_mode', '?')}, synchronous={d.get('synchronous', '?')}, "
            f"wal_autocheckpoint={d.get('wal_autocheckpoint', '?')}, "
            f"{d['setting']}, commit per turn"
        )
        return d

    def versions(self) -> dict[str, str]:
        return {**super().versions(), "sqlite": sqlite3.sqlite_version}


SYSTEM = TetherSqlite
