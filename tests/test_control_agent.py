"""The control plane on an Agent (seed 002's describe_state/reset_state/compact_state) and compact."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import tether
from tether import control
from tether.models import ScriptedModel
from tether.projections.conversation import load_conversation
from tether.runtime import Agent


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Agent]:
    a = Agent(None, ScriptedModel.demo(), store=f"sqlite:///{tmp_path / 'a.db'}", namespace="acme")
    async with a:
        yield a


async def _chat(agent: Agent, thread: str, n: int) -> None:
    for i in range(n):
        await agent.step(f"Hello number {i}", thread=thread, user="u1")


async def test_describe_reset_compact_state_on_an_agent(agent: Agent) -> None:
    await agent.step("My name is Ada", thread="customer-42", user="u1")
    await _chat(agent, "customer-42", 12)
    report = await agent.describe_state("customer-42")
    assert report.operation == "describe" and report.namespace == "acme"
    conv = next(r for r in report.stores if r.name == "conversation")
    assert conv.message_count == 26

    compacted = await agent.compact_state("customer-42", strategy="recent", max_messages=10)
    assert compacted.compacted == ("conversation",)
    meta = compacted.stores[0].metadata
    assert (meta["before"], meta["after"]) == (26, 10)
    store = await agent._get_store()
    view = await load_conversation(store, "acme", "customer-42")
    assert len(view) == 10

    ns_report = await agent.describe_state()
    # app holds the namespace's run index (tether.control.tasks).
    # No app: the run index lives in each run's thread.
    assert {r.scope for r in ns_report.stores} == {"thread:customer-42", "user:u1"}

    reset = await agent.reset_state("customer-42")
    assert reset.cleared == ("thread:customer-42",)
    again = await agent.describe_state("customer-42")
    assert again.missing == ("thread:customer-42",)
    # The user's memory is another scope: untouched.
    answer = await agent.step("What is my name?", thread="new", user="u1")
    assert answer.answer == "Your name is Ada."


async def test_compact_with_invalid_parameters_is_structured(agent: Agent) -> None:
    await _chat(agent, "t", 2)
    for fields, name in (
        ({"strategy": "all"}, "strategy"),
        ({"max_messages": 0}, "max_messages"),
        ({"max_tokens": "many"}, "max_tokens"),
        ({"preserve_recent": -1}, "preserve_recent"),
        ({"summary_max_tokens": 1.5}, "summary_max_tokens"),
    ):
        with pytest.raises(tether.InvalidRequest) as ei:
            await agent.compact_state("t", **fields)
        assert ei.value.details["field"] == name
    with pytest.raises(tether.InvalidRequest) as ei:
        await agent.state_operation("compact")
    assert ei.value.details["field"] == "thread"


async def test_compact_summary_writes_a_summary_node_and_keeps_history(agent: Agent) -> None:
    await _chat(agent, "t", 10)
    store = await agent._get_store()
    before = await store.head("acme", "thread:t")
    res = await control.compact(
        store, namespace="acme", thread="t", strategy="summary", max_messages=6, preserve_recent=2
    )
    (rep,) = res.stores
    assert rep.compacted and rep.metadata["after"] == 2 and rep.metadata["before"] == 20
    after = await store.head("acme", "thread:t")
    assert after.sequence == before.sequence + 1  # one summary node, nothing deleted
    node = await store.resource_head("acme", "thread:t", "semantic:summary:agent")
    assert node is not None and "Hello number 0" in node.payload["content"]["text"]
    nothing = await control.compact(store, namespace="acme", thread="t", strategy="recent")
    assert nothing.compacted == () and nothing.stores[0].compacted is False
    ghost = await control.compact(store, namespace="acme", thread="ghost")
    assert ghost.missing == ("conversation",)
