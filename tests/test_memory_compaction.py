"""Compaction: strategies, validation, cost after compaction, undo, and races with turns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memory_helpers import CountingStore, Thread, contents, roles
from tether import InvalidRequest, Transaction, transact
from tether.core import scopes
from tether.core.messages import ModelRequest, ModelResponse
from tether.projections import (
    Buffer,
    CompactionResult,
    EstimateCounter,
    NothingToUndo,
    Summary,
    UndoResult,
    Window,
    compact,
    extractive_summary,
    load_conversation,
    undo_compaction,
)
from tether.store.in_memory import MemoryStore


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


async def _turns(t: Thread, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        await t.turn(f"run_{i:05d}", f"u{i}", f"a{i}")


class EchoModel:
    """A model that summarises by listing what it was asked about (deterministic)."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        lines = request.messages[-1]["content"].count("\n")
        return ModelResponse(content=f"SUMMARY({lines} lines)")


# -- validation (seed 002) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"strategy": "lossy"}, "strategy"),
        ({"max_messages": 0}, "max_messages"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"preserve_recent": -1}, "preserve_recent"),
        ({"summary_max_tokens": 0}, "summary_max_tokens"),
        ({"max_messages": "20"}, "max_messages"),
        ({"max_tokens": True}, "max_tokens"),
        ({"llm": ""}, "llm"),
    ],
)
async def test_invalid_requests_are_typed_and_write_nothing(
    store: MemoryStore, ns: str, kw: dict[str, Any], field: str
) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 15)
    before = await store.head(ns, t.scope)
    with pytest.raises(InvalidRequest) as e:
        await compact(store, ns, "t1", **kw)
    assert e.value.details["field"] == field
    # Also a ValueError (issue 44): code written for the seeds' `except ValueError` holds.
    assert isinstance(e.value, ValueError)
    assert await store.head(ns, t.scope) == before


# -- strategies -----------------------------------------------------------------------


async def test_recent_keeps_the_latest_max_messages(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 15)  # 30 messages
    r = await compact(store, ns, "t1", strategy="recent", max_messages=20)
    assert r.compacted and r.covered == 10 and r.messages_after == 20 and r.count == 10
    msgs = await load_conversation(store, ns, "t1")
    assert len(msgs) == 20 and msgs[0]["content"] == "u5"  # no summary text for "recent"
    again = await compact(store, ns, "t1", strategy="recent", max_messages=20)
    assert not again.compacted and "max_messages" in again.reason


async def test_tokens_strategy_keeps_a_suffix_within_budget(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.system("sys")
    await _turns(t, 10)
    c = EstimateCounter()
    r = await compact(
        store, ns, "t1", strategy="tokens", max_tokens=60, preserve_recent=2, counter=c
    )
    assert r.compacted
    msgs = await load_conversation(store, ns, "t1")
    assert msgs[0]["content"] == "sys"
    from tether.projections import messages_tokens

    assert messages_tokens(msgs, c) <= 60
    assert len(msgs) - 1 == r.messages_after
    within = await compact(store, ns, "t1", strategy="tokens", max_tokens=60, counter=c)
    assert not within.compacted


async def test_summary_strategy_with_a_model(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 12)
    model = EchoModel()
    r = await compact(store, ns, "t1", strategy="summary", model=model, summary_max_tokens=100)
    assert r.compacted and r.messages_after == 6 and r.covered == 18
    assert model.requests[0].max_tokens == 100
    assert "u0" in model.requests[0].messages[-1]["content"]
    msgs = await load_conversation(store, ns, "t1")
    assert msgs[0] == {
        "role": "system",
        "content": "Summary of earlier conversation: SUMMARY(18 lines)",
    }
    assert contents(msgs[1:]) == ["u9", "a9", "u10", "a10", "u11", "a11"]


async def test_a_second_summary_builds_on_the_first(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 12)
    await compact(store, ns, "t1", strategy="summary")
    await _turns(t, 10, start=12)
    r = await compact(store, ns, "t1", strategy="summary")
    assert r.compacted and r.count == 18 + 20
    summary = (await load_conversation(store, ns, "t1"))[0]["content"]
    assert "u0" in summary or "earlier lines omitted" in summary
    assert "u15" in summary


def test_extractive_summary_stays_within_its_budget() -> None:
    c = EstimateCounter()
    msgs = [{"role": "user", "content": f"message number {i} " + "x" * 500} for i in range(50)]
    text = extractive_summary("earlier facts", msgs, max_tokens=200, counter=c)
    assert c.count(text) <= 200
    assert "earlier lines omitted" in text
    assert "message number 49" in text  # the newest lines are kept
    assert extractive_summary("", [], max_tokens=5, counter=c) == ""
    tiny = extractive_summary("", msgs[:1], max_tokens=3, counter=c)
    assert c.count(tiny) <= 3


# -- the cut ------------------------------------------------------------------------------


async def test_compaction_never_separates_a_call_from_its_results(
    store: MemoryStore, ns: str
) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 5)
    await t.tool_turn("run_x", "uX", [("c", "f", {}), ("d", "f", {})], ["C", "D"], "aX")
    await _turns(t, 1, start=5)
    # keep 5 messages: the cut would fall between the call and its 2 results
    r = await compact(store, ns, "t1", strategy="summary", max_messages=10, preserve_recent=5)
    assert r.compacted
    msgs = await load_conversation(store, ns, "t1")
    assert roles(msgs[1:]) == ["assistant", "tool", "tool", "assistant", "user", "assistant"]


