"""The runtime across real processes on one SQLite file (SPEC §4 "Must show").

Each test starts ``tests/runtime_proc.py`` processes: nothing is shared between
them but the database file, so what the second process knows came from the graph.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

import tether
from _proc_helpers import kill_when, log_lines, run_json

pytestmark = pytest.mark.slow

HELPER = str(Path(__file__).with_name("runtime_proc.py"))
NS = "default"


def run(db: Path, log: Path, *args: str, sleep: float = 0) -> dict[str, Any]:
    env = {**os.environ, "RUNTIME_PROC_LOG": str(log), "RUNTIME_PROC_SLEEP": str(sleep)}
    return run_json(HELPER, str(db), *args, env=env)


async def all_nodes(db: Path, scope: str) -> list[tether.CausalNode]:
    store = await tether.open_store(f"sqlite:///{db}")
    try:
        return await store.nodes(NS, scope, limit=10_000)
    finally:
        await store.close()


async def test_memory_across_two_processes(tmp_path: Path) -> None:
    db, log = tmp_path / "agent.db", tmp_path / "tools.log"
    first = run(db, log, "step", "t1", "alice", "My name is Alice.")
    assert first["status"] == "completed"

    # Same thread, new process: the conversation comes back from the file.
    same_thread = run(db, log, "step", "t1", "alice", "What is my name?")
    assert same_thread["answer"] == "Your name is Alice."

    # Another thread of the same user: only the user-scope semantic memory knows.
    other_thread = run(db, log, "step", "t2", "alice", "What is my name?")
    assert other_thread["answer"] == "Your name is Alice."
    # ...and a different user does not.
    stranger = run(db, log, "step", "t3", "bob", "What is my name?")
    assert stranger["answer"] == "I don't know your name yet."

    user_nodes = await all_nodes(db, "user:alice")
    assert [(n.kind, n.payload) for n in user_nodes] == [
        ("semantic", {"type": "memory", "key": "name", "content": "Alice"})
    ]


def run_nodes(nodes: list[Any]) -> list[Any]:
    """A thread's nodes less the run index's entries (``task:<run>`` resources)."""
    return [n for n in nodes if not (n.resource_key or "").startswith("task:")]


async def test_sigkill_during_slow_tool_then_resume(tmp_path: Path) -> None:
    db, log = tmp_path / "agent.db", tmp_path / "tools.log"
    env = {**os.environ, "RUNTIME_PROC_LOG": str(log), "RUNTIME_PROC_SLEEP": "60"}
    code = kill_when(
        HELPER,
        str(db),
        "step",
        "t1",
        "",
        "please run job alpha",
        env=env,
        ready=lambda: bool(log_lines(log)),
        what="the tool never started",
    )
    assert code == -signal.SIGKILL

    before = await all_nodes(db, "thread:t1")
    # The run's own nodes, and its run index entry (written with the goal, "running").
    assert [n.kind for n in run_nodes(before)] == ["goal", "inference", "tool_call"]
    assert [n.resource_key for n in before if n not in run_nodes(before)] == [
        f"task:{before[0].payload['run']}"
    ]
    call_node = run_nodes(before)[-1]

    resumed = run(db, log, "resume", "t1")
    assert resumed["status"] == "completed"
    assert resumed["answer"] == "Job done: job alpha finished"

    after = await all_nodes(db, "thread:t1")
    # Every node committed before the kill is intact: same ids, payloads, sequences.
    assert [n.to_dict() for n in after[: len(before)]] == [n.to_dict() for n in before]
    assert [n.kind for n in run_nodes(after[len(before) :])] == [
        "tool_result",
        "inference",
        "answer",
    ]
    assert after[len(before)].parents == (call_node.id,)
    # The tool ran twice (killed, then re-issued) with the same idempotency key, the
    # tool_call node's id, from two different processes.
    calls = log_lines(log)
    assert [c["key"] for c in calls] == [call_node.id, call_node.id]
    assert calls[0]["pid"] != calls[1]["pid"]
    # The answer exists once; resuming again changes nothing.
    assert sum(n.kind == "answer" for n in after) == 1
    again = run(db, log, "resume", "t1")
    assert again == resumed
    assert len(await all_nodes(db, "thread:t1")) == len(after)
    assert len(log_lines(log)) == 2


async def test_approval_across_three_processes(tmp_path: Path) -> None:
    db, log = tmp_path / "agent.db", tmp_path / "tools.log"
    suspended = run(db, log, "step", "t1", "carol", "pay 25 to dave")
    assert suspended["status"] == "suspended"
    [pending] = suspended["pending_approvals"]
    assert pending["name"] == "transfer"
    assert pending["arguments"] == {"amount": "25", "to": "dave"}
    assert log_lines(log) == []  # nothing ran before the approval

    decided = run(db, log, "approve", "t1", pending["call_id"], "--no-resume")
    assert decided == {}
    assert log_lines(log) == []  # approving alone does not run the tool

    completed = run(db, log, "resume", "t1")
    assert completed["status"] == "completed"
    assert completed["run_id"] == suspended["run_id"]
    assert completed["answer"] == "Payment: sent 25 to dave"
    [ran] = log_lines(log)
    assert ran["key"] == pending["node_id"] and ran["amount"] == 25

    nodes = await all_nodes(db, "thread:t1")
    # The run index entry follows each status change, in the commit that made it.
    entries = [n.payload["status"] for n in nodes if n not in run_nodes(nodes)]
    assert entries == ["running", "suspended", "running", "completed"]
    kinds = [n.kind for n in run_nodes(nodes)]
    assert kinds == [
        "goal",
        "inference",
        "tool_call",
        "verification",
        "tool_result",
        "inference",
        "answer",
    ]
