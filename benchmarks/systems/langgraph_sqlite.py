"""LangGraph: a compiled StateGraph with a ``messages`` channel (add_messages), checkpointed
by SqliteSaver on a file, ``durability="sync"``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from . import _langgraph as lg
from .base import System, pkg_version, reset_dir, sqlite_bytes, sqlite_objects, sqlite_pragmas


class LangGraphSqlite(System):
    name = "langgraph_sqlite"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        self.workdir = workdir
        if fresh:
            reset_dir(workdir)
        # SqliteSaver takes the connection we give it, so durability is ours to set:
        # it turns WAL on itself in setup(); we add synchronous=FULL (SQLite's own
        # default is FULL too, set here explicitly so it is not left to the build).
        self.conn = sqlite3.connect(workdir / "langgraph.db", check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        self.graph = lg.build(self.saver)
        self._pragmas = sqlite_pragmas(self.conn)

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        self.graph.invoke(
            lg.turn_input(user_msg, assistant_msg),
            lg.config(thread),
            durability="sync",
        )

    async def load(self, thread: str) -> list[str]:
        return lg.texts(self.graph, thread)

    async def close(self) -> None:
        self.conn.close()

    async def bytes_on_disk(self) -> int:
        return sqlite_bytes(self.workdir)

    def bytes_by_object(self) -> dict[str, int]:
        return sqlite_objects(self.workdir)

    def durability(self) -> dict[str, Any]:
        return {
            "setting": f"WAL, synchronous={self._pragmas['synchronous']}, durability='sync'",
            "strongest": True,
            "note": "own sqlite3 connection handed to SqliteSaver; invoke(durability='sync')",
            **self._pragmas,
        }

    def versions(self) -> dict[str, str]:
        return {
            "langgraph": pkg_version("langgraph"),
            "langgraph-checkpoint-sqlite": pkg_version("langgraph-checkpoint-sqlite"),
            "sqlite": sqlite3.sqlite_version,
        }

    def remarks(self) -> list[str]:
        return [
            "one invoke per turn writes 3 checkpoints (input, step 0, step 1), each holding the "
            "whole messages list (add_messages is a BinaryOperatorAggregate channel), so bytes "
            "and latency grow with the history",
        ]


SYSTEM = LangGraphSqlite
