"""Retention (issue 43): a namespace's policy, applied by gc; a conditional reset that
never takes a turn written since it was read; every backend, and the CLI."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import tether
from tether import control
from tether.control.retention import RetentionPolicy, retention, set_retention
from tether.core.errors import Conflict, InvalidRequest
from tether.core.graph import make_node
from tether.store.base import ScopeWrite, Store

OLD = "2020-01-01T00:00:00.000Z"


async def _thread(store: Store, ns: str, name: str, created_at: str | None = None) -> None:
    """A thread of two nodes, written at ``created_at`` (default: now)."""
    scope = f"thread:{name}"
    head = await store.head(ns, scope)
    a = make_node(
        "goal",
        {"run": f"r-{name}", "input": "hi", "llm": "agent"},
        head.frontier,
        sequence=head.sequence + 1,
        created_at=created_at,
    )
    b = make_node(
        "answer",
        {"run": f"r-{name}", "output": "hello"},
        [a.id],
        sequence=head.sequence + 2,
        created_at=created_at,
    )
    await store.commit(
        ns,
        [
            ScopeWrite(
                scope=scope,
                expected_generation=head.generation,
                expected_sequence=head.sequence,
                nodes=(a, b),
                frontier=(b.id,),
            )
        ],
    )


async def test_gc_deletes_idle_threads_only(store: Store, ns: str) -> None:
    await _thread(store, ns, "old", OLD)
    await _thread(store, ns, "fresh")
    assert await retention(store, ns) is None
    assert await control.gc(store, ns) == []  # no policy: nothing to do
    policy = await set_retention(store, ns, idle_thread_days=30)
    assert (await retention(store, ns)) == policy
    dry = await control.gc(store, ns, dry_run=True)
    assert [r.deleted for r in dry] == [("thread:old",)]
    assert (await store.head(ns, "thread:old")).sequence == 2  # a dry run changes nothing
    (done,) = await control.gc(store, ns)
    assert done.deleted == ("thread:old",) and done.moved == () and not done.dry_run
    assert (await store.head(ns, "thread:old")).sequence == 0
    assert (await store.head(ns, "thread:fresh")).sequence == 2
    again = await control.gc(store, ns)  # the deleted thread is not idle any more
    assert [(r.deleted, r.moved) for r in again] == [((), ())]
    assert done.to_dict()["policy"] == {
        "idle_thread_days": 30,
        "memory_ttl_days": None,
        "memory_ttl_refresh_on_read": False,
        "export_idle_threads": False,
    }


async def test_a_conditional_reset_never_takes_a_turn_written_since(store: Store, ns: str) -> None:
    await _thread(store, ns, "t", OLD)
    read = await store.head(ns, "thread:t")
    await _thread(store, ns, "t")  # a turn arrives after gc read the thread
    with pytest.raises(Conflict):
        await store.reset_scope_if(ns, "thread:t", read)
    assert (await store.head(ns, "thread:t")).sequence == 4
    now = await store.head(ns, "thread:t")
    after = await store.reset_scope_if(ns, "thread:t", now)
    assert after.generation == now.generation + 1
    assert (await store.head(ns, "thread:t")).sequence == 0


@pytest.mark.parametrize("days", [0, -1, "30", True, float("nan")])
async def test_a_bad_policy_is_refused(days: Any) -> None:
    from tether.store.in_memory import MemoryStore

    store = MemoryStore()
    with pytest.raises(InvalidRequest) as e:
        await set_retention(store, "ns", idle_thread_days=days)
    assert e.value.code == "invalid_request"
    assert await retention(store, "ns") is None


def test_the_cli_sets_a_policy_and_collects(tmp_path: Path) -> None:
    from tether.cli import main

    path = str(tmp_path / "gc.db")

    async def fill() -> None:
        async with await tether.open_store(path) as store:
            await _thread(store, "default", "old", OLD)
            await _thread(store, "default", "fresh")

    asyncio.run(fill())

    def cli(*args: str) -> Any:
        r = CliRunner().invoke(main, ["--store", path, "--json", *args], catch_exceptions=False)
        assert r.exit_code == 0, r.stderr
        return orjson.loads(r.stdout)

    assert cli("retention")["policy"] is None
    assert cli("retention", "--idle-thread-days", "7")["policy"] == {
        "idle_thread_days": 7.0,
        "memory_ttl_days": None,
        "memory_ttl_refresh_on_read": False,
        "export_idle_threads": False,
    }
    dry = cli("gc", "--dry-run")
    assert dry["namespaces"][0]["deleted"] == ["thread:old"]
    done = cli("gc")
    assert done["namespaces"][0]["deleted"] == ["thread:old"]
    threads = cli("threads")["threads"]
    assert [t["thread"] for t in threads] == ["fresh"]
    both = cli("retention", "--memory-ttl-days", "30")["policy"]
    assert both == {  # merged, not replaced
        "idle_thread_days": 7.0,
        "memory_ttl_days": 30.0,
        "memory_ttl_refresh_on_read": False,
        "export_idle_threads": False,
    }
    refreshed = cli("retention", "--refresh-on-read")["policy"]
    assert refreshed == {**both, "memory_ttl_refresh_on_read": True}
    assert cli("retention", "--idle-thread-days", "8")["policy"]["memory_ttl_refresh_on_read"]
    assert cli("retention", "--forever")["policy"] == {
        "idle_thread_days": None,
        "memory_ttl_days": None,
        "memory_ttl_refresh_on_read": False,
        "export_idle_threads": False,
    }
    assert cli("gc", "--now", "2999-01-01T00:00:00Z")["namespaces"] == []


async def test_gc_keeps_a_thread_written_between_its_read_and_its_deletion() -> None:
    from tether.store.base import Head
    from tether.store.in_memory import MemoryStore

    class Busy(MemoryStore):
        """A turn lands on each thread right before gc deletes it."""

        async def reset_scope_if(self, namespace: str, scope: str, expected: Head) -> Head:
            await _thread(self, namespace, scope.removeprefix("thread:"))
            return await super().reset_scope_if(namespace, scope, expected)

    store = Busy()
    await _thread(store, "ns", "old", OLD)
    await set_retention(store, "ns", idle_thread_days=1)
    (result,) = await control.gc(store, "ns")
    assert (result.deleted, result.moved) == ((), ("thread:old",))
    assert (await store.head("ns", "thread:old")).sequence == 4  # both turns kept


async def _memory(
    store: Store, ns: str, scope: str, type_: str, key: str, created_at: str | None
) -> str:
    head = await store.head(ns, scope)
    rk = f"semantic:{type_}:{key}"
    prev = await store.resource_head(ns, scope, rk)
    parents = sorted({*head.frontier, *([prev.id] if prev else [])})
    n = make_node(
        "semantic",
        {"type": type_, "key": key, "content": f"{key} v{head.sequence}"},
        parents,
        sequence=head.sequence + 1,
        resource_key=rk,
        created_at=created_at,
    )
    await store.commit(
        ns,
        [
            ScopeWrite(
                scope=scope,
                expected_generation=head.generation,
                expected_sequence=head.sequence,
                nodes=(n,),
                frontier=(n.id,),
            )
        ],
    )
    return n.id


async def test_gc_forgets_memories_past_their_ttl(store: Store, ns: str) -> None:
    from tether.control.retention import _tombstone
    from tether.projections.semantic import semantic_memory

    await _memory(store, ns, "user:ada", "memory", "old", OLD)
    await _memory(store, ns, "user:ada", "memory", "fresh", None)
    rewritten = await _memory(store, ns, "user:ada", "preference", "seat", OLD)
    await _memory(store, ns, "user:ada", "preference", "seat", None)  # written again: fresh
    await _memory(store, ns, "app", "memory", "policy", OLD)
    await _memory(store, ns, "thread:t", "summary", "agent", OLD)  # reserved: never expires
    await set_retention(store, ns, memory_ttl_days=30)
    (dry,) = await control.gc(store, ns, dry_run=True)
    assert sorted(dry.forgotten) == ["app/memory:policy", "user:ada/memory:old"]
    assert "memory:old" in await semantic_memory(store, ns, "user:ada")
    (done,) = await control.gc(store, ns)
    assert sorted(done.forgotten) == sorted(dry.forgotten) and done.deleted == ()
    assert set(await semantic_memory(store, ns, "user:ada")) == {"memory:fresh", "preference:seat"}
    assert await semantic_memory(store, ns, "app") == {}
    assert (await store.resource_head(ns, "thread:t", "semantic:summary:agent")) is not None
    # A version judged expired but rewritten before its tombstone commits is kept.
    assert await _tombstone(store, ns, "user:ada", "semantic:preference:seat", rewritten) is False
    assert "preference:seat" in await semantic_memory(store, ns, "user:ada")
    (again,) = await control.gc(store, ns)
    assert again.forgotten == ()


async def test_two_gc_at_once_delete_each_thread_once(store: Store, ns: str) -> None:
    for name in ("a", "b", "c"):
        await _thread(store, ns, name, OLD)
    await set_retention(store, ns, idle_thread_days=1)
    first, second = await asyncio.gather(control.gc(store, ns), control.gc(store, ns))
    deleted = [*first[0].deleted, *second[0].deleted]
    assert sorted(deleted) == ["thread:a", "thread:b", "thread:c"]  # each by one gc
    assert first[0].moved == second[0].moved == ()
    for name in ("a", "b", "c"):
        assert (await store.head(ns, f"thread:{name}")).sequence == 0


# -- a memory's TTL refreshed on read (LangGraph's TTLConfig refresh_on_read) ----------


async def test_a_read_that_refreshes_restarts_a_memorys_ttl(store: Store, ns: str) -> None:
    from tether.control.retention import TOUCH_PREFIX
    from tether.projections.semantic import semantic_memory

    old = await _memory(store, ns, "user:ada", "memory", "kept", OLD)
    unread = await _memory(store, ns, "user:ada", "memory", "unread", OLD)
    await set_retention(store, ns, memory_ttl_days=30)  # refresh_on_read off: a plain read
    assert set(await semantic_memory(store, ns, "user:ada")) == {"memory:kept", "memory:unread"}
    assert await store.resource_heads(ns, "user:ada", TOUCH_PREFIX) == {}
    (dry,) = await control.gc(store, ns, dry_run=True)
    assert sorted(dry.forgotten) == ["user:ada/memory:kept", "user:ada/memory:unread"]
    # One key read with refresh_ttl: its time restarts now; the other still expires.
    got = await semantic_memory(store, ns, "user:ada", "memory", refresh_ttl=True)
    assert got == {"memory:kept": "kept v0", "memory:unread": "unread v1"}  # the read itself
    touches = await store.resource_heads(ns, "user:ada", TOUCH_PREFIX)
    assert {k: n.payload for k, n in touches.items()} == {
        "ttl:semantic:memory:kept": {"version": old},
        "ttl:semantic:memory:unread": {"version": unread},
    }
    await _memory(store, ns, "user:ada", "memory", "other", OLD)  # never read
    (dry,) = await control.gc(store, ns, dry_run=True)
    assert dry.forgotten == ("user:ada/memory:other",)
    # Judged 31 days after the read, the read ones expire too.
    later = "2099-01-01T00:00:00Z"
    (far,) = await control.gc(store, ns, now=later, dry_run=True)
    assert len(far.forgotten) == 3
    # A second read right away records nothing more (one node a minute at most).
    before = (await store.head(ns, "user:ada")).sequence
    await semantic_memory(store, ns, "user:ada", refresh_ttl=True)
    assert (await store.head(ns, "user:ada")).sequence == before + 1  # only "other"


async def test_refresh_on_read_follows_the_policy(store: Store, ns: str) -> None:
    from tether.control.retention import TOUCH_PREFIX
    from tether.projections.semantic import semantic_memory

    await _memory(store, ns, "app", "memory", "k", OLD)
    await semantic_memory(store, ns, "app")  # no policy: a plain read
    assert await store.resource_heads(ns, "app", TOUCH_PREFIX) == {}
    await set_retention(store, ns, memory_ttl_days=30, memory_ttl_refresh_on_read=True)
    await semantic_memory(store, ns, "app", refresh_ttl=False)  # the caller says no
    assert await store.resource_heads(ns, "app", TOUCH_PREFIX) == {}
    await semantic_memory(store, ns, "app")  # the policy says yes
    assert set(await store.resource_heads(ns, "app", TOUCH_PREFIX)) == {"ttl:semantic:memory:k"}
    (r,) = await control.gc(store, ns)
    assert r.forgotten == ()
    assert (await retention(store, ns)) == RetentionPolicy(
        memory_ttl_days=30, memory_ttl_refresh_on_read=True
    )


async def test_a_refresh_never_resurrects_a_forgotten_memory(store: Store, ns: str) -> None:
    from tether.control.retention import TOUCH_PREFIX, _tombstone, refresh_memories
    from tether.projections.semantic import semantic_memory

    scope, rk = "user:ada", "semantic:memory:m"
    version = await _memory(store, ns, scope, "memory", "m", OLD)
    await set_retention(store, ns, memory_ttl_days=30)
    # gc judged it (no touch), then a read refreshed it before the tombstone: kept.
    assert await refresh_memories(store, ns, scope, {rk: version}) == (rk,)
    assert await _tombstone(store, ns, scope, rk, version, None) is False
    assert "memory:m" in await semantic_memory(store, ns, scope, refresh_ttl=False)
    # Forgotten (gc judged it with the touch it saw), then a late refresh of the version
    # that was read: nothing written, the memory stays forgotten.
    touch = await store.resource_head(ns, scope, TOUCH_PREFIX + rk)
    assert touch is not None
    assert await _tombstone(store, ns, scope, rk, version, touch.id) is True
    head = await store.head(ns, scope)
    assert await refresh_memories(store, ns, scope, {rk: version}) == ()
    assert await store.head(ns, scope) == head
    assert await semantic_memory(store, ns, scope, refresh_ttl=True) == {}
    # Refreshes and gc racing (interleaved at every await on one loop): whatever wins,
    # a forgotten memory is never read back and a refreshed one is never forgotten by
    # the gc that judged it before the refresh.
    for i in range(5):
        v = await _memory(store, ns, scope, "memory", f"r{i}", OLD)
        key = f"semantic:memory:r{i}"
        results = await asyncio.gather(
            control.gc(store, ns), refresh_memories(store, ns, scope, {key: v})
        )
        (gced,), refreshed = results
        gone = f"{scope}/memory:r{i}" in gced.forgotten
        assert gone != (refreshed == (key,)), (gced.forgotten, refreshed)
        current = await semantic_memory(store, ns, scope, refresh_ttl=False)
        assert (f"memory:r{i}" in current) is not gone


async def test_bad_refresh_requests_are_refused() -> None:
    from tether.control.retention import refresh_memories
    from tether.store.in_memory import MemoryStore

    with pytest.raises(InvalidRequest) as e:
        RetentionPolicy(memory_ttl_days=1, memory_ttl_refresh_on_read="yes")  # type: ignore[arg-type]
    assert e.value.details["field"] == "memory_ttl_refresh_on_read"
    with pytest.raises(InvalidRequest):
        RetentionPolicy.from_dict({"memory_ttl_days": 1, "refresh": True})
    store = MemoryStore()
    await _memory(store, "ns", "app", "memory", "k", OLD)
    head = await store.head("ns", "app")
    with pytest.raises(InvalidRequest) as e:
        await refresh_memories(store, "ns", "app", {"var:x": head.frontier[0]})
    assert e.value.details["field"] == "read"
    assert await store.head("ns", "app") == head  # nothing written


# -- idle threads exported, then deleted ----------------------------------------------

WEIRD = "a/b é?#%"  # a thread id no file name can hold as it is


async def test_gc_exports_each_idle_thread_then_deletes_it(
    store: Store, ns: str, tmp_path: Path
) -> None:
    await _thread(store, ns, "old", OLD)
    await _thread(store, ns, WEIRD, OLD)
    await _thread(store, ns, WEIRD, OLD)
    await _thread(store, ns, "fresh")
    kept = {
        s: [n.to_dict() for n in await store.nodes(ns, s)]
        for s in ("thread:old", f"thread:{WEIRD}")
    }
    await set_retention(store, ns, idle_thread_days=30, export_idle_threads=True)
    with pytest.raises(InvalidRequest) as e:  # the policy exports: no directory, no delete
        await control.gc(store, ns)
    assert e.value.details["field"] == "export_dir"
    assert (await store.head(ns, "thread:old")).sequence == 2
    (dry,) = await control.gc(store, ns, dry_run=True)  # a dry run needs none
    assert sorted(dry.deleted) == sorted(kept) and dry.exported == ()
    (done,) = await control.gc(store, ns, export_dir=tmp_path)
    assert sorted(done.deleted) == sorted(kept) and len(done.exported) == 2
    for scope, nodes in kept.items():
        assert (await store.head(ns, scope)).sequence == 0
        (path,) = [Path(p) for p in done.exported if scope.endswith(_unquoted(p))]
        assert path.parent == tmp_path / ns and path.name.endswith(".g0.json")
        # The file is the thread's whole snapshot: it imports back exactly.
        await control.import_snapshot(store, ns, scope + "-back", path)
        back = [n.to_dict() for n in await store.nodes(ns, scope + "-back")]
        assert back == nodes
    assert (await store.head(ns, "thread:fresh")).sequence == 2
    assert sorted(p.name for p in (tmp_path / ns).iterdir()) == sorted(
        Path(p).name for p in done.exported
    )  # no temporary file left


def _unquoted(path: str) -> str:
    from urllib.parse import unquote

    return unquote(Path(path).name.rsplit(".g", 1)[0])


async def test_a_thread_written_while_exported_is_kept(tmp_path: Path) -> None:
    from tether.store.in_memory import MemoryStore

    class Busy(MemoryStore):
        """A turn lands on the thread right after gc counts what it holds."""

        landed = False

        async def stats(self, namespace: str, scope: str) -> Any:
            out = await super().stats(namespace, scope)
            if scope == "thread:old" and not self.landed:
                self.landed = True
                await _thread(self, namespace, "old")
            return out

    store = Busy()
    await _thread(store, "ns", "old", OLD)
    await set_retention(store, "ns", idle_thread_days=30, export_idle_threads=True)
    (r,) = await control.gc(store, "ns", export_dir=tmp_path)
    assert (r.deleted, r.moved, r.exported) == ((), ("thread:old",), ())
    assert (await store.head("ns", "thread:old")).sequence == 4
    assert list((tmp_path / "ns").iterdir()) == []  # no snapshot of a thread that stays


GC_KILLED = r"""
import asyncio, os, signal, sys
import tether
from tether import control

