"""Conversation views: the projection, the failed-turn rule, isolation and each policy at its boundaries."""

from __future__ import annotations

from typing import Any

import pytest

from memory_helpers import CountingStore, Thread, contents, roles
from tether import InvalidRequest
from tether.projections import (
    Buffer,
    EstimateCounter,
    Summary,
    Tokens,
    Window,
    load_conversation,
    message_tokens,
    policy_from_dict,
)
from tether.store.in_memory import MemoryStore


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


async def _turns(t: Thread, n: int, prefix: str = "") -> None:
    """n completed turns of 2 messages each (user, assistant)."""
    for i in range(n):
        await t.turn(f"run_{prefix}{i:04d}", f"u{i}", f"a{i}")


async def _messages(t: Thread, n: int) -> None:
    """Exactly n messages in completed runs: user/assistant pairs plus one lone user if odd."""
    await _turns(t, n // 2)
    if n % 2:
        await t.goal("run_odd", f"u{n // 2}")
        await t.answer("run_odd")


# -- projection -------------------------------------------------------------------------


async def test_buffer_projects_messages_in_the_neutral_shape(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.system("be brief")
    await t.tool_turn(
        "run_1",
        "weather in Oslo?",
        [("c1", "weather", {"city": "Oslo"})],
        [{"temp": 3}],
        "3 degrees",
    )
    msgs = await load_conversation(store, ns, "t1")
    assert msgs == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "name": "weather", "arguments": {"city": "Oslo"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "weather", "content": '{"temp":3}'},
        {"role": "assistant", "content": "3 degrees"},
    ]


async def test_parallel_calls_keep_their_results_right_after_the_call(
    store: MemoryStore, ns: str
) -> None:
    t = Thread(store, ns, "t1")
    await t.goal("run_1", "two things")
    await t.inference("run_1", "on it", [("a", "f", {}), ("b", "g", {})])
    # Results land out of call order; the view puts them in call order after the call.
    await t.result("run_1", "b", "B", name="g")
    await t.result("run_1", "a", "A", name="f")
    await t.inference("run_1", "done")
    await t.answer("run_1")
    msgs = await load_conversation(store, ns, "t1")
    assert roles(msgs) == ["user", "assistant", "tool", "tool", "assistant"]
    assert [m.get("tool_call_id") for m in msgs[2:4]] == ["a", "b"]
    assert msgs[1]["content"] == "on it"


async def test_system_prompt_is_the_latest_version_and_always_first(
    store: MemoryStore, ns: str
) -> None:
    t = Thread(store, ns, "t1")
    await t.system("v1")
    await _turns(t, 3)
    await t.system("v2")
    for policy in (
        Buffer(),
        Window(size=1),
        Tokens(max_tokens=1, preserve_recent=0, counter=EstimateCounter()),
    ):
        msgs = await load_conversation(store, ns, "t1", policy=policy)
        assert msgs[0] == {"role": "system", "content": "v2"}
        assert sum(m["role"] == "system" for m in msgs) == 1


async def test_in_progress_run_is_shown_only_when_named(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.turn("run_1", "hi", "hello")
    await t.goal("run_2", "and now?")
    await t.inference("run_2", None, [("c1", "lookup", {})])
    await t.result("run_2", "c1", "found")
    current = await load_conversation(store, ns, "t1", run="run_2")
    assert contents(current) == ["hi", "hello", "and now?", None, "found"]
    # Not named: run_2 counts as unfinished; only its receipts remain.
    other = await load_conversation(store, ns, "t1")
    assert contents(other) == ["hi", "hello", "and now?", None, "found"]
    assert other[3] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {}}],
    }


