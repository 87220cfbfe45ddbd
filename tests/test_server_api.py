"""The HTTP control plane in-process (httpx's ASGITransport): every endpoint, its shapes,
its errors, and that it returns what the Python control plane returns for the same request."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from _server_helpers import TOKEN, demo_agent, fill
from tether import control
from tether.control.types import STORES, ScopeCheck, StateOperationRequest, StateOperationResult
from tether.core.errors import (
    Conflict,
    InvalidNode,
    InvalidRequest,
    InvalidSnapshot,
    NotFound,
    StoreError,
    TetherError,
)
from tether.models import ModelConnectionError
from tether.runtime import ApprovalError, RunSuspendedError
from tether.server import Forbidden, Tokens, TooLarge, Unauthorized, create_app
from tether.server._http import status_for
from tether.server._schemas import (
    COMPONENTS,
    REQUEST,
    RESULT,
    SCOPE_CHECK,
    STEP_RESULT,
    STORE_REPORT,
)
from tether.store import Store
from tether.store.in_memory import MemoryStore

NS = "default"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    s = MemoryStore()
    await fill(s)
    yield s
    await s.close()


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether", headers=AUTH
    )


@pytest.fixture
async def client(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, tokens=Tokens.single(TOKEN), agent=demo_agent)
    async with client_for(app) as c:
        yield c


def ok(r: httpx.Response) -> Any:
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    return r.json()


def err(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error", "code", "message", "details"}
    if code is not None:
        assert body["code"] == code, body
    return dict(body)


# --------------------------------------------------------------------------- meta


async def test_healthz_and_whoami(client: httpx.AsyncClient) -> None:
    assert ok(await client.get("/healthz", headers={"Authorization": ""}))["ok"] is True
    me = ok(await client.get("/v1/whoami"))
    assert me["name"] == "env" and me["grants"] == ["*"] and me["namespaces"] == ["*"]
    assert me["agent"] is True


async def test_unknown_route_is_a_json_404(client: httpx.AsyncClient) -> None:
    err(await client.get("/v1/nothing"), 404, "not_found")
    err(await client.put("/state/describe"), 405, "method_not_allowed")


async def test_api_responses_are_not_cached_and_are_sniff_safe(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/whoami")
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


# --------------------------------------------------------------------------- seed 002: /state/*


@pytest.mark.parametrize(
    "body",
    [
        {"session_id": "support-1"},
        {"thread": "support-1", "include_data": True, "stores": ["conversation", "memory"]},
        {"user": "ada", "include_data": True},
        {"app": True},
    ],
)
async def test_state_describe_is_the_python_result(
    client: httpx.AsyncClient, store: Store, body: dict[str, Any]
) -> None:
    got = ok(await client.post("/state/describe", json=body))
    want = (await control.describe(store, StateOperationRequest.from_dict(body))).to_dict()
    assert got == want
    # And it parses back into the typed result.
    assert StateOperationResult.from_dict(got).to_dict() == want


async def test_state_describe_without_a_body_describes_the_default_namespace(
    client: httpx.AsyncClient,
) -> None:
    got = ok(await client.post("/state/describe"))
    assert got["namespace"] == NS
    # One entry per store (seed 002's describe without a session), each naming the
    # scopes it was found in.
    assert [r["name"] for r in got["stores"]] == list(control.STORES)
    assert {s for r in got["stores"] for s in r["metadata"]["scopes"]} >= {
        "thread:billing",
        "thread:support-1",
        "thread:support-2",
        "user:ada",
    }


async def test_state_reset_clears_exactly_the_thread(
    client: httpx.AsyncClient, store: Store
) -> None:
    got = ok(await client.post("/state/reset", json={"namespace": NS, "thread": "support-2"}))
    # Seed 002's store names first (every store of the thread is empty now), then the scope.
    assert got["cleared"] == [*STORES, "thread:support-2"]
    assert (await store.head(NS, "thread:support-2")).sequence == 0
    assert (await store.head(NS, "thread:support-1")).sequence > 0
    again = ok(await client.post("/state/reset", json={"thread": "support-2"}))
    assert again["cleared"] == list(STORES) and again["missing"] == ["thread:support-2"]


async def test_state_reset_a_variable_and_a_store(client: httpx.AsyncClient, store: Store) -> None:
    got = ok(
        await client.post("/state/reset", json={"thread": "support-1", "variable": "last_answer"})
    )
    assert got["cleared"] == ["thread:support-1/var:last_answer"]
    head = await store.resource_head(NS, "thread:support-1", "var:last_answer")
    assert head is not None and head.payload["deleted"] is True
    mem = ok(await client.post("/state/reset", json={"thread": "support-1", "stores": ["memory"]}))
    assert mem["cleared"] == ["memory", "thread:support-1/memory"]


async def test_state_compact(client: httpx.AsyncClient) -> None:
    before = ok(await client.get("/v1/ns/default/threads/support-1"))
    conv = next(r for r in before["stores"] if r["name"] == "conversation")
    got = ok(
        await client.post(
            "/state/compact",
            json={"thread": "support-1", "strategy": "recent", "max_messages": 4},
        )
    )
    assert got["compacted"] == ["conversation"]
    report = got["stores"][0]
    assert report["metadata"]["before"] == conv["message_count"]
    assert report["metadata"]["after"] < conv["message_count"]


async def test_state_compact_summary_asks_the_agents_model(client: httpx.AsyncClient) -> None:
    async def summary(c: httpx.AsyncClient) -> str:
        got = ok(
            await c.post(
                "/state/compact",
                json={"thread": "support-1", "strategy": "summary", "max_messages": 6},
            )
        )
        assert got["compacted"] == ["conversation"]
        after = ok(
            await c.get(
                "/v1/ns/default/threads/support-1",
                params={"include_data": "true", "stores": "conversation"},
            )
        )
        first = after["stores"][0]["data"][0]
        assert first["role"] == "system"
        return str(first["content"])

    with_model = await summary(client)
    # The same thread on a server with no agent gets the extractive summary instead.
    other = MemoryStore()
    await fill(other)
    async with client_for(create_app(other, tokens=Tokens.single(TOKEN))) as c:
        extractive = await summary(c)
    await other.close()
    assert with_model != extractive
    # The scripted model answers the summary prompt with one of its rules.
    assert (
        with_model
        == "Summary of earlier conversation: Nice to meet you, Ada. I'll remember your name."
    )


async def test_state_export_import_round_trip(client: httpx.AsyncClient, store: Store) -> None:
    exported = ok(await client.post("/state/export", json={"thread": "support-1"}))
    snap = exported["snapshot"]
    assert snap["version"] == 1 and len(snap["nodes"]) == exported["metadata"]["nodes"]
    imported = ok(await client.post("/state/import", json={"thread": "copy", "snapshot": snap}))
    assert imported["created"] == "thread:copy"
    again = ok(await client.post("/state/export", json={"thread": "copy"}))
    assert again["snapshot"] == snap
    # The stored bytes are the same as the source's, as `tether export` writes them.
    assert await control.export_snapshot(store, NS, "thread:copy") == await control.export_snapshot(
        store, NS, "thread:support-1"
    )


async def test_state_history_pages(client: httpx.AsyncClient) -> None:
    first = ok(await client.post("/state/history", json={"thread": "support-1", "limit": 5}))
    assert [n["sequence"] for n in first["nodes"]] == [1, 2, 3, 4, 5]
    assert first["next_after"] == 5
    second = ok(
        await client.post(
            "/state/history", json={"thread": "support-1", "limit": 5, "after": first["next_after"]}
        )
    )
    assert [n["sequence"] for n in second["nodes"]] == [6, 7, 8, 9, 10]


async def test_state_fork(client: httpx.AsyncClient, store: Store) -> None:
    page = ok(await client.post("/state/history", json={"thread": "support-1", "limit": 4}))
    node = page["nodes"][3]
    got = ok(
        await client.post(
            "/state/fork", json={"thread": "support-1", "node": node["id"], "new_thread": "f1"}
        )
    )
    assert got["created"] == "thread:f1"
    head = await store.head(NS, "thread:f1")
    nodes = await store.nodes(NS, "thread:f1")
    # What node depends on, with node last; then the run index entries of the runs the
    # fork holds, brought in line with them (the fork's own bookkeeping).
    copied = nodes[: got["metadata"]["nodes"]]
    assert copied[-1].id == node["id"]
    extra = nodes[len(copied) :]
    assert extra and all((n.resource_key or "").startswith("task:") for n in extra)
    assert head.frontier == (extra[-1].id,) and head.sequence == len(nodes)


async def test_state_verify(client: httpx.AsyncClient) -> None:
    got = ok(await client.post("/state/verify", json={}))
    assert got["ok"] is True
    assert {c["scope"] for c in got["checks"]} >= {"thread:support-1", "user:ada"}
    bad = ok(
        await client.post(
            "/state/verify", json={"snapshot": {"version": 2, "nodes": [], "frontier": []}}
        )
    )
    assert bad["ok"] is False and bad["checks"][0]["code"] == "version"


# --------------------------------------------------------------------------- /v1/ns/{namespace}


async def test_thread_listing_pages(client: httpx.AsyncClient) -> None:
    everything = ok(await client.get("/v1/ns/default/threads"))
    assert [t["thread"] for t in everything["threads"]] == ["billing", "support-1", "support-2"]
    assert everything["next_after"] is None
    one = everything["threads"][1]
    assert one["runs"] == 6 and one["nodes"] > 30 and one["size_bytes"] > 0
    page = ok(await client.get("/v1/ns/default/threads", params={"limit": 2}))
    assert [t["thread"] for t in page["threads"]] == ["billing", "support-1"]
    assert page["next_after"] == "support-1"
    rest = ok(await client.get("/v1/ns/default/threads", params={"after": "support-1"}))
    assert [t["thread"] for t in rest["threads"]] == ["support-2"]
    assert rest["next_after"] is None
    assert ok(await client.get("/v1/ns/empty/threads"))["threads"] == []


async def test_describe_thread(client: httpx.AsyncClient, store: Store) -> None:
    got = ok(await client.get("/v1/ns/default/threads/support-1", params={"include_data": "true"}))
    want = await control.describe(store, thread="support-1", include_data=True)
    assert got == want.to_dict()
    only = ok(
        await client.get(
            "/v1/ns/default/threads/support-1", params={"stores": "variables,executions"}
        )
    )
    assert [r["name"] for r in only["stores"]] == ["variables", "executions", "graph"]


async def test_delete_thread_and_narrower_resets(client: httpx.AsyncClient, store: Store) -> None:
    got = ok(await client.delete("/v1/ns/default/threads/support-1", params={"run": "nope"}))
    assert got["missing"] == ["thread:support-1/run:nope"]
    got = ok(await client.delete("/v1/ns/default/threads/support-2"))
    assert got["cleared"] == ["thread:support-2"]
    listing = ok(await client.get("/v1/ns/default/threads"))
    assert [t["thread"] for t in listing["threads"]] == ["billing", "support-1"]
    assert (await store.head(NS, "thread:support-2")).generation == 1


async def test_thread_history_descending(client: httpx.AsyncClient) -> None:
    got = ok(
        await client.get(
            "/v1/ns/default/threads/support-1/history",
            params={"limit": 3, "descending": "true"},
        )
    )
    seqs = [n["sequence"] for n in got["nodes"]]
    assert seqs == sorted(seqs, reverse=True) and len(seqs) == 3
    assert got["metadata"]["next_before"] == seqs[-1]


async def test_export_streams_the_stored_bytes(client: httpx.AsyncClient, store: Store) -> None:
    r = await client.get("/v1/ns/default/threads/support-1/export")
    assert r.status_code == 200
    assert r.content == await control.export_snapshot(store, NS, "thread:support-1")
    assert 'filename="support-1.json"' in r.headers["content-disposition"]


async def test_import_validates_and_writes_nothing_when_invalid(
    client: httpx.AsyncClient, store: Store
) -> None:
    snap = orjson.loads(await control.export_snapshot(store, NS, "thread:support-1"))
    tampered = orjson.loads(orjson.dumps(snap))
    tampered["nodes"][2]["payload"]["content"] = "tampered"
    body = err(
        await client.post("/v1/ns/default/threads/new/import", json=tampered),
        422,
        "identity_mismatch",
    )
    assert body["details"]["index"] == 2
    assert (await store.head(NS, "thread:new")).sequence == 0

    got = ok(await client.post("/v1/ns/default/threads/new/import", json=snap))
    assert got["created"] == "thread:new" and got["metadata"]["nodes"] == len(snap["nodes"])
    err(await client.post("/v1/ns/default/threads/new/import", json=snap), 409, "scope_not_empty")
    replaced = ok(
        await client.post(
            "/v1/ns/default/threads/new/import", params={"replace": "true"}, json=snap
        )
    )
    assert replaced["metadata"]["replaced"] is True
    err(await client.post("/v1/ns/default/threads/x/import", json=[1, 2]), 400, "invalid_request")


async def test_fork_endpoint(client: httpx.AsyncClient) -> None:
    page = ok(await client.get("/v1/ns/default/threads/support-1/history", params={"limit": 2}))
    nid = page["nodes"][1]["id"]
    got = ok(
        await client.post(
            "/v1/ns/default/threads/support-1/fork", json={"node": nid, "new_thread": "branch"}
        )
    )
    assert got["created"] == "thread:branch" and got["metadata"]["nodes"] == 2
    err(
        await client.post("/v1/ns/default/threads/support-1/fork", json={"node": "cw_" + "0" * 24}),
        404,
        "not_found",
    )
    err(
        await client.post("/v1/ns/default/threads/support-1/fork", json={"node": "nope"}),
        400,
        "invalid_request",
    )
    err(
        await client.post("/v1/ns/default/threads/support-1/fork", json={"node": nid, "x": 1}),
        400,
        "invalid_request",
    )


async def test_verify_endpoint(client: httpx.AsyncClient) -> None:
    got = ok(await client.get("/v1/ns/default/threads/support-1/verify"))
    assert got["ok"] is True and got["checks"][0]["checked"] > 30


async def test_run_execution_tree(client: httpx.AsyncClient) -> None:
    d = ok(
        await client.get(
            "/v1/ns/default/threads/support-1",
            params={"include_data": "true", "stores": "executions"},
        )
    )
    runs = d["stores"][0]["data"]
    paid = next(r for r in runs if r["input"] == "pay 40 eur to Bob")
    tree = ok(await client.get(f"/v1/ns/default/threads/support-1/runs/{paid['run']}"))
    assert tree["status"] == "completed" and tree["kind"] == "run"
    [call] = tree["children"]
    assert call["actor"]["node_name"] == "transfer" and call["status"] == "completed"
    err(await client.get("/v1/ns/default/threads/support-1/runs/run_nope"), 404, "not_found")


async def test_resources_and_versions(client: httpx.AsyncClient) -> None:
    got = ok(
        await client.get(
            "/v1/ns/default/resources", params={"scope": "thread:support-1", "prefix": "var:"}
        )
    )
    assert list(got["resources"]) == ["var:last_answer"]
    versions = ok(
        await client.get(
            "/v1/ns/default/versions",
            params={"scope": "thread:support-1", "key": "var:last_answer"},
        )
    )
    values = [v["payload"]["value"] for v in versions["versions"]]
    assert len(values) == 2 and "Paris" in values[0] and "Rome" in values[1]
    user = ok(
        await client.get(
            "/v1/ns/default/resources", params={"scope": "user:ada", "prefix": "semantic:"}
        )
    )
    assert user["resources"]["semantic:memory:name"]["payload"]["content"] == "Ada"
    err(
        await client.get("/v1/ns/default/resources", params={"scope": "galaxy:x"}),
        400,
        "invalid_request",
    )


# --------------------------------------------------------------------------- task state


async def test_runs_are_the_run_index_filtered_and_paged(
    client: httpx.AsyncClient, store: Store
) -> None:
    every = ok(await client.get("/v1/ns/default/runs"))
    assert every == (await control.runs(store)).to_dict()
    assert every["counts"] == {"completed": 7, "suspended": 1}
    waiting = ok(await client.get("/v1/ns/default/runs", params={"status": "suspended"}))
    [billing] = waiting["runs"]
    assert (billing["thread"], billing["metadata"]) == ("billing", {"user": "grace"})
    assert billing["pending"][0]["name"] == "transfer"
    both = ok(await client.get("/v1/ns/default/runs", params={"status": "suspended,failed"}))
    assert both["runs"] == waiting["runs"]
    ada = ok(await client.get("/v1/ns/default/runs", params={"user": "ada"}))
    assert {r["thread"] for r in ada["runs"]} == {"support-1"} and len(ada["runs"]) == 6
    one = ok(await client.get("/v1/ns/default/runs", params={"thread": "support-2"}))
    assert [r["thread"] for r in one["runs"]] == ["support-2"]
    # Pages of 3 chained with next_after give every run once, in the same order.
    seen, after = [], None
    while True:
        params: dict[str, Any] = {"limit": 3, **({"after": after} if after else {})}
        page = ok(await client.get("/v1/ns/default/runs", params=params))
        seen += page["runs"]
        after = page["next_after"]
        if after is None:
            break
    assert seen == every["runs"]
    body = err(await client.get("/v1/ns/default/runs", params={"status": "asleep"}), 400)
    assert body["details"]["field"] == "status"
    body = err(await client.get("/v1/ns/default/runs", params={"after": "task:1:x:y"}), 400)
    assert body["details"]["field"] == "after"


async def test_task_is_a_runs_metadata_and_status_history(
    client: httpx.AsyncClient, store: Store
) -> None:
    states = await control.task_states(store, NS, "support-1")
    latest = ok(await client.get("/v1/ns/default/threads/support-1/task"))
    assert latest == states[-1].to_dict()
    paid = next(t for t in states if t.input == "pay 40 eur to Bob")
    got = ok(await client.get("/v1/ns/default/threads/support-1/task", params={"run": paid.run}))
    assert [h["status"] for h in got["history"]] == [
        "running",
        "suspended",
        "running",
        "completed",
    ]
    assert control.TaskState.from_dict(got) == paid
    err(await client.get("/v1/ns/default/threads/support-1/task?run=run_nope"), 404, "not_found")
    err(await client.get("/v1/ns/default/threads/nobody/task"), 404, "not_found")


async def test_approvals_list_what_the_latest_run_waits_on(
    client: httpx.AsyncClient, store: Store
) -> None:
    got = ok(await client.get("/v1/ns/default/threads/billing/approvals"))
    [call] = got["pending_approvals"]
    assert (got["namespace"], got["thread"]) == ("default", "billing")
    # What the agent itself says waits (the model asked for "7", as text).
    assert [p.to_dict() for p in await demo_agent(store).pending_approvals("billing")] == [call]
    assert call["name"] == "transfer" and call["arguments"] == {"amount": "7", "to": "Cy"}
    assert call["call_id"].startswith("call_") and call["node_id"].startswith("cw_")
    done = ok(await client.get("/v1/ns/default/threads/support-1/approvals"))
    assert done["pending_approvals"] == []
    assert (
        ok(await client.get("/v1/ns/default/threads/nobody/approvals"))["pending_approvals"] == []
    )
    # Once decided, nothing waits, and the run index says so.
    ok(await client.post("/v1/ns/default/threads/billing/approve", json={"call": call["call_id"]}))
    assert (
        ok(await client.get("/v1/ns/default/threads/billing/approvals"))["pending_approvals"] == []
    )
    waiting = ok(await client.get("/v1/ns/default/runs", params={"status": "suspended"}))
    assert waiting["runs"] == [] and waiting["counts"] == {"completed": 8}


async def test_task_routes_need_no_agent(store: Store) -> None:
    app = create_app(store, tokens=Tokens.single(TOKEN))
    async with client_for(app) as c:
        assert ok(await c.get("/v1/ns/default/runs?status=suspended"))["runs"]
        assert ok(await c.get("/v1/ns/default/threads/billing/task"))["status"] == "suspended"
        assert ok(await c.get("/v1/ns/default/threads/billing/approvals"))["pending_approvals"]


# --------------------------------------------------------------------------- agent routes


async def test_agent_step_approve_reject_resume(client: httpx.AsyncClient) -> None:
    base = "/v1/ns/default/threads/t-agent"
    r = ok(await client.post(f"{base}/step", json={"input": "What's the weather in Oslo?"}))
    # The spec counts weather questions in a user variable: with no user, the run fails,
    # and a failed run is data (200), not an HTTP error.
    assert r["status"] == "failed" and r["error"]["code"]
    r = ok(
        await client.post(
            f"{base}/step", json={"input": "What's the weather in Oslo?", "user": "u1"}
        )
    )
    assert r["status"] == "completed" and r["answer"] == 1

    pay = ok(await client.post(f"{base}/step", json={"input": "pay 5 eur to Ann", "user": "u1"}))
    assert pay["status"] == "suspended"
    [pending] = pay["pending_approvals"]
    busy = err(
        await client.post(f"{base}/step", json={"input": "hello", "user": "u1"}),
        409,
        "run_suspended",
    )
    assert "approve" in busy["message"].lower() or busy["details"]
    err(await client.post(f"{base}/approve", json={"call": "call_nope"}), 400, "approval")
    rejected = ok(
        await client.post(f"{base}/reject", json={"call": pending["call_id"], "reason": "no"})
    )
    assert rejected["status"] == "completed" and rejected["run_id"] == pay["run_id"]

    pay2 = ok(await client.post(f"{base}/step", json={"input": "pay 6 eur to Ann", "user": "u1"}))
    assert pay2["status"] == "suspended", pay2["error"]
    decided = ok(
        await client.post(
            f"{base}/approve",
            json={"call": pay2["pending_approvals"][0]["call_id"], "resume": False},
        )
    )
    assert decided == {
        "thread": "t-agent",
        "status": "decided",
        "call": pay2["pending_approvals"][0]["call_id"],
        "decision": "approved",
    }
    resumed = ok(await client.post(f"{base}/resume"))
    assert resumed["status"] == "completed" and "sent 6 EUR" in resumed["answer"]


async def test_agent_bodies_are_validated(client: httpx.AsyncClient) -> None:
    base = "/v1/ns/default/threads/t-agent"
    err(await client.post(f"{base}/step", json={}), 400, "invalid_request")
    err(await client.post(f"{base}/step", json={"input": "x", "extra": 1}), 400)
    err(await client.post(f"{base}/step", json={"input": "x", "context": [1]}), 400)
    err(await client.post(f"{base}/step", json={"input": "x", "user": 5}), 400)
    err(await client.post(f"{base}/approve", json={"call": "c", "resume": "yes"}), 400)


async def test_agent_routes_exist_only_with_an_agent(store: Store) -> None:
    async with client_for(create_app(store, tokens=Tokens.single(TOKEN))) as c:
        err(await c.post("/v1/ns/default/threads/t/step", json={"input": "hi"}), 404)
        assert ok(await c.get("/v1/whoami"))["agent"] is False
        assert (
            "/v1/ns/{namespace}/threads/{thread}/step"
            not in ok(await c.get("/openapi.json"))["paths"]
        )


async def test_an_agent_object_serves_its_own_namespace_only(store: Store) -> None:
    app = create_app(store, tokens=Tokens.single(TOKEN), agent=demo_agent(store, "acme"))
    async with client_for(app) as c:
        ok(await c.post("/v1/ns/acme/threads/t/step", json={"input": "hello"}))
        body = err(await c.post("/v1/ns/default/threads/t/step", json={"input": "hi"}), 404)
        assert "acme" in body["message"]
    # A one-argument factory (as tether.cli.demo:agent) makes the agent of its namespace.
    app = create_app(store, tokens=Tokens.single(TOKEN), agent=lambda s: demo_agent(s, "acme"))
    async with client_for(app) as c:
        ok(await c.post("/v1/ns/acme/threads/t2/step", json={"input": "hello"}))
        err(await c.post("/v1/ns/other/threads/t/step", json={"input": "hi"}), 404)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status"),
    [
        ("POST", "/state/describe", {"content": b"{not json"}, 400),
        ("POST", "/state/describe", {"content": b"[1,2]"}, 400),
        ("POST", "/state/describe", {"content": b"[" * 5000 + b"]" * 5000}, 400),
        ("POST", "/state/describe", {"content": b'{"metadata": {"x": NaN}}'}, 400),
        ("POST", "/state/describe", {"json": {"thread": "t", "user": "u"}}, 400),
        # Seed 002's routes ignore unknown fields (tests/test_seed_protolink.py); /v1 refuses them.
        ("POST", "/v1/ns/default/threads/support-1/fork", {"json": {"bogus": 1}}, 400),
        ("POST", "/state/describe", {"json": {"thread": "x" * 201}}, 400),
        ("POST", "/state/describe", {"json": {"namespace": ""}}, 400),
        ("POST", "/state/history", {"json": {"thread": "t", "limit": 0}}, 400),
        ("POST", "/state/history", {"json": {"thread": "t", "limit": 2.5}}, 400),
        ("POST", "/state/history", {"json": {}}, 400),
        ("POST", "/state/compact", {"json": {"thread": "t", "strategy": "magic"}}, 400),
        ("POST", "/state/fork", {"json": {"thread": "support-1"}}, 400),
        ("POST", "/state/import", {"json": {"thread": "n", "snapshot": {"version": 1}}}, 422),
        ("POST", "/state/import", {"json": {"thread": "n", "snapshot": 7}}, 400),
        ("POST", "/state/reset", {"json": {"variable": "x"}}, 400),
        ("GET", "/v1/ns/default/threads/support-1/history?limit=abc", {}, 400),
        ("GET", "/v1/ns/default/threads/support-1/history?limit=0", {}, 400),
        ("GET", "/v1/ns/default/threads?limit=100000", {}, 400),
        ("GET", "/v1/ns/%01/threads", {}, 400),
        ("GET", "/v1/ns/default/threads/support-1?stores=bogus", {}, 400),
        ("GET", "/v1/ns/default/versions?scope=thread:t", {}, 400),
        ("GET", "/v1/ns/default/resources?scope=user:", {}, 400),
        ("GET", "/v1/ns/default/runs?limit=0", {}, 400),
        ("GET", "/v1/ns/default/runs?limit=10001", {}, 400),
        ("GET", "/v1/ns/default/runs?thread=a%0Ab", {}, 400),
        ("GET", "/v1/ns/default/runs?user=", {}, 400),
        ("GET", "/v1/ns/%01/runs", {}, 400),
        ("GET", "/v1/ns/default/threads/support-1/task?run=", {}, 400),
        ("GET", "/v1/ns/default/threads/%0A/approvals", {}, 400),
        ("POST", "/v1/ns/default/threads/t/import", {"content": b""}, 400),
        ("POST", "/v1/ns/default/threads/t/step", {"content": b"null"}, 400),
    ],
)
async def test_bad_input_is_a_4xx_never_a_500(
    client: httpx.AsyncClient,
    store: Store,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
) -> None:
    before = {s.scope: s.sequence for s in await store.list_scopes(NS)}
    body = err(await client.request(method, path, **kwargs), status)
    assert body["message"]
    assert {s.scope: s.sequence for s in await store.list_scopes(NS)} == before


def test_status_mapping() -> None:
    cases: list[tuple[TetherError, int]] = [
        (Unauthorized("x"), 401),
        (Forbidden("x"), 403),
        (TooLarge("x"), 413),
        (InvalidSnapshot("x", code="too_large"), 413),
        (InvalidSnapshot("x", code="identity_mismatch"), 422),
        (InvalidNode("x"), 422),
        (NotFound("x"), 404),
        (Conflict("x"), 409),
        (RunSuspendedError("x"), 409),
        (ApprovalError("x"), 400),
        (InvalidRequest("x"), 400),
        (ModelConnectionError("x"), 502),
        (StoreError("x"), 503),
        (TetherError("x"), 500),
    ]
    for e, status in cases:
        assert status_for(e) == status, e


# --------------------------------------------------------------------------- OpenAPI


async def test_openapi_is_published_and_names_every_route(client: httpx.AsyncClient) -> None:
    doc = ok(await client.get("/openapi.json", headers={"Authorization": ""}))
    paths = doc["paths"]
    for op in control.OPERATIONS:
        assert f"/state/{op}" in paths
    for p in (
        "/v1/ns/{namespace}/threads",
        "/v1/ns/{namespace}/threads/{thread}",
        "/v1/ns/{namespace}/threads/{thread}/history",
        "/v1/ns/{namespace}/threads/{thread}/export",
        "/v1/ns/{namespace}/threads/{thread}/import",
        "/v1/ns/{namespace}/threads/{thread}/fork",
        "/v1/ns/{namespace}/threads/{thread}/verify",
        "/v1/ns/{namespace}/threads/{thread}/runs/{run}",
        "/v1/ns/{namespace}/threads/{thread}/step",
        "/v1/ns/{namespace}/threads/{thread}/approve",
        "/v1/ns/{namespace}/threads/{thread}/reject",
        "/v1/ns/{namespace}/threads/{thread}/resume",
        "/v1/ns/{namespace}/resources",
        "/v1/ns/{namespace}/versions",
        "/v1/ns/{namespace}/runs",
        "/v1/ns/{namespace}/threads/{thread}/task",
        "/v1/ns/{namespace}/threads/{thread}/approvals",
        "/v1/whoami",
    ):
        assert p in paths, p
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert "HTTPValidationError" not in orjson.dumps(doc).decode()
    # Every route but the health check needs the token.
    for path, item in paths.items():
        for op in item.values():
            assert bool(op.get("security")) == (path != "/healthz"), path


def test_body_schemas_name_exactly_the_dataclass_fields() -> None:
    fields = {f.name for f in dataclasses.fields(StateOperationRequest)}
    assert set(REQUEST["properties"]) == fields | {"session_id"}
    result = StateOperationResult(operation="describe")
    assert set(RESULT["properties"]) == set(result.to_dict())
    assert set(STORE_REPORT["properties"]) == {
        f.name for f in dataclasses.fields(control.StateStoreReport)
    }
    assert set(SCOPE_CHECK["properties"]) == {f.name for f in dataclasses.fields(ScopeCheck)}
    from tether.runtime import StepResult

    step = StepResult(run_id="r", thread="t", status="completed").to_dict()
    assert set(step) <= set(STEP_RESULT["properties"])
    from tether.runtime import PendingApproval

    for name, cls in (
        ("TaskState", control.TaskState),
        ("Transition", control.Transition),
        ("RunSummary", control.RunSummary),
        ("RunList", control.RunList),
        ("PendingApproval", PendingApproval),
    ):
        assert set(COMPONENTS[name]["properties"]) == {f.name for f in dataclasses.fields(cls)}, (
            name
        )
