"""Pydantic AI's harness stores on SQLite beside tether's, in one run: a run's write, a
cold load, bytes per turn.

    .venv/bin/python benchmarks/pydantic_ai_stores.py               # 200 turns
    .venv/bin/python benchmarks/pydantic_ai_stores.py --turns 50    # quicker

Two pairs, each advanced in lockstep (turn i of one store, then turn i of the other),
so machine load falls on both alike:

* **StepStore**: a chat of ``--turns`` turns, each one ``Agent.run`` (``FunctionModel``
  answering 200 bytes to a 200-byte prompt, ``StepPersistence`` with its own run id,
  the chat's ``conversation_id``, the history so far as ``message_history``), on the
  harness's ``SqliteStepStore`` and on ``TetherStepStore`` over tether's SQLite store.
  Per window of turns (first 10, last 10): the median time the run spent in the store
  (every ``StepStore`` call of the run, timed at the protocol) and of the whole run.
  Cold load: ``latest_snapshot`` of the last run on a store object opened afresh (the
  file in the OS cache), median of 7, the two stores alternating. Bytes per turn: the
  file (WAL folded in by a TRUNCATE checkpoint) over the turns.
* **MemoryStore**: ``--turns`` compare-and-set writes, each appending a 200-byte line to
  one notebook file (as the ``Memory`` capability's ``write_memory`` appends), on the
  harness's ``SqliteMemoryStore`` and on ``TetherMemoryStore``: median write time per
  window, a cold ``read`` of the file, bytes per write.

Both stores fsync as they do by default (WAL, ``synchronous=FULL``: the harness sets
no pragma, tether's default durability is full). ``--json PATH`` writes the figures.
"""

from __future__ import annotations

import argparse
import asyncio
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

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai_harness.memory import SqliteMemoryStore  # noqa: E402
from pydantic_ai_harness.step_persistence import SqliteStepStore, StepPersistence  # noqa: E402
from workload import turn_messages  # noqa: E402

from tether.adapters.pydantic_ai import TetherMemoryStore, TetherStepStore  # noqa: E402
from tether.store import open_store  # noqa: E402

_STEP_METHODS = (
    "register_run",
    "get_run",
    "list_runs",
    "append_event",
    "list_events",
    "save_snapshot",
    "latest_snapshot",
    "record_tool_effect",
    "get_tool_effect",
    "list_unresolved_tool_effects",
)