async def test_compaction_never_covers_a_run_in_progress(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 3)
    await t.goal("run_live", "long task")
    for i in range(12):
        await t.inference("run_live", None, [(f"c{i}", "step", {})])
        await t.result("run_live", f"c{i}", f"r{i}", name="step")
    r = await compact(store, ns, "t1", strategy="recent", max_messages=4)
    assert r.compacted and r.covered == 6  # only the 3 finished turns
    msgs = await load_conversation(store, ns, "t1", run="run_live")
    assert msgs[0]["content"] == "long task"
    assert len(msgs) == 1 + 24


async def test_an_abandoned_run_does_not_block_compaction(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.goal("run_crashed", "lost")
    await t.inference("run_crashed", "half")
    await _turns(t, 12)
    r = await compact(store, ns, "t1", strategy="summary")
    assert r.compacted and r.messages_after == 6


# -- cost: loading after compaction doesn't grow with the history --------------------------


async def test_view_after_compaction_reads_only_after_the_summary(ns: str) -> None:
    store = CountingStore()
    t = Thread(store, ns, "t1")
    await t.system("sys")
    await _turns(t, 400)  # 1201 nodes
    await compact(store, ns, "t1", strategy="summary", preserve_recent=4)
    store.reset_counts()
    msgs = await load_conversation(store, ns, "t1", policy=Buffer())
    assert contents(msgs[2:]) == ["u398", "a398", "u399", "a399"]
    assert store.read <= 8  # the nodes after the summary, not the 1200 before it
    await _turns(t, 400, start=400)
    store.reset_counts()
    await load_conversation(store, ns, "t1", policy=Buffer())
    assert 1200 <= store.read <= 1210  # grows with what came after the summary only


# -- undo ---------------------------------------------------------------------------------


async def test_undo_restores_the_full_view_and_earlier_summaries(
    store: MemoryStore, ns: str
) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 12)
    full = await load_conversation(store, ns, "t1")
    first = await compact(store, ns, "t1", strategy="summary")
    view1 = await load_conversation(store, ns, "t1")
    await _turns(t, 10, start=12)
    second = await compact(store, ns, "t1", strategy="summary")
    assert second.compacted

    u = await undo_compaction(store, ns, "t1")
    assert isinstance(u, UndoResult)
    assert u.undone == second.summary_node and u.restored == first.summary_node
    after_one_undo = await load_conversation(store, ns, "t1")
    assert after_one_undo[: len(view1)] == view1  # back to the first summary
    assert len(after_one_undo) == len(view1) + 20

    u2 = await undo_compaction(store, ns, "t1")
    assert u2.undone == first.summary_node and u2.restored is None
    everything = await load_conversation(store, ns, "t1")
    assert everything[: len(full)] == full and len(everything) == 44
    with pytest.raises(NothingToUndo) as e:
        await undo_compaction(store, ns, "t1")
    assert e.value.code == "nothing_to_undo"
    # The graph still holds every version (nothing was deleted).
    assert len(await store.versions(ns, t.scope, "semantic:summary:agent")) == 4


async def test_compact_after_undo_starts_a_new_stack(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 12)
    await compact(store, ns, "t1", strategy="summary")
    await undo_compaction(store, ns, "t1")
    r = await compact(store, ns, "t1", strategy="summary")
    assert r.compacted and r.covered == 18
    await undo_compaction(store, ns, "t1")
    assert len(await load_conversation(store, ns, "t1")) == 24


