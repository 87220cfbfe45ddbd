"""A SQLite file written by the last release opens with this code: brought to the latest
schema in place, with every node, id, head and resource head as the release wrote them.

``tests/data/sqlite_release.db`` was written by main at 5c422fc (schema 3), with
``tests/data/make_sqlite_release_db.py``; ``sqlite_release.json`` is what that code read
back from it. A new migration must pass this test unchanged.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from tether import Transaction
from tether.control import verify_scope
from tether.core.graph import node_id
from tether.store import open_store
from tether.store._sqlite_schema import LATEST
from tether.store.sqlite import SQLiteStore

DATA = Path(__file__).resolve().parent / "data"


def _version(db: Path) -> int:
    c = sqlite3.connect(db)
    try:
        return int(c.execute("SELECT max(version) FROM tether_schema").fetchone()[0])
    finally:
        c.close()


async def test_a_file_of_the_last_release_opens_migrated_with_everything_intact(
    tmp_path: Path,
) -> None:
    db = tmp_path / "release.db"
    shutil.copyfile(DATA / "sqlite_release.db", db)
    expected = json.loads((DATA / "sqlite_release.json").read_text())
    assert _version(db) == 3  # as the release left it
    async with await open_store(f"sqlite:///{db}") as s:
        assert isinstance(s, SQLiteStore)
        assert await s.schema_version() == LATEST
        namespaces = await s.list_namespaces()
        assert namespaces == sorted({k.split("/", 1)[0] for k in expected})
        seen = set()
        for ns in namespaces:
            for info in await s.list_scopes(ns):
                seen.add(f"{ns}/{info.scope}")
        assert seen == set(expected)
        for key, want in expected.items():
            ns, scope = key.split("/", 1)
            head = await s.head(ns, scope)
            assert [head.generation, head.sequence, list(head.frontier)] == want["head"], key
            nodes = await s.nodes(ns, scope)
            assert [n.to_dict() for n in nodes] == want["nodes"], key
            for n in nodes:  # every id is the content's own
                assert node_id(n.kind, n.parents, n.payload, n.resource_key) == n.id
            by_id = await s.get_nodes(ns, scope, [n.id for n in nodes])
            assert [by_id[n.id] for n in nodes] == nodes
            heads = await s.resource_heads(ns, scope)
            assert {k: v.id for k, v in heads.items()} == want["resource_heads"], key
            for k, node in heads.items():
                assert (await s.versions(ns, scope, k))[-1] == node
            check = await verify_scope(s, ns, scope)
            assert check.ok and check.checked == len(nodes), check
        # and it goes on: a turn on the release's thread, read back after a reopen
        txn = Transaction(s, "acme")
        goal = await txn.append("thread:t1", "goal", {"role": "user", "content": "after"})
        await txn.commit()
        assert goal.sequence == expected["acme/thread:t1"]["head"][1] + 1
        assert set(goal.parents) == set(expected["acme/thread:t1"]["head"][2])
    async with await open_store(f"sqlite:///{db}") as s:
        assert (await s.nodes("acme", "thread:t1", after=goal.sequence - 1)) == [goal]
    assert _version(db) == LATEST
