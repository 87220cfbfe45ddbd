"""tether.Client and tether.SyncClient against a real `tether serve` on 127.0.0.1.

The server is a child process (``--port 0``: an ephemeral port) over a SQLite file
the demo agent has worked on; the tests compare what the client returns with what
the local API returns on the same file, and the errors with the local errors.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import tether
from _server_helpers import TOKEN, Served, demo_agent, filled_sqlite, serve
from tether import Client, ClientError, SyncClient, control
from tether.control import ErasureResult
from tether.crypto import CipherError, KeyErased, MasterKey
from tether.runtime import ApprovalError, RunSuspendedError, StepResult
from tether.server.auth import Forbidden, Unauthorized, hash_token

RO_TOKEN = "read-only-token-" + "7" * 16


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    tmp = tmp_path_factory.mktemp("client")
    db = tmp / "served.db"
    filled_sqlite(db)
    tokens = tmp / "tokens.yaml"
    tokens.write_text(
        "tokens:\n"
        f"  - {{name: ro, sha256: '{hash_token(RO_TOKEN)}', grants: [state.describe], "
        "namespaces: ['*']}\n"
    )
    with serve(
        db, tmp / "serve.log", "--agent", "_server_helpers:demo_agent", "--tokens", str(tokens)
    ) as s:
        yield s, db


@pytest.fixture
async def client(served: tuple[Served, Path]) -> AsyncIterator[Client]:
    async with Client(served[0].url, TOKEN) as c:
        yield c


async def local(db: Path, fn: Any) -> Any:
    async with await tether.open_store(f"sqlite:///{db}") as store:
        return await fn(store)


async def test_control_operations_return_what_the_local_api_returns(
    client: Client, served: tuple[Served, Path]
) -> None:
    db = served[1]
    assert (await client.health())["ok"] is True
    assert (await client.whoami())["name"] == "env"
    remote = await client.describe(thread="support-1", include_data=True)
    here = await local(db, lambda s: control.describe(s, thread="support-1", include_data=True))
    assert isinstance(remote, control.StateOperationResult) and remote == here
    assert {r.name for r in remote.stores} >= {"conversation", "tools", "task", "flow"}
    page = await client.history(thread="support-1", limit=5)
    assert page == await local(db, lambda s: control.history(s, thread="support-1", limit=5))
    exported = await client.export(thread="support-2")
    assert exported == await local(db, lambda s: control.export(s, thread="support-2"))
    assert (await client.verify(thread="support-1")).ok
    forked = await client.fork(
        thread="support-1", node=page.nodes[2]["id"], new_thread="client-fork"
    )
    assert forked.created == "thread:client-fork"
    imported = await client.import_(thread="client-copy", snapshot=exported.snapshot)
    assert imported.created == "thread:client-copy"
    compacted = await client.compact(thread="support-1", strategy="recent", max_messages=4)
    assert compacted.compacted == ("conversation",)
    reset = await client.reset(thread="client-copy")
    assert reset.cleared == (*control.STORES, "thread:client-copy")
    request = control.StateOperationRequest(thread="support-2", stores=("memory",))
    assert (await client.describe(request)).stores[0].name == "memory"


async def test_agent_turns_approvals_and_task_state_over_http(
    client: Client, served: tuple[Served, Path]
) -> None:
    db = served[1]
    r = await client.step("pay 3 eur to Di", thread="c-pay", user="zoe", metadata={"ticket": 5})
    assert isinstance(r, StepResult) and r.status == "suspended"
    (pending,) = r.pending_approvals
    assert await client.pending_approvals("c-pay") == [pending]
    waiting = await client.runs(status="suspended")
    assert waiting == await local(db, lambda s: control.runs(s, status="suspended"))
    assert {x.thread for x in waiting.runs} >= {"billing", "c-pay"}
    mine = next(x for x in waiting.runs if x.thread == "c-pay")
    assert mine.metadata == {"ticket": 5, "user": "zoe"} and mine.pending[0]["name"] == "transfer"
    assert (await client.approve("c-pay", pending.call_id, resume=False)) is None
    assert await client.pending_approvals("c-pay") == []  # decided, not yet resumed
    done = await client.resume("c-pay")
    assert done.status == "completed" and done.run_id == r.run_id
    task = await client.task("c-pay")
    assert [h.status for h in task.history] == ["running", "suspended", "running", "completed"]
    assert task == (await local(db, lambda s: control.task_states(s, "default", "c-pay")))[-1]
    assert task == await client.task("c-pay", r.run_id)
    assert (await client.runs(thread="c-pay")).runs[0].status == "completed"
    with pytest.raises(tether.NotFound) as missing:
        await client.task("c-pay", "run_nope")
    assert missing.value.details == {"thread": "c-pay", "run": "run_nope"}

    r2 = await client.step("pay 4 eur to Ed", thread="c-rej", user="zoe")
    rejected = await client.reject("c-rej", r2.pending_approvals[0].call_id, reason="no")
    assert rejected is not None and rejected.status == "completed"
    # Credentials through the context are accepted and never come back.
    r3 = await client.step(
        "What's the weather in Oslo?",
        thread="c-w",
        user="zoe",
        context={"credentials": {"x": "s3cr3t-v4lue"}},
    )
    assert r3.status == "completed" and "s3cr3t" not in str(r3.to_dict())


async def test_http_errors_come_back_as_the_local_error_types(
    client: Client, served: tuple[Served, Path]
) -> None:
    db = served[1]
    # The same call, locally and over HTTP: the same class, code and details.
    with pytest.raises(tether.NotFound) as remote:
        await client.resume("no-such-thread")
    with pytest.raises(tether.NotFound) as here:

        async def resume_locally(store: tether.Store) -> None:
            from _server_helpers import demo_agent

            await demo_agent(store).resume("no-such-thread")

        await local(db, resume_locally)
    assert type(remote.value) is type(here.value) and remote.value.code == here.value.code
    assert remote.value.message == here.value.message

    with pytest.raises(RunSuspendedError) as suspended:
        await client.step("hello", thread="billing", user="grace")
    assert suspended.value.code == "run_suspended"
    assert suspended.value.details["pending"][0]["name"] == "transfer"
    with pytest.raises(ApprovalError):
        await client.approve("billing", "call_nope")
    with pytest.raises(tether.NotFound):
        await client.fork(thread="support-1", node="cw_" + "0" * 24)
    snap = (await client.export(thread="support-2")).snapshot
    assert snap is not None
    snap["nodes"][0]["payload"] = {"tampered": True}
    with pytest.raises(tether.InvalidSnapshot) as bad:
        await client.import_(thread="tampered", snapshot=snap)
    assert bad.value.code == "identity_mismatch" and bad.value.index == 0
    with pytest.raises(tether.InvalidRequest) as field:
        await client.describe(thread="support-1", stores=["nope"])
    assert field.value.details["field"] == "stores"
    with pytest.raises(tether.InvalidRequest) as status:
        await client.runs(status="asleep")
    assert status.value.details["field"] == "status"
    # Tokens: unknown -> Unauthorized, lacking the grant -> Forbidden (nothing written).
    async with Client(served[0].url, "not-a-known-token-at-all") as stranger:
        with pytest.raises(Unauthorized):
            await stranger.describe(thread="support-1")
    async with Client(served[0].url, RO_TOKEN) as ro:
        assert (await ro.describe(thread="support-1")).scope == "thread:support-1"
        with pytest.raises(Forbidden) as forbidden:
            await ro.reset(thread="support-1")
        assert forbidden.value.code == "forbidden"
    assert (await client.describe(thread="support-1")).stores[0].exists
    async with Client("http://127.0.0.1:9", TOKEN, timeout=2) as nowhere:
        with pytest.raises(ClientError) as down:
            await nowhere.health()
    assert down.value.code == "unavailable"


def test_the_sync_client_does_the_same_without_an_event_loop(
    served: tuple[Served, Path],
) -> None:
    db = served[1]
    with SyncClient(served[0].url, TOKEN) as c:
        r = c.step("pay 9 eur to Flo", thread="s-pay", user="sy")
        assert r.status == "suspended"
        listing = c.runs(status="suspended", user="sy")
        assert [x.thread for x in listing.runs] == ["s-pay"]
        done = c.approve("s-pay", r.pending_approvals[0].call_id)
        assert done is not None and done.status == "completed"
        described = c.describe(thread="s-pay", stores=["task"], include_data=True)
        assert described == asyncio.run(
            local(
                db,
                lambda s: control.describe(s, thread="s-pay", stores=["task"], include_data=True),
            )
        )
        assert c.task("s-pay").status == "completed"
        assert c.pending_approvals("s-pay") == []
        with pytest.raises(tether.NotFound):
            c.task("s-pay", "run_nope")
        with pytest.raises(tether.InvalidRequest, match="'/'"):
            c.step("hi", thread="a/b")
        # Lifecycle calls (issue 43): what the local API says, over a real server.
        usage = asyncio.run(local(db, lambda s: control.usage(s, "default", scopes=True)))
        assert c.stats("s-pay") == next(
            u for u in usage.namespaces[0].by_scope if u.scope == "thread:s-pay"
        )
        pruned = c.prune("s-pay", keep_versions=1, dry_run=True)
        assert pruned.dry_run and pruned.scope == "thread:s-pay"
        assert c.gc(dry_run=True).deleted == ()  # no retention policy on this store


async def test_runs_pages_and_filters_through_the_runs_route(
    client: Client, served: tuple[Served, Path]
) -> None:
    db = served[1]
    every = await local(db, lambda s: control.runs(s))
    pages: list[control.RunSummary] = []
    after: str | None = None
    while True:
        page = await client.runs(limit=2, after=after)
        assert isinstance(page, control.RunList) and len(page.runs) <= 2
        pages += page.runs
        after = page.next_after
        if after is None:
            break
    assert tuple(pages) == every.runs and page.counts == every.counts
    several = await client.runs(status=["suspended", "failed"], user="grace")
    assert several == await local(
        db, lambda s: control.runs(s, status=("suspended", "failed"), user="grace")
    )
    assert (await client.task("billing")).status == "suspended"
    # The runs and task routes, never a resource read or a describe. The server logs a
    # request after its response is sent: wait for the last line to reach the log.
    log = ""
    for _ in range(200):
        log = served[0].log.read_text()
        if "GET /v1/ns/default/threads/billing/task 200" in log:
            break
        await asyncio.sleep(0.05)
    assert "GET /v1/ns/default/runs 200" in log and "/resources" not in log
    assert "GET /v1/ns/default/threads/billing/task 200" in log


def test_erase_user_needs_an_encrypted_store(served: tuple[Served, Path]) -> None:
    with SyncClient(served[0].url, TOKEN) as c:
        with pytest.raises(CipherError) as refused:
            c.erase_user("grace")
        assert refused.value.code == "not_encrypted"
        assert c.task("billing").status == "suspended"  # nothing was erased


@pytest.mark.slow
def test_erase_user_over_http_on_an_encrypted_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = MasterKey.generate()
    db = tmp_path / "encrypted.db"

    async def prepare() -> None:
        async with await tether.open_store(str(db), cipher=key) as store:
            agent = demo_agent(store)
            await agent.step("pay 5 eur to Bo", thread="t-alice", user="alice")
            await agent.step("What's the weather in Oslo?", thread="t-bob", user="bob")

    asyncio.run(prepare())
    monkeypatch.setenv("TETHER_MASTER_KEY", key.to_base64())
    with serve(db, tmp_path / "serve.log") as s, SyncClient(s.url, TOKEN) as c:
        assert [p.name for p in c.pending_approvals("t-alice")] == ["transfer"]
        result = c.erase_user("alice")
        assert isinstance(result, ErasureResult)
        assert (result.keys_destroyed, result.threads, result.unindexed_runs) == (1, 1, 1)
        with pytest.raises(KeyErased):
            c.task("t-alice")
        with pytest.raises(KeyErased):
            c.pending_approvals("t-alice")
        assert [r.thread for r in c.runs().runs] == ["t-bob"]
        assert c.task("t-bob").status == "completed"
        assert c.erase_user("alice").keys_destroyed == 0  # erasing again is harmless


CALLS = [
    "operation",
    "describe",
    "reset",
    "compact",
    "export",
    "import_",
    "history",
    "fork",
    "verify",
    "step",
    "resume",
    "approve",
    "reject",
    "runs",
    "task",
    "pending_approvals",
    "erase_user",
    "prune",
    "stats",
    "scope_stats",
    "retention",
    "set_retention",
    "gc",
    "whoami",
    "health",
]


async def test_both_clients_offer_every_call_with_one_signature() -> None:
    def transport(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"ok": True, "path": request.url.path})

    mock = httpx.MockTransport(transport)
    async with Client("http://t", TOKEN, transport=mock) as a:
        with SyncClient("http://t", TOKEN, transport=mock) as s:
            public = {n for n in dir(a) if not n.startswith("_") and callable(getattr(a, n))}
            assert public == {*CALLS, "close"}
            for name in CALLS:
                async_call, sync_call = getattr(a, name), getattr(s, name)
                assert inspect.signature(async_call) == inspect.signature(sync_call), name
                assert async_call.__name__ == name and async_call.__doc__, name
                assert inspect.iscoroutinefunction(async_call), name
                assert not inspect.iscoroutinefunction(sync_call), name
            assert await a.health() == s.health() == {"ok": True, "path": "/healthz"}
            # A bad argument is raised when the call is awaited, as from any async def.
            pending = a.step("hi", thread="a/b")
            with pytest.raises(tether.InvalidRequest, match="'/'"):
                await pending
