"""``tether demo`` as a person runs it: a subprocess in a fresh directory; then what it left."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import tether
from tether import control

pytestmark = pytest.mark.slow


def _tether(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    return subprocess.run(
        [sys.executable, "-m", "tether.cli", *args],
        cwd=cwd,
        env={**env, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


async def _inspect(db: Path) -> dict[str, Any]:
    async with await tether.open_store(str(db)) as store:
        scopes = {s.scope: s.sequence for s in await store.list_scopes("default")}
        verified = await control.verify(store, namespace="default")
        exported = await control.export_snapshot(store, "default", "thread:support-1")
        user = await control.describe(store, namespace="default", user="ada", include_data=True)
        jobs = await control.describe(
            store, namespace="default", thread="jobs", include_data=True, stores=["executions"]
        )
        summary = await store.resource_head("default", "thread:support-1", "semantic:summary:agent")
    return {
        "scopes": scopes,
        "verified": verified,
        "exported": exported,
        "user_memory": next(r.data for r in user.stores if r.name == "memory"),
        "jobs": next(r.data for r in jobs.stores if r.name == "executions"),
        "summary": summary,
    }


def test_demo_runs_in_a_fresh_directory_and_leaves_inspectable_state(tmp_path: Path) -> None:
    run = _tether(tmp_path, "demo")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    for heading in (
        "1. Memory across two processes",
        "2. A tool that needs approval",
        "3. A crash in the middle of a tool",
        "4. Compaction",
        "5. Export and verify",
        "6. A tampered export is rejected",
        "7. Where the state is",
    ):
        assert heading in out
    assert "Your name is Ada." in out
    assert "Payment made: sent 120 EUR to bob." in out
    assert "SIGKILLed" in out and "with the same key" in out
    assert "identity_mismatch" in out and "nodes written: 0" in out
    assert "tether --store tether-demo.db threads" in out

    # It left the store and the export, and nothing else (SQLite's own WAL sidecars
    # may outlive a connection that was SIGKILLed; they belong to the store).
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm")))
    assert left == ["tether-demo-export.json", "tether-demo.db"]
    state = asyncio.run(_inspect(tmp_path / "tether-demo.db"))
    assert set(state["scopes"]) == {
        "thread:support-1",
        "thread:support-2",
        "thread:support-1-copy",
        "thread:jobs",
        "user:ada",
    }  # no app: each run's index entry lives in its own thread (tether.control.tasks)
    assert state["verified"].ok and len(state["verified"].checks) == 5
    assert (tmp_path / "tether-demo-export.json").read_bytes() == state["exported"]
    assert state["user_memory"] == {"memory:name": "Ada", "preference:likes": "green tea"}
    (job,) = state["jobs"]
    assert job["status"] == "completed"
    assert (
        state["summary"] is not None
        and state["summary"].payload["content"]["strategy"] == "summary"
    )

    # The commands it prints work on what it left.
    threads = _tether(tmp_path, "--store", "tether-demo.db", "--json", "threads")
    assert threads.returncode == 0
    assert {t["thread"] for t in orjson.loads(threads.stdout)["threads"]} >= {"support-1", "jobs"}
    v = _tether(tmp_path, "verify", "--file", "tether-demo-export.json")
    assert v.returncode == 0 and "ok" in v.stdout

    # Run again: it starts afresh in the same file, without deleting anything else.
    again = _tether(tmp_path, "--json", "demo")
    assert again.returncode == 0, again.stderr
    summary = orjson.loads(again.stdout)
    assert summary["memory"]["answer"] == "Your name is Ada."
    assert summary["approval"]["answer"] == "Payment made: sent 120 EUR to bob."
    assert (
        summary["crash"]["same_key"] is True and summary["crash"]["status_after_kill"] == "running"
    )
    assert summary["crash"]["killed"] != summary["crash"]["resumed_in"]
    assert summary["compaction"]["after"] < summary["compaction"]["before"]
    assert summary["compaction"]["nodes_after"] == summary["compaction"]["nodes_before"] + 1
    assert summary["export"]["all_ok"] and summary["export"]["round_trip_identical"]
    assert summary["tamper"]["code"] == "identity_mismatch" and summary["tamper"]["written"] == 0
    assert summary["seconds"] < 60


def test_demo_honours_store_and_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    run = _tether(tmp_path, "--store", "other.db", "demo", "--json")
    assert run.returncode == 0, run.stderr
    assert orjson.loads(run.stdout)["db"] == str(tmp_path / "other.db")
    assert (tmp_path / "other-export.json").exists() and not (tmp_path / "tether-demo.db").exists()
    threads = _tether(tmp_path, "--store", "other.db", "--json", "threads")
    assert "support-1" in [t["thread"] for t in orjson.loads(threads.stdout)["threads"]]
    junk = tmp_path / "notes.txt"
    junk.write_text("not a database")
    bad = _tether(tmp_path, "demo", "--db", "notes.txt")
    assert bad.returncode == 1 and bad.stderr.startswith("error [")
    assert junk.read_text() == "not a database"


def test_demo_refuses_what_it_cannot_do_in_one_line(tmp_path: Path) -> None:
    missing = _tether(tmp_path, "demo", "--db", "/missing/dir/x.db")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr == (
        "error [not_found]: cannot make the demo's store /missing/dir/x.db: "
        "no directory /missing/dir\n"
    )
    remote = _tether(tmp_path, "--store", "redis://127.0.0.1:6379/0", "demo")
    assert remote.returncode == 2 and "the demo runs on a SQLite file" in remote.stderr
    both = _tether(tmp_path, "--store", "a.db", "demo", "--db", "b.db", "--json")
    assert both.returncode == 2 and orjson.loads(both.stderr)["details"]["field"] == "db"
    assert list(tmp_path.iterdir()) == []  # nothing was created
