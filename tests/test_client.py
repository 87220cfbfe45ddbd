"""tether.Client and tether.SyncClient against a real `tether serve` on 127.0.0.1.

The server is a child process (``--port 0``: an ephemeral port) over a SQLite file
the demo agent has worked on; the tests compare what the client returns with what
the local API returns on the same file, and the errors with the local errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import tether
from _server_helpers import TOKEN, Served, filled_sqlite, serve
from tether import Client, ClientError, SyncClient, control
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
    assert reset.cleared == ("thread:client-copy",)
    request = control.StateOperationRequest(thread="support-2", stores=("memory",))
    assert (await client.describe(request)).stores[1].name == "memory"


async def test_agent_turns_approvals_and_task_state_over_http(
    client: Client, served: tuple[Served, Path]
) -> None:
    db = served[1]
    r = await client.step("pay 3 eur to Di", thread="c-pay", user="zoe", metadata={"ticket": 5})
    assert isinstance(r, StepResult) and r.status == "suspended"
    (pending,) = r.pending_approvals
    waiting = await client.runs(status="suspended")
    assert waiting == await local(db, lambda s: control.runs(s, status="suspended"))
    assert {x.thread for x in waiting.runs} >= {"billing", "c-pay"}
    mine = next(x for x in waiting.runs if x.thread == "c-pay")
    assert mine.metadata == {"ticket": 5, "user": "zoe"} and mine.pending[0]["name"] == "transfer"
    assert (await client.approve("c-pay", pending.call_id, resume=False)) is None
    done = await client.resume("c-pay")
    assert done.status == "completed" and done.run_id == r.run_id
    task = await client.task("c-pay")
    assert [h.status for h in task.history] == ["running", "suspended", "running", "completed"]
    assert task == (await local(db, lambda s: control.task_states(s, "default", "c-pay")))[-1]
    assert (await client.runs(thread="c-pay")).runs[0].status == "completed"

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
        with pytest.raises(tether.NotFound):
            c.task("s-pay", "run_nope")
        with pytest.raises(tether.InvalidRequest, match="'/'"):
            c.step("hi", thread="a/b")
