"""verify of an encrypted store where a user was erased (issue 18).

The erased scopes are reported (``ScopeCheck.erased`` counts their erased nodes) and
everything erasure left is still checked: the other scopes in full, and in the erased
ones each node's links, order, createdAt and index entries. Through the control
plane, the CLI and HTTP; verify writes nothing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest
from click.testing import CliRunner

from _server_helpers import TOKEN, demo_agent
from tether import control
from tether.cli import main
from tether.control import ScopeCheck
from tether.core.errors import InvalidRequest, KeyErased
from tether.crypto import MasterKey, erase_user
from tether.server import Tokens, create_app
from tether.store import Store, open_store

NS = "default"


def db_bytes(path: Path) -> bytes:
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


@pytest.fixture
def key() -> MasterKey:
    return MasterKey.generate()


@pytest.fixture
async def erased(tmp_path: Path, key: MasterKey) -> AsyncIterator[tuple[Store, Path]]:
    """alice (t1) erased, bob (t2) untouched, on an encrypted SQLite file."""
    path = tmp_path / "enc.db"
    store = await open_store(f"sqlite:///{path}", cipher=key)
    agent = demo_agent(store)
    await agent.step("What's the weather in Paris?", thread="t1", user="alice")
    await agent.step("Please note that my plan is gold.", thread="t1", user="alice")
    await agent.step("What's the weather in Rome?", thread="t2", user="bob")
    await erase_user(store, NS, "alice")
    yield store, path
    await store.close()


async def test_verify_reports_erased_scopes_and_checks_the_rest(
    erased: tuple[Store, Path],
) -> None:
    store, path = erased
    t1 = await store.head(NS, "thread:t1")
    before = db_bytes(path)
    result = await control.verify(store, namespace=NS)
    assert result.ok, result.checks
    by_scope = {c.scope: c for c in result.checks}
    assert by_scope["thread:t1"].erased == by_scope["thread:t1"].checked == t1.sequence
    assert by_scope["user:alice"].erased == by_scope["user:alice"].checked > 0
    assert by_scope["thread:t2"].erased == 0 and by_scope["thread:t2"].checked > 0
    assert by_scope["user:bob"].erased == 0
    assert result.metadata["erased"] == {
        "thread:t1": t1.sequence,
        "user:alice": by_scope["user:alice"].erased,
    }
    one = await control.verify(store, namespace=NS, thread="t1")
    assert one.ok and one.checks[0].erased == t1.sequence
    assert "erased" not in (await control.verify(store, namespace=NS, thread="t2")).metadata
    assert db_bytes(path) == before
    # Export still refuses: a snapshot of placeholders would lie about its ids.
    with pytest.raises(KeyErased):
        await control.export(store, namespace=NS, thread="t1")


async def test_a_fault_in_an_erased_scope_is_still_found(
    erased: tuple[Store, Path], key: MasterKey
) -> None:
    store, path = erased
    await store.close()
    with sqlite3.connect(path) as db:  # tamper with what erasure leaves readable
        sid = db.execute("SELECT sid FROM tether_scopes WHERE scope = 'thread:t1'").fetchone()[0]
        # the newest node's parent: an id no node of the scope has
        assert db.execute(
            "UPDATE tether_nodes SET parents = ? WHERE k = (SELECT max(k) FROM tether_nodes"
            " WHERE k >> 32 = ?)",
            (bytes(12), sid),
        ).rowcount
    reopened = await open_store(f"sqlite:///{path}", cipher=key)
    try:
        result = await control.verify(reopened, namespace=NS)
        by_scope = {c.scope: c for c in result.checks}
        assert not result.ok
        assert by_scope["thread:t1"].code == "parent_missing"
        assert by_scope["thread:t1"].erased > 0
        assert by_scope["thread:t2"].ok and by_scope["user:alice"].ok
    finally:
        await reopened.close()


def test_scope_check_erased_field() -> None:
    c = ScopeCheck(scope="thread:t", ok=True, checked=3, erased=2)
    assert ScopeCheck.from_dict(c.to_dict()) == c
    for bad in ({"erased": 4}, {"erased": -1}, {"erased": 1.0}):
        with pytest.raises(InvalidRequest):
            ScopeCheck.from_dict({"scope": "thread:t", "ok": True, "checked": 3, **bad})


def test_cli_verify_of_an_erased_store(tmp_path: Path, key: MasterKey) -> None:
    path = tmp_path / "cli.db"

    async def fill() -> None:
        async with await open_store(f"sqlite:///{path}", cipher=key) as s:
            agent = demo_agent(s)
            await agent.step("What's the weather in Paris?", thread="t1", user="alice")
            await agent.step("What's the weather in Rome?", thread="t2", user="bob")
            await erase_user(s, NS, "alice")

    asyncio.run(fill())
    env = {"TETHER_MASTER_KEY": key.to_base64()}
    before = db_bytes(path)
    r = CliRunner().invoke(main, ["--store", str(path), "--json", "verify"], env=env)
    assert r.exit_code == 0, r.stderr
    out = orjson.loads(r.stdout)
    assert out["ok"] is True
    assert set(out["metadata"]["erased"]) == {"thread:t1", "user:alice"}
    human = CliRunner().invoke(main, ["--store", str(path), "verify", "--thread", "t1"], env=env)
    assert human.exit_code == 0, human.stderr
    assert "erased)" in human.stdout and "ok" in human.stdout
    assert db_bytes(path) == before


async def test_http_verify_of_an_erased_store(erased: tuple[Store, Path]) -> None:
    store, path = erased
    app = create_app(store, tokens=Tokens.single(TOKEN))
    before = db_bytes(path)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://tether",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as c:
        one = await c.get("/v1/ns/default/threads/t1/verify")
        assert one.status_code == 200, one.text
        assert one.json()["ok"] is True and one.json()["checks"][0]["erased"] > 0
        every = await c.post("/state/verify", json={"namespace": NS})
        assert every.status_code == 200, every.text
        assert every.json()["ok"] is True
        assert set(every.json()["metadata"]["erased"]) == {"thread:t1", "user:alice"}
    assert db_bytes(path) == before
