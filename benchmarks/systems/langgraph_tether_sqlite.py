"""LangGraph with tether's ``TetherSaver`` on SQLite: the same compiled StateGraph as
``langgraph_sqlite`` (``_langgraph.py``), same ``invoke(durability="sync")``, with
``TetherSaver.from_url("sqlite:///...")`` in place of ``SqliteSaver``.

Runs in the peers venv beside ``langgraph_sqlite`` (same LangGraph, same interpreter),
with tether imported from this checkout's ``src/``, so the pair differs only in the
checkpointer."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import tether.crypto._store
import tether.store.sqlite  # noqa: F401
from tether.adapters.langgraph import TetherSaver

from . import _langgraph as lg
from .base import (
    System,
    pkg_version,
    reset_dir,
    sqlite_bytes,
    sqlite_objects,
    sqlite_pragmas,
)


class LangGraphTetherSqlite(System):
    name = "langgraph_tether_sqlite"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        self.workdir = workdir
        if fresh:
            reset_dir(workdir)
        # durability=full: WAL + synchronous=FULL, every commit fsynced (the default)
        self.saver = TetherSaver.from_url(f"sqlite:///{workdir / 'tether.db'}?durability=full")
        self.graph = lg.build(self.saver)
        conn = sqlite3.connect(workdir / "tether.db")
        try:
            self._pragmas = sqlite_pragmas(conn)
        finally:
            conn.close()
        store_conn = getattr(self.saver.store, "_conn", None)
        if store_conn is not None:
            self._pragmas["synchronous"] = sqlite_pragmas(store_conn)["synchronous"]

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        self.graph.invoke(
            lg.turn_input(user_msg, assistant_msg),
            lg.config(thread),
            durability="sync",
        )

    async def load(self, thread: str) -> list[str]:
        return lg.texts(self.graph, thread)

    async def close(self) -> None:
        self.saver.close()

    async def bytes_on_disk(self) -> int:
        return sqlite_bytes(self.workdir)

    def bytes_by_object(self) -> dict[str, int]:
        return sqlite_objects(self.workdir)

    def durability(self) -> dict[str, Any]:
        return {
            "setting": f"WAL, synchronous={self._pragmas['synchronous']}, durability='sync'",
            "strongest": True,
            "note": "TetherSaver.from_url(sqlite, durability=full); invoke(durability='sync')",
            **self._pragmas,
        }

    def versions(self) -> dict[str, str]:
        return {"langgraph": pkg_version("langgraph"), "sqlite": sqlite3.sqlite_version}

    def remarks(self) -> list[str]:
        return [
            "same graph and invoke as LangGraph SqliteSaver; a put serializes the changed "
            "channels as SqliteSaver does, but stores only the new messages (content-"
            "addressed list elements under a Merkle tree), so bytes per turn stay flat",
        ]


SYSTEM = LangGraphTetherSqlite
