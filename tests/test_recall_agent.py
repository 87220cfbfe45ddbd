"""The ``recall`` model tool in a ScriptedModel agent (tether.runtime.recall_tool)."""

from __future__ import annotations

import ast

import pytest

import tether
from tether.models import ModelRequest, ModelResponse, Rule, call
from tether.models.embeddings import WordLlamaEmbedder
from tether.projections import remember
from tether.runtime.recall_tool import RecallMemory, recall_tool

FACTS = {
    "allergy": "user is allergic to peanuts",
    "colour": "favourite colour is deep blue",
    "city": "lives in Lisbon, Portugal",
    "pet": "has a dog named Rex",
}


async def test_a_scripted_agent_recalls_the_right_memory_by_meaning() -> None:
    pytest.importorskip("wordllama")
    store = await tether.open_store("memory://")
    for key, text in FACTS.items():
        await remember(store, "default", "user:alice", "memory", key, text)
    model = tether.ScriptedModel(
        [
            Rule(
                match=r"^(what did I say about .*)\?$",
                tools=[call("recall", query="{1}", k=1)],
                then="You told me: {result}",
            )
        ]
    )
    agent = tether.Agent(None, model, store=store, tools=[recall_tool(WordLlamaEmbedder())])
    r = await agent.step("what did I say about my allergies?", thread="t1", user="alice")
    assert r.status == "completed", r.error
    assert r.answer is not None
    found = ast.literal_eval(r.answer.removeprefix("You told me: "))
    assert [f["key"] for f in found] == ["allergy"]
    assert found[0]["content"] == "user is allergic to peanuts"
    # without a user, the tool says why instead of searching someone else's memory
    r = await agent.step("what did I say about my allergies?", thread="t2")
    assert r.status == "completed"
    assert "allergic" not in (r.answer or "")
    await store.close()


class Recorder:
    """A model that answers "ok" and keeps the memory each request showed it."""

    def __init__(self) -> None:
        self.memory: list[dict[str, object]] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.memory.append(dict(request.memory))
        return ModelResponse(content="ok")


async def test_recall_memory_shows_the_model_the_relevant_memories_only() -> None:
    pytest.importorskip("wordllama")
    store = await tether.open_store("memory://")
    for key, text in FACTS.items():
        await remember(store, "default", "user:alice", "memory", key, text)
    await remember(store, "default", "thread:t1", "memory", "topic", "planning a trip to Japan")
    model = Recorder()
    agent = tether.Agent(
        None, model, store=store, recall_memory=RecallMemory(embedder=WordLlamaEmbedder(), k=2)
    )
    r = await agent.step("can I eat a peanut butter sandwich?", thread="t1", user="alice")
    assert r.status == "completed"
    assert len(model.memory[-1]) == 2
    assert model.memory[-1]["memory:allergy"] == "user is allergic to peanuts"
    # without the option the model sees every memory
    plain = Recorder()
    await tether.Agent(None, plain, store=store).step("hi", thread="t1", user="alice")
    assert len(plain.memory[-1]) == len(FACTS) + 1
    with pytest.raises(tether.SpecError):
        RecallMemory(embedder=WordLlamaEmbedder(), scopes=("nowhere",))
    await store.close()
