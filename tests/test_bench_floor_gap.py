"""benchmarks/floor_gap.py keeps working: a --quick run (its JSON written outside the
tree), counts that make sense, and the verdict's sentence built from them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _bench_helpers import BENCH, load_bench

ROOT = Path(__file__).resolve().parents[1]


def _bench_files() -> set[str]:
    """Every file under benchmarks/ git does not track (ignored ones included, bytecode
    and the peers venv aside): where a benchmark would leave its output."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--ignored", "--", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return {
        line
        for line in out.stdout.splitlines()
        if "__pycache__" not in line and ".venv-peers" not in line and not line.startswith(" M")
    }


@pytest.mark.slow
def test_floor_gap_quick_run(tmp_path: Path) -> None:
    before = _bench_files()
    out = tmp_path / "floor_gap.json"
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its stores go under tmp_path too
    proc = subprocess.run(
        [sys.executable, str(BENCH / "floor_gap.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=110,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "WAL frames per commit" in proc.stdout
    assert _bench_files() == before  # nothing written into the source tree
    assert [p.name for p in tmp_path.iterdir()] == ["floor_gap.json"]  # temp dirs gone
    g = json.loads(out.read_text())
    assert g["meta"]["turns"] == 100 and g["meta"]["threads"] == 20

    for w in ("single", "many"):
        t, f = g["frames"][w]["tether"], g["frames"][w]["floor"]
        for x in (t, f):
            assert x["synchronous"] == "FULL" and x["page_size"] >= 512
            # one commit per turn, every commit at least one page, at most a few dozen
            assert x["commits"] == x["turns"] > 0
            assert 1 <= x["frames_per_commit"] < 30
            assert abs(sum(x["by_object"].values()) - x["frames_per_commit"]) < 1e-6
        assert any(k.startswith("tether_nodes ") for k in t["by_object"])
        assert any(k.startswith("messages ") for k in f["by_object"])
        # the floor: BEGIN, two INSERTs, COMMIT; tether: its head read (PRAGMA
        # data_version: whether another connection committed since the head it keeps),
        # then one INSERT that checks the head and commits itself (triggers not counted)
        assert f["statements_per_turn"] == 4
        assert t["statements_per_turn"] == 2
        assert t["statements_by_keyword"] == {"PRAGMA": 1, "INSERT": 1}
        for x in (t, f):  # the replay runs every statement the system ran
            assert x["recorded_statements_per_turn"] == x["statements_per_turn"]

    for sync in ("NORMAL", "FULL"):
        for w in ("single", "many"):
            d = g["cpu"][sync][w]
            for s in ("tether", "floor", "tether_replay", "floor_replay"):
                assert d[s]["cpu_us"] > 0 and d[s]["wall_us"] > 0
                assert d[s]["synchronous"] == [sync]
            assert d["replay_complete"]
            assert d["tether_python_us"] == pytest.approx(
                d["tether"]["cpu_us"] - d["tether_replay"]["cpu_us"]
            )

    ld = g["load"]
    assert ld["messages"] == 200
    for v in ("tether_sql", "tether_nodes", "tether_payloads", "floor"):
        assert ld[v]["rows"] == [200], v  # every message of the thread, every run
        assert ld[v]["open_ms"] > 0 and ld[v]["read_ms"] > 0
    assert ld["decode_ms"] == pytest.approx(
        ld["tether_nodes"]["read_ms"] - ld["tether_sql"]["read_ms"]
    )

    fg = load_bench("floor_gap")
    assert len(fg.table(g)) == 2 + 2 + 1 + 4 + 2
    again = subprocess.run(
        [sys.executable, str(BENCH / "floor_gap.py"), "--render", str(out)],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0 and again.stdout.strip() == proc.stdout.strip()

    section = load_bench("run").floor_gap_section({"floor_gap": g})  # the README's block
    assert section[0].startswith("**Where tether's gap to the floor goes**")
    assert section[2:-1] == fg.table(g)

    verdict = load_bench("verdict")
    rest = verdict.where_the_rest_goes(g)
    assert [r.split("**")[1] for r in rest] == [
        "Pages written per commit",
        "SQL statements per turn",
        "CPU time per turn",
        "Cold load",
    ]


def _system(name: str) -> dict[str, Any]:
    return {
        "system": name,
        "label": name,
        "venv": "tether",
        "backend": "sqlite",
        "write": {"bytes_per_turn": 600.0},
        "windows": {"1-10": 0.5},
    }


def test_floor_verdict_says_only_what_was_measured() -> None:
    verdict = load_bench("verdict")
    results: dict[str, Any] = {
        "meta": {"workload": {"turns": 10}},
        "systems": [_system("tether_sqlite"), _system("sqlite_floor")],
    }
    (line,) = verdict.floor_gap(results)  # no floor_gap run: the figures, nothing more
    assert "Where the rest goes" not in line and "content identity" not in line

    frames = {
        "frames_per_commit": 5.2,
        "by_object": {"tether_nodes leaf": 2.77, "tether_nodes internal": 0.81},
        "statements_per_turn": 6,
        "statements_by_keyword": {"SELECT": 2, "INSERT": 2, "BEGIN": 1, "COMMIT": 1},
    }
    floor = {"frames_per_commit": 2.49, "by_object": {"messages leaf": 1.0}}
    results["floor_gap"] = {
        "meta": {"threads": 200, "repeats": 3, "load_runs": 5},
        "frames": {"many": {"tether": frames, "floor": floor}},  # single thread missing
        # the replay missed statements: no split, so no CPU sentence
        "cpu": {
            "NORMAL": {
                "many": {
                    "tether": {"cpu_us": 129.0},
                    "tether_replay": {"cpu_us": 50.0},
                    "floor": {"cpu_us": 32.0},
                    "tether_python_us": None,
                }
            }
        },
    }
    head, *rest = verdict.floor_gap(results)
    assert "Where the rest goes" in head
    (pages,) = rest  # no replay, no single thread, no loads: those sentences are left out
    assert "5.20 against the floor's 2.49" in pages
    assert "`tether_nodes` leaf 2.77 + internal 0.81" in pages
    assert "on one thread" not in pages


def test_the_floor_checkpoints_its_wal_as_tethers_store_does() -> None:
    """floor_gap gives the floor (and both replays) tether's WAL checkpoint interval at
    each synchronous level, so a setting never counts as either system's work."""
    from tether.store.sqlite import _WAL_AUTOCHECKPOINT

    floor_gap = load_bench("floor_gap")
    assert floor_gap.WAL_PAGES == {"FULL": _WAL_AUTOCHECKPOINT, "NORMAL": _WAL_AUTOCHECKPOINT}
