"""The OpenAI Agents SDK's own session tests, run on tether's ``TetherSession``.

The test downloads the sdist of the installed openai-agents from the package index
(``tests/_sdist.py``: ``pip download --no-deps --no-binary :all:``, cached in
``~/.cache/tether-tests``, outside the repository) and runs its session test files in
a subprocess, with the SDK's own conftest and pytest settings, plus
``tests/openai_agents_suite/tether_oa_plugin.py``, which builds a ``TetherSession``
wherever those files build ``SQLiteSession``, ``AsyncSQLiteSession``, ``RedisSession``
(on the Redis tests' shared client) or ``MongoDBSession``. Once on ``memory://``, once
on SQLite. Every test of the files runs but those ``EXCLUDE`` lists, so a test a new SDK
version adds runs by default (and fails loudly if it does not apply). Any failure
fails this test; so does a skip (other than a missing optional package), and a passing
test that never built a TetherSession, unless ``NO_SESSION`` lists it (it tests the SDK
alone). A name in ``EXCLUDE`` or ``NO_SESSION`` that the sdist's file does not define
fails ``test_listed_tests_exist_in_the_sdist``.

Every excluded test is listed below with the reason it does not apply: it reads or
drives another backend's private tables, keys, documents, connections, locks or
client, uses a method or option outside the Session protocol (``ping``, a TTL, a key
prefix), or asserts a behaviour that is that backend's own choice.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
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

# The Redis tests. The plugin builds a TetherSession where a test builds RedisSession on
# the module's shared client (fake_redis, the plugin's store) with the helpers' key prefix
# and no TTL; every test below instead drives Redis itself.
_R_CLUSTER = "drives a RedisCluster client (its initialize, pipeline, aclose) under RedisSession"
_R_KEYS = (
    "reads or writes RedisSession's own keys (its hash, list and counter: layout, "
    "collisions, created_at) on a FakeRedis client of its own"
)
_R_CORRUPT = "pushes corrupt JSON straight into RedisSession's message list"
_R_PRIVATE = "calls RedisSession's private _get_next_id or _atomic_replace_items"
_R_TTL = "builds RedisSession with a TTL and checks its key expiry or TTL writes"
_R_TTL_ONLY = (
    "builds RedisSession with a TTL, an option TetherSession has no counterpart of (its "
    "item checks are test_redis_session_direct_ops')"
)
_R_PREFIX = "isolates two RedisSessions by key_prefix, a Redis key namespace"
_R_PING = "calls RedisSession.ping(), which is not in the Session protocol"
_R_REAL = "needs a real Redis server (from_url, redis-py's own decode_responses)"
_R_DECODE = "builds RedisSession on a FakeRedis client of its own with decode_responses=True"
_R_CLIENT = (
    "patches or inspects the Redis client under RedisSession (rpop, pipeline, aclose, "
    "ping, _owns_client, _client_released) to check when it is used or closed"
)
_R_POOL = (
    "drives redis-py's connection pool and WATCH/MULTI pipeline inside RedisSession "
    "(checkout, release, reconnect, cancellation, retries)"
)
_R_COMPACT = "observes or pauses compaction's writes by patching session._redis.pipeline"
_R_OWNS = (
    "asserts RedisSession's _owns_client (its owned-client helper's premise); the same "
    "closed-session checks run in the MongoDB file's test_closed_operations_raise_runtime_error"
)
_INJECTED = (
    "with an injected client, close() must leave the session usable (checked with "
    "_owns_client and ping()); TetherSession's close() is terminal, as SQLiteSession's"
)
# The MongoDB tests. The plugin builds a TetherSession where a test builds MongoDBSession
# (one store per client object and database; from_uri gets one of its own); every test
# below instead reads or drives MongoDB's collections or client.
_M_DOCS = (
    "asserts on MongoDBSession's own documents (_seq, _generation, batch documents, "
    "timestamps in its sessions/messages collections)"
)
_M_SERIALIZE = "overrides MongoDBSession's private _serialize_item, reads its sessions collection"
_M_CORRUPT = "writes corrupt documents straight into MongoDBSession's messages collection"
_M_LEGACY = "writes a document of MongoDBSession's earlier per-item layout into its collection"
_M_PATCH = (
    "patches MongoDBSession's collections (insert_one, find_one_and_update, delete_one, "
    "delete_many, find) to pause or fail its writes mid-operation"
)
_M_INDEX = "counts MongoDBSession's create_index calls (_ensure_indexes)"
_M_PING = "calls MongoDBSession.ping(), which is not in the Session protocol"
_M_CLIENT = (
    "checks whether close() closes MongoDBSession's client (_owns_client, client._closed, "
    "a patched client.close)"
)
_M_DRIVER = (
    "checks what MongoDBSession gives pymongo's client (append_metadata, from_uri's "
    "AsyncMongoClient arguments)"
)

EXCLUDE["tests/extensions/memory/test_redis_session.py"] = {
    "test_redis_session_rejects_cluster_transactions_before_pipeline": _R_CLUSTER,
    "test_redis_cluster_reads_and_subclass_writes": _R_CLUSTER,
    "test_colliding_session_clear_preserves_existing_session": _R_KEYS,
    "test_colliding_counter_rejects_ttl_write_before_side_effects": _R_KEYS,
    "test_clear_rechecks_key_types_after_concurrent_replacement": _R_KEYS,
    "test_released_redis_layout_remains_usable": _R_KEYS,
    "test_add_items_preserves_created_at_metadata": _R_KEYS,
    "test_add_items_rejects_wrong_metadata_key_type_before_writing": _R_KEYS,
    "test_mutation_cancellation_waits_for_authoritative_outcome": _R_CLIENT,
    "test_external_client_not_closed": _R_CLIENT,
    "test_close_method_coverage": _R_CLIENT,
    "test_redis_session_failed_cleanup_is_terminal_and_retried": _R_CLIENT,
    "test_redis_session_cancelled_cleanup_is_terminal_and_retried": _R_CLIENT,
    "test_redis_session_operation_waiting_behind_close_raises": _R_CLIENT,
    "test_redis_session_closed_operations_raise_runtime_error": _R_OWNS,
    "test_redis_session_close_is_noop_for_injected_client": _INJECTED,
    "test_redis_connectivity": _R_PING,
    "test_ping_connection_failure": _R_PING,
    "test_redis_session_ping_raises_after_close": _R_PING,
    "test_ttl_functionality": _R_TTL_ONLY,
    "test_add_items_applies_ttl_in_the_write_transaction": _R_TTL,
    "test_add_items_rejects_unrepresentable_ttl_before_writing": _R_TTL,
    "test_add_items_uses_server_absolute_expiration_after_serialization": _R_TTL,
    "test_add_items_refreshes_server_timestamps_after_watch_retry": _R_TTL,
    "test_key_prefix_isolation": _R_PREFIX,
    "test_from_url_constructor": _R_REAL,
    "test_internal_client_ownership": _R_REAL,
    "test_real_redis_decode_responses_compatibility": _R_REAL,
    "test_session_settings_from_url": _R_REAL,
    "test_decode_responses_client_compatibility": _R_DECODE,
    "test_get_next_id_method": _R_PRIVATE,
    "test_atomic_replacement_preserves_clear_add_metadata": _R_PRIVATE,
    "test_atomic_replacement_serializes_before_deleting_history": _R_PRIVATE,
    "test_atomic_replacement_rejects_colliding_counter_key": _R_PRIVATE,
    "test_get_items_limit_skips_corrupt_newest_messages": _R_CORRUPT,
    "test_corrupted_data_handling": _R_CORRUPT,
    "test_compaction_replaces_redis_history_atomically": _R_COMPACT,
    "test_compaction_cancel_after_redis_commit_invalidates_cached_history": _R_COMPACT,
    "test_cancelled_redis_compaction_handoff_remains_resumable": _R_COMPACT,
    **dict.fromkeys(
        [
            "test_ambiguous_exec_watch_error_is_not_retried",
            "test_redis81_standard_pool_checkout_records_native_observability",
            "test_redis8_blocking_pool_checkout_preserves_native_timing",
            "test_add_items_with_ttl_supports_single_connection_pool",
            "test_cancelled_watch_releases_single_connection_pool",
            "test_cancelled_in_flight_watch_command_reconnects_before_pool_reuse",
            "test_cancelled_connection_acquisition_is_discarded_before_release",
            "test_post_commit_cancellation_propagates_after_cleanup",
            "test_post_commit_response_callback_failure_does_not_retry",
            "test_successful_batch_response_with_sibling_error_does_not_retry",
            "test_post_commit_reset_self_cancellation_does_not_cancel_caller",
            "test_post_commit_reset_failure_detaches_without_release_listener",
            "test_reconnect_required_release_detaches_without_listener_reborrow",
            "test_reconnect_marked_inside_release_failure_is_detached",
            "test_post_commit_release_listener_failure_does_not_retry",
            "test_pre_exec_close_failure_is_quarantined",
            "test_pre_exec_cancellation_skips_pipeline_reset",
            "test_blocking_pool_cancellation_completion_owns_release",
            "test_ordinary_pool_cancellation_completion_owns_release",
            "test_transparent_overridden_pool_release_is_supported",
            "test_release_failure_after_reborrow_preserves_new_borrower",
            "test_post_commit_disconnect_failure_is_not_retryable",
            "test_post_commit_detached_close_failure_is_quarantined",
            "test_blocking_pool_listener_failure_notifies_waiter",
            "test_blocking_pool_detached_disconnect_notifies_waiter",
            "test_post_commit_internal_reset_failure_does_not_report_write_failure",
        ],
        _R_POOL,
    ),
}
EXCLUDE["tests/extensions/memory/test_mongodb_session.py"] = {
    "test_clear_session": _M_DOCS,
    "test_session_metadata_timestamps_are_written": _M_DOCS,
    "test_concurrent_pop_item_claims_distinct_items_from_batch": _M_DOCS,
    "test_pop_item_deletes_exhausted_batch_document": _M_DOCS,
    "test_add_items_serializes_before_reserving_sequence_numbers": _M_SERIALIZE,
    "test_corrupted_document_is_skipped": _M_CORRUPT,
    "test_missing_message_data_field_is_skipped": _M_CORRUPT,
    "test_non_string_message_data_is_skipped": _M_CORRUPT,
    "test_get_items_limit_skips_corrupt_newest_docs": _M_CORRUPT,
    "test_pop_item_skips_corrupt_most_recent": _M_CORRUPT,
    "test_pop_item_returns_none_when_only_corrupt_docs_remain": _M_CORRUPT,
    "test_reads_legacy_item_documents_with_new_batch_documents": _M_LEGACY,
    "test_clear_session_partial_cleanup_failure_is_logically_atomic": _M_PATCH,
    "test_generation_reads_use_primary_after_failed_clear_cleanup": _M_PATCH,
    "test_clear_session_hides_add_reserved_before_generation_advance": _M_PATCH,
    "test_pop_rechecks_generation_after_concurrent_clear": _M_PATCH,
    "test_add_items_is_invisible_until_single_document_commit": _M_PATCH,
    "test_pop_item_atomically_selects_newest_concurrent_batch": _M_PATCH,
    "test_pop_item_cancellation_waits_for_exhausted_batch_cleanup": _M_PATCH,
    "test_mutation_cancellation_waits_for_authoritative_outcome": _M_PATCH,
    "test_pop_item_cleanup_failure_does_not_hide_known_claim": _M_PATCH,
    "test_index_creation_runs_only_once": _M_INDEX,
    "test_different_clients_each_run_index_init": _M_INDEX,
    "test_ping_success": _M_PING,
    "test_ping_failure": _M_PING,
    "test_ping_on_closed_session_raises": _M_PING,
    "test_close_external_client_not_closed": _M_CLIENT,
    "test_close_owned_client_is_closed": _M_CLIENT,
    "test_failed_close_is_terminal_and_can_be_retried": _M_CLIENT,
    "test_cancelled_close_is_terminal_and_can_be_retried": _M_CLIENT,
    "test_external_client_session_stays_usable_after_close": _INJECTED,
    "test_injected_client_receives_append_metadata": _M_DRIVER,
    "test_from_uri_passes_driver_info_to_constructor": _M_DRIVER,
    "test_caller_supplied_driver_info_is_not_overwritten": _M_DRIVER,
    "test_from_uri_rejects_non_string_session_id_before_client_creation": _M_DRIVER,
}

# file -> test that passes without building a session -> why (it tests the SDK alone)
NO_SESSION: dict[str, dict[str, str]] = {
    "tests/memory/test_session.py": {
        "test_await_mutation_cancellation_hides_later_failure_without_loop_error": (
            "tests the SDK's cancellation helper on a bare coroutine"
        ),
        "test_session_memory_disabled_parametrized": "runs an agent with no session",
        "test_session_settings_resolve": "tests SessionSettings.resolve alone",
    },
    "tests/extensions/memory/test_redis_session.py": {
        "test_session_settings_resolve": "tests SessionSettings.resolve alone",
    },
}


REDIS_FILE = "tests/extensions/memory/test_redis_session.py"


@functools.cache  # parsed once per file, not once per listed name (~11 s of CPU)
def _tests_in(path: Path) -> frozenset[str]:
    """The test functions a file of the sdist defines (read, not imported)."""
    tree = ast.parse(path.read_text())
    return frozenset(
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
    )


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def test_listed_tests_exist_in_the_sdist() -> None:
    """A stale list fails: every excluded or session-less test exists in its file."""
    src = sdist("openai-agents", "tests/memory/test_session.py")
    stale = [
        f"{file}::{name}"
        for lists in (EXCLUDE, NO_SESSION)
        for file, names in lists.items()
        for name in names
        if name not in _tests_in(src / file)
    ]
    assert not stale, stale
    assert set(NO_SESSION) <= set(EXCLUDE)
    run = {f: len(_tests_in(src / f) - set(names)) for f, names in EXCLUDE.items()}
    assert all(run.values()), run  # every file still has tests to run


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
            "TETHER_OA_EXCLUDE": json.dumps({f: sorted(n) for f, n in EXCLUDE.items()}),
            "TETHER_OA_REPORT": str(report_path),
        }  # bytecode goes to the test cache (tests/conftest.py), not into the sdist
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-c",
                str(src / "pyproject.toml"),
                "--rootdir",
                str(src),
                "-p",
                "tether_oa_plugin",
                "-p",
                "no:cacheprovider",
                "-o",
                "timeout=120",
                "-q",
                *EXCLUDE,
            ],
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
    # a test may skip only for a missing optional package (pytest.importorskip)
    unimported = {t for t, why in report["skipped"].items() if "could not import" in why}
    skipped = {t: why for t, why in report["skipped"].items() if t not in unimported}
    assert not skipped, skipped
    passed = {t for t, o in outcomes.items() if o == "passed"}
    per_file = {f: sum(t.startswith(f + "::") for t in passed) for f in EXCLUDE}
    print(f"[{backend}] passed per file: {per_file}")
    # 0.24.0: 127 (39 + 15 + 18 + 23 + 32), with cryptography for the two encrypted ones
    assert len(passed) + len(unimported) >= 127, per_file
    # a file none of whose tests passed (skipped whole, or never collected) fails
    missing = [f for f, n in per_file.items() if not n and (f != REDIS_FILE or _has("redis"))]
    assert not missing, missing
    # every passing test really ran on a TetherSession (or is a test of the SDK alone)
    alone = {f"{f}::{name}" for f, names in NO_SESSION.items() for name in names}
    names = {t.split("[", 1)[0] for t in passed - set(report["built"])}
    assert names <= alone, sorted(names - alone)
