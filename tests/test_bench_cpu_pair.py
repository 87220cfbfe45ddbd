"""benchmarks/cpu_pair.py: CPU figures of the bench's phases (no timings asserted: a
test never fails because the machine is slow)."""

from __future__ import annotations

import argparse

from _bench_helpers import load_bench


def test_the_least_cpu_of_each_figure_counts_and_the_most_turns_per_cpu_second() -> None:
    bench = load_bench("cpu_pair")
    runs = [
        {"a_1_10": 0.5, "a_91_100": None, "b_turns_per_cpu_s": 100.0, "c_load_cpu_ms": 3.0},
        {"a_1_10": 0.4, "a_91_100": None, "b_turns_per_cpu_s": 120.0, "c_load_cpu_ms": 4.0},
    ]
    assert bench.best(runs) == {
        "a_1_10": 0.4,
        "a_91_100": None,
        "b_turns_per_cpu_s": 120.0,
        "c_load_cpu_ms": 3.0,
    }


def test_a_run_of_tether_measures_every_phase_in_cpu() -> None:
    bench = load_bench("cpu_pair")
    args = argparse.Namespace(turns=12, threads=3, threads_turns=2, load_runs=1)
    r = bench.run_once("tether_sqlite", args)
    # 12 turns: the first window and the last ten are measured, 91-100 is not
    assert r["a_1_10"] > 0 and r["a_last"] > 0 and r["a_91_100"] is None
    assert r["a_total_s"] > 0 and r["b_turns_per_cpu_s"] > 0 and r["c_load_cpu_ms"] > 0
    assert r["bytes_per_turn"] > 0
    lines = bench.table({"tether_sqlite": r}, 12)
    assert lines[0].startswith("| system | A: CPU ms/turn @1-10 | @91-100 | @3-12 |")
    assert lines[2].startswith("| tether (SQLite) |") and "| - |" in lines[2]
