"""Bearer tokens and grants over HTTP: every endpoint under every auth outcome, the tokens
file, constant-time comparison, and no token ever in a log or a response."""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from _server_helpers import TOKEN, demo_agent, fill
from tether.server import GRANTS, AuthConfigError, Forbidden, Token, Tokens, create_app
from tether.server import auth as auth_mod
from tether.server.auth import dev_token, hash_token
from tether.store import Store
from tether.store.in_memory import MemoryStore

NS = "default"
WRONG = "wrong-token-" + "f" * 20
NO_GRANT = "no-grant-token-" + "1" * 20
OTHER_NS = "other-ns-token-" + "2" * 20
ONLY = "only-this-grant-" + "3" * 20


def _counted(name: str) -> Callable[..., Any]:
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(name)
        return await getattr(MemoryStore, name)(self, *args, **kwargs)

    method.__name__ = name
    return method


# A memory store that records every call of the storage contract, reads included.
CountingStore: type[MemoryStore] = type(
    "CountingStore",
    (MemoryStore,),
    {n: _counted(n) for n in sorted(Store.__abstractmethods__)},
)


@pytest.fixture
async def store() -> AsyncIterator[Any]:
    s = CountingStore()
    s.calls = []  # type: ignore[attr-defined]
    await fill(s)
    yield s
    await s.close()


EMPTY_SNAPSHOT = {"version": 1, "nodes": [], "frontier": []}

# (method, path, json body, grant). {node} and {run} are filled from the store.
ENDPOINTS: list[tuple[str, str, Any, str | None]] = [
    ("GET", "/v1/whoami", None, None),
    # Metrics sum every namespace: the token limited to some namespaces is refused too.
    ("GET", "/metrics", None, "metrics"),
    ("POST", "/state/describe", {"namespace": NS, "thread": "support-1"}, "state.describe"),
    ("POST", "/state/reset", {"namespace": NS, "thread": "support-2"}, "state.reset"),
    (
        "POST",
        "/state/compact",
        {"namespace": NS, "thread": "support-1", "strategy": "recent", "max_messages": 4},
        "state.compact",
    ),
    ("POST", "/state/export", {"namespace": NS, "thread": "support-1"}, "state.export"),
    (
        "POST",
        "/state/import",
        {"namespace": NS, "thread": "imported", "snapshot": EMPTY_SNAPSHOT},
        "state.import",
    ),
    ("POST", "/state/history", {"namespace": NS, "thread": "support-1"}, "state.history"),
    (
        "POST",
        "/state/fork",
        {"namespace": NS, "thread": "support-1", "node": "{node}", "new_thread": "forked"},
        "state.fork",
    ),
    ("POST", "/state/verify", {"namespace": NS}, "state.verify"),
    ("GET", "/v1/ns/default/threads", None, "state.describe"),
    ("GET", "/v1/ns/default/threads/support-1", None, "state.describe"),
    ("DELETE", "/v1/ns/default/threads/support-2", None, "state.reset"),
    ("GET", "/v1/ns/default/threads/support-1/history", None, "state.history"),
    ("GET", "/v1/ns/default/threads/support-1/export", None, "state.export"),
    ("POST", "/v1/ns/default/threads/imported/import", EMPTY_SNAPSHOT, "state.import"),
    ("POST", "/v1/ns/default/threads/support-1/fork", {"node": "{node}"}, "state.fork"),
    ("GET", "/v1/ns/default/threads/support-1/verify", None, "state.verify"),
    ("GET", "/v1/ns/default/threads/support-1/runs/{run}", None, "state.describe"),
    ("GET", "/v1/ns/default/resources?scope=thread:support-1", None, "state.describe"),
    (
        "GET",
        "/v1/ns/default/versions?scope=thread:support-1&key=var:last_answer",
        None,
        "state.history",
    ),
    ("GET", "/v1/ns/default/runs?status=suspended", None, "state.describe"),
    ("GET", "/v1/ns/default/recall?q=weather&scope=thread:support-1", None, "state.history"),
    ("GET", "/v1/ns/default/threads/support-1/task?run={run}", None, "state.describe"),
    ("GET", "/v1/ns/default/threads/billing/approvals", None, "state.describe"),
    # A plain store: refused with 409 not_encrypted once the grant lets it through.
    ("POST", "/v1/ns/default/users/ada/erase", None, "state.erase"),
    ("POST", "/v1/ns/default/threads/support-1/prune", {"dry_run": True}, "state.prune"),
    ("GET", "/v1/ns/default/stats", None, "state.describe"),
    ("GET", "/v1/ns/default/stats/scopes?prefix=thread:", None, "state.describe"),
    ("GET", "/v1/ns/default/threads/support-1/stats", None, "state.describe"),
    ("GET", "/v1/ns/default/retention", None, "state.describe"),
    ("PUT", "/v1/ns/default/retention", {"idle_thread_days": 3650}, "state.gc"),
    ("POST", "/v1/ns/default/gc", {"dry_run": True}, "state.gc"),
    ("POST", "/v1/ns/default/threads/support-1/step", {"input": "hi", "user": "ada"}, "agent.step"),
    ("POST", "/v1/ns/default/threads/support-1/resume", None, "agent.step"),
    ("POST", "/v1/ns/default/threads/support-1/approve", {"call": "call_x"}, "agent.approve"),
    ("POST", "/v1/ns/default/threads/support-1/reject", {"call": "call_x"}, "agent.approve"),
]
OUTCOMES = ["no token", "wrong token", "not bearer", "missing grant", "other namespace", "granted"]


