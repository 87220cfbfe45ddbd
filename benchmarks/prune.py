"""A long thread after compact + prune against a fresh thread of the same messages.

    python benchmarks/prune.py                  # 1,000 turns, keeping 100 messages
    python benchmarks/prune.py --quick          # smoke run, a few seconds
    python benchmarks/prune.py --turns 10000    # a longer history
    python benchmarks/prune.py --turns 1000,10000 --forget-runs   # make bench, README

Issue 43's goal: after compact + prune keeping 100 messages, the file and a cold load
at most 1.2x a fresh thread holding the same 100 messages.

* **long**: one agent (``tether.Agent``, ``Spec.single()``: the whole buffer, a
  ``ScriptedModel`` answering 150 bytes to 150-byte user messages) runs ``--turns``
  turns on one thread of a SQLite file of its own; then
  ``compact_state(strategy="recent", max_messages=--keep)`` and
  ``prune(keep_versions=1, finished_before=<now>)``: what the summary stands for, the
  index entries of the runs cut and the old versions of the rest go. With
  ``--forget-runs`` a copy of the compacted file is also pruned with
  ``forget_runs=True`` (the record keeps no 8-byte tag per run cut) and measured alike.
* **fresh**: the same agent runs the last ``--keep / 2`` turns (the same user
  messages) on a thread of a new file: what a user who started there would hold.

``--turns`` takes a list (``1000,10000``): one case each, one table. 10,000 turns take
about 2 minutes of CPU to build (the script 4 to 6 minutes' wall on 2 loaded cores).

Both views are checked to hold the same messages (the run fails otherwise). Measured:
each file's size (closed: the WAL checkpointed into it), its nodes (by kind) and
payload bytes, and a cold load: a new process opens the store and reads the
conversation view (``conversation_view``, the whole buffer), timed from the open to the
view (imports aside), wall and CPU time, median of ``--cold-runs``, the two files
alternating. ``--json FILE`` writes the figures; ``--update-readme`` rewrites the README
section between ``<!-- prune-bench:start -->`` and ``<!-- prune-bench:end -->``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
README = ROOT / "README.md"
START, END = "<!-- prune-bench:start -->", "<!-- prune-bench:end -->"
NS, THREAD = "default", "t"
ANSWER = ("It is sunny in Paris. " * 10)[:150]
GOAL = 1.2  # issue 43: file and cold load at most 1.2x the fresh thread's


def user_message(turn: int) -> str:
    return (f"[user #{turn}] What is the weather in Paris? " + "x" * 200)[:150]


def log(msg: str) -> None:
    print(f"[prune] {msg}", file=sys.stderr, flush=True)


def file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


async def build(path: Path, first: int, last: int, *, keep: int | None) -> dict[str, Any]:
    """Turns ``first`` .. ``last - 1`` on a new file; with ``keep``, compacted to it."""
    import tether
    from tether.models import Rule

    out: dict[str, Any] = {"turns": last - first}
    async with await tether.open_store(f"sqlite:///{path}", durability="normal") as store:
        agent = tether.Agent(
            tether.Spec.single(),
            tether.ScriptedModel([Rule(match=None, answer=ANSWER)], keep_requests=0),
            store=store,
        )
        t = time.perf_counter()
        for k in range(first, last):
            r = await agent.step(user_message(k), thread=THREAD)
            if r.answer != ANSWER:
                raise AssertionError(f"unexpected answer {r.answer!r}")
        out["build_s"] = round(time.perf_counter() - t, 2)
        if keep is not None:
            await agent.compact_state(THREAD, strategy="recent", max_messages=keep)
    return out


async def prune_and_measure(path: Path, *, forget_runs: bool | None) -> dict[str, Any]:
    """Prune the thread of ``path`` (None: leave it as it is), then say what it holds."""
    import tether
    from tether.control.prune import prune
    from tether.core.canonical import canonical_json
    from tether.projections import conversation_view

    out: dict[str, Any] = {}
    async with await tether.open_store(f"sqlite:///{path}", durability="normal") as store:
        if forget_runs is not None:
            now = dt.datetime.now(dt.UTC).isoformat()
            t = time.perf_counter()
            done = await prune(
                store,
                NS,
                thread=THREAD,
                keep_versions=1,
                finished_before=now,
                forget_runs=forget_runs,
            )
            out["prune_ms"] = round((time.perf_counter() - t) * 1e3, 1)
            out["prune"] = done.to_dict()
        nodes = await store.nodes(NS, f"thread:{THREAD}", limit=10_000_000)
        kinds: dict[str, list[int]] = {}
        for n in nodes:
            what = n.kind if n.resource_key is None else f"{n.kind} {n.resource_key.split(':')[0]}"
            c = kinds.setdefault(what, [0, 0])
            c[0] += 1
            c[1] += len(canonical_json(n.payload))
        out["nodes"] = len(nodes)
        out["payload_bytes"] = sum(b for _, b in kinds.values())
        out["kinds"] = {k: {"nodes": c, "payload_bytes": b} for k, (c, b) in sorted(kinds.items())}
        view = await conversation_view(store, NS, THREAD, llm="agent")
        out["messages"] = [m.get("content") for m in view.messages]
        runs = await tether.control.tasks.runs(store, namespace=NS, thread=THREAD, limit=10_000)
        out["runs_listed"] = len(runs.runs)
    out["file_bytes"] = file_bytes(path)
    return out


COLD = r"""
import asyncio, sys, time
import tether
from tether.projections import conversation_view

