"""The PostgreSQL backend's own promises: URL options, schemas, migrations, durability.

Behaviour shared by every backend lives in tests/conformance/. Every test here uses
its own PostgreSQL schema and drops it: the server is shared with other tests.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import asyncpg
import pytest

from _wire import RoundTrips, commit_round_trips
from tether import InvalidRequest, StoreError, Transaction
from tether.store import Head, _postgres_schema, open_store
from tether.store.postgres import PostgresStore, parse_url

pytestmark = pytest.mark.postgres


def with_query(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


@pytest.fixture
async def schema(postgres_url: str) -> AsyncIterator[str]:
    name = f"tether_pgtest_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        conn = await asyncpg.connect(postgres_url)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        finally:
            await conn.close()


async def _sql(url: str, fn: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
    conn = await asyncpg.connect(url)
    try:
        return await fn(conn)
    finally:
        await conn.close()


def test_parse_url_splits_tether_options_off() -> None:
    dsn, opts = parse_url(
        "postgres://u:p@h:5433/db?schema=t1&sslmode=disable&min_size=2&max_size=3"
    )
    assert dsn == "postgresql://u:p@h:5433/db?sslmode=disable"
    assert opts == {"schema": "t1", "min_size": "2", "max_size": "3"}
    with pytest.raises(InvalidRequest):
        parse_url("mysql://h/db")


async def test_a_schema_name_must_be_an_identifier(postgres_url: str) -> None:
    for bad in ('x"; DROP TABLE y; --', "1abc", "a-b", "x" * 64):
        with pytest.raises(InvalidRequest):
            await open_store(postgres_url, schema=bad)


async def test_an_unreachable_server_is_a_typed_error() -> None:
    with pytest.raises(StoreError) as e:
        await open_store("postgresql://nobody:secret@127.0.0.1:1/none", timeout=2)
    assert e.value.code == "store_unavailable"
    assert "secret" not in e.value.message


async def test_tables_live_in_the_named_schema(postgres_url: str, schema: str) -> None:
    async with await open_store(with_query(postgres_url, f"schema={schema}")) as s:
        assert isinstance(s, PostgresStore) and s.schema == schema
        txn = Transaction(s, "ns")
        await txn.append("thread:t", "goal", {"x": 1})
        await txn.commit()
        assert await s.schema_version() == _postgres_schema.LATEST

    async def tables(conn: Any) -> list[str]:
        rows = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1", schema
        )
        return [r[0] for r in rows]

    assert await _sql(postgres_url, tables) == [
        "tether_nodes",
        "tether_resource_heads",
        "tether_schema",
        "tether_scopes",
    ]


async def test_processes_opening_a_fresh_schema_at_once_migrate_it_once(
    postgres_url: str, schema: str
) -> None:
    url = with_query(postgres_url, f"schema={schema}")
    stores = await asyncio.gather(*(open_store(url, max_size=2) for _ in range(6)))
    try:
        for i, s in enumerate(stores):
            txn = Transaction(s, "ns")
            await txn.append(f"thread:{i}", "goal", {"i": i})
            await txn.commit()
    finally:
        for s in stores:
            await s.close()

    async def versions(conn: Any) -> list[int]:
        return [r[0] for r in await conn.fetch(f'SELECT version FROM "{schema}".tether_schema')]

    assert await _sql(postgres_url, versions) == [m.version for m in _postgres_schema.MIGRATIONS]


async def test_a_newer_schema_is_refused(postgres_url: str, schema: str) -> None:
    url = with_query(postgres_url, f"schema={schema}")
    async with await open_store(url):
        pass

    async def bump(conn: Any) -> None:
        await conn.execute(
            f"INSERT INTO \"{schema}\".tether_schema (version, name) VALUES (999, 'future')"
        )

    await _sql(postgres_url, bump)
    with pytest.raises(StoreError) as e:
        await open_store(url)
    assert e.value.code == "schema_too_new"


async def test_a_new_migration_is_applied_in_place(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = with_query(postgres_url, f"schema={schema}")
    async with await open_store(url) as s:
        txn = Transaction(s, "ns")
        await txn.append("thread:t", "goal", {"x": 1})
        await txn.commit()
    extra = _postgres_schema.Migration(
        version=_postgres_schema.LATEST + 1,
        name="test: a note column",
        statements=("ALTER TABLE {s}.tether_scopes ADD COLUMN note text",),
    )
    import tether.store.postgres as mod

    monkeypatch.setattr(mod, "MIGRATIONS", (*_postgres_schema.MIGRATIONS, extra))
    monkeypatch.setattr(mod, "LATEST", extra.version)
    async with await open_store(url) as s:
        assert isinstance(s, PostgresStore)
        assert await s.schema_version() == extra.version
        assert (await s.head("ns", "thread:t")).sequence == 1

    async def cols(conn: Any) -> list[str]:
        rows = await conn.fetch(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = $1 AND table_name = 'tether_scopes'",
            schema,
        )
        return [r[0] for r in rows]

    assert "note" in await _sql(postgres_url, cols)


async def test_durability_normal_turns_synchronous_commit_off(
    postgres_url: str, schema: str
) -> None:
    base = with_query(postgres_url, f"schema={schema}")
    for url, want in ((base, "on"), (with_query(base, "durability=normal"), "off")):
        async with await open_store(url) as s:
            assert isinstance(s, PostgresStore)

            async def show(conn: Any) -> str:
                return str(await conn.fetchval("SHOW synchronous_commit"))

            assert await s._with_conn(show) == want
    with pytest.raises(InvalidRequest):
        await open_store(base, durability="paranoid")


async def test_rows_are_compact(postgres_url: str, schema: str) -> None:
    async with await open_store(with_query(postgres_url, f"schema={schema}")) as s:
        txn = Transaction(s, "ns")
        await txn.append("thread:t", "goal", {"x": 1})
        await txn.append("thread:t", "answer", {"x": 2})
        await txn.commit()

    async def rows(conn: Any) -> list[Any]:
        return list(
            await conn.fetch(
                f"SELECT length(id), length(parents), created_ms IS NOT NULL, created_text"
                f' FROM "{schema}".tether_nodes ORDER BY seq'
            )
        )

    assert [tuple(r) for r in await _sql(postgres_url, rows)] == [
        (12, 0, True, None),
        (12, 12, True, None),
    ]


class _Counting:
    """A connection proxy counting the statements sent to the server."""

    def __init__(self, conn: Any, log: list[str]) -> None:
        self._conn, self._log = conn, log

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._conn, name)
        if name in ("execute", "fetch", "fetchval", "fetchrow", "executemany"):

            def call(sql: str, *args: Any, **kw: Any) -> Any:
                self._log.append(sql)
                return attr(sql, *args, **kw)

            return call
        return attr


async def test_a_commit_is_one_statement_whatever_it_touches(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await open_store(with_query(postgres_url, f"schema={schema}")) as s:
        assert isinstance(s, PostgresStore)
        txn = Transaction(s, "ns")
        for scope in ("thread:a", "user:u", "app"):
            await txn.append(scope, "goal", {"s": scope})
            await txn.append(scope, "resource", {"v": 1}, resource_key="var:v")
        sent: list[str] = []
        inner = PostgresStore._with_conn

        async def counting(self: PostgresStore, fn: Any, **kw: Any) -> Any:
            return await inner(self, lambda conn: fn(_Counting(conn, sent)), **kw)

        monkeypatch.setattr(PostgresStore, "_with_conn", counting)
        await txn.commit()
        monkeypatch.undo()
        assert len(sent) == 1 and "tether_commit" in sent[0]
        for scope in ("thread:a", "user:u", "app"):
            assert (await s.head("ns", scope)).sequence == 2
            assert (await s.resource_head("ns", scope, "var:v")) is not None


async def test_a_schema_at_version_1_is_migrated_in_place(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 2 replaces tether_commit in a live schema; data written before stays."""
    import tether.store.postgres as mod

    url = with_query(postgres_url, f"schema={schema}")
    with monkeypatch.context() as m:
        m.setattr(mod, "MIGRATIONS", _postgres_schema.MIGRATIONS[:1])
        m.setattr(mod, "LATEST", 1)
        async with await open_store(url) as s:
            assert isinstance(s, PostgresStore)
            assert await s.schema_version() == 1
            await s.reset_scope("ns", "thread:t")  # a head that must survive the upgrade

    async with await open_store(url) as s:
        assert isinstance(s, PostgresStore)
        assert await s.schema_version() == _postgres_schema.LATEST >= 2
        assert await s.head("ns", "thread:t") == Head(generation=1)
        txn = Transaction(s, "ns")
        await txn.append("thread:t", "goal", {"x": 1})
        await txn.append("thread:t", "resource", {"v": 1}, resource_key="var:v")
        await txn.commit()
        assert (await s.head("ns", "thread:t")).sequence == 2
        assert await s.resource_head("ns", "thread:t", "var:v") is not None


