"""benchmarks/server_rss.py's plumbing: a quick run end to end, and its README section.

No figure is judged here (a slow machine must not fail a test): what is checked is that
the server was stepped as many times as asked, its memory read where the script says,
and the section written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _bench_helpers import load_bench


@pytest.mark.slow
def test_quick_run_steps_a_server_and_reads_its_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench("server_rss")
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{bench.START}\nold\n{bench.END}\n\ntail\n")
    monkeypatch.setattr(bench, "README", readme)
    out = tmp_path / "rss.json"
    assert (
        bench.main(["--steps", "130", "--every", "60", "--json", str(out), "--update-readme"]) == 0
    )
    r = json.loads(out.read_text())["result"]
    assert r["steps"] == 130
    assert [s["step"] for s in r["samples"]] == [60, 100, 120, 130]
    assert all(s["rss_mib"] > 0 and s["step_p50_ms"] > 0 for s in r["samples"])
    by_step = {s["step"]: s["rss_mib"] for s in r["samples"]}
    assert r["ratio"] == round(by_step[130] / by_step[100], 3)
    text = readme.read_text()
    assert "old" not in text and text.endswith("\n\ntail\n")
    assert "RSS after step 130 / after step 100" in text and "| 130 |" in text


def test_checkpoints_hold_step_100_every_n_and_the_last() -> None:
    bench = load_bench("server_rss")
    assert bench.checkpoints(10_000, 1000)[:3] == [100, 1000, 2000]
    assert bench.checkpoints(10_000, 1000)[-1] == 10_000
    assert bench.checkpoints(50, 20) == [20, 40, 50]  # under 100: no base, no ratio
