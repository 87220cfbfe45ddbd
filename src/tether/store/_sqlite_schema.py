"""The SQLite schema as numbered migrations (docs/storage.md explains every column).

Append-only: a released migration is never edited; a change is a new entry. The
versions applied to a file are rows of ``tether_schema``.

Why the shapes:

* A node's row key ``k`` is ``sid << 32 | sequence``: the rowid itself orders a
  scope's nodes, so paging by sequence is a rowid range scan and no separate
  (scope, sequence) index is stored. A scope holds at most 2**32 - 1 nodes and a
  file at most 2**31 scopes.
* A scope's head is not a row that every commit rewrites: its sequence is the
  largest ``k`` of the scope and its frontier rides on the last node of each
  commit (``frontier`` is NULL on every other node). A commit therefore writes its
  new node rows (and resource heads), nothing else.
* ``live`` flips only when a scope goes from empty to non-empty (or is reset), so
  listing skips empty scopes through a small partial index.
* A resource key's head is its newest node: the last entry of the key in the
  ``(scope, rkey)`` index, whose entries end with the row key (migration 3). A commit
  is one INSERT statement however many of its nodes carry resource keys, and it
  writes nothing but its node rows and their index entries. (Migrations 1 and 2 kept
  the heads in a table as well, moved by an upsert, then by a trigger: a second
  copy of what the index holds, which cost a commit a third of its SQLite time.)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        version=1,
        name="initial schema: scopes, nodes, resource heads",
        statements=(
            """CREATE TABLE tether_scopes (
                sid INTEGER PRIMARY KEY,
                ns TEXT NOT NULL,
                scope TEXT NOT NULL,
                generation INTEGER NOT NULL DEFAULT 0,
                live INTEGER NOT NULL DEFAULT 0
            )""",
            "CREATE UNIQUE INDEX tether_scopes_name ON tether_scopes (ns, scope)",
            "CREATE INDEX tether_scopes_live ON tether_scopes (ns, scope) WHERE live = 1",
            """CREATE TABLE tether_nodes (
                k INTEGER PRIMARY KEY,
                id BLOB NOT NULL,
                kind INTEGER NOT NULL,
                parents BLOB NOT NULL,
                created_at NOT NULL,
                rkey TEXT,
                frontier BLOB,
                payload BLOB NOT NULL
            )""",
            "CREATE UNIQUE INDEX tether_nodes_id ON tether_nodes (k >> 32, id)",
            """CREATE INDEX tether_nodes_rkey ON tether_nodes (k >> 32, rkey)
                WHERE rkey IS NOT NULL""",
            """CREATE TABLE tether_resource_heads (
                sid INTEGER NOT NULL,
                key TEXT NOT NULL,
                k INTEGER NOT NULL,
                PRIMARY KEY (sid, key)
            ) WITHOUT ROWID""",
        ),
    ),
    Migration(
        version=2,
        name="resource heads moved by a trigger on the node insert",
        statements=(
            # Row by row, in insertion order: the last node of a commit with a key is
            # its head, as the upsert the store ran after its inserts made it.
            """CREATE TRIGGER tether_nodes_head AFTER INSERT ON tether_nodes
                WHEN new.rkey IS NOT NULL
                BEGIN
                    INSERT INTO tether_resource_heads (sid, key, k)
                    VALUES (new.k >> 32, new.rkey, new.k)
                    ON CONFLICT (sid, key) DO UPDATE SET k = excluded.k;
                END""",
        ),
    ),
    Migration(
        version=3,
        name="resource heads read from the resource-key index; the heads table dropped",
        statements=(
            # The index (k >> 32, rkey) WHERE rkey IS NOT NULL holds every version of
            # every key in row-key order, so a key's head is its last entry: nothing
            # to carry over.
            "DROP TRIGGER tether_nodes_head",
            "DROP TABLE tether_resource_heads",
        ),
    ),
)

# The file frees the pages a prune empties (auto_vacuum=INCREMENTAL; issue 43). Nothing
# runs in the migrations' transaction: the switch needs a VACUUM, which the store runs
# right after it commits (SQLiteStore._vacuum_mode). Kept last: renumber it if a
# migration lands before it.
INCREMENTAL_VACUUM = 4
MIGRATIONS += (
    Migration(
        version=INCREMENTAL_VACUUM,
        name="auto_vacuum=INCREMENTAL: a prune's freed pages shrink the file",
        statements=(),
    ),
)

LATEST = MIGRATIONS[-1].version
