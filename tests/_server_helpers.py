"""Shared by the server tests: a scripted agent (offline) and a store it has worked on."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.models import Rule, ScriptedModel, call
from tether.runtime import (
    Agent,
    Edge,
    LLMNode,
    LoopNode,
    Spec,
    SyncToolState,
    ToolNode,
    VarNode,
    VarSetNode,
    tool,
)
from tether.runtime.agent_memory_tools import MemoryTools
from tether.store import Store, open_store

TOKEN = "test-token-" + "0123456789abcdef"


@tool
def get_weather(city: str) -> str:
    """The weather in a city (made up)."""
    return f"18°C and sunny in {city}"


@tool(needs_approval=True)
def transfer(amount: int, to: str) -> str:
    """Send money; a person approves it first."""
    return f"sent {amount} EUR to {to}"


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                match=r"weather in (\w+)",
                tools=[call("get_weather", city="{1}")],
                then="The weather in {1}: {result}.",
            ),
            Rule(
                match=r"compare (\w+) and (\w+)",
                tools=[call("get_weather", city="{1}"), call("get_weather", city="{2}")],
                then="{results[0]} / {results[1]}",
            ),
            Rule(
                match=r"pay (\d+) (?:eur )?to (\w+)",
                tools=[call("transfer", amount="{1}", to="{2}")],
                then="Payment made: {result}.",
            ),
            Rule(
                match=r"note that my (\w+) is (\w+)",
                tools=[call("notes_store", key="{1}", value="{2}")],
                then="Noted your {1}.",
            ),
            *ScriptedModel.demo().rules,
            Rule(answer="I can tell the weather, pay, and remember things."),
        ]
    )


def spec() -> Spec:
    return Spec(
        nodes=[
            LLMNode(name="agent", system="You are a helpful test agent."),
            VarNode(name="last_answer", type="string", scope="thread", default=""),
            VarNode(name="weather_asks", type="integer", scope="user", default=0),
            VarSetNode(name="save", var="last_answer", value="{{ input }}"),
            VarSetNode(name="count", var="weather_asks", value="{{ variables.weather_asks + 1 }}"),
        ],
        edges=[
            Edge(src="agent", dst="save", condition="'weather' in output"),
            Edge(src="save", dst="count"),
        ],
        start="agent",
    )


def demo_agent(store: Store, namespace: str = "default") -> Agent:
    return Agent(
        spec(),
        model(),
        store=store,
        namespace=namespace,
        tools=[get_weather, transfer],
        agent_memory=[MemoryTools(name="notes", scope="thread")],
    )


async def fill(store: Store, namespace: str = "default") -> dict[str, Any]:
    """Two threads with memory, variables, agent memory, tools and an approval."""
    agent = demo_agent(store, namespace)
    user = "ada"
    await agent.step("Hello, my name is Ada.", thread="support-1", user=user)
    await agent.step("What's the weather in Paris?", thread="support-1", user=user)
    await agent.step("Please note that my plan is gold.", thread="support-1", user=user)
    paying = await agent.step("pay 40 eur to Bob", thread="support-1", user=user)
    assert paying.status == "suspended", paying
    approved = await agent.approve("support-1", paying.pending_approvals[0].call_id)
    await agent.step("compare Oslo and Rome", thread="support-1", user=user)
    await agent.step("What's the weather in Rome?", thread="support-1", user=user)
    await agent.step("hello", thread="support-2", user="grace")
    waiting = await agent.step("pay 7 eur to Cy", thread="billing", user="grace")
    assert waiting.status == "suspended", waiting
    return {"paid": approved.to_dict(), "waiting": waiting.to_dict()}


# --------------------------------------------------------------------------- flows


@tool(state_scope="thread")
def read_page(page: int, state: SyncToolState) -> str:
    """Read one page (made up), counting the pages read in the tool's own state."""
    state.set("pages_read", state.get("pages_read", 0) + 1)
    state.set("last_page", page)
    return f"page {page} read"


@tool(needs_approval=True)
def publish(title: str) -> str:
    """Publish a digest; a person approves it first."""
    return f"published {title!r}"


def crawler_agent(store: Store, namespace: str = "default") -> Agent:
    """A spec with a loop: three pages, each read (a stateful tool) and counted (a run
    variable); after the second page a digest waits for approval inside the loop."""
    spec = Spec(
        nodes=[
            VarNode(name="pages_seen", type="integer", scope="run", default=0),
            LoopNode(name="pages", body="read", condition="{{ loop_index < 3 }}", max_iterations=5),
            ToolNode(name="read", tool="read_page", arguments={"page": "{{ loop_index }}"}),
            VarSetNode(name="tally", var="pages_seen", value="{{ variables.pages_seen + 1 }}"),
            ToolNode(
                name="review",
                tool="publish",
                arguments={"title": "digest of {{ variables.pages_seen }} pages"},
            ),
        ],
        edges=[
            Edge(src="read", dst="tally"),
            Edge(src="tally", dst="review", condition="loop_index == 1"),
        ],
        start="pages",
    )
    return Agent(
        spec,
        ScriptedModel.demo(),
        store=store,
        namespace=namespace,
        tools=[read_page, publish],
    )


async def fill_flows(store: Store, namespace: str = "default") -> None:
    """Two crawls: one approved and finished, one waiting for a person mid-loop."""
    agent = crawler_agent(store, namespace)
    done = await agent.step(
        "weekly digest", thread="crawl-done", user="ops", metadata={"ticket": 41}
    )
    assert done.status == "suspended", done
    approved = await agent.approve("crawl-done", done.pending_approvals[0].call_id)
    assert approved.status == "completed", approved
    waiting = await agent.step(
        "daily digest", thread="crawl-waiting", user="ops", metadata={"ticket": 42}
    )
    assert waiting.status == "suspended", waiting


# --------------------------------------------------------------------------- a real server


def env_without_tokens(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_TOKEN")}
    return {**env, **extra}


def filled_sqlite(path: Path, *, flows: bool = False) -> str:
    """A SQLite store at ``path`` that the demo agent (and with ``flows``, the crawler)
    has worked on; returns its URL."""
    url = f"sqlite:///{path}"

    async def prepare() -> None:
        store = await open_store(url)
        try:
            await fill(store)
            if flows:
                await fill_flows(store)
        finally:
            await store.close()

    asyncio.run(prepare())
    return url


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    log: Path


@contextmanager
def serve(
    db: Path | str, log: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[Served]:
    """``tether --store DB serve --port 0`` in a child process, stopped with SIGTERM;
    ``db``: a SQLite file or a store URL; ``env``: more environment variables for it."""
    with open(log, "w") as err:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "tether.cli", "--store", str(db), "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env_without_tokens(
                TETHER_TOKEN=TOKEN,
                # `--agent _server_helpers:demo_agent` imports this module.
                PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]),
                **(env or {}),
            ),
        )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), (url, log.read_text())
        yield Served(proc, url, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
