"""A LangGraph chat on ``DeltaChannel`` (the O(new messages) way): write time per turn
from turn 10 to 1,000, TetherSaver beside SqliteSaver.

    .venv/bin/python benchmarks/langgraph_delta.py                 # 1,000 turns
    .venv/bin/python benchmarks/langgraph_delta.py --turns 100     # quicker
    .venv/bin/python benchmarks/langgraph_delta.py --durability normal  # no fsync

The graph is the bench's (``systems/_langgraph.py``: one node that answers, one
``graph.invoke(..., durability="sync")`` per turn, messages of 200 bytes) with its
messages channel a ``DeltaChannel`` (LangGraph 1.2, default snapshot frequency) in
place of ``add_messages``. Both savers on SQLite, WAL, ``synchronous=FULL`` (or
``NORMAL`` with ``--durability normal``: each saver's own cost without the disk's
fsync, which moves the FULL figures by milliseconds), one after the other in this
process. Reported per window of turns (1-10, 91-100, 991-1000):
the median time of the whole ``invoke``, of the checkpointer's writes in it
(``put`` + ``put_writes``) and of its ``get_delta_channel_history`` (the channel's
rebuild from the writes since its last snapshot), and the bytes on disk per turn
over the whole run (WAL folded in by a TRUNCATE checkpoint). ``--json PATH`` writes
the figures.
"""

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "src"))

from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from systems import _langgraph as lg  # noqa: E402
from workload import turn_messages  # noqa: E402

from tether.adapters.langgraph import TetherSaver  # noqa: E402


def build(saver: Any) -> Any:
    """The bench's chat graph with its messages in a ``DeltaChannel``."""
    return lg.build(saver, lg.delta_state())


def windows(turns: int) -> list[tuple[int, int]]:
    out = [(1, 10), (91, 100), (turns - 9, turns)]
    return [w for i, w in enumerate(out) if w[0] >= 1 and w[1] <= turns and w not in out[:i]]


def _bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def run(kind: str, turns: int, folder: Path, durability: str = "full") -> dict[str, Any]:
    db = folder / f"{kind}.db"
    if kind == "tether":
        saver: Any = TetherSaver.from_url(f"sqlite:///{db}?durability={durability}")
    else:
        conn = sqlite3.connect(db, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={durability.upper()}")
        saver = SqliteSaver(conn)
    spent = {"writes": 0.0, "history": 0.0}
    for name, what in (
        ("put", "writes"),
        ("put_writes", "writes"),
        ("get_delta_channel_history", "history"),
    ):
        real = getattr(saver, name)

        def timed(*a: Any, _real: Any = real, _what: str = what, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return _real(*a, **k)
            finally:
                spent[_what] += time.perf_counter() - t

        setattr(saver, name, timed)
    graph = build(saver)
    cfg = {"configurable": {"thread_id": "delta"}}
    invoke_ms: list[float] = []
    write_ms: list[float] = []
    history_ms: list[float] = []
    for i in range(turns):
        user, assistant = turn_messages("delta", i)
        spent.update(writes=0.0, history=0.0)
        t = time.perf_counter()
        graph.invoke(
            {"messages": [HumanMessage(content=user)], "reply": assistant}, cfg, durability="sync"
        )
        invoke_ms.append((time.perf_counter() - t) * 1e3)
        write_ms.append(spent["writes"] * 1e3)
        history_ms.append(spent["history"] * 1e3)
    n = len(graph.get_state(cfg).values["messages"])
    # what the saver's own connection runs at (0 OFF, 1 NORMAL, 2 FULL)
    live = saver.store._conn if kind == "tether" else saver.conn
    synchronous = live.execute("PRAGMA synchronous").fetchone()[0]
    if kind == "tether":
        saver.close()
    else:
        saver.conn.close()
    return {
        "messages": n,
        "synchronous": synchronous,
        "bytes_per_turn": _bytes(db) / turns,
        "windows": {
            f"{a}-{b}": {
                "invoke_ms": statistics.median(invoke_ms[a - 1 : b]),
                "writes_ms": statistics.median(write_ms[a - 1 : b]),
                "history_ms": statistics.median(history_ms[a - 1 : b]),
            }
            for a, b in windows(turns)
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--turns", type=int, default=1000)
    p.add_argument("--durability", choices=["full", "normal"], default="full")
    p.add_argument("--json", default="", help="write the figures to this file")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            kind: run(kind, a.turns, Path(tmp), a.durability) for kind in ("tether", "sqlite")
        }
    names = {"tether": "TetherSaver", "sqlite": "SqliteSaver"}
    spans = list(results["tether"]["windows"])
    print(
        "| saver | "
        + " | ".join(f"turns {w}: invoke / writes / history ms" for w in spans)
        + " | bytes/turn |"
    )
    print("|---|" + "---:|" * (len(spans) + 1))
    for kind, r in results.items():
        cells = [
            " / ".join(
                f"{r['windows'][w][k]:.2f}" for k in ("invoke_ms", "writes_ms", "history_ms")
            )
            for w in spans
        ]
        print(
            f"| {names[kind]} | " + " | ".join(cells) + f" | {r['bytes_per_turn'] / 1024:.1f} KiB |"
        )
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
