"""What one agent turn reads, and that the heads it starts transactions from stay exact.

An agent turn starts each transaction from the thread head it last read or its own last
commit left, instead of reading the head again (issue 23); the commit checks that head.
These tests pin the statements per turn on SQLite, and show that another writer moving
the thread mid-turn (while the model thinks, while a tool runs) costs a retry only: the
turn's nodes get the right parents and sequences, and nothing of either writer is lost.
"""

from __future__ import annotations

import sqlite3
from itertools import pairwise
from pathlib import Path
from typing import Any

import tether
from tether.control.tasks import runs as list_runs
from tether.core.messages import ModelRequest, ModelResponse
from tether.models import Rule, call
from tether.projections import Window
from tether.store.base import Store
from tether.store.txn import Transaction

ANSWER = "It is sunny in Paris."

# What a turn makes at history 5 (ScriptedModel, Window memory, SQLite), measured: a
# plain turn was 28 statements before the head reads were dropped, a tool turn 49; 22
# and 38 before a commit became one INSERT (no BEGIN, head check or COMMIT of its own).
PLAIN_MAX = 11
TOOL_MAX = 20


def _commits_and_conflicts(traced: list[str]) -> tuple[list[str], int, int]:
    """SQLite's statement trace of a store, read: (the statements, less the trigger
    reports; the commits; the conflicts caught by a commit's head check).

    A commit is a ``COMMIT`` or, for the common commit (one INSERT in autocommit mode
    that checks the head itself), an ``INSERT INTO tether_nodes`` outside a
    transaction. A conflict is a ``ROLLBACK``, or the head that the store reads after
    such an INSERT inserted nothing (to report where the scope stands). Python's trace
    reports a statement again, identical, for each trigger program it runs (a file
    before schema 3 had ``tether_nodes_head``): a repeat in a row is one of those.
    """
    stmts: list[str] = []
    for sql in traced:
        if not stmts or sql != stmts[-1]:
            stmts.append(sql)
    commits = conflicts = 0
    in_txn = False
    for sql in stmts:
        if sql.startswith("BEGIN"):
            in_txn = True
        elif sql.startswith("COMMIT"):
            in_txn, commits = False, commits + 1
        elif sql.startswith("ROLLBACK"):
            in_txn, conflicts = False, conflicts + 1
        elif not in_txn and sql.startswith("INSERT INTO tether_nodes "):
            commits += 1
        elif not in_txn and sql.startswith("SELECT generation, (SELECT k FROM tether_nodes"):
            commits, conflicts = commits - 1, conflicts + 1  # that INSERT wrote nothing
    return stmts, commits, conflicts


def _conn(store: Store) -> sqlite3.Connection:
    conn = getattr(store, "_conn", None)
    assert isinstance(conn, sqlite3.Connection), "the SQLite store runs inline on one connection"
    return conn


def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny, 21 C"


def _rules(workload: str) -> list[Rule]:
    if workload == "tool":
        return [Rule(match=None, tools=[call("get_weather", city="Paris")], then=ANSWER)]
    return [Rule(match=None, answer=ANSWER)]


async def _statements(tmp_path: Path, workload: str) -> list[str]:
    store = await tether.open_store(f"sqlite:///{tmp_path / 'a.db'}", durability="full")
    try:
        model = tether.ScriptedModel(_rules(workload))
        agent = tether.Agent(
            tether.Spec.single(memory=Window(size=20)), model, store=store, tools=[get_weather]
        )
        for k in range(5):
            await agent.step(f"question {k}", thread="t")
        stmts: list[str] = []
        _conn(store).set_trace_callback(stmts.append)
        try:
            result = await agent.step("last question", thread="t")
        finally:
            _conn(store).set_trace_callback(None)
        assert result.answer == ANSWER
        return stmts
    finally:
        await store.close()


