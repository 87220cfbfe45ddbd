"""``tether mcp``: tether's own tools, a restart, two clients at once, HTTP behind tokens,
and the message without the extra. (Side by side with the reference server:
tests/test_mcp_reference.py; the knowledge graph on every backend: test_mcp_graph.py.)"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import mcp_types
import pytest
from click.testing import CliRunner

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

import tether
from tether import Agent, ScriptedModel
from tether.cli import main
from tether.mcp import KnowledgeGraph
from tether.mcp.server import McpHost, build_server
from tether.mcp.tools import TETHER_TOOLS, TOOLS
from tether.models.embeddings import HashingEmbedder
from tether.projections.agent_memory import AgentMemory

TETHER = str(Path(sys.executable).with_name("tether"))
WRITER = "writer-token-0123456789abcdef"
READER = "reader-token-0123456789abcdef"


def _stdio(db: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=TETHER, args=["--store", str(db), "mcp", *args])


def _e(name: str, *obs: str) -> dict[str, Any]:
    return {"name": name, "entityType": "person", "observations": list(obs)}


async def test_every_tool_has_a_description_and_an_object_schema(tmp_path: Path) -> None:
    async with await tether.open_store("memory://") as store:
        host = McpHost(store=store, namespace="n", user="ada", embedder=HashingEmbedder)
        async with Client(build_server(host)) as client:
            tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == list(TOOLS)
    for t in tools:
        assert t.description and t.input_schema["type"] == "object", t.name
        assert t.output_schema is not None and t.output_schema["type"] == "object", t.name


async def test_tethers_own_tools(ns: str) -> None:
    async with await tether.open_store("memory://") as store:
        # a thread for read_thread, written by an agent as any tether app writes one
        agent = Agent(None, ScriptedModel(default="Hello, Ada."), store=store, namespace=ns)
        await agent.step("hi, I am Ada", thread="t1", user="ada")
        host = McpHost(store=store, namespace=ns, user="ada", embedder=HashingEmbedder)
        async with Client(build_server(host)) as client:

            async def call(name: str, **args: Any) -> Any:
                r = await client.call_tool(name, args)
                assert not r.is_error, (name, r.content)
                if name in {
                    t.name for t in TETHER_TOOLS
                }:  # the reference's own texts differ (a list, a line)
                    assert json.loads(r.content[0].text) == r.structured_content
                return r.structured_content

            await call("remember", key="colour", content="blue")
            await call("remember", key="colour", content="green")
            await call("remember", key="diet", content={"allergies": ["peanuts"]})
            await call("create_entities", entities=[_e("Bob", "allergic to peanuts", "likes tea")])
            assert (await call("forget", key="colour"))["forgotten"] is True
            assert (await call("forget", key="colour"))["forgotten"] is False
            versions = (await call("history", key="colour"))["versions"]
            assert [v["content"] for v in versions] == ["blue", "green", None]
            await call("delete_entities", entityNames=["Bob"])
            undone = await call("undo")  # the latest change: the graph's
            assert undone["of"] == "graph" and undone["keys"] == ["Bob"]
            assert (await call("open_nodes", names=["Bob"]))["entities"] != []
            undone = await call("undo", of="facts")
            assert undone["keys"] == ["colour"]
            assert [v["content"] for v in (await call("history", key="colour"))["versions"]][
                -1
            ] == "green"
            entity = (await call("history", entity="Bob"))["versions"]
            assert entity[0]["content"] == _e("Bob", "allergic to peanuts", "likes tea")

            hits = (await call("recall", query="peanuts allergy", k=3))["memories"]
            assert {h["type"] for h in hits} >= {"agent_memory", "kg_entity"}
            assert hits == sorted(hits, key=lambda h: -h["score"])

            thread = await call("read_thread", thread="t1")
            assert [m["role"] for m in thread["messages"]] == ["user", "assistant"]
            assert thread["messages"][-1]["content"] == "Hello, Ada."

            bad = await client.call_tool("history", {"key": "a", "entity": "b"})
            assert bad.is_error and bad.meta["tether"]["error"]["code"] == "invalid_arguments"
            bad = await client.call_tool("remember", {"key": "k", "content": None})
            assert bad.is_error
            bad = await client.call_tool("no_such_tool", {})
            assert bad.is_error and bad.meta["tether"]["error"]["code"] == "unknown_tool"
        # the notes are the Agent's own memory tool's (name "memory") in the user's scope
        mem = AgentMemory(store, ns, scope="user:ada", name="memory")
        assert await mem.items() == {"colour": "green", "diet": {"allergies": ["peanuts"]}}


async def test_writes_survive_a_restart_and_two_clients_at_once_lose_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memory.db"
    async with await tether.open_store(f"sqlite:///{db}") as store:
        await KnowledgeGraph(store, "default", scope="user:ada").create_entities([_e("Bob")])

    async def writer(tag: str) -> None:
        async with Client(_stdio(db, "--user", "ada")) as client:
            for i in range(8):
                r = await client.call_tool(
                    "add_observations",
                    {"observations": [{"entityName": "Bob", "contents": [f"{tag} {i}"]}]},
                )
                assert not r.is_error, r.content

    await asyncio.gather(writer("a"), writer("b"))  # two server processes, one file
    async with Client(_stdio(db, "--user", "ada")) as client:  # a third, after both stopped
        graph = (await client.call_tool("read_graph", {})).structured_content
        history = (await client.call_tool("history", {"entity": "Bob"})).structured_content
    (bob,) = graph["entities"]
    assert sorted(bob["observations"]) == sorted(f"{t} {i}" for t in "ab" for i in range(8))
    assert len(history["versions"]) == 17  # created, then one version per write


@contextmanager
def _http_server(db: Path, *args: str, **env_vars: str) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_TOKEN", "TETHER_JWT"))}
    env.update(MCP_TEST_WRITER=WRITER, **env_vars)
    proc = subprocess.Popen(
        [TETHER, "--store", str(db), "-n", "acme", "mcp", "--http", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else url
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()


def _client(url: str, token: str, **kw: Any) -> tuple[Client, Any]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), **kw), http


async def test_http_needs_a_known_token_and_a_read_grant_cannot_write(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {
                        "name": "writer",
                        "token_env": "MCP_TEST_WRITER",
                        "grants": ["memory.*"],
                        "namespaces": ["acme"],
                    },
                    {
                        "name": "reader",
                        "sha256": hashlib.sha256(READER.encode()).hexdigest(),
                        "grants": ["memory.read"],
                        "namespaces": ["acme"],
                    },
                ]
            }
        )
    )
    db = tmp_path / "memory.db"
    with _http_server(db, "--tokens", str(tokens), "--user", "ada") as url:
        for header in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
            r = httpx.post(
                url,
                headers={**header, "Accept": "application/json, text/event-stream"},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            )
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"

        updates: list[str] = []

        async def on_message(message: Any) -> None:
            if isinstance(message, mcp_types.ResourceUpdatedNotification):
                updates.append(message.params.uri)

        # a handshake-era session (resources/subscribe is of that era), told of graph writes
        client, http = _client(url, WRITER, mode="legacy", message_handler=on_message)
        async with http, client:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource("memory://knowledge-graph")
            assert not (await client.call_tool("remember", {"key": "k", "content": "v"})).is_error
            r = await client.call_tool("create_entities", {"entities": [_e("Bob", "x")]})
            assert not r.is_error, r.content
            for _ in range(100):  # on the session's own stream, in order: remember's first
                if updates:
                    break
                await asyncio.sleep(0.05)
            assert updates == ["memory://knowledge-graph"]  # the graph write only
        client, http = _client(url, READER)
        async with http, client:
            graph = (await client.call_tool("read_graph", {})).structured_content
            assert graph["entities"] == [_e("Bob", "x")]
            refused = await client.call_tool("create_entities", {"entities": [_e("Eve")]})
            assert refused.is_error and refused.meta["tether"]["error"]["code"] == "forbidden"
            refused = await client.call_tool("remember", {"key": "k", "content": "v"})
            assert refused.is_error
            graph = (await client.call_tool("read_graph", {})).structured_content
            assert graph["entities"] == [_e("Bob", "x")]
    async with await tether.open_store(f"sqlite:///{db}") as store:  # in -n acme, user ada
        # the fact and the memory's edit log, Bob and the graph's edit log
        assert (await store.head("acme", "user:ada")).sequence == 4


def test_without_the_extra_tether_mcp_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    result = CliRunner().invoke(main, ["--store", "memory://", "mcp", "--user", "me"])
    assert result.exit_code == 1
    assert "pip install 'tether[mcp]'" in result.output and "not_installed" in result.output


def test_stdio_needs_a_user_and_import_a_bad_file_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    result = CliRunner().invoke(main, ["--store", str(db), "mcp"])
    assert result.exit_code == 2 and "--user" in result.output
    bad = tmp_path / "memory.jsonl"
    bad.write_text('{"type":"entity","name":"a","entityType":"t","observations":[]}\n{oops\n')
    result = CliRunner().invoke(
        main, ["--store", str(db), "--json", "mcp", "import-memory", str(bad), "--user", "me"]
    )
    assert result.exit_code == 2
    assert json.loads(result.output)["details"]["field"] == "line 2"
    assert not db.exists()


async def test_over_http_without_user_each_token_keeps_its_own_memory(tmp_path: Path) -> None:
    import time

    import jwt

    secret = "s" * 40
    db = tmp_path / "memory.db"

    def signed(sub: str, namespace: str) -> str:
        claims = {
            "sub": sub,
            "exp": int(time.time()) + 600,
            "grants": ["memory.*"],
            "namespaces": [namespace],
        }
        return jwt.encode(claims, secret, algorithm="HS256")

    with _http_server(db, TETHER_JWT_SECRET=secret, TETHER_TOKEN=WRITER) as url:
        for token, name in ((signed("bea", "beta"), "Bea"), (WRITER, "Env")):
            client, http = _client(url, token)
            async with http, client:
                r = await client.call_tool("create_entities", {"entities": [_e(name)]})
                assert not r.is_error, r.content
                graph = (await client.call_tool("read_graph", {})).structured_content
                assert graph["entities"] == [_e(name)]  # its own memory only
        stranger = jwt.encode(
            {"sub": "x", "exp": int(time.time()) + 600, "grants": ["*"]}, "t" * 40, "HS256"
        )
        r = httpx.post(url, headers={"Authorization": f"Bearer {stranger}"}, json={})
        assert r.status_code == 401
    async with await tether.open_store(f"sqlite:///{db}") as store:
        # the JWT's one namespace and its subject; $TETHER_TOKEN's -n and its name "env"
        assert (await store.head("beta", "user:jwt.bea")).sequence == 2
        assert (await store.head("acme", "user:env")).sequence == 2


def test_the_tether_command_never_loads_the_sdk() -> None:
    code = "import sys, tether.cli, tether.mcp; print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
