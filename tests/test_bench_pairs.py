"""benchmarks/pairs.py: the session pairs' README tables, before and after (no timings)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from _bench_helpers import load_bench


@pytest.fixture(scope="module")
def pairs() -> ModuleType:
    return load_bench("pairs")


def _system(name: str, wall: float, cpu: float, *, tps: float, load: float, by: float) -> dict:
    n = 100
    return {
        "system": name,
        "label": name.upper(),
        "write": {
            "latencies_ms": [wall] * n,
            "cpu_ms": [cpu] * n,
            "total_s": wall * n / 1e3,
            "bytes_per_turn": by,
            "durability": {"setting": "WAL, synchronous=FULL"},
        },
        "threads": {"turns_per_s": tps, "cpu_turns_per_s": 2 * tps, "threads": 4}
        | {"turns_per_thread": 3},
        "load": {"total_ms": load, "load_cpu_ms": load / 2, "messages": 2 * n, "in_order": True},
    }


def _results(date: str, tether_wall: float, *, by: float = 700) -> dict[str, Any]:
    return {
        "meta": {
            "date": date,
            "command": "python benchmarks/run.py --systems openai_sqlite,openai_tether_sqlite",
            "machine": {"loadavg_1m_at_start": 1.0, "loadavg_1m_at_end": 2.0}
            | {"fdatasync_4k_ms": 0.1},
        },
        "systems": [
            _system("openai_sqlite", 0.5, 0.3, tps=2000, load=8.0, by=650),
            _system("openai_tether_sqlite", tether_wall, 0.2, tps=2500, load=6.0, by=by),
            # half a pair, and a pair whose tether side failed: neither is recorded
            _system("adk_sqlite", 5.0, 4.0, tps=100, load=100.0, by=1900),
            _system("openai_redis", 1.0, 1.0, tps=1, load=1.0, by=1),
            {"system": "openai_tether_redis", "label": "TR", "write": {"error": "boom"}},
        ],
    }


def test_a_pair_is_recorded_only_when_both_ran_whole(pairs: ModuleType) -> None:
    new = pairs.entries(_results("d1", 0.4), "abc")
    assert list(new) == ["openai_sqlite,openai_tether_sqlite"]
    e = new["openai_sqlite,openai_tether_sqlite"]
    assert e["commit"] == "abc" and e["load"] == [1.0, 2.0]
    t = e["tether"]
    assert t["windows"] == {"1-10": [0.4, 0.2], "91-100": [0.4, 0.2]}
    assert t["a_total_s"] == [pytest.approx(0.04), pytest.approx(0.02)]
    assert t["b_turns_per_s"] == [2500, 5000] and t["c_load_ms"] == [6.0, 3.0]


def test_behind_names_each_figure_and_bytes_over_one_point_two(pairs: ModuleType) -> None:
    e = pairs.entries(_results("d", 0.6, by=800), "c")["openai_sqlite,openai_tether_sqlite"]
    late = pairs.behind(e)
    assert "(A) turns 1-10 wall 0.60 against 0.50" in late
    assert "(A) in all, wall 0.06 against 0.05" in late
    assert not any("CPU" in x or "(B)" in x or "(C)" in x for x in late)
    assert "bytes/turn 1.23x" in late
    ahead = pairs.entries(_results("d", 0.4), "c")["openai_sqlite,openai_tether_sqlite"]
    assert pairs.behind(ahead) == []


def test_readme_section_holds_before_and_after_and_nothing_else_moves(
    pairs: ModuleType, tmp_path: Path
) -> None:
    readme = tmp_path / "README.md"
    main = "<!-- bench:start -->\nthe full run's table\n<!-- bench:end -->\n"
    readme.write_text(f"# x\n\n{main}\n{pairs.START}\nold\n{pairs.END}\n\ntail\n")
    store = tmp_path / "pairs.json"
    assert pairs.update({"meta": {}, "systems": []}, readme, store) is False
    assert not store.exists()
    for date, wall in (("first", 0.6), ("second", 0.45), ("third", 0.4)):
        assert pairs.update(_results(date, wall), readme, store, commit="c") is True
    saved = json.loads(store.read_text())
    runs = saved["openai_sqlite,openai_tether_sqlite"]
    assert [r["date"] for r in runs] == ["second", "third"]  # two kept: before, after
    text = readme.read_text()
    assert text.startswith(f"# x\n\n{main}") and text.endswith("\n\ntail\n")
    assert text.count(pairs.START) == 1 and text.count(pairs.END) == 1 and "old" not in text
    body = text.split(pairs.START)[1].split(pairs.END)[0]
    assert "- Before: second, commit c" in body and "- After: third, commit c" in body
    assert "| before | OPENAI_TETHER_SQLITE | 0.45 / 0.20 | 0.45 / 0.20 |" in body
    assert "| after | OPENAI_SQLITE | 0.50 / 0.30 | 0.50 / 0.30 |" in body
    assert "2,500 / 5,000" in body  # (B): turns/s / turns per CPU s
    assert "at or below OPENAI_SQLITE on every figure, bytes 1.08x" in body


def test_with_repeats_each_figure_is_the_best_of_the_runs(pairs: ModuleType) -> None:
    """A loaded machine only adds time: the least wall and CPU, the most turns/s, each
    taken on its own (here from different runs), and a run that failed is left out."""
    first = _system("openai_tether_sqlite", 0.6, 0.2, tps=2000, load=9.0, by=700)
    first["repeats"] = [
        _system("openai_tether_sqlite", 0.4, 0.3, tps=1500, load=7.0, by=700),
        {"system": "openai_tether_sqlite", "write": {"error": "boom"}},
    ]
    f = pairs.figures(first)
    assert f["runs"] == 2
    assert f["windows"]["1-10"] == [0.4, 0.2]  # wall of the second run, CPU of the first
    assert f["b_turns_per_s"] == [2000, 4000] and f["c_load_ms"] == [7.0, 3.5]
    results = _results("d", 0.5)
    results["systems"][1] = first
    text = pairs.section(pairs.merge({}, pairs.entries(results, "c")))
    assert "best of 2 runs of each, alternating" in text
