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
    assert bench.main(["--quick", "--forget-runs", "--json", str(out), "--update-readme"]) == 0
    res = json.loads(out.read_text())
    # One long thread, pruned as it is and, a copy, forgetting the runs; one fresh thread.
    remembered, forgot = res["cases"]
    assert (remembered["forget_runs"], forgot["forget_runs"]) == (False, True)
    assert remembered["fresh"] == forgot["fresh"]
    for case in (remembered, forgot):
        long, fresh = case["long"], case["fresh"]
        assert (case["turns"], case["keep_messages"]) == (60, 20)
        assert long["messages"] == fresh["messages"] == 20
        assert (long["turns"], fresh["turns"]) == (60, 10)
        # The runs the summary stands for are gone, index entries and all; the rest listed.
        assert long["prune"]["runs"] == 50 and long["runs_listed"] == fresh["runs_listed"] == 10
        assert long["prune"]["forget_runs"] is case["forget_runs"]
        assert long["kinds"]["goal"]["nodes"] == fresh["kinds"]["goal"]["nodes"] == 10
        assert long["kinds"]["resource task"]["nodes"] == 10  # the latest version of each
        assert long["kinds"]["resource prune"]["nodes"] == 1
        for side in (long, fresh):
            assert side["file_bytes"] > 0 and side["payload_bytes"] > 0
            assert side["cold"]["messages"] == 20 and side["cold"]["runs"] == 1
            assert side["cold"]["wall_ms"] > 0 and side["cold"]["cpu_ms"] > 0
        assert case["ratio"]["file"] == round(long["file_bytes"] / fresh["file_bytes"], 3)
    # The same nodes went; the record forgetting is smaller by the 50 runs' tags.
    assert remembered["long"]["prune"]["nodes"] == forgot["long"]["prune"]["nodes"]
    record = [c["long"]["kinds"]["resource prune"]["payload_bytes"] for c in res["cases"]]
    assert record[0] - record[1] >= 50 * 8
    text = readme.read_text()
    assert "PLACEHOLDER" not in text and text.endswith("\n\ntail\n")
    assert "| compacted to 20 messages and pruned |" in text
    assert "\n| 60 turns | " in text and "\n| 60 turns, forget_runs | " in text
