"""benchmarks/pydantic_ai_stores.py's plumbing at 10 turns (no timings asserted): both
pairs run, every store reads back what was written (the script asserts it), and the
figures name every window and store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _bench_helpers import load_bench

pytest.importorskip("pydantic_ai_harness")


def test_pydantic_ai_bench_runs_both_pairs(tmp_path: Path) -> None:
    bench = load_bench("pydantic_ai_stores")
    out = tmp_path / "figures.json"
    assert bench.main(["--turns", "10", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    steps, memory = figures["step_store"], figures["memory_store"]
    assert set(steps) == {"harness SqliteStepStore", "tether TetherStepStore"}
    assert set(memory) == {"harness SqliteMemoryStore", "tether TetherMemoryStore"}
    for f in steps.values():
        assert set(f["store_ms"]) == {"1-10"} and f["messages"] == 20
        assert f["bytes_per_turn"] > 0 and f["cold_load_ms"] > 0
    for f in memory.values():
        assert set(f["write_ms"]) == {"1-10"} and f["bytes_per_write"] > 0
