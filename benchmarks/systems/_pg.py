"""PostgreSQL helpers for the peer systems (psycopg 3): a private schema per system in
the benchmark database, its size, and the server's durability settings."""

from __future__ import annotations

from typing import Any

import psycopg

from .base import POSTGRES_URL


def connect(schema: str, **kw: Any) -> psycopg.Connection[Any]:
    return psycopg.connect(POSTGRES_URL, options=f"-c search_path={schema}", **kw)


def reset_schema(schema: str) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        c.execute(f'CREATE SCHEMA "{schema}"')


def drop_schema(schema: str) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def schema_bytes(schema: str) -> int:
    """pg_total_relation_size (heap + TOAST + indexes) of every table in ``schema``."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as c:
        row = c.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'm')",
            (schema,),
        ).fetchone()
        return int(row[0]) if row else 0


def server_durability(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in (
        "synchronous_commit",
        "fsync",
        "full_page_writes",
        "wal_sync_method",
        "server_version",
    ):
        row = conn.execute(f"SHOW {k}").fetchone()
        out[k] = row[0] if isinstance(row, tuple) else next(iter(row.values()))
    return out


def durability_report(server: dict[str, Any], commit: str, how: str) -> dict[str, Any]:
    """``System.durability()`` of a system on this server: the server's settings (no
    replica, so synchronous_commit=on is the strongest), what one commit is, and how."""
    strongest = server["synchronous_commit"] in ("on", "remote_apply") and server["fsync"] == "on"
    return {
        "setting": f"synchronous_commit={server['synchronous_commit']}, fsync={server['fsync']},"
        f" {commit}",
        "strongest": strongest,
        "note": f"server settings (no replica, so 'on' is the strongest); {how}",
        **server,
    }


def session_durability(server: dict[str, Any], how: str) -> dict[str, Any]:
    """``durability_report`` of a session system: one commit per add_items."""
    return durability_report(server, "commit per add_items", how)


def tether_schema(schema: str, *, fresh: bool) -> tuple[str, dict[str, Any]]:
    """A tether store's URL in its own ``schema`` (emptied first when ``fresh``; the store
    creates its tables in it) at durability=full, and the server's durability settings;
    ``SkipSystem`` when the server is not reachable."""
    from .base import SkipSystem

    try:
        if fresh:
            reset_schema(schema)
        with connect(schema, autocommit=True) as c:
            server = server_durability(c)
    except Exception as e:  # no server here
        raise SkipSystem(f"PostgreSQL at {POSTGRES_URL} unreachable: {e}") from e
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}schema={schema}&durability=full", server
