"""Runs one phase of the workload for one system, in this (fresh) process.

    python benchmarks/worker.py PHASE --system NAME --workdir DIR --out FILE [options]

PHASE is ``write`` (A: one thread, N turns, per-turn latency), ``load`` (C: reopen and
read the thread written by A, check order) or ``threads`` (B: T threads x K turns,
round-robin). The result is one JSON object written to ``--out``; run.py collects it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import platform
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from systems.base import SkipSystem, System
from workload import THREAD_A, expected, thread_name, turn_messages


def _rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


async def phase_write(sys_: System, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    await sys_.setup(Path(args.workdir), fresh=True)
    setup_s = time.perf_counter() - t0
    lat: list[float] = []
    cpu: list[float] = []  # process time: what a loaded machine barely moves
    capped = False
    start = time.perf_counter()
    for i in range(args.turns):
        u, a = turn_messages(THREAD_A, i)
        c = time.process_time()
        t = time.perf_counter()
        await sys_.write_turn(THREAD_A, i, u, a)
        lat.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        if args.budget and time.perf_counter() - start > args.budget and i + 1 < args.turns:
            capped = True
            break
    total = time.perf_counter() - start
    dur = sys_.durability()
    await sys_.close()
    nbytes = await sys_.bytes_on_disk()
    return {
        "setup_ms": setup_s * 1e3,
        "turns": len(lat),
        "turns_requested": args.turns,
        "capped": capped,
        "total_s": total,
        "latencies_ms": [x * 1e3 for x in lat],
        "cpu_ms": [x * 1e3 for x in cpu],
        "bytes": nbytes,
        "bytes_per_turn": nbytes / max(1, len(lat)),
        "bytes_by_object": sys_.bytes_by_object(),
        "durability": dur,
        "versions": sys_.versions(),
        "remarks": sys_.remarks(),
        "rss_mib": _rss_mib(),
    }


async def phase_load(sys_: System, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    await sys_.setup(Path(args.workdir), fresh=False)
    t1 = time.perf_counter()
    c1 = time.process_time()
    msgs = await sys_.load(THREAD_A)
    c2 = time.process_time()
    t2 = time.perf_counter()
    await sys_.close()
    want = expected(THREAD_A, args.turns)
    mismatch = next((k for k, (x, y) in enumerate(zip(msgs, want, strict=False)) if x != y), None)
    return {
        "open_ms": (t1 - t0) * 1e3,
        "load_ms": (t2 - t1) * 1e3,
        "load_cpu_ms": (c2 - c1) * 1e3,
        "total_ms": (t2 - t0) * 1e3,
        "messages": len(msgs),
        "expected": len(want),
        "in_order": len(msgs) == len(want) and mismatch is None,
        "first_mismatch": mismatch,
        "rss_mib": _rss_mib(),
    }


async def phase_threads(sys_: System, args: argparse.Namespace) -> dict[str, Any]:
    await sys_.setup(Path(args.workdir), fresh=True)
    names = [thread_name(k) for k in range(args.threads)]
    done = 0
    capped = False
    c0 = time.process_time()
    start = time.perf_counter()
    for i in range(args.threads_turns):
        for name in names:
            u, a = turn_messages(name, i)
            await sys_.write_turn(name, i, u, a)
            done += 1
        if args.budget and time.perf_counter() - start > args.budget:
            capped = i + 1 < args.threads_turns
            break
    total = time.perf_counter() - start
    cpu_s = time.process_time() - c0
    await sys_.close()
    nbytes = await sys_.bytes_on_disk()
    return {
        "cpu_s": cpu_s,
        "cpu_turns_per_s": done / cpu_s if cpu_s else None,
        "threads": args.threads,
        "turns_per_thread": args.threads_turns,
        "turns": done,
        "capped": capped,
        "total_s": total,
        "turns_per_s": done / total if total else None,
        "bytes": nbytes,
        "bytes_per_turn": nbytes / max(1, done),
        "rss_mib": _rss_mib(),
    }


async def phase_cleanup(sys_: System, args: argparse.Namespace) -> dict[str, Any]:
    await sys_.cleanup(Path(args.workdir))
    return {}


PHASES = {
    "write": phase_write,
    "load": phase_load,
    "threads": phase_threads,
    "cleanup": phase_cleanup,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("phase", choices=sorted(PHASES))
    p.add_argument("--system", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--turns", type=int, default=1000)
    p.add_argument("--threads", type=int, default=200)
    p.add_argument("--threads-turns", type=int, default=20)
    p.add_argument("--budget", type=float, default=0.0, help="seconds; 0 = no cap")
    args = p.parse_args(argv)

    result: dict[str, Any] = {
        "system": args.system,
        "phase": args.phase,
        "python": platform.python_version(),
        "executable": sys.executable,
    }
    try:
        t = time.perf_counter()
        mod = importlib.import_module(f"systems.{args.system}")
        result["import_ms"] = (time.perf_counter() - t) * 1e3
        sys_: System = mod.SYSTEM()
        gc.collect()
        result.update(asyncio.run(PHASES[args.phase](sys_, args)))
    except SkipSystem as e:
        result["skipped"] = str(e)
    except ImportError as e:
        result["skipped"] = f"cannot import: {e}"
    except Exception as e:
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()
    Path(args.out).write_text(json.dumps(result))
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
