"""benchmarks/langgraph_replay.py: the recorded calls replay on both savers (no timings
asserted: a test never fails because the machine is slow)."""

from __future__ import annotations

import pytest

from _bench_helpers import load_bench

pytest.importorskip("langgraph.checkpoint.sqlite")


def test_a_replay_runs_every_recorded_call_on_both_savers() -> None:
    bench = load_bench("langgraph_replay")
    r = bench.measure(3, 1)
    # LangGraph's calls for one invoke of the bench's graph: the latest checkpoint,
    # three puts (input, step 0, step 1) and two put_writes
    assert r["turns"] == 3 and r["calls"] == 3 * 6
    for kind in ("tether", "sqlite"):
        by = r[kind]["by_method_ms_per_turn"]
        assert set(by) == {"get_tuple", "put", "put_writes"} and all(v > 0 for v in by.values())
    sql = r["tether"]["sql_by_statement"]
    # TetherSaver's store ran its statements on the timed cursor: the node INSERTs, one
    # commit each (3 puts + 2 put_writes a turn; the very first ones open a transaction)
    inserts = sum(
        v["calls_per_turn"] for k, v in sql.items() if k.startswith("INSERT INTO tether_nodes")
    )
    assert inserts == 5
    assert 0 < r["tether"]["sql_ms_per_turn"] < r["tether"]["ms_per_turn"]
    lines = bench.table([r])
    assert lines[0].startswith("| turns | threads |") and lines[2].startswith("| 3 | 1 |")
    # Each saver's turn split: LangGraph's serializer on both (a put serializes the
    # changed channels, get_tuple decodes them), SQLite on both, and TetherSaver's
    # identity hashing, each a part of the whole turn
    t, s = r["tether"], r["sqlite"]
    assert r["repeats"] == 1
    assert t["serde_ms_per_turn"] > 0 and s["serde_ms_per_turn"] > 0
    assert s["sql_ms_per_turn"] > 0 and t["identity_ms_per_turn"] > 0
    parts = t["serde_ms_per_turn"] + t["sql_ms_per_turn"] + t["identity_ms_per_turn"]
    assert parts < t["ms_per_turn"]
    assert s["serde_ms_per_turn"] + s["sql_ms_per_turn"] < s["ms_per_turn"]
    # the identity rule's functions are put back after the replay
    from tether.core import graph

    assert graph.canonical_payload.__name__ == "canonical_payload"
    assert graph._identity.__name__ == "_identity"


def test_a_replay_times_the_serializer_and_the_hashing_it_is_handed() -> None:
    """The serializer's clock counts the calls of the saver's serde, the identity clock
    the calls of the identity rule: checked against counts, not timings."""
    bench = load_bench("langgraph_replay")
    clock = bench._Clock()
    calls: list[str] = []

    class Serde:
        def dumps_typed(self, v: object) -> tuple[str, bytes]:
            calls.append("dumps")
            return ("json", b"1")

        def loads_typed(self, v: object) -> int:
            calls.append("loads")
            return 1

        other = "kept"

    timed = bench._TimedSerde(Serde(), clock)
    assert timed.dumps_typed(1) == ("json", b"1") and timed.loads_typed(("json", b"1")) == 1
    assert timed.other == "kept" and calls == ["dumps", "loads"] and clock.s > 0

    from tether.core import graph

    hashing = bench._Clock()
    with bench._timed_identity(hashing):
        nid = graph.node_id("goal", [], {"text": "hi"})
    assert hashing.s > 0
    assert nid == graph.node_id("goal", [], {"text": "hi"})  # the same identity, untimed


def test_a_replay_of_many_threads_counts_per_turn_over_every_thread() -> None:
    bench = load_bench("langgraph_replay")
    r = bench.measure(2, 1, threads=3)
    # 2 turns on each of 3 threads, one turn of each in turn: 6 invokes of 6 calls
    assert (r["turns"], r["threads"], r["calls"]) == (2, 3, 2 * 3 * 6)
    sql = r["tether"]["sql_by_statement"]
    inserts = sum(
        v["calls_per_turn"] for k, v in sql.items() if k.startswith("INSERT INTO tether_nodes")
    )
    assert inserts == 5  # per turn over all threads: 5 commits each
    assert bench.table([r])[2].startswith("| 2 | 3 |")


def test_a_replay_without_checkpoints_counts_each_savers_pages_per_commit() -> None:
    bench = load_bench("langgraph_replay")
    r = bench.measure(3, 1, wal=True)
    t, s = r["tether"]["wal"], r["sqlite"]["wal"]
    # TetherSaver commits 5 times a turn, each commit one INSERT in autocommit mode (the
    # first put opens a transaction that makes the scope): 15 commits, no other
    assert t["commits"] == 15
    # SqliteSaver commits at least its 5 a turn (and its tables, on its first call)
    assert s["commits"] >= 15
    for w in (t, s):
        assert w["page_size"] == 4096
        assert w["frames_per_commit"] == w["frames"] / w["commits"] >= 1
        # every frame is mapped to an object, and the shares add up to the whole
        assert abs(sum(w["by_object"].values()) - w["frames_per_commit"]) < 1e-9
    assert "tether_nodes leaf" in t["by_object"] and "tether_nodes_id leaf" in t["by_object"]
    assert "checkpoints leaf" in s["by_object"]
    assert r["tether"]["no_checkpoint_ms_per_turn"] > 0
    lines = bench.wal_lines([r])
    assert len(lines) == 2 and "TetherSaver" in lines[0] and "SqliteSaver" in lines[1]
    assert "pages per commit over 15 commits" in lines[0]


def test_the_floor_commits_five_nodes_a_turn_both_ways_beside_both_replays() -> None:
    bench = load_bench("langgraph_replay")
    f = bench.floor(2, 3, 1)
    assert (f["turns"], f["threads"], f["repeats"]) == (2, 3, 1)
    # one node per checkpointer call: a turn's 3 puts and 2 put_writes, through a
    # Transaction each and through store.commit directly, every node stored
    assert f["floor_nodes_per_turn"] == {"txn": 5, "direct": 5}
    cpu = f["cpu_ms_per_turn"]
    assert set(cpu) == {"sqlite", "tether", "txn", "direct"} and all(v > 0 for v in cpu.values())
    (line,) = bench.floor_lines(f)
    assert line.startswith("2 turns on each of 3 threads") and "five direct commits" in line
