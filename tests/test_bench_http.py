"""benchmarks/http_service.py's plumbing: a quick run end to end, and its README section.

No figure is judged here (a slow machine must not fail a test): what is checked is that
every measurement ran, counted what it says it counted, and lost no request.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _bench_helpers import load_bench


@pytest.mark.slow
def test_quick_run_measures_every_part_and_loses_no_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench("http_service")
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{bench.START}\nold\n{bench.END}\n\ntail\n")
    monkeypatch.setattr(bench, "README", readme)
    out = tmp_path / "http.json"
    assert bench.main(["--quick", "--workers", "2", "--json", str(out), "--update-readme"]) == 0
    res = json.loads(out.read_text())
    ka, st = res["keepalive"], res["step"]
    assert ka["requests"] == 30 and ka["bare_p50_ms"] > 0 and ka["tether_p50_ms"] > 0
    assert st["steps"] == 10 and st["http_p50_ms"] > 0 and st["in_process_p50_ms"] > 0
    assert [(r["store"], r["workers"]) for r in res["load"]] == [("SQLite", 1), ("SQLite", 2)]
    for row in res["load"]:
        r = row["result"]
        assert r["failed"] == 0, r["failures"]
        assert r["clients"] == 8 and r["steps"] == 3 and r["p99_ms"] >= r["p50_ms"] > 0
        cpu = r["cpu_s"]  # where the machine's CPU went while the clients ran
        assert set(cpu) == {"clients", "server", "rest", "machine_busy", "wall"}
        assert cpu["server"] > 0 and cpu["wall"] > 0 and min(cpu.values()) >= 0
    text = readme.read_text()
    assert "old" not in text and text.endswith("\n\ntail\n")
    assert "| keep-alive request p50 (30 requests) |" in text
    assert text.count("| 8 x 3 | SQLite |") == 2
