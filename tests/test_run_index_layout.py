"""The run index lives in each run's own thread (issue 17): a run's commits touch its
thread only, so runs of different threads never share a head; the entries travel with
the thread (fork, import); entries of the layout before (in ``app``) are read until
``reindex`` removes them; erasing a user leaves none of their run metadata readable."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import tether
from tether import control
from tether.core.erased import erased_placeholders
from tether.crypto import CipherError, MasterKey
from tether.models import Rule, ScriptedModel, call
from tether.runtime import Agent, tool
from tether.store import ScopeWrite, Store
from tether.store.in_memory import MemoryStore
from tether.store.txn import Transaction

NS = "default"


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay (a human approves)."""
    return f"paid {amount}"


def agent(store: Store) -> Agent:
    model = ScriptedModel(
        [
            Rule(match=r"pay (\d+)", tools=[call("pay", amount="{1}")], then="{result}"),
            Rule(match=None, answer="hello"),
        ]
    )
    return Agent(None, model, store=store, tools=[pay])


class Recording(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.commits: list[set[str]] = []

    async def commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        await super().commit(namespace, writes)
        self.commits.append({w.scope for w in writes})


async def test_a_runs_commits_touch_its_thread_only() -> None:
    store = Recording()
    a = agent(store)
    r = await a.step("pay 5", thread="t1", metadata={"ticket": 1})
    await a.step("hi", thread="t2")
    await a.approve("t1", r.pending_approvals[0].call_id)
    await a.step("hi", thread="t1")
    assert store.commits and all(
        len(c) == 1 and next(iter(c)).startswith("thread:") for c in store.commits
    )
    assert (await store.head(NS, "app")).sequence == 0
    listed = (await a.runs()).runs
    assert [(x.thread, x.status) for x in listed] == [
        ("t1", "completed"),
        ("t2", "completed"),
        ("t1", "completed"),
    ]
    assert listed[0].metadata["ticket"] == 1
    # The entry names neither thread nor run (both are where it lives).
    entry = await store.resource_head(NS, "thread:t1", f"task:{r.run_id}")
    assert entry is not None and not {"thread", "run"} & set(entry.payload)


async def test_a_fork_lists_only_the_runs_it_has_under_its_own_id() -> None:
    store = MemoryStore()
    a = agent(store)
    first = await a.step("pay 5", thread="p")
    await a.approve("p", first.pending_approvals[0].call_id)
    await a.step("hi", thread="p")
    call_node = next(n for n in await store.nodes(NS, "thread:p") if n.kind == "tool_call")
    await control.fork(store, namespace=NS, thread="p", node=call_node.id, new_thread="f")
    forked = (await a.runs(thread="f")).runs
    assert [(x.thread, x.run, x.status) for x in forked] == [("f", first.run_id, "suspended")]
    assert len((await a.runs(thread="p")).runs) == 2
    # An import under another id is listed at once, under that id.
    snap = (await control.export(store, namespace=NS, thread="p")).snapshot
    await control.import_(store, namespace=NS, thread="q", snapshot=snap)
    assert [x.thread for x in (await a.runs(thread="q")).runs] == ["q", "q"]
    assert sorted({x.thread for x in (await a.runs()).runs}) == ["f", "p", "q"]


async def test_legacy_app_entries_are_read_until_reindex_removes_them(tmp_path: Path) -> None:
    store = await tether.open_store(f"sqlite:///{tmp_path / 'legacy.db'}")
    try:
        a = agent(store)
        r = await a.step("pay 5", thread="old", user="u1")
        # A store written by an older version: the entry in app, none in the thread.
        txn = Transaction(store, NS)
        heads = await store.resource_heads(NS, "thread:old", "task:")
        await control.tasks.drop_entries(txn, "thread:old", heads)
        legacy = {"thread": "old", "run": r.run_id, **heads[f"task:{r.run_id}"].payload}
        await txn.append(
            "app", "resource", legacy, resource_key=control.tasks.index_key("old", r.run_id)
        )
        await txn.commit()
        [listed] = (await a.runs()).runs
        assert (listed.thread, listed.run, listed.status, listed.user) == (
            "old",
            r.run_id,
            "suspended",
            "u1",
        )
        assert [x.run for x in (await a.runs(thread="old")).runs] == [r.run_id]
        assert await control.reindex(store, NS) == 2  # one entry rebuilt, one legacy removed
        app = await store.resource_heads(NS, "app", "task:")
        assert [n.payload for n in app.values()] == [{"deleted": True}]
        [listed] = (await a.runs()).runs
        assert (listed.thread, listed.status) == ("old", "suspended")
        # The approval updates the thread's entry; the legacy one stays out.
        await a.approve("old", r.pending_approvals[0].call_id)
        assert [x.status for x in (await a.runs()).runs] == ["completed"]
        assert await control.reindex(store, NS) == 0
    finally:
        await store.close()


async def _readable_payloads(store: Store) -> list[Any]:
    """Every payload of every scope of the namespace, as a reader with the keys sees it."""
    out: list[Any] = []
    with erased_placeholders(True):
        for info in await store.list_scopes(NS, limit=1000):
            out += [n.payload for n in await store.nodes(NS, info.scope, limit=100_000)]
        out += [n.payload for _, _, n in await store.resource_heads_across(NS, "", scope_prefix="")]
    return out


async def test_erasing_a_user_leaves_none_of_their_run_metadata_in_the_store(
    tmp_path: Path,
) -> None:
    marker = "MARK-" + secrets.token_hex(6)
    path = tmp_path / "erase.db"
    store = await tether.open_store(f"sqlite:///{path}", cipher=MasterKey.generate())
    try:
        a = agent(store)
        await a.step("pay 5", thread="a1", user="alice", metadata={"email": marker})
        await a.step("hi", thread="a2", user="alice", metadata={"email": marker})
        await a.step("hi", thread="b1", user="bob", metadata={"email": "bob@example.org"})
        assert marker in str(await _readable_payloads(store))  # the scan sees it before
        result = await control.erase_user(store, NS, "alice")
        assert (result.keys_destroyed, result.threads, result.unindexed_runs) == (1, 2, 2)
        assert marker not in str(await _readable_payloads(store))
        runs = (await a.runs()).runs
        assert [(x.thread, x.user) for x in runs] == [("b1", "bob")]
        assert (await a.runs(user="alice")).runs == ()
        assert await control.reindex(store, NS) == 0  # erased threads are skipped, not fatal
        assert [x.thread for x in (await a.runs()).runs] == ["b1"]
    finally:
        await store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("erase.db"))
    assert marker.encode() not in raw and b"bob@example.org" not in raw


async def test_a_plaintext_store_refuses_to_erase_and_writes_nothing() -> None:
    store = MemoryStore()
    a = agent(store)
    await a.step("hi", thread="a1", user="alice")
    heads = {s.scope: s.sequence for s in await store.list_scopes(NS)}
    with pytest.raises(CipherError):
        await control.erase_user(store, NS, "alice")
    assert {s.scope: s.sequence for s in await store.list_scopes(NS)} == heads
    assert [x.user for x in (await a.runs()).runs] == ["alice"]
