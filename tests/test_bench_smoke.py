"""The benchmark's plumbing, on the stdlib floor system only (no peers venv, no timings)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from _bench_helpers import BENCH, load_bench


@pytest.fixture(scope="module")
def worker() -> ModuleType:
    return load_bench("worker")


@pytest.fixture(scope="module")
def run() -> ModuleType:
    return load_bench("run")


def _phase(worker: ModuleType, tmp: Path, phase: str, *extra: str) -> dict:
    out = tmp / f"{phase}.json"
    argv = [phase, "--system", "sqlite_floor", "--workdir", str(tmp / "db"), "--out", str(out)]
    assert worker.main([*argv, *extra]) == 0, out.read_text()
    return json.loads(out.read_text())


def test_floor_write_load_threads(worker: ModuleType, tmp_path: Path) -> None:
    a = _phase(worker, tmp_path, "write", "--turns", "30")
    assert a["turns"] == 30 and len(a["latencies_ms"]) == 30 and not a["capped"]
    assert a["bytes"] > 30 * 400  # 60 messages of 200 bytes, at least
    assert a["durability"]["journal_mode"] == "WAL"
    assert a["durability"]["synchronous"] == "FULL"
    assert a["durability"]["wal_autocheckpoint"] == 1000  # tether's store's setting, read back

    c = _phase(worker, tmp_path, "load", "--turns", "30")
    assert c["in_order"] and c["messages"] == 60 and c["first_mismatch"] is None

    b = _phase(worker, tmp_path, "threads", "--threads", "4", "--threads-turns", "3")
    assert b["turns"] == 12 and b["turns_per_s"] > 0


def test_load_detects_missing_messages(worker: ModuleType, tmp_path: Path) -> None:
    _phase(worker, tmp_path, "write", "--turns", "10")
    c = _phase(worker, tmp_path, "load", "--turns", "11")  # expects 22, finds 20
    assert not c["in_order"] and c["messages"] == 20 and c["expected"] == 22


def test_windows(run: ModuleType) -> None:
    assert run.windows(1000) == [(1, 10), (91, 100), (991, 1000)]
    assert run.windows(100) == [(1, 10), (91, 100)]
    assert run.windows(50) == [(1, 10), (41, 50)]
    assert run.window([1.0, 2.0, 3.0], 1, 3) == 2.0
    assert run.window([1.0, 2.0], 1, 3) is None


def test_readme_section_is_replaced_in_place(
    run: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\nintro\n")
    monkeypatch.setattr(run, "README", readme)
    results = {
        "meta": {
            "date": "2026-01-01 00:00 UTC",
            "command": "make bench",
            "machine": {"nproc": 2, "cpu": "cpu", "memory": "1 GiB", "os": "os"}
            | {"python": "3.11", "sqlite": "3.40", "fdatasync_4k_ms": 0.1},
            "postgres": None,
            "workload": {"message_bytes": 200, "turns": 100, "threads": 2}
            | {"threads_turns": 2, "budget_s": 15.0, "quick": True},
        },
        "systems": [{"system": "x", "label": "X", "skipped": "not here"}],
    }
    run.update_readme(run.markdown(results, "docs/bench/latency.png"))
    run.update_readme(run.markdown(results, "docs/bench/latency.png"))
    text = readme.read_text()
    assert text.startswith("# x\n\nintro\n")
    assert text.count(run.START) == 1 and text.count(run.END) == 1
    assert "| X |" in text and "skipped: not here" in text and "`make bench`" in text


def _system(name: str, venv: str, backend: str, *, a: float, b: float, c: float, by: float) -> dict:
    return {
        "system": name,
        "label": name.upper(),
        "venv": venv,
        "backend": backend,
        "windows": {"1-10": a, "91-100": a},
        "threads": {"turns_per_s": b},
        "load": {"total_ms": c, "open_ms": 1.0, "load_ms": c - 1.0},
        "write": {"bytes_per_turn": by, "bytes_by_object": {}},
    }


def test_verdict_names_every_figure_where_tether_is_behind_a_peer_on_its_backend() -> None:
    verdict = load_bench("verdict")
    results = {
        "meta": {"workload": {"turns": 100}},
        "systems": [
            _system("sqlite_floor", "tether", "sqlite", a=0.2, b=5000, c=2.0, by=500),
            _system("tether_sqlite", "tether", "sqlite", a=0.3, b=3000, c=9.0, by=700),
            _system("peer_sqlite", "peers", "sqlite", a=0.4, b=2000, c=8.0, by=650),
            # faster than tether on SQLite, but on another backend: not compared
            _system("peer_pg", "peers", "postgres", a=0.1, b=9000, c=1.0, by=100),
            _system("tether_postgres", "tether", "postgres", a=0.5, b=10000, c=0.5, by=90),
            {"system": "peer_gone", "label": "GONE", "venv": "peers", "skipped": "no"},
        ],
    }
    found = verdict.findings(results)
    assert {(f["tether"]["system"], f["peer"]["system"], f["key"]) for f in found} == {
        ("tether_sqlite", "peer_sqlite", "C"),
        ("tether_sqlite", "peer_sqlite", "bytes"),
        ("tether_postgres", "peer_pg", "A 1-10"),
        ("tether_postgres", "peer_pg", "A 91-100"),
    }
    text = "\n".join(verdict.section(results))
    assert "**TETHER_SQLITE** is behind **PEER_SQLITE** on (C) load ms 9.00 vs 8.00" in text
    assert "bytes/turn 700 B vs 650 B" in text
    assert "against the sqlite3 floor" in text.lower() and "(B) turns/s 3,000 vs 5,000" in text
    # Each reason once per figure kind, even with two (A) windows behind.
    assert text.count("two round trips") == 1
    results["systems"] = results["systems"][:3]
    results["systems"][2]["load"]["total_ms"] = 99.0
    results["systems"][2]["write"]["bytes_per_turn"] = 999.0
    assert "TETHER_SQLITE** is ahead of every peer on its backend (PEER_SQLITE)" in "\n".join(
        verdict.section(results)
    )


def _langgraph_pair() -> list[dict]:
    """SqliteSaver and TetherSaver, TetherSaver behind at (A) only."""
    return [
        _system("langgraph_sqlite", "peers", "sqlite", a=5.0, b=200, c=8.0, by=90_000),
        _system("langgraph_tether_sqlite", "peers", "sqlite", a=6.0, b=250, c=7.0, by=9000),
    ]


def test_verdict_compares_tether_inside_langgraph_with_langgraphs_own_saver_only() -> None:
    verdict = load_bench("verdict")
    results = {
        "meta": {"workload": {"turns": 100}},
        "systems": [
            _system("tether_sqlite", "tether", "sqlite", a=0.3, b=3000, c=1.0, by=700),
            *_langgraph_pair(),
        ],
    }
    found = verdict.findings(results)
    # the pair only: TetherSaver is behind SqliteSaver on (A), and is no peer of tether_sqlite
    assert {(f["tether"]["system"], f["peer"]["system"], f["key"]) for f in found} == {
        ("langgraph_tether_sqlite", "langgraph_sqlite", "A 1-10"),
        ("langgraph_tether_sqlite", "langgraph_sqlite", "A 91-100"),
    }
    text = "\n".join(verdict.section(results))
    assert "both commit 5 times a turn" in text  # the pair's own reason, not the store's
    assert "TETHER_SQLITE** is ahead of every peer on its backend (LANGGRAPH_SQLITE)" in text
    assert "cannot skip" not in text and "replay of this run's calls below" not in text


def _replay(turns: int, threads: int, t: tuple[float, ...], s: tuple[float, ...]) -> dict:
    """A langgraph_replay.measure result: t = (total, serde, sql, identity), s = (total,
    serde, sql)."""
    return {
        "turns": turns,
        "threads": threads,
        "repeats": 3,
        "tether": {
            "ms_per_turn": t[0],
            "serde_ms_per_turn": t[1],
            "sql_ms_per_turn": t[2],
            "identity_ms_per_turn": t[3],
        },
        "sqlite": {"ms_per_turn": s[0], "serde_ms_per_turn": s[1], "sql_ms_per_turn": s[2]},
    }


def test_verdict_states_what_tethersaver_cannot_skip_against_sqlitesavers_whole_turn() -> None:
    verdict = load_bench("verdict")
    results = {
        "meta": {"workload": {"turns": 100}},
        "systems": _langgraph_pair(),
        "langgraph_replay": [
            # serializer + SQLite + hashing = 0.2 + 0.35 + 0.1 = 0.65 > 0.6: over
            _replay(10, 20, (1.7, 0.2, 0.35, 0.1), (0.6, 0.2, 0.3)),
            # 0.3 + 0.3 + 0.1 = 0.7 < 1.0: under
            _replay(20, 200, (1.9, 0.3, 0.3, 0.1), (1.0, 0.35, 0.33)),
        ],
    }
    text = "\n".join(verdict.section(results))
    assert "What TetherSaver cannot skip" in text and "the best of 3 replays" in text
    assert (
        "10 turns on each of 20 threads, ms a turn: TetherSaver 1.70 (serializer 0.20, "
        "SQLite 0.35, identity hashing 0.10, the rest 1.05); SqliteSaver 0.60 (serializer "
        "0.20, SQLite 0.30, the rest 0.10). TetherSaver's serializer, SQLite and hashing "
        "alone: 0.65, 1.08x SqliteSaver's whole turn (over it)"
    ) in text
    assert "alone: 0.70, 0.70x SqliteSaver's whole turn (under it)" in text
    # the pair's reason points at the replay instead of restating it
    assert "the replay of this run's calls below splits both savers' turns" in text
    assert "the saver's own Python is most of the difference" not in text
    for broken in (None, {"error": "boom"}, []):
        results["langgraph_replay"] = broken
        assert "cannot skip" not in "\n".join(verdict.section(results))
    results["langgraph_cold"] = {
        "turns": 1000,
        "runs": 5,
        "tether": {"ms": 23.0, "serde_ms": 18.0, "sql_ms": 2.0, "json_ms": 1.5, "messages": 2000},
        "sqlite": {"ms": 19.0, "serde_ms": 17.5, "sql_ms": 1.25, "json_ms": 0.0, "messages": 2000},
    }
    text = "\n".join(verdict.section(results))
    assert (
        "TetherSaver 23.00 ms (serializer 18.00, SQLite 2.00, parsing its rows' JSON 1.50, "
        "the rest 1.50), SqliteSaver 19.00 (serializer 17.50, SQLite 1.25, the rest 0.25), "
        "2,000 messages each. TetherSaver's serializer, SQLite and JSON parsing alone: "
        "21.50 ms, 1.13x SqliteSaver's whole read (over it)"
    ) in text
    results["langgraph_cold"]["sqlite"]["ms"] = 25.0
    assert "0.86x SqliteSaver's whole read (under it)" in "\n".join(verdict.section(results))
    results["langgraph_cold"] = {"error": "boom"}
    assert "The cold read" not in "\n".join(verdict.section(results))


def test_the_langgraph_replay_runs_with_the_langgraph_pair_and_writes_its_figures(
    run: ModuleType, tmp_path: Path
) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite")
    assert run.parse(["--systems", "langgraph_sqlite,langgraph_tether_sqlite"]).langgraph_replay
    assert not run.parse(["--systems", "langgraph_sqlite"]).langgraph_replay
    assert not run.parse(["--systems", "tether_sqlite", "--no-langgraph-replay"]).langgraph_replay
    (r,) = run.langgraph_replays(tmp_path, quick=True)
    assert (r["turns"], r["threads"], r["repeats"]) == (3, 2, 1)
    assert r["tether"]["identity_ms_per_turn"] > 0 and r["sqlite"]["sql_ms_per_turn"] > 0
    assert (tmp_path / "langgraph_replay_3x2.json").exists()
    # the cold read: a 20-turn thread read back whole by each saver in a fresh process,
    # each part of the read timed
    c = run.langgraph_cold(tmp_path, quick=True, turns=1000)
    assert (c["turns"], c["runs"]) == (20, 1)
    for kind in ("tether", "sqlite"):
        assert c[kind]["messages"] == 40
        assert c[kind]["serde_ms"] > 0 and c[kind]["sql_ms"] > 0
        assert c[kind]["serde_ms"] + c[kind]["sql_ms"] < c[kind]["ms"]
    assert c["tether"]["json_ms"] > 0 and c["sqlite"]["json_ms"] == 0


def test_render_reprints_a_saved_run_without_touching_the_readme(
    run: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# untouched\n")
    monkeypatch.setattr(run, "README", readme)
    monkeypatch.setattr(run, "PEERS_VENV", tmp_path / "no-venv")  # no matplotlib: no chart
    saved = tmp_path / "saved.json"
    floor = _system("sqlite_floor", "tether", "sqlite", a=0.2, b=5000, c=2.0, by=500)
    floor["write"].update(durability={"setting": "WAL", "strongest": True}, latencies_ms=[0.2])
    results = {
        "meta": {"workload": {"turns": 100, "threads": 2, "threads_turns": 2}},
        "systems": [floor],
    }
    saved.write_text(json.dumps(results))
    assert run.main(["--render", str(saved), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "SQLITE_FLOOR" in out and "5000" in out and "Where tether is slower" in out
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == results
    assert readme.read_text() == "# untouched\n"


def test_agent_turn_runs_every_loop_on_a_durable_store(tmp_path: Path) -> None:
    at = load_bench("agent_turn")
    py = Path(sys.executable)
    res = at.run_all(
        list(at.SYSTEMS),
        ["tool"],
        [2],
        1,
        {"tether": py, "peers": py},
        tmp_path,
        log=lambda m: None,
    )
    runs = {r["system"]: r for r in res["runs"]}
    assert set(runs) == set(at.SYSTEMS)
    for name in ("tether_window", "tether_buffer"):
        r = runs[name]
        assert r["histories"]["2"]["median_ms"] > 0 and r["rss_mib"]["end"] > 0, r
        assert r["durability"]["journal_mode"] == "WAL"
    for name in ("openai_agents", "langgraph_react"):
        r = runs[name]
        if "skipped" in r:  # the peer is not installed in this interpreter
            continue
        assert "error" not in r, r
        assert r["durability"]["synchronous"] == "FULL" and r["durability"]["journal_mode"] == "WAL"
    lines = at.table(res)
    assert len(lines) == 2 + len(at.SYSTEMS) and "ms/turn @2" in lines[0]
    for name, r in runs.items():
        if "histories" in r:  # a tool turn commits at least its result and its answer
            assert r["histories"]["2"]["commits_per_turn"] >= 2, (name, r)
            assert (
                r["histories"]["2"]["statements_per_turn"] > r["histories"]["2"]["commits_per_turn"]
            )


def test_agent_turn_long_thread_splits_out_the_models_time(tmp_path: Path) -> None:
    # --long: tether's threads seeded by a Window agent, then timed with and without the
    # kept view; each row gives tether's own part of a turn (the model's time aside).
    at = load_bench("agent_turn")
    py = Path(sys.executable)
    res = at.run_all(
        ["tether_buffer", "tether_buffer_cold"],
        ["plain"],
        [2, 30],
        2,
        {"tether": py, "peers": py},
        tmp_path,
        log=lambda m: None,
        fast_seed=True,
    )
    for r in res["runs"]:
        assert "error" not in r, r
        for h in ("2", "30"):
            v = r["histories"][h]
            assert 0 < v["own_median_ms"] <= v["median_ms"] and "own_cpu_median_ms" in v, v
            assert v["own_cpu_const_median_ms"] > 0, v  # with the model reading one message
            assert v["commits_per_turn"] >= 1
    lines = at.long_table(res)
    assert len(lines) == 4 and "tether's own ms @30 (CPU)" in lines[0]
    assert "model reading the last message only: @2 / @30 (ratio)" in lines[0]
    assert "no kept view" in lines[3] and lines[3].count("x)") == 1


def test_agent_turn_counts_round_trips_and_commits_on_postgres(
    tmp_path: Path, postgres_url: str
) -> None:
    """--postgres: the same tether agent on a real server, every query counted by
    asyncpg's query logger (a round trip each), its schema dropped after the run."""
    import asyncio

    import asyncpg

    at = load_bench("agent_turn")
    res = at.run_all(
        ["tether_window_postgres"],
        ["plain"],
        [2],
        1,
        {"tether": Path(sys.executable)},
        tmp_path,
        log=lambda m: None,
        postgres=postgres_url,
    )
    (r,) = res["runs"]
    assert "error" not in r, r
    h = r["histories"]["2"]
    # a plain turn commits the goal, then the answer: two tether_commit calls, and
    # it reads the thread (head, tail, resource heads) around them
    assert h["commits_per_turn"] == 2, h
    assert h["statements_per_turn"] > h["commits_per_turn"]
    assert r["durability"]["synchronous_commit"] == "on"
    assert r["label"].endswith("PostgreSQL") and "postgres" in r["versions"]
    assert "PostgreSQL" in at.table(res)[2]

    schema = r["durability"]["schema"]
    assert schema.startswith("agent_turn_")

    async def left(name: str) -> bool:
        conn = await asyncpg.connect(postgres_url)
        try:
            return bool(
                await conn.fetchval(
                    "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
                    name,
                )
            )
        finally:
            await conn.close()

    assert not asyncio.run(left(schema))  # the run dropped the schema it made


