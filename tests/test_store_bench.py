"""benchmarks/storage.py keeps working: a --quick run, its JSON written outside the tree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "storage.py"


@pytest.mark.slow
def test_storage_benchmark_quick_run(tmp_path: Path) -> None:
    out = tmp_path / "storage.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr
    assert "## Storage performance" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["meta"]["command"].startswith("python benchmarks/storage.py --quick")
    (result,) = doc["results"]
    assert result["backend"] == "sqlite"
    assert [row["history"] for row in result["latency"]] == [10, 100]
    for row in result["latency"]:
        assert row["tether_median_ms"] > 0 and row["floor_median_ms"] > 0
    assert result["cold"]["messages"] == 200
    assert result["bytes"]["tether_per_turn"] > result["bytes"]["payload_per_turn"]
    again = subprocess.run(
        [sys.executable, str(SCRIPT), "--render", str(out)], capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == proc.stdout.strip()
