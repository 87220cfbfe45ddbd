"""``tether recall`` and ``tether reindex`` in-process (CliRunner) on a SQLite file."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli import main
from tether.projections import remember
from tether.store import open_store


def _seed(db: Path) -> None:
    async def go() -> None:
        store = await open_store(f"sqlite:///{db}")
        await remember(store, "default", "user:alice", "memory", "allergy", "allergic to peanuts")
        await remember(store, "default", "user:alice", "memory", "city", "lives in Lisbon")
        await remember(store, "default", "user:alice", "preference", "drink", "likes green tea")
        await store.close()

    asyncio.run(go())


def test_recall_and_reindex_from_the_shell(tmp_path: Path) -> None:
    pytest.importorskip("wordllama")
    db = tmp_path / "t.db"
    _seed(db)
    r = CliRunner().invoke(
        main,
        [
            "--store",
            str(db),
            "--json",
            "recall",
            "what am I allergic to?",
            "-u",
            "alice",
            "-k",
            "2",
        ],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["scope"] == "user:alice" and out["hits"][0]["key"] == "allergy"
    r = CliRunner().invoke(
        main,
        [
            "--store",
            str(db),
            "--json",
            "recall",
            "tea",
            "-u",
            "alice",
            "--type",
            "preference",
            "--embedder",
            "hashing:64",
        ],
        catch_exceptions=False,
    )
    assert [h["key"] for h in json.loads(r.output)["hits"]] == ["drink"]
    r = CliRunner().invoke(main, ["--store", str(db), "reindex", "-u", "alice"])
    assert r.exit_code == 0 and "indexed 3 memories of user:alice" in r.output
    # the file keeps the index: --check compares it with the graph, and finds tampering
    r = CliRunner().invoke(main, ["--store", str(db), "reindex", "--check", "-u", "alice"])
    assert r.exit_code == 0 and "checked 3 memories" in r.output, r.output
    with sqlite3.connect(db) as c:
        c.execute("UPDATE tether_recall_vectors SET vector = zeroblob(1024) WHERE key LIKE '%city'")
    r = CliRunner().invoke(main, ["--store", str(db), "reindex", "--check", "-u", "alice"])
    assert r.exit_code == 3 and "semantic:memory:city: vector differs" in r.output, r.output
    r = CliRunner().invoke(main, ["--store", str(db), "reindex", "-u", "alice"])
    assert r.exit_code == 0
    r = CliRunner().invoke(
        main, ["--store", str(db), "recall", "x", "-u", "alice", "--embedder", "nope"]
    )
    assert r.exit_code != 0 and "unknown embedder" in r.output


async def test_recall_over_http_needs_a_grant_and_finds_by_meaning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("fastapi")
    import httpx

    from tether.server import Tokens, create_app
    from tether.server.auth import dev_token
    from tether.store.in_memory import MemoryStore

    monkeypatch.setenv("TETHER_EMBEDDER", "hashing:128")
    store = MemoryStore()
    await remember(store, "default", "user:alice", "memory", "allergy", "allergic to peanuts")
    await remember(store, "default", "user:alice", "memory", "city", "lives in Lisbon")
    tokens = Tokens(
        [
            dev_token(
                "t-read-0123456789abcdef",
                name="read",
                grants=["state.history"],
                namespaces=["default"],
            ),
            dev_token(
                "t-other-0123456789abcdef",
                name="other",
                grants=["state.describe"],
                namespaces=["default"],
            ),
        ]
    )
    app = create_app(store, tokens=tokens)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether"
    ) as c:
        url = "/v1/ns/default/recall"
        params = {"q": "peanuts", "scope": "user:alice", "k": "1"}
        r = await c.get(
            url, params=params, headers={"Authorization": "Bearer t-read-0123456789abcdef"}
        )
        assert r.status_code == 200, r.text
        assert [h["key"] for h in r.json()["hits"]] == ["allergy"]
        r = await c.get(
            url, params=params, headers={"Authorization": "Bearer t-other-0123456789abcdef"}
        )
        assert r.status_code == 403
        r = await c.get(
            url,
            params={**params, "scope": "nowhere"},
            headers={"Authorization": "Bearer t-read-0123456789abcdef"},
        )
        assert r.status_code == 400