async def test_dangling_call_never_reaches_the_model(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.goal("run_1", "do two")
    await t.inference("run_1", "working", [("a", "f", {}), ("b", "g", {})])
    await t.result("run_1", "a", "A", name="f")  # b never finished (crash)
    msgs = await load_conversation(store, ns, "t1", run="run_1")
    assert msgs[1]["tool_calls"] == [{"id": "a", "name": "f", "arguments": {}}]
    assert [m.get("tool_call_id") for m in msgs if m["role"] == "tool"] == ["a"]


# -- failed turns (SPEC §3, seed 002 receipts) ------------------------------------------


async def test_failed_run_is_left_out(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.turn("run_1", "hi", "hello")
    await t.goal("run_2", "crash please")
    await t.inference("run_2", "thinking...")
    await t.error("run_2")
    await t.turn("run_3", "again", "sure")
    assert contents(await load_conversation(store, ns, "t1")) == ["hi", "hello", "again", "sure"]


async def test_failed_run_keeps_completed_side_effects_as_receipts(
    store: MemoryStore, ns: str
) -> None:
    t = Thread(store, ns, "t1")
    await t.goal("run_1", "pay and mail")
    await t.inference("run_1", "paying", [("p", "pay", {"eur": 5}), ("m", "mail", {})])
    await t.result("run_1", "p", "paid", name="pay")  # mail never ran
    await t.inference("run_1", "now mailing", [("m2", "mail", {})])
    await t.error("run_1", "model_down")
    msgs = await load_conversation(store, ns, "t1")
    assert msgs == [
        {"role": "user", "content": "pay and mail"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "p", "name": "pay", "arguments": {"eur": 5}}],
        },
        {"role": "tool", "tool_call_id": "p", "name": "pay", "content": "paid"},
    ]
    # Even named as the run, a failed run keeps only its receipts.
    assert await load_conversation(store, ns, "t1", run="run_1") == msgs


