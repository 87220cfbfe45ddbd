"""Usage, retention and gc over HTTP and through tether.Client (issue 43): every backend,
the grants, a token bound to a user, and bad requests (a typed error, nothing written)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from _server_helpers import TOKEN
from test_retention import OLD, _thread
from tether import Client, control
from tether.control.prune import PRUNE_KEY
from tether.control.retention import RetentionPolicy, retention
from tether.control.stats import NamespaceUsage, ScopeUsage
from tether.core.errors import InvalidRequest
from tether.server import Tokens, create_app
from tether.server.auth import Forbidden, dev_token
from tether.store.base import Store

ADA = "ada-bound-token-" + "4" * 20


@pytest.fixture
async def client(store: Store) -> AsyncIterator[Client]:
    app = create_app(store, tokens=Tokens.single(TOKEN))
    async with Client("http://tether", TOKEN, transport=httpx.ASGITransport(app=app)) as c:
        yield c


async def test_stats_over_http_are_the_local_usage(store: Store, ns: str, client: Client) -> None:
    await _thread(store, ns, "old", OLD)
    await _thread(store, ns, "fresh")
    await _thread(store, ns, "fresh")
    local = (await control.usage(store, ns)).namespaces[0]
    total = await client.stats(namespace=ns)
    assert isinstance(total, NamespaceUsage)
    assert total == NamespaceUsage(
        namespace=ns,
        scopes=local.scopes,
        nodes=local.nodes,
        payload_bytes=local.payload_bytes,
        last_activity=local.last_activity,
    )
    assert (total.scopes, total.nodes) == (2, 6) and total.payload_bytes > 0
    one = await client.stats("old", namespace=ns)
    assert isinstance(one, ScopeUsage)
    assert one == next(s for s in local.by_scope if s.scope == "thread:old")
    assert one.last_activity == OLD and one.nodes == 2
    # Paged by scope name; the pages together are the local by_scope.
    first, after = await client.scope_stats(limit=1, namespace=ns)
    assert after == "thread:fresh" and len(first) == 1
    rest, end = await client.scope_stats(after=after, limit=1, namespace=ns)
    assert end is None and [*first, *rest] == list(local.by_scope)
    assert await client.scope_stats(prefix="user:", namespace=ns) == ([], None)
    empty = await client.stats("never", namespace=ns)
    assert (empty.nodes, empty.payload_bytes, empty.last_activity) == (0, 0, None)


async def test_gc_over_http_dry_run_then_delete(store: Store, ns: str, client: Client) -> None:
    await _thread(store, ns, "old", OLD)
    await _thread(store, ns, "fresh")
    assert await client.retention(namespace=ns) is None
    nothing = await client.gc(namespace=ns)  # no policy: nothing done
    assert nothing.policy == RetentionPolicy() and nothing.deleted == ()
    policy = await client.set_retention(idle_thread_days=30, namespace=ns)
    assert policy == RetentionPolicy(idle_thread_days=30) == await retention(store, ns)
    assert await client.retention(namespace=ns) == policy
    dry = await client.gc(dry_run=True, namespace=ns)
    assert dry.dry_run and dry.deleted == ("thread:old",)
    assert (await store.head(ns, "thread:old")).sequence == 2  # nothing changed
    done = await client.gc(namespace=ns)
    assert done.deleted == ("thread:old",) and not done.dry_run
    assert (await store.head(ns, "thread:old")).sequence == 0
    assert (await store.head(ns, "thread:fresh")).sequence == 2
    # Judged at a later time, the fresh thread is idle too (a dry run: it stays).
    later = await client.gc(dry_run=True, now="2099-01-01T00:00:00Z", namespace=ns)
    assert later.deleted == ("thread:fresh",) and later.now == "2099-01-01T00:00:00.000Z"
    assert (await store.head(ns, "thread:fresh")).sequence == 2


async def test_bad_lifecycle_requests_are_typed_and_write_nothing(
    store: Store, ns: str, client: Client
) -> None:
    await _thread(store, ns, "old", OLD)
    base = f"/v1/ns/{ns}"
    bad: list[tuple[str, str, Any, str]] = [
        ("POST", "/gc", {"dry_run": True, "bogus": 1}, "bogus"),
        ("POST", "/gc", {"dry_run": "yes"}, "dry_run"),
        ("POST", "/gc", {"now": "soon"}, "now"),
        ("POST", "/gc", {"now": 5}, "now"),
        ("PUT", "/retention", {"idle_thread_days": 0}, "idle_thread_days"),
        ("PUT", "/retention", {"idle_thread_days": True}, "idle_thread_days"),
        ("PUT", "/retention", {"idle_days": 3}, "idle_days"),
    ]
    app = create_app(store, tokens=Tokens.single(TOKEN))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://tether",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as http:
        for method, path, body, field in bad:
            r = await http.request(method, base + path, json=body)
            assert r.status_code == 400, (path, body, r.text)
            assert r.json()["code"] == "invalid_request", r.text
            assert r.json()["details"]["field"] == field, r.text
        r = await http.put(base + "/retention", content=b"[1]")
        assert r.status_code == 400
        r = await http.get(base + "/stats/scopes", params={"limit": 0})
        assert r.status_code == 400
    assert await retention(store, ns) is None  # no policy was written
    assert (await store.head(ns, "thread:old")).sequence == 2
    with pytest.raises(InvalidRequest):
        await client.set_retention(memory_ttl_days=-1, namespace=ns)  # refused locally


async def test_a_user_bound_token_sees_only_its_threads_stats(store: Store, ns: str) -> None:
    from tether.models import Rule, ScriptedModel
    from tether.runtime import Agent

    agent = Agent(None, ScriptedModel([Rule(answer="ok")]), store=store, namespace=ns)
    await agent.step("hi", thread="mine", user="ada")
    await agent.step("hi", thread="theirs", user="bob")
    tokens = Tokens([dev_token(ADA, name="ada", grants=["*"], namespaces=[ns], user="ada")])
    app = create_app(store, tokens=tokens)
    async with Client("http://t", ADA, transport=httpx.ASGITransport(app=app)) as c:
        mine = await c.stats("mine", namespace=ns)
        assert isinstance(mine, ScopeUsage) and mine.nodes > 0
        for call in (
            c.stats("theirs", namespace=ns),
            c.stats(namespace=ns),
            c.scope_stats(namespace=ns),
            c.gc(dry_run=True, namespace=ns),
            c.set_retention(idle_thread_days=1, namespace=ns),
        ):
            with pytest.raises(Forbidden):
                await call
    assert await retention(store, ns) is None


async def test_a_pruned_thread_lists_the_nodes_it_holds(store: Store, ns: str) -> None:
    """The thread listing (the inspector's) shows what a thread holds after a prune: its
    nodes and stored bytes as ``stats`` counts them, not its sequence, and its last
    activity; a thread's ``/stats`` says the same."""
    from test_prune import _long_thread

    await _long_thread(store, 4, ns=ns)
    done = await control.prune(store, ns, thread="t", keep_versions=1)
    assert done.nodes > 0
    app = create_app(store, tokens=Tokens.single(TOKEN))
    async with Client("http://t", TOKEN, transport=httpx.ASGITransport(app=app)) as c:
        http = c._http
        listing = (await http.get(f"/v1/ns/{ns}/threads")).json()["threads"]
        one = await c.stats("t", namespace=ns)
    head = await store.head(ns, "thread:t")
    held = await store.nodes(ns, "thread:t", limit=1000)
    (row,) = listing
    assert row["nodes"] == len(held) == one.nodes < head.sequence == row["sequence"]
    assert (
        row["size_bytes"] == one.payload_bytes == (await store.stats(ns, "thread:t")).payload_bytes
    )
    assert row["last_activity"] == one.last_activity == held[-1].created_at


async def test_gc_over_http_exports_to_the_servers_directory(
    store: Store, ns: str, tmp_path: Any
) -> None:
    from pathlib import Path

    from tether.control.retention import set_retention

    await _thread(store, ns, "old", OLD)
    await _thread(store, ns, "fresh")
    nodes = [n.to_dict() for n in await store.nodes(ns, "thread:old")]
    await set_retention(store, ns, idle_thread_days=30, export_idle_threads=True)
    # A server without an export directory refuses, typed, and deletes nothing.
    bare = create_app(store, tokens=Tokens.single(TOKEN))
    async with Client("http://t", TOKEN, transport=httpx.ASGITransport(app=bare)) as c:
        with pytest.raises(InvalidRequest) as e:
            await c.gc(namespace=ns)
        assert e.value.details["field"] == "export_dir" and "--gc-export-dir" in e.value.message
        assert (await c.gc(dry_run=True, namespace=ns)).deleted == ("thread:old",)
    assert (await store.head(ns, "thread:old")).sequence == 2
    # One started with it writes each idle thread's snapshot there, then deletes it.
    folder = tmp_path / "exports"
    app = create_app(store, tokens=Tokens.single(TOKEN), gc_export_dir=folder)
    async with Client("http://t", TOKEN, transport=httpx.ASGITransport(app=app)) as c:
        done = await c.gc(namespace=ns)
    assert done.deleted == ("thread:old",) and done.erased == ()
    (path,) = [Path(p) for p in done.exported]
    assert path == folder / ns / "old.g0.json"
    assert (await store.head(ns, "thread:old")).sequence == 0
    assert (await store.head(ns, "thread:fresh")).sequence == 2
    await control.import_snapshot(store, ns, "thread:back", path)
    assert [n.to_dict() for n in await store.nodes(ns, "thread:back")] == nodes


def test_tether_serve_takes_a_gc_export_dir(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from tether.cli import main

    r = CliRunner().invoke(main, ["serve", "--help"])
    assert r.exit_code == 0 and "--gc-export-dir" in r.stdout
    from tether.server import cli as server_cli

    app = server_cli._app(
        {
            "store_url": "memory://",
            "tokens_file": None,
            "agent_ref": None,
            "max_body": 1 << 20,
            "inspector": False,
            "trace_url": None,
            "max_inflight": 8,
            "queue_timeout": 1.0,
            "anonymous": "state.gc",
            "anonymous_remote": False,
            "gc_export_dir": str(tmp_path / "x"),
        }
    )
    assert app.state.tether.gc_export_dir == tmp_path / "x"


async def test_a_pruned_run_over_http_is_a_typed_404(store: Store, ns: str) -> None:
    from test_prune import FAR, _indexed_thread
    from tether.core.errors import NotFound, RunPruned

    await _indexed_thread(store, ns)
    await control.prune(store, ns, thread="t", keep_versions=1, finished_before=FAR)
    app = create_app(store, tokens=Tokens.single(TOKEN))
    async with Client("http://t", TOKEN, transport=httpx.ASGITransport(app=app)) as c:
        gone = await c._http.get(f"/v1/ns/{ns}/threads/t/runs/run_0")
        assert gone.status_code == 404 and gone.json()["code"] == "run_pruned"
        assert gone.json()["details"]["record"]
        never = await c._http.get(f"/v1/ns/{ns}/threads/t/runs/run_99")
        assert never.status_code == 404 and never.json()["code"] == "not_found"
        kept = await c._http.get(f"/v1/ns/{ns}/threads/t/runs/run_6")
        assert kept.status_code == 200
    from tether.client import error_from_response

    err = error_from_response(404, gone.json())
    assert isinstance(err, RunPruned) and isinstance(err, NotFound)


async def test_forget_runs_over_http_and_the_client(store: Store, ns: str) -> None:
    """``Client.prune(forget_runs=True)``: the dry run says it, the prune forgets the
    runs it cut (a plain 404 ``not_found``, not ``run_pruned``); without it they stay
    ``run_pruned``. A bad value is a typed 400."""
    from test_prune import FAR, _indexed_thread

    await _indexed_thread(store, ns)
    app = create_app(store, tokens=Tokens.single(TOKEN))
    async with Client("http://t", TOKEN, transport=httpx.ASGITransport(app=app)) as c:
        first = await c.prune("t", keep_versions=1, finished_before=FAR, namespace=ns)
        assert first.runs == 5 and not first.forget_runs
        gone = await c._http.get(f"/v1/ns/{ns}/threads/t/runs/run_0")
        assert gone.status_code == 404 and gone.json()["code"] == "run_pruned"
        dry = await c.prune("t", forget_runs=True, dry_run=True, namespace=ns)
        assert dry.dry_run and dry.forget_runs and dry.forgotten_runs == 5 and dry.nodes > 0
        done = await c.prune("t", forget_runs=True, namespace=ns)
        assert done.forgotten_runs == 5 and done.record is not None
        never = await c._http.get(f"/v1/ns/{ns}/threads/t/runs/run_0")
        assert never.status_code == 404 and never.json()["code"] == "not_found"
        bad = await c._http.post(f"/v1/ns/{ns}/threads/t/prune", json={"forget_runs": "yes"})
        assert bad.status_code == 400 and bad.json()["details"]["field"] == "forget_runs"
    record = await store.resource_head(ns, "thread:t", PRUNE_KEY)
    assert record is not None and record.id == done.record
    assert "sha256_64" not in record.payload["pruned"]["runs"]
    assert (await control.verify(store, namespace=ns, thread="t")).ok
