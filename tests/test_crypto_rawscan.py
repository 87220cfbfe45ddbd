"""Write a known marker through an encrypted store, then read the database as an attacker
without keys would (the raw SQLite file and its WAL, the raw PostgreSQL rows, every Redis
key): no trace of the marker, in any encoding we can think of.

Each test first checks that the same scan finds the marker when the store is NOT
encrypted, so a scan that sees nothing cannot pass by accident.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from _crypto_backends import Database, backend_params, database_fixture
from tether import Transaction
from tether.crypto import MasterKey
from tether.store import Store

NS = "rawscan"


@pytest.fixture(params=[p for p in backend_params() if p.id != "memory"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    async for d in database_fixture(request, tmp_path):
        yield d


def _traces(marker: str) -> list[bytes]:
    raw = marker.encode()
    return [
        raw,
        raw.hex().encode(),
        base64.b64encode(raw)[:-4],  # unpadded prefix: survives any alignment of base64
        raw.decode().encode("utf-16-le"),
    ]


async def _write_everywhere(store: Store, marker: str) -> None:
    txn = Transaction(store, NS)
    await txn.append("thread:t1", "goal", {"run": "r1", "input": f"my password is {marker}"})
    await txn.append("thread:t1", "inference", {"run": "r1", "content": marker, "tool_calls": []})
    await txn.semantic("user:u1", "preference", "note", {"text": marker})
    await txn.append("app", "resource", {"name": "v", "value": marker}, resource_key="var:v")
    await txn.commit()


async def _scan_finds(db: Database, cipher: MasterKey | None) -> list[bytes]:
    marker = "MARKER-" + secrets.token_hex(8)
    store = await db.open(cipher)
    await _write_everywhere(store, marker)
    got = await store.nodes(NS, "thread:t1")
    assert marker in got[0].payload["input"]  # readable through the store
    await store.close()
    raw = await db.raw_bytes()
    return [t for t in _traces(marker) if t in raw]


async def test_plaintext_store_shows_the_marker(db: Database) -> None:
    assert await _scan_finds(db, None)  # the scan works: without a cipher it sees the marker


async def test_encrypted_store_shows_no_trace_of_the_marker(db: Database) -> None:
    assert await _scan_finds(db, MasterKey.generate()) == []