def _tokens(grant: str | None) -> Tokens:
    others = [g for g in GRANTS if g != grant]
    return Tokens(
        [
            dev_token(NO_GRANT, name="no-grant", grants=others),
            # A prefix pattern that looks like the namespace but is not it.
            dev_token(OTHER_NS, name="other-ns", namespaces=["acme", "default-*", "defaul"]),
            # Metrics sum every namespace, so their grant counts on all of them only.
            dev_token(
                ONLY,
                name="only",
                grants=[grant] if grant else [],
                namespaces=["*"] if grant == "metrics" else [NS],
            ),
        ]
    )


async def _fill_placeholders(store: Store, path: str, body: Any) -> tuple[str, Any]:
    nodes = await store.nodes(NS, "thread:support-1", limit=1)
    goal = nodes[0]
    text = orjson.dumps(body).decode() if body is not None else None
    for k, v in {"{node}": goal.id, "{run}": goal.payload["run"]}.items():
        path = path.replace(k, v)
        text = text.replace(k, v) if text is not None else None
    return path, (orjson.loads(text) if text is not None else None)


def test_the_table_covers_every_route() -> None:
    app = create_app(MemoryStore(), tokens=Tokens.single(TOKEN), agent=demo_agent)
    routes = {(m, p) for p, item in app.openapi()["paths"].items() for m in item if p != "/healthz"}
    covered = set()
    for method, path, _, _ in ENDPOINTS:
        template = path.split("?")[0]
        for path_template in {p for _, p in routes}:
            parts, want = path_template.split("/"), template.split("/")
            if len(parts) == len(want) and all(
                a == b or a.startswith("{") for a, b in zip(parts, want, strict=True)
            ):
                covered.add((method.lower(), path_template))
    assert covered == routes


