"""Crash recovery: a process dies at every possible point of a run; another resumes it.

``DyingStore`` makes the process "die" (a BaseException nothing catches) just before
or just after its k-th commit; from then on every store call of that process dies
too, so no stray work leaks out after the crash. A fresh agent over the same data
then resumes. For every k the run must complete with the same shape as a run that
never crashed, keep every node committed before the crash, give each tool call
exactly one result and one idempotency key, and hold one answer.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

import tether
from tether.models import Rule, ScriptedModel, call, remember
from tether.runtime import Agent, Edge, LLMNode, Spec, ToolNode, VarNode, VarSetNode, tool
from tether.store import Head, ScopeInfo, ScopeStats, ScopeWrite, Store
from tether.store.in_memory import MemoryStore

NS = "default"


class Died(BaseException):
    """The process is gone."""


class DyingStore(Store):
    def __init__(self, inner: Store, *, at: int, after: bool) -> None:
        super().__init__()
        self.inner, self.at, self.after = inner, at, after
        self.count = 0
        self.dead = False

    def _check(self) -> None:
        if self.dead:
            raise Died()

    async def _do_commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        self._check()
        self.count += 1
        if self.count == self.at and not self.after:
            self.dead = True
            raise Died()
        await self.inner.commit(namespace, writes)
        if self.count == self.at:
            self.dead = True
            raise Died()

    async def _do_reset_scope(self, namespace: str, scope: str) -> Head:
        self._check()
        return await self.inner.reset_scope(namespace, scope)

    async def _do_delete_namespace(self, namespace: str) -> int:
        self._check()
        return await self.inner.delete_namespace(namespace)

    async def head(self, namespace: str, scope: str) -> Head:
        self._check()
        return await self.inner.head(namespace, scope)

    async def nodes(self, namespace: str, scope: str, **kw: Any) -> list[tether.CausalNode]:
        self._check()
        return await self.inner.nodes(namespace, scope, **kw)

    async def get_nodes(
        self, namespace: str, scope: str, ids: Sequence[str]
    ) -> dict[str, tether.CausalNode]:
        self._check()
        return await self.inner.get_nodes(namespace, scope, ids)

    async def resource_head(self, namespace: str, scope: str, key: str) -> tether.CausalNode | None:
        self._check()
        return await self.inner.resource_head(namespace, scope, key)

    async def resource_heads(
        self, namespace: str, scope: str, prefix: str = ""
    ) -> dict[str, tether.CausalNode]:
        self._check()
        return await self.inner.resource_heads(namespace, scope, prefix)

    async def versions(
        self, namespace: str, scope: str, key: str, *, limit: int = 1000
    ) -> list[tether.CausalNode]:
        self._check()
        return await self.inner.versions(namespace, scope, key, limit=limit)

    async def list_namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        self._check()
        return await self.inner.list_namespaces(after=after, limit=limit)

    async def list_scopes(self, namespace: str, **kw: Any) -> list[ScopeInfo]:
        self._check()
        return await self.inner.list_scopes(namespace, **kw)

    async def stats(self, namespace: str, scope: str) -> ScopeStats:
        self._check()
        return await self.inner.stats(namespace, scope)


class Scenario:
    """A run with parallel calls, an approval, model memory and var/tool nodes."""

    def __init__(self) -> None:
        self.keys: list[tuple[str, str]] = []  # (tool, idempotency key) per invocation

        @tool
        async def lookup(city: str, idempotency_key: str) -> str:
            self.keys.append(("lookup", idempotency_key))
            await asyncio.sleep(0.001 * len(city))
            return f"{city}: sunny"

        @tool(needs_approval=True)
        def book(city: str, idempotency_key: str) -> str:
            self.keys.append(("book", idempotency_key))
            return f"booked {city}"

        @tool
        def receipt(text: str, idempotency_key: str) -> str:
            self.keys.append(("receipt", idempotency_key))
            return f"receipt for {text}"

        self.tools = [lookup, book, receipt]
        self.model = ScriptedModel(
            [
                Rule(
                    match=r"trip (\w+) (\w+)",
                    tools=[
                        call("lookup", city="{1}"),
                        call("lookup", city="{2}"),
                        call("book", city="{1}"),
                    ],
                    then="done: {results[0]} / {results[1]} / {results[2]}",
                    remember=[remember("dest", "{1}", type="preference")],
                )
            ]
        )
        self.spec = Spec(
            nodes=[
                LLMNode(name="agent", tools=("lookup", "book")),
                VarNode(name="trips", type="integer", scope="user", default=0),
                VarSetNode(name="count", var="trips", value="{{ variables.trips + 1 }}"),
                ToolNode(
                    name="receipt", tool="receipt", arguments={"text": "{{ nodes.agent.output }}"}
                ),
            ],
            edges=[Edge(src="agent", dst="count"), Edge(src="count", dst="receipt")],
            start="agent",
        )

    def agent(self, store: Store) -> Agent:
        return Agent(self.spec, self.model, store=store, tools=self.tools)


async def drive(agent: Agent) -> tether.runtime.StepResult:
    """step, approving whatever is pending (the human is always there)."""
    r = await agent.step("trip Oslo Rome", thread="t", user="u")
    while r.status == "suspended":
        r = await agent.approve("t", r.pending_approvals[0].call_id)
    return r


async def resume_to_end(agent: Agent) -> tether.runtime.StepResult:
    r = await agent.resume("t")
    while r.status == "suspended":
        r = await agent.approve("t", r.pending_approvals[0].call_id)
    return r


def shape(nodes: Sequence[tether.CausalNode]) -> Counter[str]:
    """Kinds of the run's own nodes (its index entries, ``task:<run>``, counted apart)."""
    return Counter("index" if (n.resource_key or "").startswith("task:") else n.kind for n in nodes)


