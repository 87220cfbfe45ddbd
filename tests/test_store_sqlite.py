"""The SQLite backend's own promises: URL, durability, migrations, locking, cost, layout.

Behaviour shared by every backend lives in tests/conformance/.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tether
from tether import InvalidRequest, StoreError, Transaction
from tether.core.graph import make_node, now_iso
from tether.store import _sqlite_schema, open_store
from tether.store import sqlite as sqlite_module
from tether.store._sql import (
    KIND_CODES,
    created_at_text,
    created_at_value,
    pack_ids,
    prefix_upper,
    unpack_ids,
)
from tether.store.base import ScopeWrite
from tether.store.sqlite import SQLiteStore, parse_url


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = await open_store(f"sqlite:///{tmp_path / 't.db'}")
    assert isinstance(s, SQLiteStore)
    try:
        yield s
    finally:
        await s.close()


async def turn(store: tether.Store, i: int, scope: str = "thread:t") -> None:
    txn = Transaction(store, "ns")
    await txn.append(scope, "goal", {"i": i})
    await txn.append(scope, "answer", {"i": i})
    await txn.commit()


# --- URLs and options ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path", "opts"),
    [
        ("sqlite:///agent.db", "agent.db", {}),
        ("sqlite:////abs/dir/agent.db", "/abs/dir/agent.db", {}),
        ("sqlite:///d/a%20b.db?durability=normal", "d/a b.db", {"durability": "normal"}),
        ("agent.db", "agent.db", {}),
        ("/abs/agent.db?busy_timeout=2", "/abs/agent.db", {"busy_timeout": "2"}),
        ("SQLITE:///:memory:", ":memory:", {}),
    ],
)
def test_parse_url(url: str, path: str, opts: dict[str, str]) -> None:
    assert parse_url(url) == (path, opts)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///?durability=full"])
def test_a_url_without_a_file_is_refused(url: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_url(url)


async def test_bad_options_are_refused_with_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="durability"):
        await open_store(f"sqlite:///{tmp_path / 'a.db'}", durability="fast")
    with pytest.raises(InvalidRequest, match="unknown SQLite URL option"):
        await open_store(f"sqlite:///{tmp_path / 'a.db'}?journal=off")
    with pytest.raises(InvalidRequest, match="busy_timeout"):
        await open_store(f"sqlite:///{tmp_path / 'a.db'}?busy_timeout=soon")
    with pytest.raises(StoreError, match="does not exist") as e:
        await open_store(f"sqlite:///{tmp_path / 'missing' / 'a.db'}")
    assert e.value.code == "store_unavailable"
    assert not (tmp_path / "a.db").exists()


async def test_a_file_that_is_not_a_database_is_a_typed_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError):
        await open_store(f"sqlite:///{junk}")
    assert junk.read_bytes() == b"this is not a database" * 100  # left untouched


async def test_a_bare_path_opens_sqlite(tmp_path: Path) -> None:
    async with await open_store(str(tmp_path / "bare.db")) as s:
        assert isinstance(s, SQLiteStore)
        await turn(s, 0)
    assert (tmp_path / "bare.db").exists()


async def test_in_memory_database_works_in_one_store() -> None:
    async with await open_store("sqlite:///:memory:") as s:
        await turn(s, 0)
        assert (await s.head("ns", "thread:t")).sequence == 2


def _pragma(store: SQLiteStore, name: str) -> Any:
    assert store._conn is not None
    return store._conn.execute(f"PRAGMA {name}").fetchone()[0]


async def test_wal_and_durable_commits_by_default(store: SQLiteStore, tmp_path: Path) -> None:
    assert str(_pragma(store, "journal_mode")).lower() == "wal"
    assert _pragma(store, "synchronous") == 2  # FULL: the WAL is fsynced at every commit
    assert store.durability == "full"
    async with await open_store(f"sqlite:///{tmp_path / 't.db'}?durability=normal") as s:
        assert isinstance(s, SQLiteStore)
        assert _pragma(s, "synchronous") == 1  # NORMAL
    async with await open_store(f"sqlite:///{tmp_path / 't.db'}", durability="normal") as s:
        assert isinstance(s, SQLiteStore) and s.durability == "normal"


def _wal_frames(path: Path, page: int) -> int:
    wal = Path(f"{path}-wal")
    return (wal.stat().st_size - 32) // (page + 24) if wal.exists() else 0


@pytest.mark.parametrize("durability", ["full", "normal"])
async def test_the_wal_is_checkpointed_at_sqlites_thousand_pages(
    tmp_path: Path, durability: str
) -> None:
    """The WAL is checkpointed every 1,000 pages (``_WAL_AUTOCHECKPOINT``, SQLite's
    default, as SQLiteSession and SqliteSaver run), at both durabilities: the database
    file stays as created until the WAL passes 1,000 frames (a checkpoint is the only
    thing that writes it in WAL mode), then grows while the WAL holds no more than
    about 1,000 frames (it wraps)."""
    path = tmp_path / "w.db"
    async with await open_store(f"sqlite:///{path}?durability={durability}") as s:
        assert isinstance(s, SQLiteStore)
        assert _pragma(s, "wal_autocheckpoint") == sqlite_module._WAL_AUTOCHECKPOINT == 1000
        page = _pragma(s, "page_size")
        created = path.stat().st_size
        i = 0
        while path.stat().st_size == created:  # no checkpoint yet
            assert _wal_frames(path, page) <= 1000 + 50, i
            await turn(s, i, scope=f"thread:t{i % 7}")
            i += 1
        assert _wal_frames(path, page) >= 1000, i  # the first checkpoint came at 1,000
        for j in range(i, i + 400):  # the WAL wraps: no longer file
            await turn(s, j, scope=f"thread:t{j % 7}")
        assert 1000 <= _wal_frames(path, page) <= 1000 + 50
        assert path.stat().st_size > created
        assert (await s.head("ns", "thread:t0")).sequence == 2 * len(range(0, i + 400, 7))


# --- migrations ------------------------------------------------------------------------------


async def test_schema_version_is_recorded_once(store: SQLiteStore, tmp_path: Path) -> None:
    assert await store.schema_version() == _sqlite_schema.LATEST
    async with await open_store(f"sqlite:///{tmp_path / 't.db'}"):
        pass
    c = sqlite3.connect(tmp_path / "t.db")
    try:
        rows = c.execute("SELECT version, name FROM tether_schema ORDER BY version").fetchall()
    finally:
        c.close()
    assert [r[0] for r in rows] == [m.version for m in _sqlite_schema.MIGRATIONS]


async def test_a_new_migration_is_applied_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    async with await open_store(url) as s:
        await turn(s, 0)
    extra = _sqlite_schema.Migration(
        version=_sqlite_schema.LATEST + 1,
        name="test: an extra column",
        statements=("ALTER TABLE tether_scopes ADD COLUMN note TEXT",),
    )
    import tether.store.sqlite as mod

    monkeypatch.setattr(mod, "MIGRATIONS", (*_sqlite_schema.MIGRATIONS, extra))
    monkeypatch.setattr(mod, "LATEST", extra.version)
    async with await open_store(url) as s:
        assert isinstance(s, SQLiteStore)
        assert await s.schema_version() == extra.version
        assert (await s.head("ns", "thread:t")).sequence == 2  # data kept
        assert s._conn is not None
        cols = [r[1] for r in s._conn.execute("PRAGMA table_info(tether_scopes)")]
        assert "note" in cols


@pytest.mark.parametrize("version", [1, 2])
async def test_an_older_file_opens_with_its_resource_heads_read_from_the_index(
    version: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Versions 1 and 2 kept resource heads in a table too (moved by an upsert, then by
    # a trigger); version 3 reads them from the rkey index and drops the table. A file
    # written at 1 or 2 opens at the latest with every head as it was.
    import tether.store.sqlite as mod

    url = f"sqlite:///{tmp_path / f'v{version}.db'}"
    with monkeypatch.context() as m:
        m.setattr(mod, "MIGRATIONS", _sqlite_schema.MIGRATIONS[:version])
        m.setattr(mod, "LATEST", version)
        async with await open_store(url) as s:
            txn = Transaction(s, "ns")
            await txn.append("thread:t", "resource", {"v": 0}, resource_key="var:x")
            old = await txn.append("thread:t", "resource", {"v": 1}, resource_key="var:x")
            await txn.append("thread:t", "resource", {"z": 1}, resource_key="var:z")
            await txn.commit()
            assert await s.schema_version() == version
    async with await open_store(url) as s:
        assert isinstance(s, SQLiteStore) and s._conn is not None
        assert await s.schema_version() == _sqlite_schema.LATEST == 4
        tables = {r[0] for r in s._conn.execute("SELECT name FROM sqlite_schema")}
        assert "tether_resource_heads" not in tables and "tether_nodes_head" not in tables
        assert await s.resource_head("ns", "thread:t", "var:x") == old
        txn = Transaction(s, "ns")
        new = await txn.append("thread:t", "resource", {"v": 2}, resource_key="var:x")
        await txn.append("thread:t", "resource", {"w": 1}, resource_key="var:y")
        await txn.commit()
        assert await s.resource_head("ns", "thread:t", "var:x") == new
        assert [n.payload for n in await s.versions("ns", "thread:t", "var:x")] == [
            {"v": 0},
            {"v": 1},
            {"v": 2},
        ]
        heads = await s.resource_heads("ns", "thread:t", "var:")
        assert list(heads) == ["var:x", "var:y", "var:z"]
        assert heads["var:x"] == new and heads["var:z"].payload == {"z": 1}


async def test_a_common_commit_is_one_statement(store: SQLiteStore) -> None:
    # A commit to a scope the store knows, with a resource key among its nodes, is
    # one INSERT that checks the head itself (no BEGIN, no separate check, no COMMIT)
    # and leaves the nodes, the head and the resource head as the long form does.
    await turn(store, 0)
    head = await store.head("ns", "thread:t")
    txn = Transaction(store, "ns")
    a = await txn.append("thread:t", "goal", {"i": 1})
    b = await txn.append("thread:t", "resource", {"v": 1}, resource_key="var:x")
    seen: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(seen.append)
    try:
        await txn.commit()
    finally:
        store._conn.set_trace_callback(None)
    # SQLite's trace reports a statement again for each trigger program it runs in it,
    # so the check is on which statements ran: the INSERT alone (no BEGIN, no
    # SELECT of the head, no upsert of the resource head, no COMMIT).
    assert seen and all(sql.startswith("INSERT INTO tether_nodes (") for sql in seen), seen
    after = await store.head("ns", "thread:t")
    assert (after.generation, after.sequence, after.frontier) == (0, head.sequence + 2, (b.id,))
    assert [n.id for n in await store.nodes("ns", "thread:t", after=head.sequence)] == [a.id, b.id]
    assert await store.resource_head("ns", "thread:t", "var:x") == b
    assert store._conn.in_transaction is False


async def test_a_turn_reads_its_head_with_one_pragma_and_sees_every_other_writer(
    tmp_path: Path,
) -> None:
    # A head this store read or left is kept while no other connection commits: the
    # next turn's head read is PRAGMA data_version alone. A commit, reset or deletion
    # by another store on the file (another connection, as another process would be)
    # is seen at once, and a Transaction computed from the kept head never conflicts
    # where one that read the head would not.
    url = f"sqlite:///{tmp_path / 'h.db'}"
    async with await open_store(url) as a, await open_store(url) as b:
        assert isinstance(a, SQLiteStore) and a._conn is not None
        await turn(a, 0)
        seen: list[str] = []
        a._conn.set_trace_callback(seen.append)
        try:
            kept = await a.head("ns", "thread:t")
        finally:
            a._conn.set_trace_callback(None)
        assert seen == ["PRAGMA data_version"], seen
        assert kept == await b.head("ns", "thread:t")
        await turn(b, 1)  # another connection moves the head
        moved = await a.head("ns", "thread:t")
        assert moved.sequence == 4 and moved == await b.head("ns", "thread:t")
        await turn(a, 2)  # no conflict: the head a computed against is the real one
        assert (await b.head("ns", "thread:t")).sequence == 6
        # a reset by the other store, then a write of a's computed at the old head
        await b.reset_scope("ns", "thread:t")
        assert await a.head("ns", "thread:t") == tether.Head(generation=1)
        await turn(a, 3)
        assert (await b.head("ns", "thread:t")) == (await a.head("ns", "thread:t"))
        await b.delete_namespace("ns")
        assert await a.head("ns", "thread:t") == tether.Head(generation=2)


@given(
    frontiers=st.lists(
        st.sampled_from(["last", "empty", "two", "first", "a list"]), min_size=1, max_size=6
    )
)
async def test_a_kept_head_is_the_head_a_read_returns(frontiers: list[str]) -> None:
    # Whatever frontier a commit leaves (the last node, none, several, an older node),
    # the head this store keeps after it is the one a fresh store reads from the file.
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{d}/k.db"
        async with await open_store(url) as a, await open_store(url) as fresh:
            head = await a.head("ns", "thread:t")
            for i, shape in enumerate(frontiers):
                n1 = make_node("goal", {"i": i}, head.frontier, sequence=head.sequence + 1)
                n2 = make_node("answer", {"i": i}, [], sequence=head.sequence + 2)
                front = {
                    "last": (n2.id,),
                    "empty": (),
                    "two": (n1.id, n2.id),
                    "first": (n1.id,),
                    "a list": [n1.id, n2.id],  # a caller's list: kept, as read, as a tuple
                }[shape]
                await a.commit(
                    "ns",
                    [
                        ScopeWrite(
                            scope="thread:t",
                            expected_generation=head.generation,
                            expected_sequence=head.sequence,
                            nodes=(n1, n2),
                            frontier=front,
                        )
                    ],
                )
                head = await a.head("ns", "thread:t")
                assert isinstance(fresh, SQLiteStore)
                fresh._heads.clear()
                assert head == await fresh.head("ns", "thread:t")
                assert head.frontier == tuple(front)


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'n.db'}"
    async with await open_store(url):
        pass
    c = sqlite3.connect(tmp_path / "n.db")
    c.execute("INSERT INTO tether_schema VALUES (999, 'from the future', 'x')")
    c.commit()
    c.close()
    with pytest.raises(StoreError) as e:
        await open_store(url)
    assert e.value.code == "schema_too_new"
    assert "upgrade tether" in e.value.message


# --- locking: 'database is locked' never reaches the caller -------------------------------


def _hold_write_lock(path: Path, seconds: float, started: threading.Event) -> None:
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("BEGIN IMMEDIATE")
    started.set()
    time.sleep(seconds)
    c.execute("COMMIT")
    c.close()


@pytest.mark.parametrize("offload", [False, True])
async def test_a_locked_database_is_waited_for_without_blocking_the_loop(
    tmp_path: Path, offload: bool
) -> None:
    path = tmp_path / "l.db"
    async with await open_store(f"sqlite:///{path}", offload=offload) as s:
        await turn(s, 0)
        started = threading.Event()
        holder = threading.Thread(target=_hold_write_lock, args=(path, 0.3, started))
        holder.start()
        started.wait()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.create_task(ticker())
        t0 = time.monotonic()
        await turn(s, 1)  # waits for the other connection's lock, then commits
        waited = time.monotonic() - t0
        tick.cancel()
        holder.join()
        assert waited >= 0.2
        assert ticks >= 10, "the event loop was blocked while waiting for the lock"
        assert (await s.head("ns", "thread:t")).sequence == 4


async def test_a_lock_held_past_busy_timeout_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    async with await open_store(f"sqlite:///{path}", busy_timeout=0.2) as s:
        await turn(s, 0)
        started = threading.Event()
        holder = threading.Thread(target=_hold_write_lock, args=(path, 1.0, started))
        holder.start()
        started.wait()
        try:
            with pytest.raises(StoreError) as e:
                await turn(s, 1)
        finally:
            holder.join()
        assert e.value.code == "busy"
        assert "busy_timeout" in e.value.message
        assert (await s.head("ns", "thread:t")).sequence == 2
        await turn(s, 1)  # and the store is fine afterwards
        assert (await s.head("ns", "thread:t")).sequence == 4


async def test_offloaded_calls_run_on_the_store_thread(tmp_path: Path) -> None:
    async with await open_store(f"sqlite:///{tmp_path / 'o.db'}", offload=True) as s:
        assert isinstance(s, SQLiteStore)
        names: list[str] = []
        assert s._conn is not None
        s._conn.set_trace_callback(lambda _: names.append(threading.current_thread().name))
        await turn(s, 0)
        assert names and all(n.startswith("tether-sqlite") for n in names)


# --- cost: appends and heads do not grow with history -------------------------------------


async def test_commit_and_head_cost_the_same_at_any_history_length(tmp_path: Path) -> None:
    """Counted in SQLite VM instructions, so the test is exact and immune to timing.

    (durability=normal only to keep 2,000 fsyncs out of the test's time: the work a
    commit does in SQLite is the same either way.)
    """
    store = await open_store(f"sqlite:///{tmp_path / 'c.db'}", durability="normal")
    assert isinstance(store, SQLiteStore)
    try:
        await _costs(store)
    finally:
        await store.close()


class _Steps:
    """A progress handler that counts SQLite VM instructions."""

    n = 0

    def __call__(self) -> int:
        self.n += 1
        return 0


async def _costs(store: SQLiteStore) -> None:
    assert store._conn is not None
    conn = store._conn
    costs: dict[int, tuple[int, int]] = {}
    for i in range(2001):
        txn = Transaction(store, "ns")
        await txn.append("thread:t", "goal", {"i": i})
        await txn.append("thread:t", "answer", {"i": i})
        if i not in (10, 100, 2000):
            await txn.commit()
            continue
        steps = _Steps()
        conn.set_progress_handler(steps, 1)
        await txn.commit()
        commit_steps, steps.n = steps.n, 0
        await store.head("ns", "thread:t")
        conn.set_progress_handler(None, 1)
        costs[i] = (commit_steps, steps.n)
    assert costs[10] == costs[100] == costs[2000], costs


async def test_queries_use_indexes_not_scans(store: SQLiteStore) -> None:
    txn = Transaction(store, "ns")
    g = await txn.append("thread:t", "goal", {"i": 0})
    await txn.append("thread:t", "resource", {"v": 1}, resource_key="var:x")
    await txn.commit()
    assert store._conn is not None
    conn = store._conn
    sql: list[str] = []
    conn.set_trace_callback(sql.append)
    await store.head("ns", "thread:t")
    await store.nodes("ns", "thread:t", after=1, limit=5)
    await store.nodes("ns", "thread:t", before=3, descending=True)
    await store.get_nodes("ns", "thread:t", [g.id])
    await store.resource_head("ns", "thread:t", "var:x")
    await store.resource_heads("ns", "thread:t", "var:")
    await store.resource_heads("ns", "thread:t")
    await store.resource_heads_across("ns", "var:")
    await store.resource_heads_across("ns", "var:", after=("thread:t", "var:a"))
    await store.resource_heads_across("ns", "", scope_prefix="", after=("thread:t", ""))
    await store.versions("ns", "thread:t", "var:x")
    await store.list_scopes("ns", prefix="thread:")
    await store.list_namespaces()
    conn.set_trace_callback(None)
    selects = [s for s in sql if s.lstrip().upper().startswith(("SELECT", "WITH"))]
    assert len(selects) >= 9
    for s in selects:
        steps = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + s)]
        plan = " | ".join(steps)
        for table in ("tether_nodes", "tether_scopes"):
            assert f"SCAN {table}" not in plan, f"{s}\n  -> {plan}"
        # a SEARCH that names no index walks the table (a comparison's affinity can
        # keep the planner off an expression index: ``k >> 32 = +sid``)
        for step in steps:
            if step.startswith("SEARCH"):
                assert " USING " in step, f"{s}\n  -> {plan}"


# --- layout: rows stay small --------------------------------------------------------------


async def test_rows_are_compact(store: SQLiteStore) -> None:
    txn = Transaction(store, "ns")
    await txn.append("thread:t", "goal", {"i": 0})
    b = await txn.append("thread:t", "tool_call", {"i": 1})
    await txn.commit()
    assert store._conn is not None
    rows = store._conn.execute(
        "SELECT length(id), length(parents), typeof(created_at), kind, frontier"
        " FROM tether_nodes ORDER BY k"
    ).fetchall()
    assert rows[0] == (12, 0, "integer", KIND_CODES.index("goal"), None)
    # The last node of a commit carries the frontier; the only head is itself: 0 bytes.
    assert rows[1] == (12, 12, "integer", KIND_CODES.index("tool_call"), b"")
    assert (await store.head("ns", "thread:t")).frontier == (b.id,)


def test_kind_codes_are_frozen() -> None:
    # Stored in every row: reordering would silently change every stored kind.
    assert KIND_CODES == (
        "system",
        "goal",
        "inference",
        "semantic",
        "tool_call",
        "tool_result",
        "resource",
        "verification",
        "answer",
        "protocol_error",
    )
    assert set(KIND_CODES) == set(tether.KINDS)


@given(st.datetimes(timezones=st.just(__import__("datetime").UTC)))
def test_created_at_compacts_losslessly(dt: Any) -> None:
    s = dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    v = created_at_value(s)
    assert created_at_text(v) == s
    if dt.year >= 1:
        assert isinstance(v, int)


@given(st.text(max_size=30))
def test_any_created_at_string_round_trips(s: str) -> None:
    assert created_at_text(created_at_value(s)) == s


def test_now_iso_is_stored_as_an_integer() -> None:
    assert isinstance(created_at_value(now_iso()), int)


@given(st.lists(st.binary(min_size=12, max_size=12), max_size=5))
def test_id_packing_round_trips(raw: list[bytes]) -> None:
    ids = ["cw_" + r.hex() for r in raw]
    assert unpack_ids(pack_ids(ids)) == tuple(ids)


_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=6)


@given(prefix=_text, s=_text)
def test_prefix_upper_bounds_exactly_the_strings_with_the_prefix(prefix: str, s: str) -> None:
    upper = prefix_upper(prefix)
    b = s.encode()  # SQLite and PostgreSQL "C" compare UTF-8 bytes
    in_range = b >= prefix.encode() and (upper is None or b < upper.encode())
    assert in_range == s.startswith(prefix)


async def test_the_write_path_leaves_no_cursor_behind(tmp_path: Path) -> None:
    # sqlite3's Connection.execute makes a cursor per call and keeps a weak reference to
    # each of the last 200; a store per session (TetherSession.from_url) times that is
    # what the garbage collector ends up walking. Head reads and commits reuse one cursor.
    import gc
    import weakref

    def dead_refs() -> int:
        return sum(1 for o in gc.get_objects() if type(o) is weakref.ref and o() is None)

    store = await open_store(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        for i in range(3):  # warm up: the scope exists, statements are cached
            txn = Transaction(store, "ns")
            await txn.append("thread:t", "goal", {"i": i})
            await txn.commit()
        gc.collect()
        before = dead_refs()
        for i in range(150):
            txn = Transaction(store, "ns")
            await txn.append("thread:t", "goal", {"i": i})
            await txn.append("thread:t", "answer", {"i": i})
            await txn.commit()
            await store.head("ns", "thread:t")
        gc.collect()
        assert dead_refs() - before < 10  # a cursor per call leaves up to 200 behind
        assert (await store.head("ns", "thread:t")).sequence == 303
    finally:
        await store.close()


async def test_a_write_past_a_scopes_last_sequence_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """A scope's row keys hold 2**32 - 1 sequences: a write past them is a StoreError
    before anything is written."""
    from tether.core.errors import StoreError
    from tether.core.graph import make_node
    from tether.store import ScopeWrite

    store = await open_store(f"sqlite:///{tmp_path / 'full.db'}")
    try:
        node = make_node("goal", {"input": "x"}, [], sequence=2**32)
        write = ScopeWrite(
            scope="thread:t",
            expected_generation=0,
            expected_sequence=2**32 - 1,
            nodes=(node,),
            frontier=(node.id,),
        )
        with pytest.raises(StoreError, match="is full"):
            await store.commit("ns", [write])
        assert (await store.head("ns", "thread:t")).sequence == 0
    finally:
        await store.close()


@pytest.mark.parametrize(
    "parents", [("cw_" + "0" * 23,), ("not an id",), (7,), ["cw_" + "0" * 24], ("cw_" + "g" * 24,)]
)
async def test_a_node_with_malformed_parents_is_refused(store: SQLiteStore, parents: Any) -> None:
    import dataclasses

    from tether import InvalidNode

    good = make_node("goal", {"text": "hi"}, [], sequence=1)
    bad = dataclasses.replace(good, parents=parents)
    w = ScopeWrite(
        scope="s", expected_generation=0, expected_sequence=0, nodes=(bad,), frontier=(good.id,)
    )
    with pytest.raises(InvalidNode) as e:
        await store.commit("ns", [w])
    assert e.value.code == "shape"
    assert (await store.head("ns", "s")).sequence == 0  # nothing written
    # an earlier node of the same write is a parent by its id
    child = make_node("goal", {"text": "child"}, [good.id], sequence=2)
    ok = ScopeWrite(
        scope="s",
        expected_generation=0,
        expected_sequence=0,
        nodes=(good, child),
        frontier=(child.id,),
    )
    await store.commit("ns", [ok])
    assert (await store.head("ns", "s")).sequence == 2
