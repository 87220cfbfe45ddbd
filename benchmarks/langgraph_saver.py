"""LangGraph saver benchmark: tether's TetherSaver beside LangGraph's own AsyncSqliteSaver.

    .venv/bin/python benchmarks/langgraph_saver.py              # 1,000 turns, a few minutes
    .venv/bin/python benchmarks/langgraph_saver.py --quick      # 100 turns, smoke run

One thread, one StateGraph over ``MessagesState`` (an ``add_messages`` channel)
with a single agent node answering from a scripted chat model: each turn
(``ainvoke``) adds a user message (~120 bytes) and an assistant message (~300
bytes) and LangGraph writes three checkpoints plus their pending writes. Both
savers run on SQLite in WAL mode, at the same durability: ``full``
(synchronous=FULL, every commit fsynced: both savers' default) and ``normal``
(synchronous=NORMAL, which shows each saver's own cost rather than the disk's).

Reported at turns 10, 100 and 1,000:

* **bytes on disk per turn**: the growth of the database file (WAL folded in by
  ``wal_checkpoint(TRUNCATE)``) over the turns of a window ending at that turn,
  divided by the turns in the window;
* **write time per turn**: the time spent inside the saver's ``aput`` and
  ``aput_writes`` during that turn (median over the window);
* the file size at the end.

Results go to ``benchmarks/out/langgraph_saver.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tether.adapters.langgraph import TetherSaver

OUT = Path(__file__).resolve().parent / "out" / "langgraph_saver.json"


def _replies() -> Iterator[AIMessage]:
    i = 0
    while True:
        i += 1
        yield AIMessage(
            content=f"Answer {i}: " + "the quick brown fox jumps over the lazy dog. " * 6,
            id=f"ai-{i}",
        )


def _graph(saver: BaseCheckpointSaver[Any]) -> Any:
    model = GenericFakeChatModel(messages=_replies())

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


def _disk_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _timed(saver: BaseCheckpointSaver[Any], spent: list[float]) -> None:
    """Count the time spent inside the saver's write methods."""
    for name in ("aput", "aput_writes"):
        inner: Callable[..., Awaitable[Any]] = getattr(saver, name)

        async def wrapper(*a: Any, _inner: Callable[..., Awaitable[Any]] = inner, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return await _inner(*a, **kw)
            finally:
                spent[0] += time.perf_counter() - t

        setattr(saver, name, wrapper)


async def _run(
    name: str, saver: BaseCheckpointSaver[Any], db: Path, turns: int, marks: list[int]
) -> dict[str, Any]:
    graph = _graph(saver)
    config = {"configurable": {"thread_id": "bench"}}
    spent = [0.0]
    _timed(saver, spent)
    windows = {m: range(max(1, m - max(2, min(10, m // 2)) + 1), m + 1) for m in marks}
    starts = {w.start - 1: m for m, w in windows.items()}
    size_at: dict[int, int] = {0: _disk_bytes(db)}
    times: dict[int, float] = {}
    for turn in range(1, turns + 1):
        if turn - 1 in starts:
            size_at[turn - 1] = _disk_bytes(db)
        spent[0] = 0.0
        await graph.ainvoke(
            {"messages": [HumanMessage(f"Question {turn}: " + "what about the weather? " * 4)]},
            config,
        )
        times[turn] = spent[0]
        if turn in windows:
            size_at[turn] = _disk_bytes(db)
    state = await graph.aget_state(config)
    assert len(state.values["messages"]) == 2 * turns
    result: dict[str, Any] = {
        "saver": name,
        "turns": turns,
        "final_bytes": _disk_bytes(db),
        "at": {},
    }
    for m, w in windows.items():
        grown = size_at[m] - size_at[w.start - 1]
        result["at"][str(m)] = {
            "bytes_per_turn": grown / len(w),
            "write_ms_per_turn": 1000 * statistics.median(times[t] for t in w),
        }
    return result


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="100 turns")
    ap.add_argument("--durability", choices=["full", "normal", "both"], default="both")
    args = ap.parse_args()
    turns = 100 if args.quick else args.turns
    marks = [m for m in (10, 100, 1000) if m <= turns]
    modes = ["full", "normal"] if args.durability == "both" else [args.durability]
    results = []
    for mode in modes:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "tether.db"
            async with await TetherSaver.afrom_url(f"sqlite:///{db}?durability={mode}") as saver:
                results.append(await _run(f"tether TetherSaver {mode}", saver, db, turns, marks))
            db = Path(tmp) / "langgraph.db"
            async with AsyncSqliteSaver.from_conn_string(str(db)) as lg:
                await lg.setup()
                await lg.conn.execute(f"PRAGMA synchronous={mode.upper()}")
                results.append(
                    await _run(f"langgraph AsyncSqliteSaver {mode}", lg, db, turns, marks)
                )
    out = {
        "benchmark": "langgraph_saver",
        "python": sys.version.split()[0],
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "results": results,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(f"{'saver':32} {'turn':>5} {'bytes/turn':>12} {'write ms/turn':>14}")
    for r in results:
        for m, v in r["at"].items():
            print(
                f"{r['saver']:32} {m:>5} {v['bytes_per_turn']:>12,.0f} {v['write_ms_per_turn']:>14.2f}"
            )
        print(f"{r['saver']:32} final file {r['final_bytes']:,} bytes after {r['turns']} turns")


if __name__ == "__main__":
    asyncio.run(main())
