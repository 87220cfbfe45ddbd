"""Benchmark: ``tether mcp`` beside the reference memory server, over stdio, one script.

    .venv/bin/python benchmarks/mcp_memory.py                     # 200 entities, 20 writes
    .venv/bin/python benchmarks/mcp_memory.py --entities 50 --writes 10 --dir /tmp/mb

The reference, ``@modelcontextprotocol/server-memory`` (npm), is installed into
``--dir`` (a temporary folder by default) unless ``--server-js`` names its
``dist/index.js``. Each server is started fresh, as a desktop client starts it, and
driven with the MCP SDK's client (one session; every call waits for its answer):

  (1) N ``create_entities`` calls of one entity each, then N ``add_observations`` of one
      observation each, then ``read_graph`` and ``search_nodes`` (5 each) at N entities:
      the median milliseconds per call of each kind;
  (2) C clients (C server processes on one store, default 4) adding W observations each
      to one entity at the same time, beside N other entities: how many of the C x W the
      entity holds afterwards;
  (3) the bytes on disk after (1): the reference's memory.jsonl; tether's SQLite file
      with its WAL (every version is kept).

Prints a table and, with ``--json FILE``, writes the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

REFERENCE = "@modelcontextprotocol/server-memory@2026.8.31"
TETHER = str(Path(sys.executable).with_name("tether"))


def install_reference(folder: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise SystemExit("node and npm are needed for the reference memory server")
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), REFERENCE],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return folder / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"


def servers(server_js: Path, work: Path) -> dict[str, tuple[StdioServerParameters, list[Path]]]:
    jsonl = work / "memory.jsonl"
    db = work / "tether.db"
    return {
        "reference (memory.jsonl)": (
            StdioServerParameters(
                command="node", args=[str(server_js)], env={"MEMORY_FILE_PATH": str(jsonl)}
            ),
            [jsonl],
        ),
        "tether mcp (SQLite)": (
            StdioServerParameters(command=TETHER, args=["--store", str(db), "mcp", "--user", "me"]),
            [db, db.with_name(db.name + "-wal")],
        ),
    }


async def _timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    r = await fn()
    assert not r.is_error, r.content
    return (time.perf_counter() - start) * 1000


async def calls(params: StdioServerParameters, n: int) -> dict[str, float]:
    async with Client(params) as c:
        create, add, read, search = [], [], [], []
        for i in range(n):
            e = {"name": f"person {i}", "entityType": "person", "observations": [f"born {i}"]}
            create.append(await _timed(lambda e=e: c.call_tool("create_entities", {"entities": [e]})))
        for i in range(n):
            o = {"entityName": f"person {i}", "contents": [f"likes tea number {i}"]}
            add.append(await _timed(lambda o=o: c.call_tool("add_observations", {"observations": [o]})))
        for _ in range(5):
            read.append(await _timed(lambda: c.call_tool("read_graph", {})))
            search.append(await _timed(lambda: c.call_tool("search_nodes", {"query": "tea number 1"})))
    return {
        "create_entities": statistics.median(create),
        "add_observations": statistics.median(add),
        "read_graph": statistics.median(read),
        "search_nodes": statistics.median(search),
    }


async def race(params: StdioServerParameters, n: int, writes: int, clients: int) -> int:
    filler = [{"name": f"p {i}", "entityType": "t", "observations": ["x" * 100]} for i in range(n)]
    shared = {"name": "shared", "entityType": "t", "observations": []}
    started, created, done = asyncio.Barrier(clients), asyncio.Event(), asyncio.Barrier(clients)

    async def client(k: int) -> int:
        async with Client(params) as c:  # every server process starts at once
            await started.wait()
            if k == 0:
                await c.call_tool("create_entities", {"entities": [*filler, shared]})
                created.set()
            await created.wait()
            for i in range(writes):
                o = {"entityName": "shared", "contents": [f"client {k}: {i}"]}
                await c.call_tool("add_observations", {"observations": [o]})
            await done.wait()
            if k != 0:
                return 0
            g = (await c.call_tool("open_nodes", {"names": ["shared"]})).structured_content
            return len(g["entities"][0]["observations"]) if g["entities"] else 0

    return (await asyncio.gather(*(client(k) for k in range(clients))))[0]


async def run(
    server_js: Path, work: Path, n: int, writes: int, clients: int
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "entities": n, "writes_per_client": writes, "clients": clients, "systems": {}
    }
    for name, (params, files) in servers(server_js, work / "calls").items():
        (work / "calls").mkdir(exist_ok=True)
        figures = await calls(params, n)
        figures["bytes_on_disk"] = sum(f.stat().st_size for f in files if f.exists())
        out["systems"][name] = figures
    for name, (params, _) in servers(server_js, work / "race").items():
        (work / "race").mkdir(exist_ok=True)
        out["systems"][name]["race_kept"] = await race(params, n, writes, clients)
    return out


def table(r: dict[str, Any]) -> str:
    rows = [
        f"| system | create_entities ms | add_observations ms | read_graph ms @{r['entities']} "
        f"| search_nodes ms @{r['entities']} | bytes on disk "
        f"| {r['clients']} clients at once: kept of {r['clients'] * r['writes_per_client']} |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, f in r["systems"].items():
        rows.append(
            f"| {name} | {f['create_entities']:.2f} | {f['add_observations']:.2f} | "
            f"{f['read_graph']:.2f} | {f['search_nodes']:.2f} | {f['bytes_on_disk']:,} | "
            f"{f['race_kept']} |"
        )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entities", type=int, default=200)
    ap.add_argument("--writes", type=int, default=20, help="observations per client in (2)")
    ap.add_argument("--clients", type=int, default=4, help="clients writing at once in (2)")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temp dir)")
    ap.add_argument("--server-js", type=Path, default=None, help="the reference's dist/index.js")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        server_js = args.server_js or install_reference(work / "npm")
        result = asyncio.run(run(server_js, work, args.entities, args.writes, args.clients))
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
