"""A long agent thread's cold load against its floor (issue 43).

    python benchmarks/cold_floor.py                 # 10,000 turns (make bench)
    python benchmarks/cold_floor.py --quick         # 50 turns, 1 run: a smoke run
    python benchmarks/cold_floor.py --turns 2000 --runs 5

Issue 43's goal: a thread of 10,000 turns loads cold in at most 1.3x the floor, the same
message rows read and decoded in bare Python.

* **the thread**: written by the agent of ``agent_turn.py --long`` (``Tether`` there, the
  whole buffer, the plain workload, seeded as its long run seeds: a ``Window`` agent at
  ``durability="normal"`` for all turns but the last, then one turn of the measured
  agent), ``--turns`` turns on thread ``h<turns>``: a native thread, each message naming
  its run. Built once and kept under ``benchmarks/out/cold_floor/`` (the file's name
  carries a digest of ``agent_turn.py``, the store's source and tether's version: any
  change of those builds it again); ``--rebuild`` builds it anyway. 10,000 turns take a
  few minutes to build.
* **cold load**: a fresh process (tether's modules imported before the clock) opens the
  store (``tether.open_store``) and takes the whole-buffer ``conversation_view`` of the
  thread; wall and CPU time from the open to the view.
* **floor**: a fresh process (``sqlite3`` and ``orjson`` imported before the clock)
  connects to the file, looks the thread's scope up and runs the SELECT ``Store.payloads``
  runs for it (``k & 0xFFFFFFFF, kind, payload`` of the scope's key range, ordered by
  ``k``; one statement, not pages of 1,000), decoding every payload with
  ``orjson.loads``: exactly the rows the view reads, nothing built of them.

The two alternate, ``--runs`` times each; figures are medians, and the ratio is cold load
/ floor (CPU and wall). Before timing, the view is checked to hold 2 messages a turn and
to equal the one projected from the thread's nodes (``store.nodes``, ``project``): the
run fails otherwise. ``--json FILE`` writes the figures; ``--update-readme`` rewrites the
README section between ``<!-- cold-floor:start -->`` and ``<!-- cold-floor:end -->``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import agent_turn  # noqa: E402

README = ROOT / "README.md"
START, END = "<!-- cold-floor:start -->", "<!-- cold-floor:end -->"
CACHE = BENCH / "out" / "cold_floor"
NS = "default"
GOAL = 1.3  # issue 43: cold load at most 1.3x the floor


def log(msg: str) -> None:
    print(f"[cold-floor] {msg}", file=sys.stderr, flush=True)


def thread_of(turns: int) -> str:
    return f"h{turns}"  # agent_turn.py's thread of that history


def digest() -> str:
    """What the cached file depends on: the agent that writes it, the store that lays it
    out, tether's version."""
    from importlib.metadata import version

    h = hashlib.sha256(version("tether").encode())
    for p in (
        BENCH / "agent_turn.py",
        ROOT / "src" / "tether" / "store" / "sqlite.py",
        ROOT / "src" / "tether" / "store" / "_sql.py",
        ROOT / "src" / "tether" / "store" / "_sqlite_keys.py",
    ):
        if p.exists():
            h.update(p.read_bytes())
    return h.hexdigest()[:12]


async def _build(path: Path, turns: int) -> None:
    sys_ = agent_turn.Tether(path, "plain", "buffer", fast_seed=True)
    await sys_.setup()
    try:
        await sys_.seed(thread_of(turns), turns)
    finally:
        await sys_.store.close()


def thread_file(turns: int, *, cache: Path, rebuild: bool) -> tuple[Path, bool]:
    """The file holding the thread of ``turns`` turns, built unless cached; (path, built)."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"thread-{turns}-{digest()}.db"
    if path.exists() and not rebuild:
        return path, False
    for old in cache.glob(f"thread-{turns}-*"):  # stale builds: another agent or store
        old.unlink()
    part = path.with_suffix(".part")
    for p in (part, Path(f"{part}-wal"), Path(f"{part}-shm")):
        p.unlink(missing_ok=True)
    log(f"building the thread: {turns:,} turns (agent_turn.py's long-run agent) ...")
    t = time.perf_counter()
    asyncio.run(_build(part, turns))
    wal = Path(f"{part}-wal")
    if wal.exists() and wal.stat().st_size:
        raise RuntimeError("the store closed with its WAL not checkpointed into the file")
    wal.unlink(missing_ok=True)
    Path(f"{part}-shm").unlink(missing_ok=True)
    part.rename(path)
    log(f"  built in {time.perf_counter() - t:.0f} s: {path}")
    return path, True


async def _check(path: Path, turns: int) -> dict[str, Any]:
    """The view holds 2 messages a turn and equals the one projected from the nodes."""
    import tether
    from tether.projections import conversation_view
    from tether.projections.projection import flatten, project
    from tether.projections.reads import read_nodes
    from tether.projections.view_cache import view_cache

    async with await tether.open_store(f"sqlite:///{path}") as store:
        view = await conversation_view(store, NS, thread_of(turns), llm="agent")
        scope = f"thread:{thread_of(turns)}"
        nodes = await read_nodes(store, NS, scope, after=0, before=view.head.sequence + 1)
        cache = view_cache(store)
        if cache is not None:
            cache.clear()
        rebuilt = flatten(project(nodes, llm="agent"))
        if list(view.messages) != rebuilt:
            raise SystemExit("the view is not the one projected from the thread's nodes")
        if len(view.messages) != 2 * turns:
            raise SystemExit(f"the view holds {len(view.messages)} messages, not {2 * turns}")
        kinds: dict[str, int] = {}
        for n in nodes:
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
    return {"messages": len(view.messages), "rows": len(nodes), "kinds": kinds}


COLD = r"""
import asyncio, gc, sys, time
import tether
import tether.projections.conversation, tether.projections.view_cache
import tether.store.sqlite
from tether.projections import conversation_view

