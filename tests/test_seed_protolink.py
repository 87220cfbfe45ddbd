"""Seed 002's own client against tether: Protolink 0.8.3's ``AgentClient``, unmodified.

The package comes from the package index in the test's setup, into a cache outside
the repository (``~/.cache/tether-tests/protolink-0.8.3``, or
``$TETHER_TEST_CACHE``), and runs in a child process (tests/protolink_driver.py) so
its own dependencies never meet tether's. The server is a real ``tether serve`` on
127.0.0.1 with an HS256 JWT secret; the client signs nothing itself and verifies
the token with the same secret, as the seed's ``BearerTokenAuth`` does.

The rest of the file checks the /state/* reading rules seed 002's callers rely on
(lenient fields, reset of every session, store names) directly over ASGI.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

import tether
from _server_helpers import TOKEN, Served, demo_agent, fill, serve
from tether import control
from tether.runtime.errors import RunSuspendedError
from tether.server import Tokens, create_app
from tether.server.auth import JwtKey
from tether.store import Store, open_store
from tether.store.in_memory import MemoryStore

PROTOLINK = "protolink==0.8.3"
# protolink's HTTP transport imports httpx2 (its "http" extra also pulls a server stack
# the client does not need).
REQUIREMENTS = (PROTOLINK, "httpx2>=2.5.0,<3")
SECRET = "jwt-secret-for-tests-" + "a1b2c3d4" * 4
NS = "acme"


def _cache() -> Path:
    root = os.environ.get("TETHER_TEST_CACHE") or Path.home() / ".cache" / "tether-tests"
    return Path(root) / "protolink-0.8.3"


@pytest.fixture(scope="module")
def protolink_path() -> Path:
    """protolink 0.8.3 installed from the package index (once; reused from the cache)."""
    target = _cache()
    stamp = target / ".installed"
    target.mkdir(parents=True, exist_ok=True)
    # one install at a time: xdist workers (make test) may both reach here on a new cache
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _install(target, stamp)
    return target


def _install(target: Path, stamp: Path) -> None:
    if not stamp.exists():
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--upgrade",
                "--target",
                str(target),
                *REQUIREMENTS,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, f"pip install {PROTOLINK} failed:\n{proc.stderr[-3000:]}"
        stamp.write_text(" ".join(REQUIREMENTS))


def mint(grants: list[str], **claims: Any) -> str:
    """An HS256 JWT as docs/http.md says to mint one."""
    payload = {
        "sub": "support-bot",
        "exp": int(time.time()) + 600,
        "grants": grants,
        "namespaces": [NS],
        **claims,
    }
    return jwt.encode(payload, SECRET, algorithm="HS256")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    db = tmp_path / "protolink.db"

    async def prepare() -> None:
        store = await open_store(f"sqlite:///{db}")
        try:
            await fill(store, NS)
            await fill(store, "other")  # a reset of "everything" in acme leaves it alone
        finally:
            await store.close()

    asyncio.run(prepare())
    with serve(
        db,
        tmp_path / "serve.log",
        "--agent",
        "_server_helpers:demo_agent",
        env={"TETHER_JWT_SECRET": SECRET},
    ) as s:
        yield s


def _ok(out: dict[str, Any], name: str) -> dict[str, Any]:
    assert "result" in out[name], (name, out[name])
    result: dict[str, Any] = out[name]["result"]
    return result


def test_protolinks_agent_client_drives_tether_serve(
    protolink_path: Path, served: Served, tmp_path: Path
) -> None:
    token = mint(["state.describe", "state.reset", "state.compact"])
    reader = mint(["state.describe"], sub="reader")
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("protolink_driver.py")),
            served.url.rstrip("/"),
            SECRET,
            token,
            reader,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(protolink_path)},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])

    # No credentials: the client sends no header, and the server refuses, naming the flag
    # that would serve it.
    assert "401" in out["anonymous"]["message"], out["anonymous"]
    assert "--anonymous" in out["anonymous"]["message"], out["anonymous"]

    # describe without a session: every store over the namespace, conversation first,
    # item_count = sessions (the seed's mapping session -> messages).
    every = _ok(out, "describe_all")
    names = [s["name"] for s in every["stores"]]
    assert names[:4] == ["conversation", "tools", "task", "flow"]
    assert every["stores"][0]["item_count"] == 2  # support-1 and support-2 talked
    # describe a session: the seed's own check, stores[0].name == "conversation".
    one = _ok(out, "describe_session")
    conv = one["stores"][0]
    assert conv["name"] == "conversation" and conv["exists"] is True
    assert one["session_id"] == "support-1"
    assert conv["message_count"] == len(conv["data"]) > 8

    # compact with each strategy: "conversation" in compacted, before/after in metadata.
    for strategy in ("recent", "tokens", "summary"):
        res = _ok(out, f"compact_{strategy}")
        assert res["compacted"] == ["conversation"], (strategy, res)
        meta = res["stores"][0]["metadata"]
        assert meta["strategy"] == strategy and meta["after"] < meta["before"], meta

    # A token without the reset grant: refused, nothing cleared.
    assert "403" in out["reader_reset"]["message"], out["reader_reset"]

    # reset of one session: the seed's check, "conversation" in cleared; the session's
    # conversation only: its task state (runs) stays, as in the seed.
    reset = _ok(out, "reset_session")
    assert reset["cleared"][0] == "conversation", reset["cleared"]
    assert "tools" not in reset["cleared"] and "task" not in reset["cleared"]
    after = _ok(out, "after_session_reset")["stores"]
    assert after[0]["name"] == "conversation" and after[0]["exists"] is False
    assert after[2]["name"] == "task" and after[2]["exists"] is True

    # reset without a session: every session (the whole namespace), as in the seed.
    everything = _ok(out, "reset_all")
    assert everything["cleared"][:4] == ["conversation", "tools", "task", "flow"]
    after = _ok(out, "after_reset_all")
    assert after["stores"][0]["name"] == "conversation"
    assert after["stores"][0]["exists"] is False and after["stores"][0]["item_count"] == 0

    async def others_left() -> int:
        store = await open_store(f"sqlite:///{tmp_path / 'protolink.db'}")
        try:
            return (await store.head("other", "thread:support-1")).sequence
        finally:
            await store.close()

    assert asyncio.run(others_left()) > 0
    assert token not in served.log.read_text()


def test_every_way_protolinks_client_signs_in(protolink_path: Path, tmp_path: Path) -> None:
    """The seed's client, unmodified, through every way it signs in: no credentials
    (a server started with --anonymous), APIKeyAuth (a key of the tokens file) and
    BearerTokenAuth with a token minted by `tether token` for a user."""
    db = tmp_path / "signin.db"
    key = "protolink-api-key-" + "k" * 24
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        "tokens:\n"
        "  - name: protolink-key\n"
        "    token_env: PROTOLINK_KEY\n"
        "    grants: [state.describe]\n"
        f"    namespaces: [{NS}]\n"
    )

    async def prepare() -> None:
        store = await open_store(f"sqlite:///{db}")
        try:
            await fill(store, NS)
        finally:
            await store.close()

    asyncio.run(prepare())
    minted = subprocess.run(
        [sys.executable, "-m", "tether.cli", "-n", NS, "token", "-u", "ada", "--grant", "*"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TETHER_JWT_SECRET": SECRET},
    )
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    env = {"TETHER_JWT_SECRET": SECRET, "PROTOLINK_KEY": key}
    with serve(
        db,
        tmp_path / "serve.log",
        "--tokens",
        str(tokens),
        "--anonymous",
        "state.describe",
        env=env,
    ) as s:
        proc = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).with_name("protolink_driver.py")),
                "signin",
                s.url.rstrip("/"),
                SECRET,
                token,
                key,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(protolink_path)},
            cwd=tmp_path,
        )
        log = s.log.read_text()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # Anonymous: served with the grants of --anonymous (in "default": the seed's client
    # names no namespace), and nothing more.
    anon = _ok(out, "anonymous_describe")
    assert anon["operation"] == "describe" and anon["stores"][0]["exists"] is False
    assert "403" in out["anonymous_reset"]["message"], out["anonymous_reset"]
    # The API key of the tokens file, sent as Authorization: ApiKey and X-API-Key.
    conv = _ok(out, "key_describe")["stores"][0]
    assert conv["name"] == "conversation" and conv["message_count"] > 8
    # The minted JWT: ada's token reads ada's thread, not grace's.
    assert _ok(out, "jwt_describe")["stores"][0]["exists"] is True
    assert "403" in out["jwt_other_user"]["message"], out["jwt_other_user"]
    assert key not in log and token not in log
    assert "token=anonymous" in log and "token=protolink-key" in log and "token=jwt.ada" in log


def test_anonymous_clients_only_from_loopback_unless_told() -> None:
    async def status(tokens: Tokens, client: tuple[str, int], headers: dict[str, str]) -> int:
        app = create_app(MemoryStore(), tokens=tokens)
        transport = httpx.ASGITransport(app=app, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://tether") as c:
            r = await c.post("/state/describe", json={}, headers=headers)
            return r.status_code

    local, remote = ("127.0.0.1", 5000), ("192.0.2.7", 5000)
    anon = Tokens.single(TOKEN).with_anonymous("state.describe")
    anywhere = Tokens.single(TOKEN).with_anonymous(["state.describe"], remote=True)
    assert asyncio.run(status(anon, local, {})) == 200
    assert asyncio.run(status(anon, remote, {})) == 401
    assert asyncio.run(status(anywhere, remote, {})) == 200
    # A credential that is sent but unknown is refused, never taken as anonymous.
    assert asyncio.run(status(anon, local, {"X-API-Key": "nope" * 5})) == 401
    assert asyncio.run(status(anon, local, {"Authorization": "Basic abc"})) == 401
    # Keys sent the seed's ways are tokens like any other.
    for h in ({"Authorization": f"ApiKey {TOKEN}"}, {"X-API-Key": TOKEN}):
        assert asyncio.run(status(Tokens.single(TOKEN), remote, h)) == 200


# --------------------------------------------------------------------------- /state/* rules


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    s = MemoryStore()
    await fill(s)
    await fill(s, NS)
    yield s
    await s.close()


@pytest.fixture
async def client(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        store,
        tokens=Tokens.single(TOKEN).merged(Tokens([], jwt=JwtKey(secret=SECRET))),
        agent=demo_agent,
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://tether",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as c:
        yield c


async def test_state_routes_read_requests_as_seed_002_does(
    client: httpx.AsyncClient, store: Store
) -> None:
    # 20.0 is an integer and unknown keys are ignored (and named), as the seed's from_dict.
    body = {
        "session_id": "support-1",
        "strategy": "recent",
        "max_messages": 20.0,
        "preserve_recent": 2.0,
        "stores": "conversation",
        "future_field": 1,
        "metadata": None,
    }
    r = await client.post("/state/compact", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["metadata"] == {"ignored_fields": ["future_field"]}
    r = await client.post(
        "/state/describe", json={"session_id": "support-1", "x": 1, "metadata": {"who": "ops"}}
    )
    assert r.status_code == 200, r.text
    assert r.json()["metadata"] == {"who": "ops", "ignored_fields": ["x"]}
    # A fraction is not silently truncated: exact or a loud error.
    r = await client.post("/state/compact", json={"session_id": "support-1", "max_messages": 2.5})
    assert r.status_code == 400 and r.json()["details"]["field"] == "max_messages"
    # An unknown store is reported as not enabled, as the seed's State does.
    r = await client.post(
        "/state/describe", json={"session_id": "support-1", "stores": ["conversation", "vectors"]}
    )
    got = r.json()
    assert [(s["name"], s["enabled"]) for s in got["stores"]] == [
        ("conversation", True),
        ("graph", True),
        ("vectors", False),
    ]
    assert got["missing"] == ["vectors"]
    # tether's own routes stay strict.
    r = await client.post("/v1/ns/default/threads/support-1/fork", json={"node": "x", "y": 1})
    assert r.status_code == 400


async def test_a_reset_without_a_session_resets_every_session(
    client: httpx.AsyncClient, store: Store
) -> None:
    # With some stores: refused and reported, as the seed does; nothing cleared.
    before = await store.head("default", "thread:support-1")
    r = await client.post("/state/reset", json={"session_id": None, "stores": ["memory"]})
    got = r.json()
    assert r.status_code == 200, got
    assert got["cleared"] == [] and got["errors"][0]["code"] == "partial_reset"
    assert got["missing"] == ["memory"] and got["stores"][0]["error"]
    assert await store.head("default", "thread:support-1") == before
    # Without: the whole namespace, and only it.
    r = await client.post("/state/reset", json={"session_id": None, "stores": []})
    got = r.json()
    assert got["cleared"] == [*control.STORES, "namespace:default"]
    assert (await store.head("default", "thread:support-1")).sequence == 0
    assert (await store.head(NS, "thread:support-1")).sequence > 0


async def test_jwt_bearer_tokens(client: httpx.AsyncClient, store: Store) -> None:
    def auth(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    who = await client.get("/v1/whoami", headers=auth(mint(["state.describe"])))
    assert who.status_code == 200
    assert who.json()["name"] == "jwt.support-bot" and who.json()["namespaces"] == [NS]
    # The token's one namespace is the body's default on /state/*; others are refused.
    r = await client.post("/state/describe", headers=auth(mint(["state.describe"])), json={})
    assert r.status_code == 200 and r.json()["namespace"] == NS
    r = await client.post(
        "/state/describe", headers=auth(mint(["state.describe"])), json={"namespace": "default"}
    )
    assert r.status_code == 403
    r = await client.post(
        "/state/reset", headers=auth(mint(["state.describe"])), json={"session_id": "support-1"}
    )
    assert r.status_code == 403
    assert (await store.head(NS, "thread:support-1")).sequence > 0
    refused = [
        mint(["state.describe"], exp=int(time.time()) - 60),  # expired
        jwt.encode({"grants": ["*"], "namespaces": ["*"]}, SECRET, algorithm="HS256"),  # no exp
        jwt.encode(
            {"exp": int(time.time()) + 60, "grants": ["*"], "namespaces": ["*"]},
            "another-secret-" + "x" * 32,
            algorithm="HS256",
        ),
        jwt.encode(
            {"exp": int(time.time()) + 60, "grants": ["*"], "namespaces": ["*"]},
            SECRET * 2,  # (64 bytes at least for HS512, or PyJWT warns)
            algorithm="HS512",
        ),
        mint(["state.everything"]),  # a grant that does not exist
        mint(["*"], namespaces=[]),  # no namespace
        jwt.encode(
            {"exp": int(time.time()) + 60, "grants": ["*"], "namespaces": ["*"]},
            None,
            algorithm="none",
        ),
    ]
    for token in refused:
        r = await client.post("/state/describe", headers=auth(token), json={})
        assert r.status_code == 401, (jwt.get_unverified_header(token), r.text)
        assert token not in r.text
    with pytest.raises(Exception, match="shorter than 32"):
        JwtKey(secret="short")


# --------------------------------------------------------------------------- modules


async def test_only_enabled_modules_are_reported_and_reset(store: Store) -> None:
    """Agent(state=[...]) as Protolink's: describe reports the enabled stores, a
    disabled one asked for is reported disabled and missing, a thread reset clears
    the enabled stores only; the /state routes of a server with that agent follow it."""
    agent = demo_agent(store, "default")
    only = tether.Agent(agent.spec, agent.model, store=store, state=["conversation", "task"])
    d = await only.describe_state("support-1")
    assert [r.name for r in d.stores] == ["conversation", "task", "graph"]
    d = await only.describe_state("support-1", stores=["conversation", "tools"])
    tools = next(r for r in d.stores if r.name == "tools")
    assert tools.enabled is False and "tools" in d.missing
    tool_state_before = await control.describe(store, namespace="default", thread="support-1")
    r = await only.reset_state("support-1")
    # The enabled stores were reset (the task store ends open runs: there are none).
    assert [x.name for x in r.stores] == ["conversation", "task"]
    assert r.cleared == ("thread:support-1/conversation",)
    after = await control.describe(store, namespace="default", thread="support-1")
    by_name = {x.name: x for x in after.stores}
    assert by_name["conversation"].exists is False
    was = {x.name: x for x in tool_state_before.stores}
    assert by_name["variables"].item_count == was["variables"].item_count > 0  # kept
    with pytest.raises(ValueError, match="unknown state module 'bogus'"):
        tether.Agent(agent.spec, agent.model, store=store, state=["bogus"])

    def factory(s: Store, ns: str) -> tether.Agent:
        a = demo_agent(s, ns)
        return tether.Agent(a.spec, a.model, store=s, namespace=ns, state=["conversation"])

    app = create_app(store, tokens=Tokens.single(TOKEN), agent=factory)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://tether",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as c:
        got = (await c.post("/state/describe", json={})).json()
        assert [s["name"] for s in got["stores"]] == ["conversation"]
        got = (await c.post("/state/describe", json={"stores": ["flow"]})).json()
        assert got["stores"][0]["enabled"] is False and got["missing"] == ["flow"]


def test_invoke_sync_shares_the_default_session_too(tmp_path: Path) -> None:
    """Protolink's `sync.invoke()`: the same default session, without an event loop,
    on a store that outlives the process (opened and closed per call)."""
    agent = tether.Agent(None, tether.ScriptedModel.demo(), store=f"sqlite:///{tmp_path}/s.db")
    agent.invoke_sync("My name is Alice.")
    assert agent.invoke_sync("What is my name?") == "Your name is Alice."
    assert agent.invoke_sync("What is my name?", "other") == "I don't know your name yet."


@pytest.mark.parametrize("state", [None, ["conversation"], ["task", "flow"], []])
async def test_without_the_conversation_module_each_turn_starts_cold(
    state: list[str] | None,
) -> None:
    """Protolink's agent loads and saves history only with its conversation module
    enabled; without it every turn is a cold start. So is tether's: the model is sent no
    earlier run's messages (a run's own tool rounds still are)."""
    store = MemoryStore()
    model = tether.ScriptedModel.demo()
    agent = tether.Agent(None, model, store=store, state=state)
    await agent.step("hello there", thread="s")
    r = await agent.step("What's the weather in Oslo?", thread="s")
    sent = [m.get("content") for m in model.requests[-1].messages]
    remembers = state is None or "conversation" in state
    assert ("hello there" in sent) is remembers
    assert "What's the weather in Oslo?" in sent
    assert r.status == "completed"
    # The graph records both turns either way (history, export).
    runs = (await agent.runs(thread="s")).runs
    assert len(runs) == 2


async def test_a_default_thread_is_shared_as_invoke_shares_it() -> None:
    base = demo_agent(MemoryStore(), "default")
    agent = tether.Agent(base.spec, base.model, default_thread="invocation_session_id")
    a = await agent.step("Hello, my name is Ada.")
    b = await agent.step("What is my name?")
    assert a.thread == b.thread == "invocation_session_id"
    assert "Ada" in str(b.answer)


async def test_invoke_shares_protolinks_default_session() -> None:
    """`agent.invoke(message)` as Protolink's: calls naming no session share
    "invocation_session_id" and return the answer; `session_id=` partitions; `step`
    without a thread stays a thread of its own (its run id, as Protolink's external
    task falls back to its task id). A suspended or failed run raises, typed."""
    store = MemoryStore()
    agent = demo_agent(store, "default")
    assert "Ada" not in str(await agent.invoke("What is my name?"))
    assert (
        await agent.invoke("Hello, my name is Ada.")
        == "Nice to meet you, Ada. I'll remember your name."
    )
    assert "Ada" in str(await agent.invoke("What is my name?"))
    runs = (await agent.runs(thread="invocation_session_id")).runs
    assert len(runs) == 3
    # Another session shares nothing; a step without a thread is a run of its own.
    assert "Ada" not in str(await agent.invoke("What is my name?", session_id="other"))
    alone = await agent.step("What is my name?")
    assert alone.thread == alone.run_id and "Ada" not in str(alone.answer)
    # default_thread, when set, is the agent's shared session for invoke() too.
    named = tether.Agent(agent.spec, agent.model, store=store, default_thread="shared")
    await named.invoke("Hello, my name is Grace.")
    assert "Grace" in str((await named.step("What is my name?", thread="shared")).answer)
    with pytest.raises(RunSuspendedError) as held:
        await agent.invoke("pay 40 eur to Bob", session_id="pay")
    assert held.value.code == "run_suspended" and held.value.details["thread"] == "pay"
    assert held.value.details["pending"][0]["name"] == "transfer"

    class Broken:
        async def complete(self, request: Any) -> Any:
            raise RuntimeError("the model is down")

    with pytest.raises(tether.TetherError) as failed:
        await tether.Agent(None, Broken(), store=store).invoke("hello")
    assert failed.value.code == "run_failed"
    assert failed.value.details["error"]["code"] == "model_raised"
    assert failed.value.details["thread"] == "invocation_session_id"


def test_anonymous_clients_act_in_the_namespace_named(tmp_path: Path) -> None:
    """`--anonymous-namespace NS`: a request naming no namespace (Protolink's) acts in NS,
    and anonymous clients touch no other namespace; without the flag they act in
    `default`. The flag without --anonymous, or given a pattern, is refused at start."""
    db = tmp_path / "anon.db"

    async def prepare() -> None:
        store = await open_store(f"sqlite:///{db}")
        try:
            await fill(store, NS)
        finally:
            await store.close()

    asyncio.run(prepare())
    flags = ("--anonymous", "state.describe")
    with serve(db, tmp_path / "ns.log", *flags, "--anonymous-namespace", NS) as s:
        here = httpx.post(s.url + "state/describe", json={"session_id": "support-1"})
        other = httpx.post(
            s.url + "state/describe", json={"session_id": "support-1", "namespace": "default"}
        )
    assert here.status_code == 200, here.text
    conv = here.json()["stores"][0]
    assert conv["name"] == "conversation" and conv["exists"] is True
    assert conv["message_count"] > 8
    assert other.status_code == 403, other.text
    with serve(db, tmp_path / "default.log", *flags) as s:
        default = httpx.post(s.url + "state/describe", json={"session_id": "support-1"})
    assert default.status_code == 200, default.text
    assert default.json()["stores"][0]["exists"] is False  # `default` holds nothing
    for args in (
        ("--anonymous-namespace", NS),  # no --anonymous
        (*flags, "--anonymous-namespace", "ac*"),  # a pattern, not a namespace
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "tether.cli", "--store", str(db), "serve", "--port", "0", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "--anonymous-namespace" in proc.stderr, proc.stderr
