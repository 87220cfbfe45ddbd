"""benchmarks/turn_instructions.py's plumbing, end to end without valgrind (CPU time):
threads seeded, a fresh process per history, a figure per history. No figure judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _bench_helpers import load_bench


@pytest.mark.slow
def test_smoke_run_measures_each_history(tmp_path: Path) -> None:
    bench = load_bench("turn_instructions")
    out = tmp_path / "ir.json"
    assert bench.main(["--no-callgrind", "--long", "25", "--turns", "2", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["unit"] == "CPU ms" and res["turns"] == 2
    assert set(res["per_turn"]) == {"10", "25"} and min(res["per_turn"].values()) > 0
    assert res["ratio"] == res["per_turn"]["25"] / res["per_turn"]["10"]