async def main(url, folder):
    store = await tether.open_store(url)
    async def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)   # after the export, before the delete
    type(store).reset_scope_if = die
    await control.gc(store, "default", export_dir=folder)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_sigkill_between_export_and_delete_keeps_the_thread(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'gc.db'}"
    folder = tmp_path / "exports"

    async def setup() -> list[Any]:
        async with await tether.open_store(url) as store:
            await _thread(store, "default", "old", OLD)
            await set_retention(store, "default", idle_thread_days=30, export_idle_threads=True)
            return [n.to_dict() for n in await store.nodes("default", "thread:old")]

    nodes = asyncio.run(setup())
    src = Path(__file__).resolve().parents[1] / "src"
    proc = subprocess.run(
        [sys.executable, "-c", GC_KILLED, url, str(folder)],
        env={**os.environ, "PYTHONPATH": str(src)},
        timeout=60,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL
    (path,) = (folder / "default").iterdir()
    first = path.read_bytes()
    assert control.verify_snapshot(path).ok

    async def after() -> Any:
        async with await tether.open_store(url) as store:
            assert [n.to_dict() for n in await store.nodes("default", "thread:old")] == nodes
            (r,) = await control.gc(store, "default", export_dir=folder)  # run again: done
            assert r.deleted == ("thread:old",) and r.exported == (str(path),)
            assert (await store.head("default", "thread:old")).sequence == 0

    asyncio.run(after())
    assert path.read_bytes() == first  # the same snapshot, written again


def test_the_cli_exports_then_deletes(tmp_path: Path) -> None:
    from tether.cli import main

    path = str(tmp_path / "gc.db")

    async def fill() -> None:
        async with await tether.open_store(path) as store:
            await _thread(store, "default", "old", OLD)

    asyncio.run(fill())

    def cli(*args: str, code: int = 0) -> Any:
        r = CliRunner().invoke(main, ["--store", path, "--json", *args], catch_exceptions=False)
        assert r.exit_code == code, r.stderr
        return r

    policy = orjson.loads(
        cli("retention", "--idle-thread-days", "7", "--export-idle-threads").stdout
    )
    assert policy["policy"]["export_idle_threads"] is True
    refused = cli("gc", code=2)
    assert "export_dir" in refused.stderr
    done = orjson.loads(cli("gc", "--export-dir", str(tmp_path / "out")).stdout)
    (r,) = done["namespaces"]
    assert r["deleted"] == ["thread:old"]
    assert r["exported"] == [str(tmp_path / "out" / "default" / "old.g0.json")]


async def test_export_gc_skips_an_erased_thread_and_says_so(tmp_path: Path) -> None:
    # An encrypted store: a thread bound to a user the user's erasure made unreadable has
    # no snapshot to write; gc skips it (reported as erased, kept) and goes on.
    from tether.crypto import MasterKey, bind_thread, erase_user

    store = await tether.open_store(f"sqlite:///{tmp_path / 'enc.db'}", cipher=MasterKey.generate())
    try:
        for name in ("gone", "old"):
            await bind_thread(store, "ns", name, f"u-{name}")
            await _thread(store, "ns", name, OLD)
        await erase_user(store, "ns", "u-gone")
        await set_retention(store, "ns", idle_thread_days=30, export_idle_threads=True)
        (r,) = await control.gc(store, "ns", export_dir=tmp_path / "out")
        assert r.deleted == ("thread:old",) and r.erased == ("thread:gone",)
        assert [Path(p).name for p in r.exported] == ["old.g0.json"]
        assert r.to_dict()["erased"] == ["thread:gone"]
        assert type(r).from_dict(r.to_dict()) == r
        assert (await store.head("ns", "thread:gone")).sequence == 2  # kept as it was
        assert (await store.head("ns", "thread:old")).sequence == 0
        assert sorted(p.name for p in (tmp_path / "out" / "ns").iterdir()) == ["old.g0.json"]
    finally:
        await store.close()


async def test_mcp_reads_refresh_ttls_where_the_policy_says(
    store: Store, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tether mcp's read tools (read_graph, search_nodes, open_nodes, recall) restart the
    # TTL of what they return, as semantic_memory does, where the namespace says so.
    from tether.control.retention import TOUCH_PREFIX
    from tether.mcp.tools import Memory, call_tool
    from tether.models.embeddings import HashingEmbedder
    from tether.projections import semantic

    monkeypatch.setattr(semantic, "REFRESH_EVERY_S", -60.0)  # record every read, even now
    m = Memory(store=store, namespace=ns, scope="user:ada", embedder=HashingEmbedder)

    async def call(name: str, **args: Any) -> Any:
        r = await call_tool(m, name, args)
        assert not r.is_error, r.error
        return r.structured

    async def touched() -> dict[str, Any]:
        heads = await store.resource_heads(ns, "user:ada", TOUCH_PREFIX)
        return {k.removeprefix(TOUCH_PREFIX): n.payload["version"] for k, n in heads.items()}

    def person(name: str, *obs: str) -> dict[str, Any]:
        return {"name": name, "entityType": "person", "observations": list(obs)}

    await call(
        "create_entities", entities=[person("Bob", "likes tea"), person("Ann"), person("Cy")]
    )
    await call(
        "create_relations", relations=[{"from": "Bob", "to": "Ann", "relationType": "knows"}]
    )
    await call("remember", key="diet", content="no peanuts")  # the agent's own: reserved
    heads = await store.resource_heads(ns, "user:ada", "semantic:")
    bob, ann, cy = (f'semantic:kg_entity:"{n}"' for n in ("Bob", "Ann", "Cy"))
    knows = 'semantic:kg_relation:["Bob","knows","Ann"]'
    await call("read_graph")
    assert await touched() == {}  # no policy: a plain read
    await set_retention(store, ns, memory_ttl_days=30)
    await call("open_nodes", names=["Bob"])
    assert await touched() == {}  # a TTL, not refreshed on read
    await set_retention(store, ns, memory_ttl_days=30, memory_ttl_refresh_on_read=True)
    await call("open_nodes", names=["Bob"])  # Bob and the relation from him
    assert await touched() == {bob: heads[bob].id, knows: heads[knows].id}
    await call("search_nodes", query="cy")
    assert set(await touched()) == {bob, knows, cy}
    await call("read_graph")
    assert set(await touched()) == {bob, knows, cy, ann}
    if store.__class__.__name__ == "MemoryStore":  # recall's vectors: one backend is enough
        await call("create_entities", entities=[person("Dee", "drinks tea")])
        hits = (await call("recall", query="tea", k=10))["memories"]
        assert {h["type"] for h in hits} == {"agent_memory", "kg_entity", "kg_relation"}
        dee = 'semantic:kg_entity:"Dee"'
        now = await touched()
        head = await store.resource_head(ns, "user:ada", dee)
        assert head is not None and now[dee] == head.id
        assert not [k for k in now if "agent_memory" in k]  # reserved: never expires
    # A memory forgotten since it was read is never brought back by the refresh.
    await call("delete_entities", entityNames=["Cy"])
    assert (await call("open_nodes", names=["Cy"]))["entities"] == []
    assert (await call("search_nodes", query="cy"))["entities"] == []
