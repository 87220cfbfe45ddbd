"""Property tests: over random histories (parallel calls, dangling calls, failed and
unfinished runs, compactions at random points), no view ever yields a tool result
without its call nor a finished call without its result, and the tail-read views
equal the same policy applied to the whole history."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_helpers import Thread
from tether.projections import (
    Buffer,
    EstimateCounter,
    Summary,
    Tokens,
    Window,
    compact,
    conversation_view,
    load_conversation,
    undo_compaction,
)
from tether.projections.policies import select_tokens, select_window
from tether.projections.projection import flatten
from tether.store.in_memory import MemoryStore

LLMS = ("agent", "other")

step = st.tuples(
    st.sampled_from(LLMS),  # which LLM node infers
    st.integers(0, 3),  # parallel calls
    st.lists(st.booleans(), min_size=3, max_size=3),  # which calls get a result
    st.booleans(),  # results in reverse order
    st.booleans(),  # text content
)
run = st.fixed_dictionaries(
    {
        "llm": st.sampled_from(LLMS),
        "steps": st.lists(step, max_size=4),
        "end": st.sampled_from(["answer", "error", "none"]),
        "compact": st.one_of(st.none(), st.sampled_from(["recent", "tokens", "summary", "undo"])),
        "keep": st.integers(0, 4),
    }
)


def check(messages: list[dict[str, Any]]) -> None:
    """Every tool message directly follows (with its siblings) the assistant message
    that made the call, and every call of an assistant message has its result."""
    pending: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in pending, f"result without its call: {m}"
            pending.discard(m["tool_call_id"])
            continue
        assert not pending, f"calls without results: {pending}"
        if m["role"] == "assistant":
            ids = [c["id"] for c in m.get("tool_calls") or ()]
            assert len(ids) == len(set(ids))
            pending = set(ids)
    assert not pending, f"calls without results: {pending}"


async def build(runs: list[dict[str, Any]]) -> tuple[MemoryStore, str | None]:
    store = MemoryStore()
    t = Thread(store, "ns", "t")
    await t.system("sys")
    current = None
    for i, r in enumerate(runs):
        rid = f"run_{i}"
        await t.goal(rid, f"q{i}", r["llm"])
        for j, (llm, n, mask, rev, text) in enumerate(r["steps"]):
            calls = [(f"c{j}_{k}", "f", {"k": k}) for k in range(n)]
            await t.inference(rid, f"t{i}.{j}" if text else None, calls, llm=llm)
            done = [c for c, keep in zip(calls, mask, strict=False) if keep]
            for cid, _, _ in reversed(done) if rev else done:
                await t.result(rid, cid, f"r{cid}", name="f", llm=llm)
        if r["end"] == "answer":
            await t.answer(rid)
        elif r["end"] == "error":
            await t.error(rid)
        current = rid if r["end"] == "none" else None
        if r["compact"] == "undo":
            for llm in LLMS:
                try:
                    await undo_compaction(store, "ns", "t", llm=llm)
                except Exception as e:  # nothing to undo is fine
                    assert getattr(e, "code", "") == "nothing_to_undo"
        elif r["compact"] is not None:
            for llm in LLMS:
                await compact(
                    store,
                    "ns",
                    "t",
                    llm=llm,
                    strategy=r["compact"],
                    max_messages=3,
                    max_tokens=40,
                    preserve_recent=r["keep"],
                    counter=EstimateCounter(),
                )
    return store, current


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(run, min_size=1, max_size=8), st.integers(1, 6), st.integers(1, 80))
def test_no_view_separates_calls_from_results(
    runs: list[dict[str, Any]], size: int, budget: int
) -> None:
    async def go() -> None:
        store, current = await build(runs)
        c = EstimateCounter()
        for llm in LLMS:
            for r in (current, None):
                full = await conversation_view(store, "ns", "t", llm=llm, run=r)
                check(full.messages)
                units = list(full.units)
                prefix = full.messages[: len(full.messages) - full.kept]
                window = await load_conversation(
                    store, "ns", "t", llm=llm, run=r, policy=Window(size=size)
                )
                check(window)
                # The tail read equals the policy applied to the whole history.
                assert window == prefix + flatten(units[select_window(units, size) :])
                tokens = Tokens(max_tokens=budget, preserve_recent=size % 3, counter=c)
                tv = await load_conversation(store, "ns", "t", llm=llm, run=r, policy=tokens)
                check(tv)
                fixed = sum(1 for m in prefix)
                from tether.projections import messages_tokens

                b = budget - messages_tokens(prefix, c)
                assert fixed <= len(tv)
                assert tv == prefix + flatten(units[select_tokens(units, b, size % 3, c) :])
        for llm in LLMS:
            summarized = await load_conversation(
                store, "ns", "t", llm=llm, run=current, policy=Summary(threshold=4, keep=2)
            )
            check(summarized)
            check(await load_conversation(store, "ns", "t", llm=llm, policy=Buffer()))

    asyncio.run(go())