class Timed:
    """A ``StepStore`` that forwards every call and adds up the time spent in it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.spent = 0.0
        for name in _STEP_METHODS:
            setattr(self, name, self._wrap(getattr(inner, name)))

    def _wrap(self, fn: Any) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - t

        return call


def _bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _windows(turns: int) -> list[tuple[int, int]]:
    out = [(1, 10), (turns - 9, turns)]
    return [w for i, w in enumerate(out) if w[0] >= 1 and w not in out[:i]]


def _median_ms(values: list[float], window: tuple[int, int]) -> float:
    return round(statistics.median(values[window[0] - 1 : window[1]]) * 1000, 3)


def _model(turn: list[int]) -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(turn_messages("pai", turn[0])[1])])

    return FunctionModel(answer)


async def steps(turns: int, folder: Path) -> dict[str, Any]:
    harness_db = folder / "harness-steps.sqlite3"
    tether_db = folder / "tether-steps.db"
    tstore = await open_store(f"sqlite:///{tether_db}")
    stores = {
        "harness SqliteStepStore": Timed(SqliteStepStore(database=harness_db)),
        "tether TetherStepStore": Timed(TetherStepStore(tstore)),
    }
    turn = [0]
    history: dict[str, list[ModelMessage] | None] = dict.fromkeys(stores)
    store_s: dict[str, list[float]] = {k: [] for k in stores}
    run_s: dict[str, list[float]] = {k: [] for k in stores}
    for i in range(turns):
        turn[0] = i
        for name, timed in stores.items():
            agent: Agent[None, str] = Agent(
                _model(turn),
                capabilities=[StepPersistence(store=timed, run_id=f"t{i}")],  # type: ignore[arg-type]
            )
            timed.spent = 0.0
            t = time.perf_counter()
            r = await agent.run(
                turn_messages("pai", i)[0], message_history=history[name], conversation_id="chat"
            )
            run_s[name].append(time.perf_counter() - t)
            store_s[name].append(timed.spent)
            history[name] = r.all_messages()
    await tstore.close()
    last = f"t{turns - 1}"
    cold_s: dict[str, list[float]] = {k: [] for k in stores}
    for _ in range(7):  # the pair alternates, so load falls on both alike
        for name in stores:
            t = time.perf_counter()
            if name.startswith("harness"):
                snap = await SqliteStepStore(database=harness_db).latest_snapshot(run_id=last)
            else:
                s = await open_store(f"sqlite:///{tether_db}")
                snap = await TetherStepStore(s).latest_snapshot(run_id=last)
            cold_s[name].append(time.perf_counter() - t)
            if not name.startswith("harness"):
                await s.close()
            assert snap is not None and snap.messages == history[name]
    cold = {k: round(statistics.median(v) * 1000, 3) for k, v in cold_s.items()}
    sizes = {
        "harness SqliteStepStore": _bytes(harness_db),
        "tether TetherStepStore": _bytes(tether_db),
    }
    return {
        name: {
            "store_ms": {f"{a}-{b}": _median_ms(store_s[name], (a, b)) for a, b in _windows(turns)},
            "run_ms": {f"{a}-{b}": _median_ms(run_s[name], (a, b)) for a, b in _windows(turns)},
            "cold_load_ms": cold[name],
            "bytes_per_turn": round(sizes[name] / turns),
            "messages": len(history[name] or []),
        }
        for name in stores
    }


async def memory(turns: int, folder: Path) -> dict[str, Any]:
    harness_db = folder / "harness-memory.sqlite3"
    tether_db = folder / "tether-memory.db"
    tstore = await open_store(f"sqlite:///{tether_db}")
    stores: dict[str, Any] = {
        "harness SqliteMemoryStore": SqliteMemoryStore(database=harness_db),
        "tether TetherMemoryStore": TetherMemoryStore(tstore),
    }
    version: dict[str, str | None] = dict.fromkeys(stores)
    text: dict[str, str] = dict.fromkeys(stores, "")
    write_s: dict[str, list[float]] = {k: [] for k in stores}
    for i in range(turns):
        line = turn_messages("memory", i)[0] + "\n"
        for name, ms in stores.items():
            t = time.perf_counter()
            current = await ms.read("MEMORY.md", max_chars=10_000_000)
            content = (current.content if current else "") + line
            m = await ms.write("MEMORY.md", content, expected_version=version[name])
            write_s[name].append(time.perf_counter() - t)
            version[name], text[name] = m.version, content
    await tstore.close()
    cold_s: dict[str, list[float]] = {k: [] for k in stores}
    for _ in range(7):
        for name in stores:
            t = time.perf_counter()
            if name.startswith("harness"):
                f = await SqliteMemoryStore(database=harness_db).read("MEMORY.md", max_chars=10**7)
            else:
                s = await open_store(f"sqlite:///{tether_db}")
                f = await TetherMemoryStore(s).read("MEMORY.md", max_chars=10**7)
            cold_s[name].append(time.perf_counter() - t)
            if not name.startswith("harness"):
                await s.close()
            assert f is not None and f.content == text[name]
    cold = {k: round(statistics.median(v) * 1000, 3) for k, v in cold_s.items()}
    sizes = {
        "harness SqliteMemoryStore": _bytes(harness_db),
        "tether TetherMemoryStore": _bytes(tether_db),
    }
    return {
        name: {
            "write_ms": {f"{a}-{b}": _median_ms(write_s[name], (a, b)) for a, b in _windows(turns)},
            "cold_read_ms": cold[name],
            "bytes_per_write": round(sizes[name] / turns),
        }
        for name in stores
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--turns", type=int, default=200)
    p.add_argument("--json", default="", help="write the figures to this file")
    args = p.parse_args(argv)
    if args.turns < 10:
        p.error("--turns: at least 10")
    with tempfile.TemporaryDirectory() as tmp:
        out = {
            "turns": args.turns,
            "step_store": asyncio.run(steps(args.turns, Path(tmp))),
            "memory_store": asyncio.run(memory(args.turns, Path(tmp))),
        }
    for section in ("step_store", "memory_store"):
        print(section)
        for name, figures in out[section].items():
            print(f"  {name:28} {json.dumps(figures)}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