@pytest.mark.parametrize(
    ("method", "path", "body", "grant"), ENDPOINTS, ids=[f"{m} {p}" for m, p, _, _ in ENDPOINTS]
)
async def test_every_endpoint_under_every_auth_outcome(
    store: Any, method: str, path: str, body: Any, grant: str | None
) -> None:
    path, body = await _fill_placeholders(store, path, body)
    app = create_app(store, tokens=_tokens(grant), agent=demo_agent)
    headers = {
        "no token": None,
        "wrong token": f"Bearer {WRONG}",
        "not bearer": f"Basic {ONLY}",
        "missing grant": f"Bearer {NO_GRANT}",
        "other namespace": f"Bearer {OTHER_NS}",
        "granted": f"Bearer {ONLY}",
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether"
    ) as c:
        # The refusals first (they must change nothing), the granted call last.
        for outcome in OUTCOMES:
            if grant is None and outcome in ("missing grant", "other namespace"):
                continue  # whoami needs no grant and names no namespace
            header = headers[outcome]
            before = {s.scope: (s.generation, s.sequence) for s in await store.list_scopes(NS)}
            store.calls.clear()
            r = await c.request(
                method, path, json=body, headers={"Authorization": header} if header else {}
            )
            if outcome == "granted":
                assert r.status_code not in (401, 403), r.text
                assert r.status_code < 500, r.text
                continue
            want = 401 if outcome in ("no token", "wrong token", "not bearer") else 403
            assert r.status_code == want, (outcome, r.text)
            err = r.json()
            assert err["code"] == ("unauthorized" if want == 401 else "forbidden"), outcome
            if want == 401:
                assert r.headers["www-authenticate"].startswith("Bearer")
            # Nothing read, nothing written.
            assert store.calls == [], outcome
            after = {s.scope: (s.generation, s.sequence) for s in await store.list_scopes(NS)}
            assert after == before, outcome


async def test_a_token_limited_to_one_namespace_sees_only_it(store: Any) -> None:
    tokens = Tokens([dev_token(ONLY, name="acme-reader", grants=["state.*"], namespaces=["acme"])])
    app = create_app(store, tokens=tokens)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://tether",
        headers={"Authorization": f"Bearer {ONLY}"},
    ) as c:
        assert (await c.get("/v1/ns/acme/threads")).status_code == 200
        assert (await c.post("/state/describe", json={"namespace": "acme"})).status_code == 200
        # The body names the namespace for /state/*: it is checked before anything is read.
        store.calls.clear()
        r = await c.post("/state/reset", json={"namespace": NS, "whole_namespace": True})
        assert r.status_code == 403 and store.calls == []
        r = await c.post("/state/describe", json={"namespace": NS})
        assert r.status_code == 403
        # A body without a namespace acts in the token's only namespace (seed 002's clients
        # cannot name one).
        r = await c.post("/state/describe", json={})
        assert r.status_code == 200 and r.json()["namespace"] == "acme"
        assert (await c.post("/v1/ns/acme/threads/t/step", json={"input": "x"})).status_code == 404
    assert (await store.head(NS, "thread:support-1")).sequence > 0


# --------------------------------------------------------------------------- users

ADA = "ada-bound-token-" + "4" * 20
EVE = "eve-bound-token-" + "5" * 20
ADMIN = "admin-token-xyz-" + "6" * 20
# What the fill holds of users other than ada (grace's threads and her memory, the
# threads' ids): a response to ada's token never holds any, eve's never holds any.
GRACE_WORDS = ("support-2", "billing", "grace", "Cy")
ADA_WORDS = ("support-1", '"ada"', "Paris", "gold")
# The endpoints that touch only ada's own data: her thread support-1, her user scope,
# her threads' listings. Everything else is another user's or the whole namespace's.
ADA_OWN = {
    "/state/describe",
    "/state/compact",
    "/state/export",
    "/state/history",
    "/state/fork",
    "/v1/ns/default/threads",
    "/v1/ns/default/runs",
}


def _ada_may(path: str, body: Any) -> bool:
    base = path.split("?")[0]
    own = ("support-1" in path or "/users/ada/" in path) and "/import" not in path
    return base in ADA_OWN or own


