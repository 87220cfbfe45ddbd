"""tether on its embedded SQLite backend (one file). Provisional: see _tether.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, ClassVar

# Imported at module level, as the worker expects, so that import time is reported
# apart from setup/load: open_store would import the backend (and the crypto hook) lazily.
import tether.crypto._store
import tether.store.sqlite  # noqa: F401

from ._tether import TetherBase
from .base import reset_dir, sqlite_bytes


class TetherSqlite(TetherBase):
    name = "tether_sqlite"
    # TODO(tether): the SQLite backend's durability option (SPEC section 5 names
    # ``durability=``); the strongest setting should mean WAL + synchronous=FULL.
    store_options: ClassVar[dict[str, Any]] = {"durability": "full"}

    def url(self, workdir: Path) -> str:
        return f"sqlite:///{workdir / 'tether.db'}"

    async def reset(self, workdir: Path) -> None:
        reset_dir(workdir)

    async def bytes_on_disk(self) -> int:
        return sqlite_bytes(self.workdir)

    def durability(self) -> dict[str, Any]:
        d = super().durability()
        db = self.workdir / "tether.db"
        if db.exists():  # measured from a side connection: journal mode persists in the file
            c = sqlite3.connect(db)
            try:
                d["journal_mode"] = str(c.execute("PRAGMA journal_mode").fetchone()[0]).upper()
            finally:
                c.close()
        sync = " (synchronous=FULL)" if d["strongest"] else ""
        d["setting"] = f"{d.get('journal_mode', '?')}, {d['setting']}{sync}, commit per turn"
        return d

    def versions(self) -> dict[str, str]:
        return {**super().versions(), "sqlite": sqlite3.sqlite_version}


SYSTEM = TetherSqlite
