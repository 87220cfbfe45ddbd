"""A store built on a four-method ``LogBackend`` (``tether.store.LogStore``, issue 44).

The conformance suite runs on it in full (tests/conformance/backend_log.py: a dict, a
directory, the directory encrypted). Here: what the suite cannot show. An agent's turns
continued by a second store on the same directory, verified and exported exactly; real
processes racing on one directory (no write lost); a save that dies between two
renames (the journal finishes it, or drops a torn one); prune; a backend that breaks
the contract (typed errors, nothing written).
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

import tether
from test_crypto_rawscan import _traces, _write_everywhere
from test_prune import (  # run again here, on the store fixture below
    test_a_compacted_prune_keeps_the_runs_listed,
    test_a_dry_run_says_what_it_would_free_and_changes_nothing,
    test_a_store_cutting_a_keys_head_leaves_its_newest_version_left,
    test_a_writer_computed_before_the_prune_conflicts,
    test_finished_before_takes_finished_runs_out_of_the_index,
    test_forget_runs_keeps_no_tags_and_the_ids_are_not_found,
    test_forget_runs_with_a_date_in_one_prune,
    test_the_store_prunes_only_sequences_it_holds,
)
from tether import control, transact
from tether.core.errors import StoreError
from tether.crypto import MasterKey, encrypt_store
from tether.store import Head, LogBackend, LogSave, LogStore, ScopeLog, ScopeWrite, Store
from tether.store.examples import DictBackend, DirectoryBackend
from tether.store.keys import MemoryKeyStore

__all__ = [
    "test_a_compacted_prune_keeps_the_runs_listed",
    "test_a_dry_run_says_what_it_would_free_and_changes_nothing",
    "test_a_store_cutting_a_keys_head_leaves_its_newest_version_left",
    "test_a_writer_computed_before_the_prune_conflicts",
    "test_finished_before_takes_finished_runs_out_of_the_index",
    "test_forget_runs_keeps_no_tags_and_the_ids_are_not_found",
    "test_forget_runs_with_a_date_in_one_prune",
    "test_the_store_prunes_only_sequences_it_holds",
]


@pytest.fixture(params=["dict", "dir"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend = DictBackend() if request.param == "dict" else DirectoryBackend(tmp_path / "d")
    s = LogStore(backend)
    try:
        yield s
    finally:
        await s.close()


async def test_an_agent_continues_from_a_second_store_on_the_directory(tmp_path: Path) -> None:
    s1 = LogStore(DirectoryBackend(tmp_path / "logs"))
    a1 = tether.Agent(None, tether.ScriptedModel.demo(), store=s1)
    await a1.step("My name is Alice.", thread="chat")
    s2 = LogStore(DirectoryBackend(tmp_path / "logs"))  # another process, the same files
    r = await tether.Agent(None, tether.ScriptedModel.demo(), store=s2).step(
        "What is my name?", thread="chat"
    )
    assert r.answer == "Your name is Alice."
    assert (await control.verify(s1, namespace="default", thread="chat")).ok
    snap = (await control.export(s1, namespace="default", thread="chat")).snapshot
    sqlite = await tether.open_store(f"sqlite:///{tmp_path / 'copy.db'}")
    await control.import_(sqlite, namespace="default", thread="chat", snapshot=snap)
    assert (await control.export(sqlite, namespace="default", thread="chat")).snapshot == snap
    await sqlite.close()
    await control.reset(s2, namespace="default", thread="chat")
    assert (await s1.head("default", "thread:chat")) == Head(generation=1)
    await s1.close()
    await s2.close()


_WRITER = """
import asyncio, sys
from tether import transact
from tether.store import LogStore
from tether.store.examples import DirectoryBackend

async def main():
    store = LogStore(DirectoryBackend(sys.argv[1], durable=False))
    for i in range(int(sys.argv[3])):
        await transact(store, "ns", lambda t: t.append(
            "thread:t", "goal", {"w": sys.argv[2], "i": i}))