async def reference() -> tuple[int, Counter[str], Any]:
    sc = Scenario()
    counting = DyingStore(MemoryStore(), at=10**9, after=False)
    r = await drive(sc.agent(counting))
    assert r.status == "completed"
    graph = await counting.inner.nodes(NS, "thread:t", limit=10_000)
    return counting.count, shape(graph), r.answer


async def test_reference_run_shape() -> None:
    commits, kinds, answer = await reference()
    assert answer == "receipt for done: Oslo: sunny / Rome: sunny / booked Oslo"
    assert kinds == Counter(
        goal=1,
        inference=2,
        tool_call=4,  # three from the model, one from the tool node
        verification=1,
        tool_result=4,
        resource=1,  # the var_set node's step record (the variable is in the user scope)
        answer=1,
        index=4,  # the run's index entry: running, suspended, running, completed
    )
    # goal, inference+calls, 2 results, verification, result, inference,
    # var_set (+ record), tool node call, its result, answer
    assert commits == 11


@pytest.mark.parametrize("after", [False, True], ids=["before-write", "after-write"])
async def test_crash_at_every_commit_then_resume(after: bool) -> None:
    commits, ref_kinds, ref_answer = await reference()
    for k in range(1, commits + 1):
        inner = MemoryStore()
        first = Scenario()
        with pytest.raises(Died):
            await drive(first.agent(DyingStore(inner, at=k, after=after)))
        before = await inner.nodes(NS, "thread:t", limit=10_000)
        if not before:
            # Died before the goal was written: there is nothing to resume.
            with pytest.raises(tether.NotFound):
                await Scenario().agent(inner).resume("t")
            continue
        second = Scenario()
        r = await resume_to_end(second.agent(inner))
        assert r.status == "completed", (k, r)
        assert r.answer == ref_answer, k
        graph = await inner.nodes(NS, "thread:t", limit=10_000)
        assert [n.to_dict() for n in graph[: len(before)]] == [n.to_dict() for n in before], k
        assert shape(graph) == ref_kinds, (k, shape(graph), ref_kinds)
        calls = {n.id: n for n in graph if n.kind == "tool_call"}
        results = [n for n in graph if n.kind == "tool_result"]
        answered = sorted(p for res in results for p in res.parents if p in calls)
        assert answered == sorted(calls), k
        # Every invocation, in either process, used its call node's id as the key.
        for name, key in first.keys + second.keys:
            assert key in calls and calls[key].payload["name"] == name, k
        # A call is re-issued only if the crash left it without a result.
        assert len(second.keys) == len(set(second.keys)), k
        # The user-scope variable was written once.
        versions = await inner.versions(NS, "user:u", "var:trips")
        assert [v.payload["value"] for v in versions] == [1], k


async def test_two_processes_resuming_the_same_run_race_safely() -> None:
    inner = MemoryStore()
    sc = Scenario()
    with pytest.raises(Died):
        await drive(sc.agent(DyingStore(inner, at=2, after=True)))  # inference + calls written
    a, b = Scenario(), Scenario()
    ra, rb = await asyncio.gather(a.agent(inner).resume("t"), b.agent(inner).resume("t"))
    assert ra.status == rb.status == "suspended"
    final = await resume_to_end(Scenario().agent(inner))
    assert final.status == "completed"
    graph = await inner.nodes(NS, "thread:t", limit=10_000)
    calls = {n.id for n in graph if n.kind == "tool_call"}
    answered = Counter(p for n in graph if n.kind == "tool_result" for p in n.parents if p in calls)
    assert set(answered) == calls and set(answered.values()) == {1}  # one result per call
    assert sum(n.kind == "answer" for n in graph) == 1
