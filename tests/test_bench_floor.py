"""benchmarks/floor.py (issue 40's two floors) keeps working: a tiny run in a temporary
directory, every system's figures present and of the right kind, and the tables built
from them; the identity floor computes the identity rule's own ids."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _bench_helpers import BENCH, load_bench

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_tiny_run_gives_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "floor.json"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    args = "--turns 12 --threads 3 --threads-turns 2 --repeats 1 --load-runs 1 --sync NORMAL"
    p = subprocess.run(
        [sys.executable, str(BENCH / "floor.py"), *args.split(), "--json", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())
    for system in ("plain", "identity", "tether"):
        assert res["writes"]["NORMAL"][system]["1-10"] > 0
        assert res["threads"]["NORMAL"][system] > 0
    for k in ("plain.nodes", "identity.nodes", "tether.nodes", "tether.payloads"):
        assert res["load"][k]["rows"] == [24], k  # 12 turns of two messages
    assert res["load"]["tether.sql"]["rows"] == [24]
    split = res["split"]["NORMAL"]["single"]
    assert split["sql"] > 0 and split["identity"] > 0 and split["whole"] > split["sql"]
    assert "| write ms/turn @1-10, NORMAL |" in p.stdout
    assert "| cold load, ms of CPU (open + read) |" in p.stdout
    # make bench runs it with tether (SQLite) and puts both tables in the README
    run = load_bench("run")
    assert run.parse(["--systems", "tether_sqlite"]).floor
    assert not run.parse(["--systems", "tether_sqlite", "--no-floor"]).floor
    assert not run.parse(["--systems", "sqlite_floor"]).floor
    section = "\n".join(run.floor_section({"floor": res}))
    assert "| write ms/turn @1-10, NORMAL |" in section and "| cold load, ms of CPU" in section
    assert run.floor_section({"floor": {"error": "x"}}) == []


def test_the_identity_floor_computes_tethers_ids(tmp_path: Path) -> None:
    # The identity floor's hashing is the identity rule written in bare Python: its ids
    # are the ones tether gives the same nodes (else it would not measure that work).
    floor = load_bench("floor")
    import tether

    async def both() -> tuple[list[bytes], list[str]]:
        f = floor.Identity(tmp_path / "i.db", "NORMAL")
        await f.write_turn("t", 0, "hello", "hi")
        await f.write_turn("t", 1, "again", "yes")
        ids = [r[0] for r in f.conn.execute("SELECT id FROM messages ORDER BY seq")]
        await f.close()
        store = await tether.open_store("memory://")
        t = floor.Tether(store)
        for k, (u, a) in enumerate((("hello", "hi"), ("again", "yes"))):
            await t.write_turn("t", k, u, a)
        nodes = await store.nodes("bench", "thread:t")
        await store.close()
        return ids, [n.id for n in nodes]

    ids, tether_ids = asyncio.run(both())
    assert ["cw_" + i.hex() for i in ids] == tether_ids


def test_the_layout_comparison_runs_every_layout(tmp_path: Path) -> None:
    # benchmarks/layout_sql.py, docs/storage.md's figures for the layouts not adopted:
    # each layout takes the store's statement, and the content-id index shows in the
    # pages a commit writes
    layout_sql = load_bench("layout_sql")
    frames = {}
    for layout in layout_sql.LAYOUTS:
        cpu, frames[layout] = layout_sql.run(layout, "single", tmp_path)
        assert cpu > 0
    assert frames["noid"] < frames["k"]
