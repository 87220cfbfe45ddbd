"""The SQLite store's write statement on other row layouts, in bare sqlite3 (issue 40).

    python benchmarks/layout_sql.py [--runs 2]

Each layout gets a fresh file (WAL, ``synchronous=NORMAL``: CPU, not the disk) and the
store's own commit for a turn of two 200-byte nodes: the head read, then one INSERT of
both rows that checks the scope's generation and last row key in its WHERE (as
``tether.store.sqlite._checked_insert``). One thread x 1,000 turns, and 200 threads x
20 turns round-robin. Printed: CPU per turn and WAL frames (pages) per commit
(``wal_autocheckpoint=0``: every frame the turns wrote). Layouts:

* ``k``: schema 3 (the row key ``sid << 32 | sequence`` is the rowid; the content-id
  index ``(k >> 32, id)``; the resource-key index);
* ``append``: rows appended in commit order (a rowid of their own), the row key in a
  unique index;
* ``noid``: schema 3 without the content-id index (what it costs; not a layout the
  store could use: look-ups by id and the duplicate rule need it).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import tempfile
import time
from pathlib import Path

LAYOUTS = ("k", "append", "noid")
PAYLOAD = b'{"role":"user","content":"' + b"x" * 200 + b'"}'
COLS = "k, id, kind, parents, created_at, rkey, frontier, payload"
NODE = "id BLOB NOT NULL, kind INTEGER NOT NULL, parents BLOB NOT NULL, created_at NOT NULL,"
NODE += " rkey TEXT, frontier BLOB, payload BLOB NOT NULL"
INSERT = (
    f"INSERT INTO tether_nodes ({COLS}) SELECT * FROM (VALUES (?,?,?,?,?,?,?,?),"
    " (?,?,?,?,?,?,?,?)) WHERE (SELECT generation FROM tether_scopes WHERE sid = ?) = ?"
    " AND (SELECT k FROM tether_nodes WHERE k BETWEEN ? AND ? ORDER BY k DESC LIMIT 1) IS ?"
)
HEAD = (
    "SELECT k, id, frontier, (SELECT generation FROM tether_scopes WHERE sid = ?)"
    " FROM tether_nodes WHERE k BETWEEN ? AND ? ORDER BY k DESC LIMIT 1"
)


def run(layout: str, workload: str, folder: Path) -> tuple[float, float]:
    path = folder / f"{layout}.{workload}.db"
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=NORMAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute("CREATE TABLE tether_scopes (sid INTEGER PRIMARY KEY, generation INTEGER)")
    if layout == "append":
        c.execute(f"CREATE TABLE tether_nodes (r INTEGER PRIMARY KEY, k INTEGER NOT NULL, {NODE})")
        c.execute("CREATE UNIQUE INDEX tether_nodes_k ON tether_nodes (k)")
    else:
        c.execute(f"CREATE TABLE tether_nodes (k INTEGER PRIMARY KEY, {NODE})")
    if layout != "noid":
        c.execute("CREATE UNIQUE INDEX tether_nodes_id ON tether_nodes (k >> 32, id)")
    c.execute(
        "CREATE INDEX tether_nodes_rkey ON tether_nodes (k >> 32, rkey) WHERE rkey IS NOT NULL"
    )
    if workload == "single":
        seq = [(1, i) for i in range(1000)]
    else:
        seq = [(t + 1, i) for i in range(20) for t in range(200)]
    c.executemany(
        "INSERT INTO tether_scopes VALUES (?, 0)", [(s,) for s in sorted({s for s, _ in seq})]
    )
    ids = [
        (hashlib.sha256(b"%d-%d-a" % t).digest()[:12], hashlib.sha256(b"%d-%d-b" % t).digest()[:12])
        for t in seq
    ]
    wal0 = os.path.getsize(f"{path}-wal")
    t0 = time.process_time()
    for (sid, i), (a, b) in zip(seq, ids, strict=True):
        base = sid << 32
        c.execute(HEAD, (sid, base, base | 0xFFFFFFFF)).fetchone()
        row_a = (base | (2 * i + 1), a, 1, b"", 1, None, None, PAYLOAD)
        row_b = (base | (2 * i + 2), b, 8, a, 1, None, b"", PAYLOAD)
        check = (sid, 0, base, base | 0xFFFFFFFF, None if i == 0 else base | (2 * i))
        c.execute(INSERT, (*row_a, *row_b, *check))
    cpu = (time.process_time() - t0) / len(seq) * 1e6
    page = c.execute("PRAGMA page_size").fetchone()[0]
    frames = (os.path.getsize(f"{path}-wal") - max(wal0, 32)) / (page + 24) / len(seq)
    c.close()
    return cpu, frames


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=2)
    a = p.parse_args()
    print("| layout | workload | CPU us/turn (each run) | WAL frames/commit |")
    print("|---|---|---|---:|")
    with tempfile.TemporaryDirectory() as d:
        for workload in ("single", "many"):
            for layout in LAYOUTS:
                out = []
                for r in range(a.runs):
                    folder = Path(d) / f"{r}"
                    folder.mkdir(exist_ok=True)
                    out.append(run(layout, workload, folder))
                name = "1 thread x 1,000" if workload == "single" else "200 threads x 20"
                cpus = " / ".join(f"{x:.1f}" for x, _ in out)
                print(f"| {layout} | {name} | {cpus} | {out[0][1]:.2f} |")


if __name__ == "__main__":
    main()