@pytest.mark.parametrize(
    ("method", "path", "body", "grant"), ENDPOINTS, ids=[f"{m} {p}" for m, p, _, _ in ENDPOINTS]
)
async def test_a_token_bound_to_a_user_touches_only_that_users_data(
    store: Any, method: str, path: str, body: Any, grant: str | None
) -> None:
    """The second-user column: tokens with every grant on the namespace, bound to ada
    (owns support-1) and to eve (owns nothing). eve reads and writes nothing of anyone;
    ada only her own; the admin token (bound to no user) still reaches everything."""
    path, body = await _fill_placeholders(store, path, body)
    tokens = Tokens(
        [
            dev_token(ADA, name="ada", namespaces=["*"], user="ada"),
            dev_token(EVE, name="eve", namespaces=["*"], user="eve"),
            dev_token(ADMIN, name="admin", namespaces=["*"]),
        ]
    )
    app = create_app(store, tokens=tokens, agent=demo_agent)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether"
    ) as c:

        async def call(secret: str) -> httpx.Response:
            return await c.request(
                method, path, json=body, headers={"Authorization": f"Bearer {secret}"}
            )

        def heads() -> Any:
            return store.list_scopes(NS)

        for who, secret in (("eve", EVE), ("ada", ADA)):
            before = {s.scope: (s.generation, s.sequence) for s in await heads()}
            r = await call(secret)
            after = {s.scope: (s.generation, s.sequence) for s in await heads()}
            assert r.status_code < 500, r.text
            allowed = (who == "ada" and _ada_may(path, body)) or grant is None
            if not allowed and r.status_code == 200:
                # Only a listing answers a stranger, and it lists nothing of others.
                assert path.split("?")[0] in ADA_OWN, (who, r.text)
            elif not allowed:
                assert r.status_code == 403, (who, r.text)
                assert r.json()["code"] == "forbidden"
                assert after == before, who  # nothing written
                continue
            else:
                assert r.status_code not in (401, 403), (who, r.text)
            text = r.text
            for word in GRACE_WORDS:
                assert word not in text, (who, word, text[:300])
            if who == "eve":
                for word in ADA_WORDS:
                    assert word not in text, (who, word, text[:300])
                assert {k: v for k, v in after.items() if k in before} == before
            else:
                # Only her own scopes change (a fork makes a new thread of hers).
                changed = {k for k in before if before[k] != after.get(k)}
                assert changed <= {"thread:support-1", "user:ada"}, changed
        # The admin token (no user) reaches every route as before.
        r = await call(ADMIN)
        assert r.status_code not in (401, 403), r.text


async def test_a_thread_is_its_first_turns_user(store: Any) -> None:
    """A user's step starts an empty thread, which becomes theirs; another user's step on
    it, or as another user, is refused; a JWT's user claim binds it the same way."""
    import jwt

    from tether.server.auth import JwtKey

    secret = "s" * 40
    claims = {"exp": 4102444800, "grants": ["*"], "namespaces": [NS]}
    eve_jwt = jwt.encode({**claims, "user": "eve"}, secret, algorithm="HS256")
    tokens = Tokens([dev_token(ADA, name="ada", user="ada")], jwt=JwtKey(secret=secret))
    app = create_app(store, tokens=tokens, agent=demo_agent)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether"
    ) as c:
        ada = {"Authorization": f"Bearer {ADA}"}
        eve = {"Authorization": f"Bearer {eve_jwt}"}
        who = (await c.get("/v1/whoami", headers=eve)).json()
        assert who["user"] == "eve"
        step = "/v1/ns/default/threads/eve-notes/step"
        r = await c.post(step, json={"input": "hello", "user": "ada"}, headers=eve)
        assert r.status_code == 403 and "bound to user 'eve'" in r.json()["message"]
        assert (await c.post(step, json={"input": "hello"}, headers=eve)).status_code == 200
        assert (await c.post(step, json={"input": "again"}, headers=eve)).status_code == 200
        assert (await c.post(step, json={"input": "hi"}, headers=ada)).status_code == 403
        r = await c.get("/v1/ns/default/threads/eve-notes", headers=ada)
        assert r.status_code == 403
        listed = (await c.get("/v1/ns/default/threads", headers=eve)).json()["threads"]
        assert [t["thread"] for t in listed] == ["eve-notes"]
        r = await c.get("/v1/ns/default/resources?scope=user:eve", headers=eve)
        assert r.status_code == 200
        r = await c.get("/v1/ns/default/resources?scope=user:ada", headers=eve)
        assert r.status_code == 403
        r = await c.get("/v1/ns/default/resources?scope=app", headers=eve)
        assert r.status_code == 403
        # Protolink's routes: a session of another user is refused, its own is read.
        r = await c.post("/state/describe", json={"session_id": "support-1"}, headers=eve)
        assert r.status_code == 403
        r = await c.post("/state/describe", json={"session_id": "eve-notes"}, headers=eve)
        assert r.status_code == 200 and r.json()["scope"] == "thread:eve-notes"
        r = await c.post("/state/reset", json={}, headers=eve)  # the whole namespace
        assert r.status_code == 403
    assert (await store.head(NS, "thread:support-1")).sequence > 0