async def test_a_statement_past_command_timeout_is_a_typed_error(
    postgres_url: str, schema: str
) -> None:
    url = with_query(postgres_url, f"schema={schema}")
    async with await open_store(url, command_timeout=0.3) as s:
        txn = Transaction(s, "ns")
        await txn.append("thread:t", "goal", {"x": 1})
        await txn.commit()
        blocker = await asyncpg.connect(postgres_url)
        try:
            tr = blocker.transaction()
            await tr.start()
            await blocker.execute(f'SELECT 1 FROM "{schema}".tether_scopes FOR UPDATE')
            with pytest.raises(StoreError) as e:
                await s.reset_scope("ns", "thread:t")  # waits for the row lock
            assert e.value.code == "timeout"
            await tr.rollback()
        finally:
            await blocker.close()
    # Checked on a store with the default timeout: the 0.3 s above is for the blocked
    # statement only, and a busy machine can take that long for an unblocked one.
    async with await open_store(url) as s:
        assert (await s.head("ns", "thread:t")).generation == 0  # the reset did not happen
        assert (await s.reset_scope("ns", "thread:t")).generation == 1


def _rows_read(plan: dict[str, Any], table: str) -> float:
    """Rows a plan (EXPLAIN ANALYZE, JSON) read from ``table``: those it returned from
    its scans of it plus those their filters removed, over every loop."""
    own = 0.0
    if plan.get("Relation Name") == table:
        loops = plan.get("Actual Loops", 1)
        own = (plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)) * loops
    return own + sum(_rows_read(p, table) for p in plan.get("Plans", ()))