async def main():
    gc.collect()
    t, c = time.perf_counter(), time.process_time()
    store = await tether.open_store(sys.argv[1])
    view = await conversation_view(store, "default", sys.argv[2], llm="agent")
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    await store.close()
    print(wall * 1e3, cpu * 1e3, len(view.messages))

asyncio.run(main())
"""

FLOOR = r"""
import gc, sqlite3, sys, time
import orjson

gc.collect()
t, c = time.perf_counter(), time.process_time()
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
(sid,) = conn.execute(
    "SELECT sid FROM tether_scopes WHERE ns = ? AND scope = ?", ("default", sys.argv[2])
).fetchone()
loads = orjson.loads
rows = [
    (seq, kind, loads(p))
    for seq, kind, p in conn.execute(
        "SELECT k & 4294967295, kind, payload FROM tether_nodes WHERE k > ? AND k <= ?"
        " ORDER BY k ASC",
        (sid << 32, (sid << 32) | 4294967295),
    )
]
wall, cpu = time.perf_counter() - t, time.process_time() - c
conn.close()
print(wall * 1e3, cpu * 1e3, len(rows))
"""


def measure(path: Path, turns: int, runs: int) -> dict[str, Any]:
    """Cold load and floor, alternating, ``runs`` times each, each in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    thread = thread_of(turns)
    got: dict[str, list[tuple[float, float, int]]] = {"cold": [], "floor": []}
    for _ in range(runs):
        for what, script, arg in (
            ("cold", COLD, thread),
            ("floor", FLOOR, f"thread:{thread}"),
        ):
            target = f"sqlite:///{path}" if what == "cold" else str(path)
            r = subprocess.run(
                [sys.executable, "-c", script, target, arg],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            wall, cpu, n = r.stdout.split()
            got[what].append((float(wall), float(cpu), int(n)))

    def med(g: list[tuple[float, float, int]]) -> dict[str, Any]:
        return {
            "wall_ms": round(statistics.median(w for w, _, _ in g), 2),
            "cpu_ms": round(statistics.median(c for _, c, _ in g), 2),
            "wall_samples_ms": [round(w, 2) for w, _, _ in g],
            "cpu_samples_ms": [round(c, 2) for _, c, _ in g],
            "count": g[0][2],
            "runs": len(g),
        }

    cold, floor = med(got["cold"]), med(got["floor"])
    return {
        "cold": cold,
        "floor": floor,
        "ratio": {
            "cpu": round(cold["cpu_ms"] / floor["cpu_ms"], 3),
            "wall": round(cold["wall_ms"] / floor["wall_ms"], 3),
        },
    }


def markdown(res: dict[str, Any]) -> str:
    def ok(x: float) -> str:
        return f"**{x:.2f}x**" + ("" if x <= GOAL else f" (over {GOAL}x)")

    c, f, r = res["cold"], res["floor"], res["ratio"]
    return "\n".join(
        [
            f"`{res['command']}`, {res['date']}, {res['machine']}:",
            "",
            "| a native agent thread | messages | rows read | cold load, ms (CPU; wall)"
            " | floor, ms (CPU; wall) | ratio, CPU | ratio, wall |",
            "|---|---:|---:|---:|---:|---:|---:|",
            f"| {res['turns']:,} turns | {c['count']:,} | {f['count']:,}"
            f" | {c['cpu_ms']:.1f}; {c['wall_ms']:.1f} | {f['cpu_ms']:.1f}; {f['wall_ms']:.1f}"
            f" | {ok(r['cpu'])} | {ok(r['wall'])} |",
            "",
            "Cold load: a fresh process opens the store and takes the whole-buffer"
            " `conversation_view` (imports before the clock). Floor: a fresh process with bare"
            " `sqlite3` and `orjson` runs the SELECT `Store.payloads` runs for the thread and"
            f" decodes every payload. Medians of {c['runs']} runs each, alternating; the"
            " thread is written by `agent_turn.py --long`'s agent.",
        ]
    )


def update_readme(section: str) -> None:
    import readme_section

    readme_section.replace(README, START, END, section)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="50 turns, 1 run: a smoke run")
    p.add_argument("--turns", type=int, default=agent_turn.LONG)
    p.add_argument("--runs", type=int, default=7, help="cold loads and floors each [7]")
    p.add_argument("--cache", type=Path, default=CACHE, help=argparse.SUPPRESS)
    p.add_argument("--rebuild", action="store_true", help="build the thread even if cached")
    p.add_argument("--json", type=Path, metavar="FILE")
    p.add_argument("--update-readme", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.turns, args.runs = 50, 1
    if args.turns < 1 or args.runs < 1:
        raise SystemExit("--turns and --runs are at least 1")
    started = time.perf_counter()
    path, built = thread_file(args.turns, cache=args.cache, rebuild=args.rebuild)
    held = asyncio.run(_check(path, args.turns))
    log(f"cold loads and floors: {args.runs} each")
    res = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benchmarks/cold_floor.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "turns": args.turns,
        "built": built,
        "file_bytes": path.stat().st_size,
        **held,
        **measure(path, args.turns, args.runs),
    }
    res["machine"] = f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    res["elapsed_s"] = round(time.perf_counter() - started, 1)
    for side in ("cold", "floor"):
        if res[side]["count"] != (held["messages"] if side == "cold" else held["rows"]):
            raise SystemExit(f"the {side} run read {res[side]['count']}: not the thread's")
    md = markdown(res)
    print(md)
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    if args.update_readme:
        update_readme(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
