"""benchmarks/langgraph_delta.py: a DeltaChannel chat on both savers (no timings asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _bench_helpers import load_bench

pytest.importorskip("langgraph.channels.delta")
pytest.importorskip("langgraph.checkpoint.sqlite")


def test_a_delta_chat_runs_on_both_savers_and_keeps_every_message(tmp_path: Path) -> None:
    bench = load_bench("langgraph_delta")
    out = tmp_path / "delta.json"
    assert bench.main(["--turns", "12", "--durability", "normal", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    for kind in ("tether", "sqlite"):
        # the state rebuilt from the delta history holds every message of every turn
        assert r[kind]["messages"] == 24
        assert r[kind]["synchronous"] == 1  # --durability normal reached the connection
        assert r[kind]["bytes_per_turn"] > 0
        assert set(r[kind]["windows"]) == {"1-10", "3-12"}
        for w in r[kind]["windows"].values():
            assert 0 < w["writes_ms"] + w["history_ms"] <= w["invoke_ms"]
    assert bench.windows(1000) == [(1, 10), (91, 100), (991, 1000)]