async def test_a_step_for_an_owner_never_writes_another_users_thread(store: Any) -> None:
    """What closes the race between the route's ownership check and the step's commit:
    the step itself refuses a thread that is not empty and not the owner's, against the
    head its goal would be committed on."""
    from tether import Conflict

    agent = demo_agent(store, NS)
    before = await store.head(NS, "thread:support-1")  # ada's
    with pytest.raises(Conflict) as e:
        await agent.step("hi", thread="support-1", user="eve", owner="eve")
    assert e.value.code == "thread_owned"
    assert await store.head(NS, "thread:support-1") == before
    # An empty thread becomes the owner's; a second step goes on; another owner is refused.
    assert (await agent.step("hi", thread="eve-1", user="eve", owner="eve")).thread == "eve-1"
    assert (await agent.step("again", thread="eve-1", user="eve", owner="eve")).status
    with pytest.raises(Conflict):
        await agent.step("mine?", thread="eve-1", user="ada", owner="ada")


def test_a_tokens_file_entry_binds_a_user(tmp_path: Path) -> None:
    entry = {"name": "ada", "sha256": hash_token(ADA), "grants": ["*"], "namespaces": ["*"]}
    tokens = Tokens.from_dict({"tokens": [{**entry, "user": "ada"}]})
    assert tokens.authenticate(ADA).user == "ada"
    assert Tokens.from_dict({"tokens": [entry]}).authenticate(ADA).user is None
    with pytest.raises(AuthConfigError) as e:
        Tokens.from_dict({"tokens": [{**entry, "user": ""}]})
    assert e.value.details["field"] == "user"


# --------------------------------------------------------------------------- secrets


async def test_tokens_never_reach_logs_or_responses(
    store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tokens = Tokens([dev_token(TOKEN, name="ops"), dev_token(ONLY, name="ro", grants=[])])
    app = create_app(store, tokens=tokens, agent=demo_agent)
    bodies = []
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether"
    ) as c:
        for secret in (TOKEN, ONLY, WRONG):
            h = {"Authorization": f"Bearer {secret}"}
            for method, path, body in (
                ("GET", "/v1/whoami", None),
                ("GET", "/v1/ns/default/threads", None),
                ("POST", "/state/describe", {"thread": "support-1", "include_data": True}),
                ("POST", "/state/describe", {"thread": 5}),
                ("GET", "/v1/ns/default/threads/support-1/history?limit=zero", None),
                ("POST", "/v1/ns/default/threads/support-1/step", {"input": "hi"}),
            ):
                r = await c.request(method, path, json=body, headers=h)
                bodies.append(r.text + str(r.headers))
    logged = [r for r in caplog.records if r.name == "tether.server"]
    # The request log is there (the test can see logs) and names tokens by name only.
    assert any("token=ops" in r.getMessage() for r in logged)
    assert any("token=-" in r.getMessage() for r in logged)  # the unknown token
    for secret in (TOKEN, ONLY, WRONG):
        for rec in caplog.records:
            assert secret not in rec.getMessage()
            assert secret not in repr(rec.__dict__)
        for text in bodies:
            assert secret not in text
        assert secret not in repr(tokens)


