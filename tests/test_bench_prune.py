"""benchmarks/prune.py's plumbing: a quick run end to end, and its README section.

No figure is judged here (a slow machine must not fail a test): what is checked is that
both threads were built and hold the same view, the prune cut what it says, every part
was measured, and the README section was rewritten in place.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _bench_helpers import load_bench


@pytest.mark.slow
def test_quick_run_compares_a_pruned_thread_with_a_fresh_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench("prune")
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{bench.START}\nPLACEHOLDER\n{bench.END}\n\ntail\n")
    monkeypatch.setattr(bench, "README", readme)
    out = tmp_path / "prune.json"
    assert bench.main(["--quick", "--json", str(out), "--update-readme"]) == 0
    res = json.loads(out.read_text())
    long, fresh = res["long"], res["fresh"]
    assert (res["turns"], res["keep_messages"]) == (60, 20)
    assert long["messages"] == fresh["messages"] == 20
    assert (long["turns"], fresh["turns"]) == (60, 10)
    # The runs the summary stands for are gone, index entries and all; the rest listed.
    assert long["prune"]["runs"] == 50 and long["runs_listed"] == fresh["runs_listed"] == 10
    assert long["kinds"]["goal"]["nodes"] == fresh["kinds"]["goal"]["nodes"] == 10
    assert long["kinds"]["resource task"]["nodes"] == 10  # the latest version of each
    assert long["kinds"]["resource prune"]["nodes"] == 1
    for side in (long, fresh):
        assert side["file_bytes"] > 0 and side["payload_bytes"] > 0
        assert side["cold"]["messages"] == 20 and side["cold"]["runs"] == 1
        assert side["cold"]["wall_ms"] > 0 and side["cold"]["cpu_ms"] > 0
    assert res["ratio"]["file"] == round(long["file_bytes"] / fresh["file_bytes"], 3)
    text = readme.read_text()
    assert "PLACEHOLDER" not in text and text.endswith("\n\ntail\n")
    assert "| 60 turns, compacted to 20 messages and pruned |" in text
    assert "| runs listed | 10 | 10 | |" in text
