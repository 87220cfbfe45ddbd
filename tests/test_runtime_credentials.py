"""Credentials from context (seed 000's ServiceAccount): resolved per call, handed to the
tool that declares them, and never persisted, logged, exported or shown."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import tether
from tether import ToolState, control
from tether.models import Rule, ScriptedModel, call
from tether.runtime import Agent, CredentialProvider, Spec, ToolDefinitionError, ToolNode, tool
from tether.runtime.credentials import REDACTED, redact
from tether.store.in_memory import MemoryStore

NS = "default"


class Recorder:
    """Tools that do everything a careless tool could do with a secret."""

    def __init__(self) -> None:
        self.got: list[dict[str, str]] = []
        self.contexts: list[dict[str, Any]] = []

        @tool(credentials=["github"])
        async def open_issue(
            title: str, credentials: dict[str, str], context: dict[str, Any], state: ToolState
        ) -> str:
            """Open an issue."""
            self.got.append(dict(credentials))
            self.contexts.append(dict(context))
            # Careless: echo the token, and keep it in the tool's state.
            await state.set("last_token", credentials["github"])
            return f"opened {title!r} as token {credentials['github']}"

        @tool(credentials=["github"])
        def leaky(credentials: dict[str, str]) -> str:
            """Fail, quoting the token."""
            raise PermissionError(f"token {credentials['github']} was refused")

        self.tools = [open_issue, leaky]


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(match=r"issue (\w+)", tools=[call("open_issue", title="{1}")], then="{result}"),
            Rule(match=r"leak", tools=[call("leaky")], then="{result}"),
        ]
    )


def secret() -> str:
    return f"ghp-{uuid.uuid4().hex}"


async def test_the_tool_gets_it_and_nothing_else_does(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    s = secret()
    rec, m, store = Recorder(), model(), MemoryStore()
    agent = Agent(None, m, store=store, tools=rec.tools)
    ctx = {"credentials": {"github": s}, "request_id": "r-1"}
    r = await agent.step("issue crash", thread="t", context=ctx)
    assert rec.got == [{"github": s}]
    # The tool's context parameter, the model and its templates never see credentials.
    assert rec.contexts == [{"request_id": "r-1"}]
    assert all("credentials" not in req.context for req in m.requests)
    # What the tool echoed was scrubbed before it was stored or returned.
    assert r.answer == f"opened 'crash' as token {REDACTED}"
    state = await agent.tool_state("open_issue", thread="t")
    assert await state.get("last_token") == REDACTED
    leak = await agent.step("leak", thread="t", context=ctx)
    assert leak.answer == f"PermissionError: token {REDACTED} was refused"
    everything = str([n.to_dict() for n in await store.nodes(NS, "thread:t", limit=10_000)])
    assert s not in everything and s not in caplog.text
    assert "was refused" in caplog.text  # the failure was logged, scrubbed


async def test_a_missing_credential_is_an_error_result_naming_it() -> None:
    rec = Recorder()
    r = await Agent(None, model(), store=MemoryStore(), tools=rec.tools).step(
        "issue x", thread="t", context={"credentials": {"gitlab": "nope-nope"}}
    )
    assert r.status == "completed" and rec.got == []  # the tool did not run
    assert "no credential 'github'" in str(r.answer)
    with pytest.raises(tether.InvalidRequest, match="credentials"):
        await Agent(None, model(), store=MemoryStore(), tools=rec.tools).step(
            "issue x", thread="t", context={"credentials": "not a mapping"}
        )


class Vault:
    def __init__(self, values: Mapping[str, str | None], fail: bool = False) -> None:
        self.values = dict(values)
        self.fail = fail
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def resolve(self, name: str, context: Mapping[str, Any]) -> str | None:
        self.asked.append((name, dict(context)))
        if self.fail:
            raise RuntimeError(f"vault down, secret {self.values.get(name)}")
        return self.values.get(name)


async def test_a_registered_provider_comes_first_then_the_context() -> None:
    assert isinstance(Vault({}), CredentialProvider)
    rec = Recorder()
    vault = Vault({"github": "from-the-vault"})
    agent = Agent(None, model(), store=MemoryStore(), tools=rec.tools, credentials=vault)
    await agent.step(
        "issue a", thread="t", context={"tenant": "acme", "credentials": {"github": "ctx-value"}}
    )
    assert rec.got == [{"github": "from-the-vault"}]
    assert vault.asked == [("github", {"tenant": "acme"})]  # the provider sees no secrets
    vault.values["github"] = None  # the provider declines: the context decides
    await agent.step("issue b", thread="t", context={"credentials": {"github": "ctx-value"}})
    assert rec.got[-1] == {"github": "ctx-value"}
    broken = Agent(
        None, model(), store=MemoryStore(), tools=rec.tools, credentials=Vault({}, fail=True)
    )
    r = await broken.step("issue c", thread="t")
    assert "provider failed" in str(r.answer) and "vault down" not in str(r.answer)
    with pytest.raises(tether.InvalidRequest, match="CredentialProvider"):
        Agent(None, model(), credentials=object())  # type: ignore[arg-type]


async def test_a_spec_tool_node_declares_credentials() -> None:
    got: list[dict[str, str]] = []

    @tool
    def deploy(env: str, credentials: dict[str, str]) -> str:
        got.append(dict(credentials))
        return f"deployed {env}"

    spec = Spec(
        nodes=[
            ToolNode(name="ship", tool="deploy", arguments={"env": "prod"}, credentials=["cloud"])
        ]
    )
    assert Spec.from_dict(spec.to_dict()) == spec
    store = MemoryStore()
    r = await Agent(spec, ScriptedModel.demo(), store=store, tools=[deploy]).step(
        "go", thread="t", context={"credentials": {"cloud": "cloud-key-1"}}
    )
    assert r.answer == "deployed prod" and got == [{"cloud": "cloud-key-1"}]
    (call_node,) = [n for n in await store.nodes(NS, "thread:t") if n.kind == "tool_call"]
    assert call_node.payload["arguments"] == {"env": "prod"}


def test_declaring_credentials_needs_the_parameter() -> None:
    with pytest.raises(ToolDefinitionError, match="credentials"):

        @tool(credentials=["x"])
        def nope() -> None: ...


def test_redact_scrubs_nested_values_and_leaves_short_ones() -> None:
    v = {"a": ["xx secret-1 yy", {"secret-1": 3}], "b": 7}
    assert redact(v, ["secret-1", "ab"]) == {
        "a": [f"xx {REDACTED} yy", {REDACTED: 3}],
        "b": 7,
    }
    assert redact("a secret-12 here", ["secret-1", "secret-12"]) == f"a {REDACTED} here"


async def test_no_trace_in_the_database_file_the_export_or_the_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """The must-show test: a secret written through context leaves no trace anywhere."""
    caplog.set_level(logging.DEBUG)
    s = secret()
    db = tmp_path / "agent.db"
    rec = Recorder()
    async with Agent(None, model(), store=f"sqlite:///{db}", tools=rec.tools) as agent:
        ctx = {"credentials": {"github": s}}
        await agent.step("issue one", thread="t", user="u", context=ctx, metadata={"k": 1})
        await agent.step("leak", thread="t", user="u", context=ctx)
        # Describe with data (what the inspector shows) holds no trace either.
        described = await agent.describe_state("t", include_data=True)
        assert s not in str(described.to_dict())
        assert rec.got == [{"github": s}]
    # The store is closed: its WAL is checkpointed into the file. Scan every byte.
    for f in tmp_path.iterdir():
        assert s.encode() not in f.read_bytes(), f.name
    assert REDACTED.encode() in db.read_bytes()  # the scrubbed echo is there instead
    out = subprocess.run(
        [sys.executable, "-m", "tether.cli", "--store", str(db), "export", "--thread", "t"],
        capture_output=True,
        env={**os.environ},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert b'"kind":"tool_result"' in out.stdout and s.encode() not in out.stdout
    async with await tether.open_store(f"sqlite:///{db}") as store:
        snap = await control.export(store, namespace=NS, thread="t")
        runs = await control.runs(store, namespace=NS)
    assert s not in str(snap.to_dict()) and s not in str(runs.to_dict())
    captured = capfd.readouterr()
    assert s not in captured.err and s not in captured.out
    assert s not in caplog.text and "tool leaky failed" in caplog.text


# --------------------------------------------------------------------------- issue 18


def test_redaction_covers_json_escaped_forms() -> None:
    import json

    s = 'pa"ss\\word-é'
    for text in (
        json.dumps({"token": s}),
        json.dumps({"token": s}, ensure_ascii=False),
        json.dumps(json.dumps({"token": s})),
        f"plain {s} text",
    ):
        out = redact({"content": text}, [s])
        dumped = json.dumps(out) + json.dumps(out, ensure_ascii=False)
        assert "pa" not in out["content"].replace("[redacted]", ""), out
        assert REDACTED in out["content"]
        assert "ss\\\\word" not in dumped


async def test_a_json_dumps_result_holding_a_secret_is_scrubbed() -> None:
    import json

    s = 'ghp"' + uuid.uuid4().hex + "\\x"

    @tool(credentials=["github"])
    def dumps(credentials: dict[str, str]) -> str:
        """Return the credentials as JSON text."""
        return json.dumps({"auth": credentials["github"]})

    m = ScriptedModel([Rule(match=r"go", tools=[call("dumps")], then="{result}")])
    store = MemoryStore()
    agent = Agent(None, m, store=store, tools=[dumps])
    r = await agent.step("go", thread="t", context={"credentials": {"github": s}})
    exported = await control.export_snapshot(store, NS, "thread:t")
    inner = json.dumps(s)[1:-1]
    assert inner.encode() not in exported and s.encode() not in exported
    assert json.dumps(inner)[1:-1].encode() not in exported
    assert REDACTED in str(r.answer)


async def test_a_credential_in_a_tool_state_key_is_refused_and_not_stored() -> None:
    from tether.runtime.credentials import CredentialPersisted

    s = secret()
    seen: list[str] = []

    @tool(credentials=["bank"])
    async def cache(credentials: dict[str, str], state: ToolState) -> str:
        """Cache by the account's token."""
        try:
            await state.set(f"cache-{credentials['bank']}", 1)
        except CredentialPersisted as e:
            seen.append(e.code)
            raise
        return "cached"

    m = ScriptedModel([Rule(match=r"go", tools=[call("cache")], then="{result}")])
    store = MemoryStore()
    agent = Agent(None, m, store=store, tools=[cache])
    r = await agent.step("go", thread="t", context={"credentials": {"bank": s}})
    assert seen == ["credential_persisted"]
    assert "CredentialPersisted" in str(r.answer)
    exported = await control.export_snapshot(store, NS, "thread:t")
    assert s.encode() not in exported
    state = await agent.tool_state("cache", thread="t")
    assert await state.list() == []


@pytest.mark.parametrize("where", ["input", "metadata", "thread"])
async def test_a_credential_in_the_step_input_or_metadata_is_refused(where: str) -> None:
    from tether.runtime.credentials import CredentialPersisted

    s = secret()
    store = MemoryStore()
    agent = Agent(None, model(), store=store, tools=Recorder().tools)
    kwargs: dict[str, Any] = {
        "thread": f"t-{s}" if where == "thread" else "t",
        "context": {"credentials": {"github": s}},
    }
    if where == "metadata":
        kwargs["metadata"] = {"note": f"token={s}"}
    with pytest.raises(CredentialPersisted) as e:
        await agent.step(f"issue {s}" if where == "input" else "issue x", **kwargs)
    assert e.value.code == "credential_persisted"
    assert s not in e.value.message
    assert await store.list_namespaces() == []
