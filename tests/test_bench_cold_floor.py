"""benchmarks/cold_floor.py's plumbing: a quick run end to end, and its README section.

No figure is judged here (a slow machine must not fail a test): what is checked is that
the thread was built by the long-run agent and then taken from the cache, the cold load
and the floor read the thread whole (its messages; its rows), and the README section was
rewritten in place.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _bench_helpers import load_bench


@pytest.mark.slow
def test_quick_run_measures_a_cold_load_against_its_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench("cold_floor")
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{bench.START}\nPLACEHOLDER\n{bench.END}\n\ntail\n")
    monkeypatch.setattr(bench, "README", readme)
    cache = tmp_path / "cache"
    out = tmp_path / "cold.json"
    argv = ["--quick", "--cache", str(cache), "--json", str(out), "--update-readme"]
    assert bench.main(argv) == 0
    res = json.loads(out.read_text())
    assert res["built"] is True and res["turns"] == 50
    # A native agent thread: a goal, an inference and an answer a turn, each naming its
    # run, the run's task resource beside; the view holds a user and an assistant message
    # a turn, and the floor read every row of the thread.
    assert res["messages"] == res["cold"]["count"] == 100
    assert res["kinds"]["goal"] == res["kinds"]["answer"] == 50
    assert res["rows"] == res["floor"]["count"] == sum(res["kinds"].values())
    for side in ("cold", "floor"):
        assert res[side]["runs"] == 1 and res[side]["cpu_ms"] > 0 and res[side]["wall_ms"] > 0
    assert res["ratio"]["cpu"] == round(res["cold"]["cpu_ms"] / res["floor"]["cpu_ms"], 3)
    text = readme.read_text()
    assert "PLACEHOLDER" not in text and text.endswith("\n\ntail\n")
    assert "\n| 50 turns | 100 | " in text
    # A second run takes the cached file: nothing built again.
    (built,) = cache.glob("thread-50-*.db")
    mtime = built.stat().st_mtime_ns
    assert bench.main(["--quick", "--cache", str(cache), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["built"] is False
    assert built.stat().st_mtime_ns == mtime