async def main():
    t, c = time.perf_counter(), time.process_time()
    async with await tether.open_store(sys.argv[1]) as store:
        view = await conversation_view(store, "default", "t", llm="agent")
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    print(wall * 1e3, cpu * 1e3, len(view.messages))

asyncio.run(main())
"""


def cold(paths: list[Path], runs: int) -> list[dict[str, Any]]:
    """A cold load of each file in a new process, ``runs`` times, the files alternating."""
    got: list[list[tuple[float, float, int]]] = [[] for _ in paths]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for _ in range(runs):
        for i, p in enumerate(paths):
            r = subprocess.run(
                [sys.executable, "-c", COLD, f"sqlite:///{p}"],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            wall, cpu, n = r.stdout.split()
            got[i].append((float(wall), float(cpu), int(n)))
    return [
        {
            "wall_ms": round(statistics.median(w for w, _, _ in g), 2),
            "cpu_ms": round(statistics.median(c for _, c, _ in g), 2),
            "messages": g[0][2],
            "runs": len(g),
        }
        for g in got
    ]


def run(
    turns: int, keep: int, cold_runs: int, tmp: Path, *, forget_runs: bool = False
) -> list[dict[str, Any]]:
    """One long thread of ``turns`` turns, compacted, then pruned (and, ``forget_runs``,
    a copy pruned forgetting the runs): a case for each prune, against one fresh thread."""
    if keep % 2 or not 0 < keep <= 2 * turns:
        raise SystemExit("--keep is an even number of messages, at most two a turn")
    compacted, fresh_p = tmp / f"compacted-{turns}.db", tmp / f"fresh-{turns}.db"
    log(f"long: {turns} turns, compact to {keep} messages")
    built = asyncio.run(build(compacted, 0, turns, keep=keep))
    paths = {False: tmp / f"long-{turns}.db"}
    if forget_runs:
        paths[True] = tmp / f"long-{turns}-forget.db"
    longs: dict[bool, dict[str, Any]] = {}
    for forget, path in paths.items():
        shutil.copyfile(compacted, path)  # closed: the WAL is in the file
        log(f"prune{' (forget_runs)' if forget else ''}")
        longs[forget] = {**built, **asyncio.run(prune_and_measure(path, forget_runs=forget))}
    log(f"fresh: the last {keep // 2} turns on a new thread")
    fresh = asyncio.run(build(fresh_p, turns - keep // 2, turns, keep=None))
    fresh.update(asyncio.run(prune_and_measure(fresh_p, forget_runs=None)))
    for long in longs.values():
        if long["messages"] != fresh["messages"] or len(fresh["messages"]) != keep:
            raise SystemExit("the pruned thread's view is not the fresh thread's: no comparison")
    log(f"cold loads: {cold_runs} each")
    colds = cold([*paths.values(), fresh_p], cold_runs)
    fresh["cold"] = colds[-1]
    fresh["messages"] = len(fresh["messages"])
    out = []
    for (forget, long), c in zip(longs.items(), colds, strict=False):
        long["cold"], long["messages"] = c, len(long["messages"])
        out.append(
            {
                "turns": turns,
                "keep_messages": keep,
                "forget_runs": forget,
                "long": long,
                "fresh": fresh,
                "ratio": {
                    "file": round(long["file_bytes"] / fresh["file_bytes"], 3),
                    "cold_wall": round(long["cold"]["wall_ms"] / fresh["cold"]["wall_ms"], 3),
                    "cold_cpu": round(long["cold"]["cpu_ms"] / fresh["cold"]["cpu_ms"], 3),
                },
            }
        )
    return out


def markdown(res: dict[str, Any]) -> str:
    def ok(x: float) -> str:
        return f"{x:.2f}x" + ("" if x <= GOAL else " (over 1.2x)")

    keep = res["keep_messages"]
    rows = [
        f"`{res['command']}`, {res['date']}, {res['machine']}:",
        "",
        f"| compacted to {keep} messages and pruned | file: pruned / fresh"
        f" ({keep // 2} turns) | ratio | cold load: pruned / fresh | ratio | CPU time ratio"
        " | prune record | nodes held: pruned / fresh | runs listed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for case in res["cases"]:
        lo, fr, ra = case["long"], case["fresh"], case["ratio"]
        record = lo["kinds"].get("resource prune", {"payload_bytes": 0})["payload_bytes"]
        what = f"{case['turns']:,} turns" + (", forget_runs" if case["forget_runs"] else "")
        rows.append(
            f"| {what} | {lo['file_bytes'] / 1024:.0f} / {fr['file_bytes'] / 1024:.0f} KiB"
            f" | {ok(ra['file'])} | {lo['cold']['wall_ms']:.1f} / {fr['cold']['wall_ms']:.1f} ms"
            f" | {ok(ra['cold_wall'])} | {ok(ra['cold_cpu'])} | {record / 1024:.1f} KiB"
            f" | {lo['nodes']:,} / {fr['nodes']:,} | {lo['runs_listed']:,} |"
        )
        cut = lo["prune"]
        notes.append(
            f"{what}: the prune cut {cut['nodes']:,} nodes ({cut['payload_bytes'] / 1024:,.0f}"
            f" KiB of payloads) and {cut.get('runs', 0):,} runs in {lo['prune_ms']:,.0f} ms."
        )
    cold_runs = res["cases"][0]["long"]["cold"]["runs"]
    return "\n".join(
        [
            *rows,
            "",
            "File: the SQLite file, closed. Cold load: a new process opens the store and reads"
            f" the whole-buffer view (wall time, median of {cold_runs}; its CPU time's ratio"
            " beside). Prune record: its payload, which keeps an 8-byte tag for each run cut"
            " unless forget_runs. " + " ".join(notes),
        ]
    )


def update_readme(section: str) -> None:
    import readme_section

    readme_section.replace(README, START, END, section)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="60 turns, 20 messages: a smoke run")
    p.add_argument(
        "--turns",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[1000],
        help="turns of the long thread; a comma-separated list runs a case for each",
    )
    p.add_argument(
        "--forget-runs",
        action="store_true",
        help="also prune a copy with forget_runs=True (no run tags in the record)",
    )
    p.add_argument("--keep", type=int, default=100, help="messages kept by the compaction")
    p.add_argument("--cold-runs", type=int, default=5)
    p.add_argument("--json", type=Path, metavar="FILE")
    p.add_argument("--update-readme", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.turns, args.keep, args.cold_runs = [60], 20, 1
    tmp = Path(tempfile.mkdtemp(prefix="tether-prune-bench-"))
    started = time.perf_counter()
    cases: list[dict[str, Any]] = []
    try:
        for turns in args.turns:
            cases += run(turns, args.keep, args.cold_runs, tmp, forget_runs=args.forget_runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benchmarks/prune.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "elapsed_s": round(time.perf_counter() - started, 1),
        "keep_messages": args.keep,
        "cases": cases,
    }
    md = markdown(res)
    print(md)
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    if args.update_readme:
        update_readme(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
