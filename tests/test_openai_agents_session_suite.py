"""The OpenAI Agents SDK's own session tests, run on tether's ``TetherSession``.

The test downloads the sdist of the installed openai-agents from the package index
(``tests/_sdist.py``: ``pip download --no-deps --no-binary :all:``, cached in
``~/.cache/tether-tests``, outside the repository) and runs its session test files in
a subprocess, with the SDK's own conftest and pytest settings, plus
``tests/openai_agents_suite/tether_oa_plugin.py``, which builds a ``TetherSession``
wherever those files build ``SQLiteSession``, ``AsyncSQLiteSession``, or (through the
files' helpers) a Redis or MongoDB session. Once on ``memory://``, once on SQLite.
Any failure fails this test; so does a passing test that never built a
TetherSession, unless it is listed in ``NO_SESSION`` (it tests the SDK alone).

Every excluded test is listed below with the reason it does not apply: it reads or
drives another backend's private tables, connections, locks or client, or asserts
a behaviour that is that backend's own choice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from _sdist import sdist

pytest.importorskip("agents")
pytest.importorskip("aiosqlite")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PLUGIN_DIR = Path(__file__).resolve().parent / "openai_agents_suite"

_CONNECTIONS = "drives SQLiteSession's per-thread sqlite3 connections (session._connections)"
_CORRUPT = "writes a corrupt row straight into SQLiteSession's agent_messages table"
_ROLLBACK = "drops or probes SQLiteSession's own tables with sqlite3 to check its rollback"
_ASYNC_CONN = (
    "patches or probes AsyncSQLiteSession's aiosqlite connection, its startup or its "
    "rollback (_get_connection, _connection, _running)"
)
_ASYNC_CORRUPT = "writes a corrupt row into AsyncSQLiteSession's table (_get_connection)"
_SAME_TS = "rewrites created_at in AsyncSQLiteSession's table to test its tie-break"

# file -> excluded test -> why it does not apply to TetherSession
EXCLUDE: dict[str, dict[str, str]] = {
    "tests/memory/test_session.py": {
        "test_sqlite_session_close_closes_worker_thread_connections": _CONNECTIONS,
        "test_sqlite_session_reaps_connections_from_exited_worker_threads": _CONNECTIONS,
        "test_sqlite_session_closes_retired_connections_before_the_next_allocation": _CONNECTIONS,
        "test_sqlite_session_keeps_connections_of_live_worker_threads": _CONNECTIONS,
        "test_sqlite_session_pop_item_skips_corrupt_most_recent": _CORRUPT,
        "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": _CORRUPT,
        "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _CORRUPT,
        "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": _CORRUPT,
        "test_sqlite_session_file_lock_is_shared_across_instances": (
            "checks SQLiteSession's class-level lock table (_file_locks, _file_lock_counts)"
        ),
        "test_sqlite_session_failed_add_items_releases_write_lock": _ROLLBACK,
        "test_sqlite_session_failed_clear_session_rolls_back": _ROLLBACK,
        "test_sqlite_session_failed_pop_item_releases_write_lock": _ROLLBACK,
        "test_sqlite_session_rollback_failure_evicts_connection": _CONNECTIONS,
        "test_sqlite_session_close_retries_quarantined_connection": _CONNECTIONS,
        "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": (
            _CONNECTIONS
        ),
    },
    "tests/memory/test_session_limit.py": {},
    "tests/extensions/memory/test_async_sqlite_session.py": {
        "test_async_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _ASYNC_CORRUPT,
        "test_async_sqlite_session_pop_item_skips_corrupt_most_recent": _ASYNC_CORRUPT,
        "test_async_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": _ASYNC_CORRUPT,
        "test_async_sqlite_session_get_items_same_timestamp_consistent_order": _SAME_TS,
        "test_async_sqlite_session_pop_item_same_timestamp_returns_latest": _SAME_TS,
        "test_cancelled_add_items_rolls_back_write_transaction": _ASYNC_CONN,
        "test_cancelled_close_finishes_cleanup_and_propagates_cancellation": _ASYNC_CONN,
        "test_cancelled_connect_closes_eventually_acquired_connection": _ASYNC_CONN,
        "test_cancelled_initialization_finishes_candidate_close": _ASYNC_CONN,
        "test_cancelled_wal_retry_closes_startup_connection": _ASYNC_CONN,
        "test_close_retries_connection_quarantined_after_rollback_failure": _ASYNC_CONN,
        "test_close_retries_quarantined_failed_initialization_candidate": _ASYNC_CONN,
        "test_failed_add_items_rolls_back_and_reuses_connection": _ASYNC_CONN,
        "test_failed_clear_session_rolls_back": _ASYNC_CONN,
        "test_failed_initialization_closes_candidate_connection": _ASYNC_CONN,
        "test_failed_pop_item_releases_write_lock": _ASYNC_CONN,
        "test_initialization_does_not_retry_unrecoverable_wal_errors": _ASYNC_CONN,
        "test_initialization_failure_then_cancellation_during_candidate_close": _ASYNC_CONN,
        "test_initialization_releases_wal_cursor_before_schema_write": _ASYNC_CONN,
        "test_initialization_retries_transient_wal_lock": _ASYNC_CONN,
        "test_operation_failure_then_cancellation_during_rollback": _ASYNC_CONN,
        "test_post_commit_cancellation_propagates_after_known_mutation_outcome": _ASYNC_CONN,
        "test_rollback_failure_closes_and_evicts_connection": _ASYNC_CONN,
    },
}

# Files whose sessions come from a helper the plugin replaces: only these tests build
# theirs through it with no backend option; every other test of the file builds a
# RedisSession/MongoDBSession with its own client, TTL or key prefix, or reads its
# keys or documents.
ONLY: dict[str, list[str]] = {
    "tests/extensions/memory/test_redis_session.py": [
        "test_redis_session_direct_ops",
        "test_runner_integration",
        "test_session_isolation",
        "test_get_items_with_limit",
        "test_pop_from_empty_session",
        "test_add_empty_items_list",
        "test_unicode_content",
        "test_special_characters_and_json_safety",
        "test_data_integrity_with_problematic_strings",
        "test_concurrent_access",
        "test_get_items_limit_returns_fewer_when_history_exhausted",
        "test_session_settings_default",
    ],
    "tests/extensions/memory/test_mongodb_session.py": [
        "test_add_and_get_items",
        "test_add_empty_list_is_noop",
        "test_get_items_empty_session",
        "test_pop_item_returns_last",
        "test_pop_item_empty_session",
        "test_multiple_add_calls_accumulate",
        "test_get_items_with_explicit_limit",
        "test_get_items_limit_zero",
        "test_get_items_limit_exceeds_count",
        "test_unicode_content_roundtrip",
        "test_json_special_characters",
        "test_get_items_limit_returns_fewer_when_history_exhausted",
        "test_runner_integration",
    ],
}

# Tests that pass without building a session (they test the SDK alone).
NO_SESSION: set[str] = {
    "test_await_mutation_cancellation_hides_later_failure_without_loop_error",
    "test_session_memory_disabled_parametrized",
    "test_session_settings_resolve",
}


def _select() -> dict[str, dict[str, list[str]]]:
    select = {f: {"exclude": sorted(names)} for f, names in EXCLUDE.items()}
    select.update({f: {"only": names} for f, names in ONLY.items()})
    return select


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_openai_agents_session_tests_pass_on_tether_session(backend: str) -> None:
    src = sdist("openai-agents", "tests/memory/test_session.py")
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.json"
        path = [str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in path if p),
            "TETHER_OA_BACKEND": backend,
            "TETHER_OA_SELECT": json.dumps(_select()),
            "TETHER_OA_REPORT": str(report_path),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-c", str(src / "pyproject.toml"),
             "--rootdir", str(src), "-p", "tether_oa_plugin", "-p", "no:cacheprovider",
             "-o", "timeout=120", "-q", *EXCLUDE, *ONLY],
            cwd=src,
            env=env,
            capture_output=True,
            text=True,
            timeout=850,
        )
        tail = "\n".join((r.stdout + r.stderr).splitlines()[-80:])
        assert r.returncode == 0, tail
        print(f"[{backend}] {r.stdout.strip().splitlines()[-1]}")  # the SDK tests' summary
        report = json.loads(report_path.read_text())
    outcomes: dict[str, str] = report["outcomes"]
    failed = sorted(t for t, o in outcomes.items() if o == "failed")
    assert not failed, failed
    passed = {t for t, o in outcomes.items() if o == "passed"}
    assert len(passed) >= 60, tail
    # every passing test really ran on a TetherSession (or is a test of the SDK alone)
    names = {t.split("::", 1)[1].split("[", 1)[0] for t in passed - set(report["built"])}
    assert names <= NO_SESSION, sorted(names - NO_SESSION)
