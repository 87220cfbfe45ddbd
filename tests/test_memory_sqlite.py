"""Memory projections over SQLite: state survives a restart and is seen by another process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from memory_helpers import Thread
from tether import open_store
from tether.projections import (
    AgentMemory,
    VarDecl,
    Variables,
    Window,
    compact,
    conversation_view,
    load_conversation,
    undo_compaction,
)

DECLS = [
    VarDecl(name="n", type="integer", default=0),
    VarDecl(name="tags", type="csv", scope="user"),
]


async def test_views_variables_and_memory_survive_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = await open_store(url)
    try:
        t = Thread(store, "acme", "t1")
        await t.system("sys")
        for i in range(15):
            await t.turn(f"run_{i}", f"u{i}", f"a{i}")
        await t.tool_turn("run_x", "look", [("c1", "f", {"q": 1})], [{"hit": True}], "found")
        r = await compact(store, "acme", "t1", strategy="summary")
        assert r.compacted
        before = await load_conversation(store, "acme", "t1")
        await Variables(store, "acme", DECLS, thread="t1", user="u").update(
            {"n": "41", "tags": "a,b\n1,2\n"}
        )
        await AgentMemory(store, "acme", scope="thread:t1").store("k", {"v": 1})
    finally:
        await store.close()

    store = await open_store(url)
    try:
        assert await load_conversation(store, "acme", "t1") == before
        v = Variables(store, "acme", DECLS, thread="t1", user="u")
        assert await v.all() == {"n": 41, "tags": [["a", "b"], ["1", "2"]]}
        assert await AgentMemory(store, "acme", scope="thread:t1").items() == {"k": {"v": 1}}
        await undo_compaction(store, "acme", "t1")
        full = await conversation_view(store, "acme", "t1")
        assert full.summary is None and full.kept == 34
    finally:
        await store.close()


async def test_another_process_reads_the_same_window(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = await open_store(url)
    try:
        t = Thread(store, "acme", "t1")
        for i in range(30):
            await t.turn(f"run_{i}", f"u{i}", f"a{i}")
        await compact(store, "acme", "t1", strategy="recent", max_messages=8)
        here = await load_conversation(store, "acme", "t1", policy=Window(size=5))
    finally:
        await store.close()
    code = textwrap.dedent(
        f"""
        import asyncio, json
        from tether import open_store
        from tether.projections import load_conversation, Window

        async def main():
            s = await open_store({url!r})
            try:
                print(json.dumps(await load_conversation(s, "acme", "t1", policy=Window(size=5))))
            finally:
                await s.close()

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(out.stdout) == here
    assert [m["content"] for m in here] == ["a27", "u28", "a28", "u29", "a29"]