def test_agent_turn_verdict_names_each_history_where_tether_is_behind() -> None:
    verdict = load_bench("verdict")

    def run(system: str, ms: dict[int, float], commits: float) -> dict[str, Any]:
        per = {
            str(h): {"median_ms": v, "cpu_median_ms": v / 2, "commits_per_turn": commits}
            for h, v in ms.items()
        }
        return {"system": system, "label": system, "workload": "plain", "histories": per}

    turn = {
        "histories": [10, 100],
        "runs": [
            run("tether_window", {10: 5.0, 100: 5.0}, 2),
            run("openai_agents", {10: 4.0, 100: 9.0}, 2),
            run("langgraph_react", {10: 6.0, 100: 7.0}, 5),
        ],
    }
    (line,) = verdict.agent_turn(turn)
    assert "behind the fastest peer at @10: 5.00 ms vs openai_agents 4.00 ms (1.25x)" in line
    assert "ahead at @100: 5.00 ms vs langgraph_react 7.00 ms" in line
    assert "langgraph_react 5 commits" in line


def test_scale_runs_workers_and_a_populated_store_without_errors(tmp_path: Path) -> None:
    """benchmarks/scale.py end to end, tiny (SQLite): both namespace layouts turn without
    an error, and the populated store lists exactly its runs plus the timed ones."""
    import subprocess

    out = tmp_path / "scale.json"
    argv = [sys.executable, str(BENCH / "scale.py"), "--workers", "1", "--seconds", "0.5"]
    argv += ["--concurrency", "2", "--populate", "30", "--turns", "4", "--json", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert {r["namespaces"] for r in got["rows"]} == {"one", "separate"}
    assert all(r["turns_per_s"] > 0 and r["errors"] == 0 for r in got["rows"])
    [pop] = got["populated"]
    assert (pop["threads"], pop["errors"], pop["listed_total"]) == (30, 0, 30 + 4)
    assert 0 < pop["rss_mib"] <= pop["rss_after_list_mib"] + 1