async def test_a_look_up_by_id_reads_only_those_rows_whatever_the_statistics(
    postgres_url: str, schema: str
) -> None:
    """get_nodes (and the duplicate check of a commit) probe the (sid, id) index once per
    id. While a table's statistics are stale (it was never analyzed, as a new schema that
    grew fast), PostgreSQL's generic plan for ``id = ANY($3)``, the one a prepared
    statement ends up with, scanned every node of the scope and filtered the ids."""
    async with await open_store(with_query(postgres_url, f"schema={schema}")) as s:
        assert isinstance(s, PostgresStore)
        for i in range(30):
            txn = Transaction(s, "ns")
            for j in range(100):
                await txn.append("thread:t", "goal", {"i": i, "j": j})
            await txn.commit()
        some = [n.id for n in await s.nodes("ns", "thread:t", after=1000, limit=5)]
        assert len(some) == 5
        sent: list[tuple[str, tuple[Any, ...]]] = []
        inner = PostgresStore._with_conn

        class Recording:
            def __init__(self, conn: Any) -> None:
                self.conn = conn

            async def fetch(self, sql: str, *args: Any) -> Any:
                sent.append((sql, args))
                return await self.conn.fetch(sql, *args)

        async def recording(self: PostgresStore, fn: Any, **kw: Any) -> Any:
            return await inner(self, lambda conn: fn(Recording(conn)), **kw)

        PostgresStore._with_conn = recording  # type: ignore[method-assign]
        try:
            got = await s.get_nodes("ns", "thread:t", [*some, "cw_" + "0" * 24])
        finally:
            PostgresStore._with_conn = inner  # type: ignore[method-assign]
        assert sorted(got) == sorted(some)
        ((sql, args),) = sent

    async def explain(conn: Any) -> list[Any]:
        await conn.execute(f"PREPARE by_ids(text, text, bytea[]) AS {sql}")
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        ids = ", ".join(f"'\\x{i.hex()}'::bytea" for i in args[2])
        assert args[:2] == ("ns", "thread:t")  # literals below: EXECUTE takes no parameters
        out = await conn.fetchval(
            f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE by_ids('ns', 'thread:t', ARRAY[{ids}])"
        )
        return json.loads(out) if isinstance(out, str) else out

    analyzed = await _sql(
        postgres_url,
        lambda c: c.fetchval(
            "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL FROM pg_stat_user_tables"
            " WHERE schemaname = $1 AND relname = 'tether_nodes'",
            schema,
        ),
    )
    (plan,) = await _sql(postgres_url, explain)
    # 3,000 nodes in the scope; 6 ids asked for, 5 of them stored
    assert _rows_read(plan["Plan"], "tether_nodes") <= 6, (analyzed, plan)


async def test_a_commit_is_one_round_trip(postgres_url: str, schema: str) -> None:
    # Counted on the wire (a proxy between the store and the server): every commit,
    # however many scopes and nodes, a head only asserted, a stale head refused, is
    # one request and one answer once the connection has prepared tether_commit.
    async with RoundTrips(postgres_url) as wire:
        url = with_query(wire.url, f"schema={schema}&min_size=1&max_size=1")
        async with await open_store(url) as s:
            trips = await commit_round_trips(s, wire)
    assert len(trips) == 4 and set(trips.values()) == {1}, trips