async def test_compaction_is_per_llm(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    for i in range(12):
        await t.turn(f"run_a{i}", f"a-u{i}", f"a-a{i}", llm="a")
        await t.turn(f"run_b{i}", f"b-u{i}", f"b-a{i}", llm="b")
    await compact(store, ns, "t1", llm="a", strategy="summary")
    assert len(await load_conversation(store, ns, "t1", llm="a")) == 7
    assert len(await load_conversation(store, ns, "t1", llm="b")) == 24
    with pytest.raises(NothingToUndo):
        await undo_compaction(store, ns, "t1", llm="b")


def test_results_round_trip() -> None:
    r = CompactionResult(
        thread="t",
        llm="agent",
        strategy="tokens",
        compacted=True,
        covered=3,
        through=9,
        summary_node="cw_x",
    )
    assert CompactionResult.from_dict(r.to_dict()) == r
    u = UndoResult(
        thread="t", llm="agent", undone="a", restored=None, through=None, summary_node="b"
    )
    assert UndoResult.from_dict(u.to_dict()) == u


# -- races ------------------------------------------------------------------------------------


class TurnDuringSummary:
    """A model whose summary call lets a whole turn commit meanwhile (a racing turn)."""

    def __init__(self, thread: Thread) -> None:
        self.thread = thread

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await self.thread.turn("run_racer", "racing question", "racing answer")
        return ModelResponse(content="S")


async def test_a_turn_committed_during_compaction_is_not_lost(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 12)
    r = await compact(store, ns, "t1", strategy="summary", model=TurnDuringSummary(t))
    assert r.compacted
    msgs = await load_conversation(store, ns, "t1")
    assert contents(msgs[-2:]) == ["racing question", "racing answer"]
    assert msgs[0]["content"].endswith("S")


async def test_a_turn_computed_before_compaction_retries_and_is_not_lost(
    store: MemoryStore, ns: str
) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 12)
    scope = scopes.thread("t1")
    computed = asyncio.Event()
    compacted = asyncio.Event()
    attempts = 0

    async def turn(txn: Transaction) -> None:
        nonlocal attempts
        attempts += 1
        await txn.append(
            scope, "goal", {"run": "run_late", "input": "late", "llm": "agent", "metadata": {}}
        )
        await txn.append(
            scope,
            "inference",
            {
                "run": "run_late",
                "llm": "agent",
                "content": "late reply",
                "tool_calls": [],
                "usage": {},
            },
        )
        await txn.append(scope, "answer", {"run": "run_late", "output": None})
        if attempts == 1:
            computed.set()
            await compacted.wait()

    task = asyncio.create_task(transact(store, ns, turn))
    await computed.wait()
    r = await compact(store, ns, "t1", strategy="summary")
    compacted.set()
    await task
    assert r.compacted and attempts == 2  # the turn hit a Conflict and recomputed
    msgs = await load_conversation(store, ns, "t1")
    assert contents(msgs[-2:]) == ["late", "late reply"]
    assert msgs[0]["content"].startswith("Summary of earlier conversation")


async def test_concurrent_compactions_write_one_summary_each_consistently(
    store: MemoryStore, ns: str
) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 30)
    results = await asyncio.gather(
        *(compact(store, ns, "t1", strategy="summary") for _ in range(4))
    )
    assert any(r.compacted for r in results)
    msgs = await load_conversation(store, ns, "t1")
    assert contents(msgs[-6:]) == ["u27", "a27", "u28", "a28", "u29", "a29"]
    assert len(msgs) == 7


async def test_summary_policy_asks_the_model_once_per_threshold(
    store: MemoryStore, ns: str
) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 11)  # 22 messages > 20
    model = EchoModel()
    for _ in range(3):
        msgs = await load_conversation(store, ns, "t1", policy=Summary(), model=model)
    assert len(model.requests) == 1 and len(msgs) == 7
    await _turns(t, 7, start=11)  # 6 kept + 14 = 20: not past the threshold
    await load_conversation(store, ns, "t1", policy=Summary(model=model))
    assert len(model.requests) == 1
    await _turns(t, 1, start=18)  # 22
    await load_conversation(store, ns, "t1", policy=Summary(model=model))
    assert len(model.requests) == 2
    # a window view after compaction still starts with the summary
    w = await load_conversation(store, ns, "t1", policy=Window(size=2))
    assert roles(w) == ["system", "user", "assistant"]