asyncio.run(main())
"""


async def test_processes_racing_on_one_directory_lose_no_write(tmp_path: Path) -> None:
    root, n = tmp_path / "logs", 15
    procs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", _WRITER, str(root), w, str(n))
        for w in ("a", "b", "c")
    ]
    assert [await p.wait() for p in procs] == [0, 0, 0]
    async with LogStore(DirectoryBackend(root)) as store:
        got = [(x.payload["w"], x.payload["i"]) for x in await store.nodes("ns", "thread:t")]
        assert sorted(got) == [(w, i) for w in "abc" for i in range(n)]
        assert all(got.index((w, i)) < got.index((w, i + 1)) for w in "abc" for i in range(n - 1))
        assert (await control.verify(store, namespace="ns", thread="t")).ok


class _Died(BaseException):
    pass


class _DiesMidSave(DirectoryBackend):
    """Dies (as SIGKILL would) after ``writes`` files of a save went to disk."""

    def __init__(self, root: Path, writes: int) -> None:
        super().__init__(root, durable=False)
        self.writes = writes

    def _write(self, path: Path, data: bytes) -> None:
        if self.writes == 0:
            raise _Died()
        self.writes -= 1
        super()._write(path, data)


async def _two_scope_commit(store: Store) -> None:
    async def turn(txn: tether.Transaction) -> None:
        await txn.append("thread:t", "goal", {"q": 1})
        await txn.append(
            "user:u",
            "semantic",
            {"type": "memory", "key": "k", "content": "v"},
            resource_key="semantic:memory:k",
        )

    await transact(store, "ns", turn)


@pytest.mark.parametrize(("writes", "landed"), [(1, False), (2, True), (3, True)])
async def test_a_save_that_dies_midway_is_whole_or_absent(
    tmp_path: Path, writes: int, landed: bool
) -> None:
    """Writes: the namespace marker, the journal, then the two scope files. Dying after
    the marker leaves no journal (nothing saved); after the journal or one scope file, the
    next process replays it (both scopes saved); a torn journal is dropped."""
    root = tmp_path / "logs"
    with pytest.raises(_Died):
        await _two_scope_commit(LogStore(_DiesMidSave(root, writes)))
    assert (root / "journal.jsonl").exists() == (writes >= 2)
    async with LogStore(DirectoryBackend(root)) as store:
        seqs = [(await store.head("ns", s)).sequence for s in ("thread:t", "user:u")]
        assert seqs == ([1, 1] if landed else [0, 0])
        assert not (root / "journal.jsonl").exists()
    (root / "journal.jsonl").write_text('["x", "torn')  # a journal cut short: never applied
    async with LogStore(DirectoryBackend(root)) as store:
        assert [(await store.head("ns", s)).sequence for s in ("thread:t", "user:u")] == seqs
        assert not (root / "journal.jsonl").exists()


class _Broken(DictBackend):
    def __init__(self, *, save: object = True, log: object = None) -> None:
        super().__init__()
        self.answer, self.log = save, log

    async def load(self, namespace: str, scope: str) -> ScopeLog:
        return self.log if self.log is not None else await super().load(namespace, scope)  # type: ignore[return-value]

    async def save(self, namespace: str, saves: Sequence[LogSave]) -> bool:
        await super().save(namespace, saves)
        return self.answer  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("backend", "code"),
    [
        (_Broken(save=None), "backend_contract"),  # save forgot to return
        (_Broken(log={"version": 0}), "corrupt_log"),  # load returned no ScopeLog
        (_Broken(log=ScopeLog(1, ("not json",))), "corrupt_log"),
        (_Broken(log=ScopeLog(1, ('{"x": 1}',))), "corrupt_log"),
        (_Broken(log=ScopeLog(1, ('{"id": "cw_1", "sequence": "1"}',))), "corrupt_log"),
    ],
)
async def test_a_backend_that_breaks_the_contract_is_a_typed_error(
    backend: LogBackend, code: str
) -> None:
    store = LogStore(backend)
    with pytest.raises(StoreError) as err:
        await _two_scope_commit(store)
    assert err.value.code == code


async def test_not_a_backend_and_a_closed_store_are_typed_errors() -> None:
    with pytest.raises(StoreError) as err:
        LogStore(object())  # type: ignore[arg-type]
    assert err.value.code == "invalid_request"
    store = LogStore(DictBackend())
    await store.close()
    with pytest.raises(StoreError) as err:
        await store.commit(
            "ns",
            [
                ScopeWrite(
                    scope="app", expected_generation=0, expected_sequence=0, nodes=(), frontier=()
                )
            ],
        )
    assert err.value.code == "closed"


async def test_a_log_rewritten_behind_a_store_is_read_again(tmp_path: Path) -> None:
    """A store keeps what it parsed of each log, and uses it only for a log that begins
    with exactly those entries: a log another store reset and refilled to the same
    length (or a backend that rewrote one, version unchanged) is parsed again."""
    s1, s2 = (LogStore(DirectoryBackend(tmp_path / "d", durable=False)) for _ in range(2))
    for payload in ("a", "b"):
        await transact(s1, "ns", lambda txn, p=payload: txn.append("thread:t", "goal", {"p": p}))
    assert [n.payload for n in await s1.nodes("ns", "thread:t")] == [{"p": "a"}, {"p": "b"}]
    await s2.reset_scope("ns", "thread:t")  # the log: [generation 1, c], as long as before
    await transact(s2, "ns", lambda txn: txn.append("thread:t", "goal", {"p": "c"}))
    assert [n.payload for n in await s1.nodes("ns", "thread:t")] == [{"p": "c"}]
    assert (await s1.head("ns", "thread:t")).generation == 1

    backend = DictBackend()
    store = LogStore(backend)
    await transact(store, "ns", lambda txn: txn.append("thread:t", "goal", {"p": "x"}))
    read = (await store.nodes("ns", "thread:t"))[0]
    read.payload["p"] = "mutated by the caller"
    assert (await store.nodes("ns", "thread:t"))[0].payload == {"p": "x"}
    other = LogStore(DictBackend())
    await transact(other, "ns", lambda txn: txn.append("thread:t", "goal", {"p": "y"}))
    backend.logs["ns", "thread:t"] = other.backend.logs["ns", "thread:t"]  # type: ignore[attr-defined]
    assert [n.payload for n in await store.nodes("ns", "thread:t")] == [{"p": "y"}]


@pytest.mark.parametrize("encrypted", [False, True])
async def test_an_encrypted_directory_holds_no_trace_of_what_was_written(
    tmp_path: Path, encrypted: bool
) -> None:
    """tether.crypto over a LogStore (its key table where keystore= says): the files
    hold ciphertext only. Without a cipher the same scan finds the marker."""
    marker = "MARKER-" + secrets.token_hex(8)
    store: Store = LogStore(DirectoryBackend(tmp_path / "d", durable=False))
    if encrypted:
        store = await encrypt_store(store, MasterKey.generate(), keystore=MemoryKeyStore())
    await _write_everywhere(store, marker)
    assert marker in (await store.nodes("rawscan", "thread:t1"))[0].payload["input"]
    await store.close()
    raw = b"".join(p.read_bytes() for p in (tmp_path / "d").rglob("*") if p.is_file())
    assert bool([t for t in _traces(marker) if t in raw]) is not encrypted


async def test_a_directory_store_opens_from_a_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``logdir:////abs/dir`` and ``logdir:///rel/dir`` (as SQLite's URLs) open a
    LogStore over the DirectoryBackend, so the CLI and ``tether serve`` take it."""
    url = f"logdir:///{tmp_path / 'logs'}"  # an absolute path: four slashes
    s1 = await tether.open_store(url)
    try:
        assert isinstance(s1, LogStore) and isinstance(s1.backend, DirectoryBackend)
        assert s1.url == url and s1.backend.durable
        await tether.Agent(None, tether.ScriptedModel.demo(), store=s1).step(
            "My name is Alice.", thread="chat"
        )
    finally:
        await s1.close()
    assert list((tmp_path / "logs").rglob("*.jsonl"))  # the files are where the URL says
    monkeypatch.chdir(tmp_path)
    s2 = await tether.open_store("logdir:///logs?durable=false")  # relative: three
    try:
        assert isinstance(s2, LogStore) and isinstance(s2.backend, DirectoryBackend)
        assert not s2.backend.durable
        r = await tether.Agent(None, tether.ScriptedModel.demo(), store=s2).step(
            "What is my name?", thread="chat"
        )
        assert r.answer == "Your name is Alice."
    finally:
        await s2.close()
    for bad in ("logdir://", "logdir:///logs?durable=maybe", "logdir:///logs?fsync=no"):
        with pytest.raises(tether.InvalidRequest):
            await tether.open_store(bad)


def test_tether_serve_runs_on_a_directory_store(tmp_path: Path) -> None:
    import httpx

    from _server_helpers import TOKEN, serve

    url = f"logdir:///{tmp_path / 'logs'}"

    async def prepare() -> None:
        store = await tether.open_store(url)
        try:
            agent = tether.Agent(None, tether.ScriptedModel.demo(), store=store)
            await agent.step("My name is Alice.", thread="chat")
        finally:
            await store.close()

    asyncio.run(prepare())
    with serve(url, tmp_path / "serve.log") as s:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        threads = httpx.get(s.url + "v1/ns/default/threads", headers=headers)
        described = httpx.post(
            s.url + "state/describe",
            json={"session_id": "chat", "stores": ["conversation"]},
            headers=headers,
        )
    assert threads.status_code == 200, threads.text
    assert [t["thread"] for t in threads.json()["threads"]] == ["chat"]
    assert described.json()["stores"][0]["message_count"] == 2, described.text