def test_every_token_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    # auth.py calls hmac.compare_digest through the module, so the spy sees every call.
    monkeypatch.setattr(hmac, "compare_digest", spy)
    tokens = Tokens(
        [
            dev_token("a" * 20, name="a"),
            dev_token("b" * 20, name="b"),
            dev_token("c" * 20, name="c"),
        ]
    )
    assert tokens.authenticate("a" * 20).name == "a"
    # The first token matched, yet every digest was compared (no early exit).
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(auth_mod.Unauthorized):
        tokens.authenticate("z" * 20)
    assert len(calls) == 3
    assert all(len(a) == len(b) == 32 for a, b in calls)  # digests, not the secrets


# --------------------------------------------------------------------------- tokens files


def test_tokens_file_json_and_yaml(tmp_path: Path) -> None:
    data = {
        "tokens": [
            {
                "name": "ops",
                "sha256": hash_token(TOKEN),
                "grants": ["state.describe", "state.history"],
                "namespaces": ["acme", "beta-*"],
            },
            {"name": "ci", "token_env": "CI_TOKEN", "grants": ["*"], "namespaces": ["*"]},
        ]
    }
    env = {"CI_TOKEN": "ci-secret-" + "9" * 20}
    as_json = tmp_path / "tokens.json"
    as_json.write_bytes(orjson.dumps(data))
    as_yaml = tmp_path / "tokens.yaml"
    as_yaml.write_text(
        "tokens:\n"
        f"  - {{name: ops, sha256: '{hash_token(TOKEN)}', grants: [state.describe, state.history],"
        " namespaces: [acme, 'beta-*']}\n"
        "  - {name: ci, token_env: CI_TOKEN, grants: ['*'], namespaces: ['*']}\n"
    )
    for path in (as_json, as_yaml):
        tokens = Tokens.from_file(path, env=env)
        ops = tokens.authenticate(TOKEN)
        assert ops.name == "ops"
        ops.require("state.history", "beta-2")
        with pytest.raises(Forbidden):
            ops.require("state.reset", "acme")
        with pytest.raises(Forbidden):
            ops.require("state.describe", "beta")
        assert tokens.authenticate(env["CI_TOKEN"]).name == "ci"
    # The file holds only the digest.
    assert TOKEN not in as_json.read_text() and TOKEN not in as_yaml.read_text()


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"name": "x", "grants": ["*"], "namespaces": ["*"]}, "exactly one of sha256"),
        (
            {"name": "x", "sha256": "ab", "token_env": "V", "grants": [], "namespaces": ["*"]},
            "exactly one",
        ),
        ({"name": "x", "sha256": "zz", "namespaces": ["*"]}, "64 hex"),
        (
            {"name": "x", "sha256": "a" * 64, "grants": ["state.everything"], "namespaces": ["*"]},
            "unknown grant",
        ),
        ({"name": "x", "sha256": "a" * 64, "grants": ["*"]}, "namespaces"),
        ({"name": "x", "token": "secret", "namespaces": ["*"]}, "never in the file"),
        ({"name": "x", "token_env": "MISSING_VAR", "namespaces": ["*"]}, "not set"),
        ({"name": "x", "token_env": "SHORT", "namespaces": ["*"]}, "shorter than"),
        ({"name": "bad name!", "sha256": "a" * 64, "namespaces": ["*"]}, "token name"),
        ({"name": "x", "sha256": "a" * 64, "grants": "*", "namespaces": [3]}, "list of strings"),
    ],
)
def test_tokens_file_errors_say_what_is_wrong(entry: dict[str, Any], words: str) -> None:
    with pytest.raises(AuthConfigError) as e:
        Tokens.from_dict({"tokens": [entry]}, env={"SHORT": "abc"})
    assert words in e.value.message
    assert e.value.code == "auth_config"


