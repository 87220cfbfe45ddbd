"""Benchmark: peak memory of a snapshot import against the file's size.

    .venv/bin/python benchmarks/import_memory.py                 # 10^6 nodes and 250 MB
    .venv/bin/python benchmarks/import_memory.py --nodes 10000 --mb 5 --dir /tmp/im

Writes two valid snapshots (streamed to disk, never held): one of ``--nodes`` tiny
nodes (a chain of goals ``{"i": n}``) and one of about ``--mb`` megabytes (nodes of
about 100 KB payload each). Each is then imported, in a fresh process, into a new
SQLite file (``tether import`` does the same) and checked without writing
(``tether verify --file``); the process reports its peak resident set
(``getrusage`` ``ru_maxrss``) and its resident set just before the import began
(the interpreter and tether's modules), so the difference is what the import
itself took. What the import must hold, whatever the file's size: the text of the
node being read (plus one 1 MiB read chunk), one batch of checked nodes (at most
1,000 nodes or about 2 MiB of payload), and the ids seen so far (to check parents
and duplicates: about 100 bytes an id in a Python set).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from tether.core.graph import SNAPSHOT_VERSION, make_node


def write_chain(path: Path, nodes: int, payload_bytes: int) -> dict[str, int]:
    """A valid snapshot of ``nodes`` goals, each the child of the one before; its sizes."""
    filler = "x" * max(0, payload_bytes - 20)
    largest = 0
    parent: tuple[str, ...] = ()
    with path.open("wb") as f:
        f.write(b'{"version":%d,"nodes":[' % SNAPSHOT_VERSION)
        for i in range(nodes):
            payload: dict[str, object] = {"i": i}
            if filler:
                payload["t"] = filler
            n = make_node(
                "goal",
                payload,
                parent,
                sequence=i + 1,
                created_at="2026-01-01T00:00:00.000Z",
            )
            text = orjson.dumps(n.to_dict())
            largest = max(largest, len(text))
            f.write(b"," + text if i else text)
            parent = (n.id,)
        f.write(b'],"frontier":' + orjson.dumps(list(parent)) + b"}")
    return {"bytes": path.stat().st_size, "nodes": nodes, "largest_node": largest}


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def child(mode: str, snapshot: str, db: str) -> None:
    """In a fresh process: import (or check) ``snapshot``; print the memory it took."""
    from tether.control.snapshot import check_snapshot_file, import_snapshot
    from tether.store import open_store

    async def run() -> int:
        if mode == "check":
            return check_snapshot_file(Path(snapshot)).nodes
        store = await open_store(f"sqlite:///{db}")
        try:
            done = await import_snapshot(store, "default", "thread:imported", Path(snapshot))
            return done.nodes
        finally:
            await store.close()

    before = _rss_kib()
    start = time.perf_counter()
    count = asyncio.run(run())
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"nodes": count, "before_kib": before, "peak_kib": peak, "s": seconds}))


def measure(mode: str, snapshot: Path, workdir: Path) -> dict[str, float]:
    db = workdir / f"import-{mode}.db"
    for p in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        p.unlink(missing_ok=True)
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(snapshot), str(db)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    r = json.loads(out.strip().splitlines()[-1])
    db.unlink(missing_ok=True)
    return {
        "peak_mib": r["peak_kib"] / 1024,
        "baseline_mib": r["before_kib"] / 1024,
        "import_mib": (r["peak_kib"] - r["before_kib"]) / 1024,
        "seconds": r["s"],
        "nodes": r["nodes"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1_000_000, help="nodes of the tiny-node file")
    ap.add_argument("--mb", type=float, default=250.0, help="size of the big file (10^6 bytes)")
    ap.add_argument("--node-kb", type=float, default=100.0, help="payload of the big file's nodes")
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "SNAPSHOT", "DB"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        work = Path(tmp)
        node_bytes = int(args.node_kb * 1000)
        files = {
            f"{args.nodes:,} tiny nodes": write_chain(work / "tiny.json", args.nodes, 0),
            f"{args.mb:g} MB": write_chain(
                work / "big.json", max(1, int(args.mb * 1e6 / (node_bytes + 150))), node_bytes
            ),
        }
        paths = dict(zip(files, (work / "tiny.json", work / "big.json"), strict=True))
        print(
            "| snapshot | file MB | nodes | largest node KB | mode | peak RSS MiB "
            "| of it, the import MiB | seconds |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, info in files.items():
            for mode in ("import", "check"):
                m = measure(mode, paths[name], work)
                print(
                    f"| {name} | {info['bytes'] / 1e6:.1f} | {info['nodes']:,} "
                    f"| {info['largest_node'] / 1e3:.1f} | {mode} | {m['peak_mib']:.0f} "
                    f"| {m['import_mib']:.0f} | {m['seconds']:.1f} |"
                )
                sys.stdout.flush()
            os.unlink(paths[name])


if __name__ == "__main__":
    main()