async def test_run_with_the_same_call_ids_as_another_run(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.tool_turn("run_1", "q1", [("call_1", "f", {})], ["r1"], "a1")
    await t.goal("run_2", "q2")
    await t.inference("run_2", None, [("call_1", "f", {})])  # same provider id, no result yet
    await t.error("run_2")
    msgs = await load_conversation(store, ns, "t1")
    assert contents(msgs) == ["q1", None, "r1", "a1"]  # run_1's result is not a receipt of run_2


# -- isolation ---------------------------------------------------------------------------


async def test_two_llm_nodes_keep_two_histories(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.system("planner prompt", llm="planner")
    await t.system("writer prompt", llm="writer")
    await t.goal("run_1", "write a poem", llm="planner")
    await t.inference("run_1", "plan: 3 lines", llm="planner")
    await t.inference("run_1", "roses...", llm="writer", input="plan: 3 lines")
    await t.answer("run_1")
    planner = await load_conversation(store, ns, "t1", llm="planner")
    writer = await load_conversation(store, ns, "t1", llm="writer")
    assert contents(planner) == ["planner prompt", "write a poem", "plan: 3 lines"]
    assert contents(writer) == ["writer prompt", "plan: 3 lines", "roses..."]
    assert roles(writer) == ["system", "user", "assistant"]
    assert await load_conversation(store, ns, "t1", llm="agent") == []


async def test_two_threads_and_two_namespaces_are_isolated(store: MemoryStore, ns: str) -> None:
    await Thread(store, ns, "t1").turn("run_1", "one", "1")
    await Thread(store, ns, "t2").turn("run_1", "two", "2")
    await Thread(store, ns + "x", "t1").turn("run_1", "other tenant", "x")
    assert contents(await load_conversation(store, ns, "t1")) == ["one", "1"]
    assert contents(await load_conversation(store, ns, "t2")) == ["two", "2"]
    assert contents(await load_conversation(store, ns, "t3")) == []


# -- window -------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "expected"), [(9, 9), (10, 10), (11, 10)])
async def test_window_10_at_its_boundary(
    store: MemoryStore, ns: str, n: int, expected: int
) -> None:
    t = Thread(store, ns, "t1")
    await t.system("sys")
    await _messages(t, n)
    msgs = await load_conversation(store, ns, "t1", policy=Window())
    assert msgs[0]["role"] == "system"
    body = msgs[1:]
    assert len(body) == expected
    full = (await load_conversation(store, ns, "t1"))[1:]
    assert body == full[-expected:]


async def test_window_drops_a_unit_straddling_the_cut(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.goal("run_1", "q")
    await t.inference("run_1", None, [("a", "f", {}), ("b", "f", {})])
    await t.result("run_1", "a", "A", name="f")
    await t.result("run_1", "b", "B", name="f")
    await t.inference("run_1", "done")
    await t.answer("run_1")
    await t.turn("run_2", "u2", "a2")
    # 8 messages: q, call(a,b), A, B, done, u2, a2. A window of 5 would cut between the call and A.
    msgs = await load_conversation(store, ns, "t1", policy=Window(size=5))
    assert contents(msgs) == ["done", "u2", "a2"]
    msgs = await load_conversation(store, ns, "t1", policy=Window(size=6))
    assert contents(msgs) == [None, "A", "B", "done", "u2", "a2"]


async def test_window_keeps_an_oversized_newest_unit_whole(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.turn("run_0", "before", "ok")
    await t.goal("run_1", "many")
    calls = [(f"c{i}", "f", {"i": i}) for i in range(4)]
    await t.inference("run_1", None, calls)
    for c, _, _ in calls:
        await t.result("run_1", c, c.upper(), name="f")
    msgs = await load_conversation(store, ns, "t1", policy=Window(size=2), run="run_1")
    assert roles(msgs) == ["assistant", "tool", "tool", "tool", "tool"]


async def test_window_reads_the_tail_not_the_whole_thread(ns: str) -> None:
    store = CountingStore()
    t = Thread(store, ns, "t1")
    await _turns(t, 300)  # 900 nodes
    store.reset_counts()
    msgs = await load_conversation(store, ns, "t1", policy=Window(size=10))
    assert contents(msgs) == [x for i in range(295, 300) for x in (f"u{i}", f"a{i}")]
    assert store.read <= 64 + 10  # one tail page, not 900 nodes
    store.reset_counts()
    await load_conversation(store, ns, "t1", policy=Buffer())
    assert store.read == 900 + 1  # and the last node again: its id, which the kept view checks


# -- tokens --------------------------------------------------------------------------------


class Chars:
    """One token per character: makes budgets easy to reason about in tests."""

    def count(self, text: str) -> int:
        return len(text)


async def test_tokens_keeps_the_longest_suffix_within_budget(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await _turns(t, 10)  # contents "u0","a0",... : 2 chars + 4 overhead = 6 tokens each
    c = Chars()
    msgs = await load_conversation(
        store, ns, "t1", policy=Tokens(max_tokens=6 * 7, preserve_recent=0, counter=c)
    )
    assert len(msgs) == 7
    assert contents(msgs)[-1] == "a9"
    assert sum(message_tokens(m, c) for m in msgs) <= 42
    # preserve_recent wins over the budget
    msgs = await load_conversation(
        store, ns, "t1", policy=Tokens(max_tokens=1, preserve_recent=6, counter=c)
    )
    assert contents(msgs) == ["u7", "a7", "u8", "a8", "u9", "a9"]


async def test_tokens_with_a_call_pair_straddling_the_cut(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.turn("run_0", "u0", "a0")
    await t.tool_turn("run_1", "u1", [("c1", "f", {})], ["R1"], "a1")
    await t.turn("run_2", "u2", "a2")
    c = Chars()
    full = await load_conversation(store, ns, "t1")
    costs = [message_tokens(m, c) for m in full]
    # A budget that fits the last 3 messages plus the tool result but not its call.
    budget = sum(costs[-4:])
    assert full[-5]["role"] == "assistant" and full[-4]["role"] == "tool"
    msgs = await load_conversation(
        store, ns, "t1", policy=Tokens(max_tokens=budget, preserve_recent=0, counter=c)
    )
    assert contents(msgs) == ["a1", "u2", "a2"]  # the result went with its call
    # preserve_recent reaching into the pair pulls in the whole pair
    msgs = await load_conversation(
        store, ns, "t1", policy=Tokens(max_tokens=1, preserve_recent=4, counter=c)
    )
    assert contents(msgs) == [None, "R1", "a1", "u2", "a2"]


async def test_tokens_counts_the_system_prompt(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.system("x" * 20)  # 24 tokens with overhead
    await _turns(t, 5)
    c = Chars()
    msgs = await load_conversation(
        store, ns, "t1", policy=Tokens(max_tokens=24 + 6 * 3, preserve_recent=0, counter=c)
    )
    assert len(msgs) == 1 + 3


# -- summary (policy) ------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "compressed"), [(19, False), (20, False), (21, True)])
async def test_summary_policy_at_its_threshold(
    store: MemoryStore, ns: str, n: int, compressed: bool
) -> None:
    t = Thread(store, ns, "t1")
    await t.system("sys")
    await _messages(t, n)
    msgs = await load_conversation(store, ns, "t1", policy=Summary())
    if not compressed:
        assert len(msgs) == 1 + n
        assert msgs[1]["role"] == "user"
    else:
        assert roles(msgs)[:2] == ["system", "system"]
        assert msgs[1]["content"].startswith("Summary of earlier conversation: ")
        assert len(msgs) == 2 + 6  # the latest 6 verbatim
        full = await load_conversation(store, ns, "t1", policy=Buffer())
        assert msgs[2:] == full[2:]
        assert "u0" in msgs[1]["content"]  # the extractive summary covers the first message


# -- policies as data --------------------------------------------------------------------------


def test_policies_round_trip_through_dicts() -> None:
    for p in (
        Buffer(),
        Window(size=3),
        Summary(threshold=8, keep=2, max_tokens=64),
        Tokens(max_tokens=100, preserve_recent=1),
    ):
        assert policy_from_dict(p.to_dict()) == p
    assert policy_from_dict({"policy": "window"}) == Window(size=10)
    assert policy_from_dict("summary") == Summary(threshold=20, keep=6, max_tokens=512)
    assert Tokens() == Tokens(max_tokens=4000, preserve_recent=6)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"policy": "lru"}, "policy"),
        ({"policy": "window", "size": 0}, "size"),
        ({"policy": "window", "size": "10"}, "size"),
        ({"policy": "window", "window_size": 3}, "window_size"),
        ({"policy": "summary", "keep": 30}, "keep"),
        ({"policy": "tokens", "preserve_recent": -1}, "preserve_recent"),
        (42, "policy"),
    ],
)
def test_bad_policies_are_typed_errors(data: object, field: str) -> None:
    with pytest.raises(InvalidRequest) as e:
        policy_from_dict(data)  # type: ignore[arg-type]
    assert e.value.details["field"] == field


async def test_load_conversation_validates_its_arguments(store: MemoryStore, ns: str) -> None:
    with pytest.raises(InvalidRequest):
        await load_conversation(store, ns, "")
    with pytest.raises(InvalidRequest) as e:
        await load_conversation(store, ns, "t1", llm="")
    assert e.value.details["field"] == "llm"
    assert await load_conversation(store, ns, "t1", policy={"policy": "window", "size": 2}) == []


def test_token_counters() -> None:
    est = EstimateCounter()
    assert est.count("") == 0
    assert est.count("abcd") == 1 and est.count("abcde") == 2
    assert est.count("日本語") == 3  # each non-ASCII character counts as a token
    m = {
        "role": "assistant",
        "content": "abcd",
        "tool_calls": [{"id": "c", "name": "f", "arguments": {}}],
    }
    assert message_tokens(m, est) == 4 + 1 + 3 + 1 + 1
    from tether.projections import TokenCounter, default_counter

    c = default_counter()
    assert isinstance(c, TokenCounter) and c.count("hello world") > 0
    assert default_counter() is c  # decided once


class _HeadCounting(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.heads = 0

    async def head(self, namespace: str, scope: str) -> Any:
        self.heads += 1
        return await super().head(namespace, scope)


async def test_a_view_at_a_given_head_reads_the_messages_up_to_it(ns: str) -> None:
    """``at``: the caller's head (one it read or its own commit left) bounds the
    messages and needs no read of the head; a system prompt written after it makes
    the view read the head, so prompt and messages come from one state."""
    from tether.projections import conversation_view

    store = _HeadCounting()
    t = Thread(store, ns, "t1")
    await _turns(t, 2)
    held = await store.head(ns, "thread:t1")
    await _turns(t, 1, prefix="late")
    store.heads = 0
    view = await conversation_view(store, ns, "t1", policy=Window(size=20), at=held)
    assert contents(view.messages) == ["u0", "a0", "u1", "a1"]  # not the later turn
    assert view.head == held and store.heads == 0
    await t.system("v2")  # written after ``held``
    view = await conversation_view(store, ns, "t1", policy=Window(size=20), at=held)
    assert view.messages[0] == {"role": "system", "content": "v2"}
    assert contents(view.messages[1:]) == ["u0", "a0", "u1", "a1", "u0", "a0"]
    assert view.head == await store.head(ns, "thread:t1")