def test_tokens_must_be_distinct_and_the_file_well_formed(tmp_path: Path) -> None:
    entry = {"name": "a", "sha256": "a" * 64, "namespaces": ["*"]}
    with pytest.raises(AuthConfigError, match="unique"):
        Tokens.from_dict({"tokens": [entry, entry]})
    with pytest.raises(AuthConfigError, match="same token"):
        Tokens.from_dict({"tokens": [entry, {**entry, "name": "b"}]})
    with pytest.raises(AuthConfigError):
        Tokens.from_dict([entry])
    with pytest.raises(AuthConfigError, match="unknown keys"):
        Tokens.from_dict({"tokens": [], "admin": True})
    bad = tmp_path / "t.yaml"
    bad.write_text("tokens: [unclosed")
    with pytest.raises(AuthConfigError, match="not valid"):
        Tokens.from_file(bad)
    with pytest.raises(AuthConfigError, match="cannot read"):
        Tokens.from_file(tmp_path / "missing.yaml")


def test_tokens_from_the_environment(tmp_path: Path) -> None:
    assert len(Tokens.from_env({})) == 0
    t = Tokens.from_env({"TETHER_TOKEN": TOKEN})
    assert t.authenticate(TOKEN).to_dict() == {"name": "env", "grants": ["*"], "namespaces": ["*"]}
    f = tmp_path / "tokens.json"
    f.write_bytes(
        orjson.dumps({"tokens": [{"name": "f", "sha256": hash_token(ONLY), "namespaces": ["*"]}]})
    )
    both = Tokens.from_env({"TETHER_TOKEN": TOKEN, "TETHER_TOKENS_FILE": str(f)})
    assert both.names == ("f", "env")
    with pytest.raises(AuthConfigError, match="shorter"):
        Tokens.from_env({"TETHER_TOKEN": "short"})


def test_a_server_without_tokens_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_TOKEN", raising=False)
    monkeypatch.delenv("TETHER_TOKENS_FILE", raising=False)
    with pytest.raises(AuthConfigError, match="no tokens"):
        create_app(MemoryStore())
    monkeypatch.setenv("TETHER_TOKEN", TOKEN)
    assert create_app(MemoryStore()).state.tether.tokens.names == ("env",)


# --------------------------------------------------------------------------- properties

_ns = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)


@given(allowed=st.lists(_ns.filter(lambda s: "*" not in s), max_size=4), asked=_ns)
def test_exact_namespace_patterns_allow_exactly_those(allowed: list[str], asked: str) -> None:
    token = Token(
        name="t",
        digest=hashlib.sha256(b"x").digest(),
        grants=frozenset(),
        namespaces=(*allowed, "zz"),
    )
    assert token.allows_namespace(asked) == (asked in allowed or asked == "zz")


@given(prefix=_ns.filter(lambda s: "*" not in s), rest=_ns, other=_ns)
def test_prefix_patterns_allow_names_that_start_with_the_prefix(
    prefix: str, rest: str, other: str
) -> None:
    token = Token(
        name="t",
        digest=hashlib.sha256(b"x").digest(),
        grants=frozenset(),
        namespaces=(prefix + "*",),
    )
    assert token.allows_namespace(prefix + rest)
    assert token.allows_namespace(other) == other.startswith(prefix)


@given(
    grants=st.lists(st.sampled_from([*GRANTS, "state.*", "agent.*", "memory.*"]), max_size=4),
    asked=st.sampled_from(GRANTS),
)
def test_grants_allow_exactly_what_they_name(grants: list[str], asked: str) -> None:
    token = Token(
        name="t", digest=hashlib.sha256(b"x").digest(), grants=frozenset(grants), namespaces=("*",)
    )
    family = asked.split(".")[0] + ".*"
    assert token.has_grant(asked) == (asked in grants or family in grants)