async def test_plain_turn_statements(tmp_path: Path) -> None:
    stmts, commits, conflicts = _commits_and_conflicts(await _statements(tmp_path, "plain"))
    assert (commits, conflicts) == (2, 0), "\n".join(stmts)
    assert len(stmts) <= PLAIN_MAX, "\n".join(stmts)


async def test_tool_turn_statements(tmp_path: Path) -> None:
    stmts, commits, conflicts = _commits_and_conflicts(await _statements(tmp_path, "tool"))
    assert (commits, conflicts) == (4, 0), "\n".join(stmts)
    assert len(stmts) <= TOOL_MAX, "\n".join(stmts)


class _Other:
    """Another process's writes to the thread: its own store on the same file."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.written: list[str] = []

    async def write(self) -> None:
        txn = Transaction(self.store, "default")
        n = await txn.append(
            "thread:t", "resource", {"note": len(self.written)}, resource_key="note"
        )
        await txn.commit()
        self.written.append(n.id)


class _MovingModel(tether.ScriptedModel):
    """Answers like ScriptedModel, after another writer has moved the thread."""

    other: _Other

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await self.other.write()
        return await super().complete(request)


def _check_graph(nodes: list[Any], frontier: tuple[str, ...]) -> None:
    assert [n.sequence for n in nodes] == list(range(1, len(nodes) + 1))
    seen: set[str] = set()
    children: set[str] = set()
    last: dict[str, str] = {}
    for n in nodes:
        assert set(n.parents) <= seen, f"{n.kind} #{n.sequence} has a parent not before it"
        if n.resource_key is not None:
            if n.resource_key in last:
                # Every new version of a resource key (the run index entry included)
                # names the one before it: no hint ever skipped a version.
                assert last[n.resource_key] in n.parents, (n.kind, n.sequence, n.resource_key)
            last[n.resource_key] = n.id
        seen.add(n.id)
        children.update(n.parents)
    assert set(frontier) == seen - children


async def test_another_writer_mid_turn_costs_a_retry_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = await tether.open_store(url, durability="full")
    other_store = await tether.open_store(url, durability="full")
    try:
        other = _Other(other_store)
        model = _MovingModel(_rules("tool"))
        model.other = other
        calls = 0

        async def moving_weather(city: str) -> str:
            """The weather in a city."""
            nonlocal calls
            calls += 1
            await other.write()  # while the tool runs, after the run's last commit
            return "sunny, 21 C"

        moving_weather.__name__ = "get_weather"
        agent = tether.Agent(
            tether.Spec.single(memory=Window(size=20)), model, store=store, tools=[moving_weather]
        )
        stmts: list[str] = []
        _conn(store).set_trace_callback(stmts.append)
        for k in range(3):
            result = await agent.step(f"question {k}", thread="t")
            assert result.status == "completed" and result.answer == ANSWER
            await other.write()  # between two steps too
        _conn(store).set_trace_callback(None)
        assert calls == 3  # each tool ran once: no step was redone
        # The stale heads were caught by the commit's check (a Conflict, nothing written,
        # retried inside the turn), never written against.
        assert _commits_and_conflicts(stmts)[2] >= 3

        nodes = await store.nodes("default", "thread:t")
        head = await store.head("default", "thread:t")
        assert head.sequence == len(nodes)
        _check_graph(nodes, head.frontier)
        ids = {n.id for n in nodes}
        # Per step: one write per model call (two), one in the tool, one after the step.
        assert set(other.written) <= ids and len(other.written) == 3 * 4
        by_kind = [n.kind for n in nodes if n.kind != "resource"]
        assert (
            by_kind == ["goal", "inference", "tool_call", "tool_result", "inference", "answer"] * 3
        )
        # An inference (parents: the frontier) right after another writer's node has it as
        # a parent: it was computed against the head that node made, not a stale one.
        for prev, n in pairwise(nodes):
            if prev.id in other.written and n.kind == "inference":
                assert prev.id in n.parents
        runs = await list_runs(store, thread="t")
        assert [r.status for r in runs.runs] == ["completed"] * 3
    finally:
        await other_store.close()
        await store.close()
