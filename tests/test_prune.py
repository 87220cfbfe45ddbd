"""Prune (issue 43): nodes nothing current needs go; every current projection stays.

* Over random threads (finished, failed and unfinished runs, parallel calls, two LLM
  nodes, compactions, variables and memories with many versions), a prune with random
  options leaves every current projection as it was: each LLM's view (whole buffer and
  window, from its summary on), every resource head, the latest run's task state and
  every pending approval; and a view a store object kept from before is read again.
* The store's part: fenced like a reset (a writer computed against the old head gets a
  Conflict, nothing written), all or nothing, every backend of the conformance fixture
  that can prune; SQLite under SIGKILL in the middle is before or after, nothing between;
  on an encrypted SQLite store the pruned ciphertext is gone from the file.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tether
from memory_helpers import Thread
from tether import Transaction, transact
from tether.control import export_snapshot, import_snapshot, tasks, verify_scope
from tether.control.prune import PRUNE_KEY, plan_prune, prune
from tether.core.errors import Conflict, InvalidRequest, RunPruned
from tether.projections import Buffer, Window, compact, conversation_view
from tether.store.base import Store
from tether.store.in_memory import MemoryStore

ROOT = Path(__file__).resolve().parent.parent
LLMS = ("agent", "other")
NS = "ns"

run_st = st.fixed_dictionaries(
    {
        "llm": st.sampled_from(LLMS),
        "calls": st.integers(0, 2),
        "results": st.booleans(),
        "end": st.sampled_from(["answer", "error", "none", "approval"]),
        "compact": st.booleans(),
        "writes": st.integers(0, 3),  # variable and memory versions written after the run
    }
)


async def build(store: Store, runs: list[dict[str, Any]]) -> Thread:
    t = Thread(store, NS, "t")
    await t.system("sys")
    for i, r in enumerate(runs):
        rid, llm = f"run_{i}", r["llm"]
        await t.goal(rid, f"q{i}", llm)
        calls = [(f"c{i}_{k}", "f", {"k": k}) for k in range(r["calls"])]
        await t.inference(
            rid, None if calls else f"a{i}", calls, llm=llm, needs_approval=r["end"] == "approval"
        )
        if r["results"] and r["end"] != "approval":
            for cid, _, _ in calls:
                await t.result(rid, cid, f"r{cid}", name="f", llm=llm)
            if calls:
                await t.inference(rid, f"a{i}", llm=llm)
        if r["end"] == "answer":
            await t.answer(rid)
        elif r["end"] == "error":
            await t.error(rid)

        async def write(txn: Transaction, i: int = i, n: int = r["writes"]) -> None:
            for k in range(n):
                await txn.append(t.scope, "resource", {"value": [i, k]}, resource_key="var:x")
                await txn.semantic(t.scope, "memory", f"m{k % 2}", f"v{i}.{k}")

        await transact(store, NS, write)
        await tasks.index_thread(store, NS, "t")  # the run index, as the runtime keeps it
        if r["compact"]:
            for llm in LLMS:
                await compact(
                    store, NS, "t", llm=llm, strategy="recent", max_messages=2, preserve_recent=1
                )
    return t


async def _runs_cut(store: Store) -> set[str]:
    from tether.control.prune import record_cut_run

    record = await store.resource_head(NS, "thread:t", PRUNE_KEY)
    if record is None:
        return set()
    return {f"run_{i}" for i in range(10) if record_cut_run(record, f"run_{i}")}


async def run_ids(store: Store) -> list[Any]:
    return sorted(
        {n.payload.get("run") for n in await store.nodes(NS, "thread:t") if n.kind == "goal"},
        key=str,
    )


async def projections(store: Store, runs: list[Any]) -> dict[str, Any]:
    """Every current projection of thread t, as plain data (views as each run sees them)."""
    out: dict[str, Any] = {}
    for llm in LLMS:
        for run in [*runs[-2:], None]:
            for pol in (Buffer(), Window(size=3)):
                v = await conversation_view(store, NS, "t", llm=llm, run=run, policy=pol)
                out[f"{llm}/{run}/{pol.name}"] = (v.messages, v.kept, v.summary)
    heads = await store.resource_heads(NS, "thread:t")
    # The run index is checked on its own (a prune with a date takes entries out).
    out["heads"] = {
        k: n.id for k, n in heads.items() if k != PRUNE_KEY and not k.startswith("task:")
    }
    if runs:
        out["task"] = (await tasks.task(store, NS, "t")).to_dict()
    out["pending"] = [p.to_dict() for p in await tasks.pending_approvals(store, NS, "t")]
    return out


options_st = st.fixed_dictionaries(
    {
        "compacted": st.booleans(),
        "keep_versions": st.one_of(st.none(), st.integers(1, 3)),
        "finished_before": st.one_of(st.none(), st.just("2999-01-01T00:00:00.000Z")),
        "forget_runs": st.booleans(),
    }
)


def _open_runs(nodes: list[Any]) -> set[str]:
    """The runs with a tool call no result names."""
    answered = {p for n in nodes if n.kind == "tool_result" for p in n.parents}
    return {n.payload["run"] for n in nodes if n.kind == "tool_call" and n.id not in answered}


async def _check_listing(
    store: Store,
    listed: dict[str, Any],
    dated: bool,
    open_runs: set[str],
    forgotten: set[str] = frozenset(),  # type: ignore[assignment]
) -> None:
    """After prunes: a run that can still move (not over, waiting, a call without a
    result) is listed as it was; one a prune cut says so when asked for, unless a prune
    since forgot it (``forgotten``: then plainly not found, and not listed); one not cut
    is there whole; a run leaves the listing only when cut by a prune with a date, or
    forgotten."""
    from tether.control.prune import pruned_run
    from tether.core.errors import NotFound

    now = {r.run: r for r in (await tasks.runs(store, namespace=NS, thread="t")).runs}
    for run, entry in listed.items():
        cut = await pruned_run(store, NS, "t", run) is not None
        if entry.status in ("running", "suspended") or run in open_runs:
            assert now.get(run) == entry and not cut and run not in forgotten
        if cut:
            assert run not in forgotten
            with pytest.raises(RunPruned):
                await tasks.task(store, NS, "t", run)
        elif run in forgotten:
            with pytest.raises(NotFound) as e:
                await tasks.task(store, NS, "t", run)
            assert e.value.code == "not_found" and run not in now
        else:
            assert (await tasks.task(store, NS, "t", run)).status == entry.status
        if run not in now:
            assert (cut and dated) or run in forgotten


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(run_st, min_size=1, max_size=7), options_st, options_st)
def test_a_prune_leaves_every_current_projection(
    runs: list[dict[str, Any]], options: dict[str, Any], then: dict[str, Any]
) -> None:
    async def go() -> None:
        store = MemoryStore()
        await build(store, runs)
        runs_before = await run_ids(store)
        before = await projections(store, runs_before)  # views kept from here on
        nodes_before = await store.nodes(NS, "thread:t")
        listed = {r.run: r for r in (await tasks.runs(store, namespace=NS, thread="t")).runs}
        result = await prune(store, NS, thread="t", **options)
        after = await projections(store, runs_before)
        assert after == before
        dated = options["finished_before"] is not None
        gone = set(runs_before) - set(await run_ids(store))  # their goal went
        forgotten = gone if options["forget_runs"] else set()
        await _check_listing(store, listed, dated, _open_runs(nodes_before), forgotten)
        assert result.runs == len(gone)
        if options["forget_runs"]:  # no tags kept; the ids cut answer as never seen
            assert await _runs_cut(store) == set() and result.forgotten_runs == len(gone)
        else:
            assert await _runs_cut(store) == gone
        nodes_after = await store.nodes(NS, "thread:t")
        if result.nodes:
            # What was cut is what the plan said, every other node kept its id and place.
            assert result.record is not None and nodes_after[-1].id == result.record
            kept = {(n.sequence, n.id) for n in nodes_after[:-1]}
            assert kept <= {(n.sequence, n.id) for n in nodes_before}
            assert len(nodes_before) - len(kept) == result.nodes
            record = nodes_after[-1]
            assert record.resource_key == PRUNE_KEY
            assert record.payload["pruned"]["digest"] == result.digest
            head = await store.head(NS, "thread:t")
            assert head.generation == 1 and head.sequence == nodes_before[-1].sequence + 1
        else:
            assert nodes_after == nodes_before and result.record is None
        # Once pruned, nothing more of what these options cut is left.
        again = await prune(store, NS, thread="t", dry_run=True, **options)
        assert again.nodes == 0
        # A second prune with other options (runs an earlier one cut, entries kept).
        await prune(store, NS, thread="t", **then)
        assert await projections(store, runs_before) == before
        later = set(runs_before) - set(await run_ids(store)) - gone
        if then["forget_runs"]:
            forgotten = gone | later
            assert len(await store.versions(NS, "thread:t", PRUNE_KEY)) <= 1
        await _check_listing(
            store,
            listed,
            dated or then["finished_before"] is not None,
            _open_runs(nodes_before),
            forgotten,
        )
        assert (await verify_scope(store, NS, "thread:t")).ok
        copy = await export_snapshot(store, NS, "thread:t")
        await import_snapshot(store, NS, "thread:copy", copy)
        assert (await verify_scope(store, NS, "thread:copy")).ok
        assert await export_snapshot(store, NS, "thread:copy") == copy

    asyncio.run(go())


async def _long_thread(store: Store, turns: int = 6, ns: str = NS) -> None:
    t = Thread(store, ns, "t")
    for i in range(turns):
        await t.tool_turn(f"run_{i}", f"q{i}", [(f"c{i}", "f", {})], [f"r{i}"], f"a{i}")
        await transact(
            store,
            ns,
            lambda txn, i=i: txn.append(t.scope, "resource", {"v": i}, resource_key="var:x"),
        )
    await compact(store, ns, "t", strategy="recent", max_messages=4, preserve_recent=2)


async def test_a_dry_run_says_what_it_would_free_and_changes_nothing(store: Store, ns: str) -> None:
    await _long_thread(store, ns=ns)
    before = await store.nodes(ns, "thread:t")
    head = await store.head(ns, "thread:t")
    dry = await prune(store, ns, thread="t", keep_versions=1, dry_run=True)
    assert dry.dry_run and dry.nodes > 0 and dry.payload_bytes > 0 and dry.record is None
    assert set(dry.reasons) == {"compacted", "old_versions"}
    assert await store.nodes(ns, "thread:t") == before
    assert await store.head(ns, "thread:t") == head
    plan = plan_prune("thread:t", before, head.frontier, keep_versions=1)
    assert (plan.nodes, plan.digest) == (dry.nodes, dry.digest)
    done = await prune(store, ns, thread="t", keep_versions=1)
    assert (done.nodes, done.digest, done.dry_run) == (dry.nodes, dry.digest, False)
    stats = await store.stats(ns, "thread:t")
    assert stats.nodes == len(before) - done.nodes + 1
    assert done.to_dict()["operation"] == "prune"


async def test_a_writer_computed_before_the_prune_conflicts(store: Store, ns: str) -> None:
    await _long_thread(store, ns=ns)
    stale = await store.head(ns, "thread:t")
    await prune(store, ns, thread="t")
    txn = Transaction(store, ns)
    txn.seed("thread:t", stale)
    await txn.append("thread:t", "resource", {"late": True}, resource_key="var:y")
    with pytest.raises(Conflict):
        await txn.commit()
    assert await store.resource_head(ns, "thread:t", "var:y") is None
    # A prune computed against a moved head is refused whole too.
    nodes = await store.nodes(ns, "thread:t")
    with pytest.raises(Conflict):
        await store.prune(
            ns, "thread:t", expected=stale, sequences=[nodes[0].sequence], record=nodes[-1]
        )


@pytest.mark.parametrize(
    "options",
    [
        {"keep_versions": 0},
        {"keep_versions": "2"},
        {"finished_before": "yesterday"},
        {"finished_before": 20261207},
        {"compacted": "yes"},
        {"thread": "t", "user": "u"},
    ],
)
async def test_bad_options_are_refused_before_anything_is_read(options: dict[str, Any]) -> None:
    store = MemoryStore()
    await _long_thread(store, 2)
    before = await store.nodes(NS, "thread:t")
    with pytest.raises(InvalidRequest) as e:
        await prune(store, NS, **{"thread": "t", **options})
    assert e.value.code == "invalid_request"
    assert await store.nodes(NS, "thread:t") == before


async def test_the_store_prunes_only_sequences_it_holds(store: Store, ns: str) -> None:
    """A sequence past the head (or below 1) is refused, nothing done; the newest node
    may go (a record that a later one stands for), the record then the last node."""
    from tether.core.graph import make_node

    await _long_thread(store, 1, ns=ns)
    head = await store.head(ns, "thread:t")
    nodes = await store.nodes(ns, "thread:t")
    record = make_node(
        "resource",
        {"pruned": {}},
        list(head.frontier),
        sequence=head.sequence + 1,
        resource_key=PRUNE_KEY,
    )
    for bad in ([head.sequence + 1], [0], [1, head.sequence + 5]):
        with pytest.raises(InvalidRequest):
            await store.prune(ns, "thread:t", expected=head, sequences=bad, record=record)
    assert await store.nodes(ns, "thread:t") == nodes
    after = await store.prune(
        ns, "thread:t", expected=head, sequences=[head.sequence], record=record
    )
    assert after.sequence == head.sequence + 1 and after.frontier == (record.id,)
    assert await store.head(ns, "thread:t") == after
    got = await store.nodes(ns, "thread:t")
    assert [n.id for n in got] == [n.id for n in nodes[:-1]] + [record.id]
    # The scope goes on from the record: the next write comes after it.
    await transact(store, ns, lambda txn: txn.append("thread:t", "resource", {}, resource_key="x"))
    assert (await store.head(ns, "thread:t")).sequence == head.sequence + 2


async def test_a_pruned_scope_reads_in_full_pages(store: Store, ns: str) -> None:
    """Pages of a scope with holes a prune cut hold ``limit`` nodes until the range
    ends, both ways: readers take a short page for the end (Redis returned the holes'
    share of a page short, and a paging reader then stopped before the newest nodes)."""
    await _long_thread(store, 6, ns=ns)
    await prune(store, ns, thread="t", keep_versions=1)
    every = await store.nodes(ns, "thread:t")
    seqs = [n.sequence for n in every]
    assert seqs != list(range(1, len(seqs) + 1))  # the prune left holes
    for limit in (1, 2, 3, 5):
        for descending in (False, True):
            got: list[int] = []
            bound: int | None = None
            while True:
                if descending:
                    page = await store.nodes(
                        ns, "thread:t", before=bound, limit=limit, descending=True
                    )
                else:
                    page = await store.nodes(ns, "thread:t", after=bound or 0, limit=limit)
                got += [n.sequence for n in page]
                if len(page) < limit:
                    break
                bound = page[-1].sequence
            assert got == (seqs[::-1] if descending else seqs), (limit, descending)


# -- SQLite: SIGKILL in the middle, encryption ------------------------------------------

PRUNER = r"""
import asyncio, sys
sys.path.insert(0, sys.argv[2])
import tether
from tether.control.prune import prune

async def main():
    store = await tether.open_store(sys.argv[1])
    print("ready", flush=True)
    await prune(store, "ns", thread="t", keep_versions=1)
    print("done", flush=True)
    await store.close()

asyncio.run(main())
"""


def test_sigkill_mid_prune_leaves_before_or_after(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"

    async def setup() -> tuple[list[Any], list[Any]]:
        store = await tether.open_store(url)
        try:
            await _long_thread(store, 40)
            nodes = await store.nodes(NS, "thread:t", limit=10_000)
            head = await store.head(NS, "thread:t")
            plan = plan_prune("thread:t", nodes, head.frontier, keep_versions=1)
            cut = set(plan.sequences)
            return [(n.sequence, n.id) for n in nodes], [
                (n.sequence, n.id) for n in nodes if n.sequence not in cut
            ]
        finally:
            await store.close()

    before, after = asyncio.run(setup())
    assert len(after) < len(before)
    outcomes = set()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for delay in (0.0, 0.01, 0.03, 0.06, 0.1, 0.2):
        proc = subprocess.Popen(
            [sys.executable, "-c", PRUNER, url, str(ROOT / "tests")],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()

        async def check() -> str:
            store = await tether.open_store(url)
            try:
                nodes = [
                    (n.sequence, n.id) for n in await store.nodes(NS, "thread:t", limit=10_000)
                ]
                if nodes == before:
                    return "before"
                assert nodes[:-1] == after, "a half-pruned scope"
                record = await store.resource_head(NS, "thread:t", PRUNE_KEY)
                assert record is not None and record.id == nodes[-1][1]
                return "after"
            finally:
                await store.close()

        outcome = asyncio.run(check())
        outcomes.add(outcome)
        if outcome == "after":
            break
    assert outcomes  # each attempt was before or after (asserted inside)


async def test_pruned_ciphertext_is_gone_from_an_encrypted_file(tmp_path: Path) -> None:
    from tether.crypto import MasterKey

    path = tmp_path / "enc.db"
    store = await tether.open_store(f"sqlite:///{path}", cipher=MasterKey.generate())
    try:
        await _long_thread(store, 4)
        head = await store.head(NS, "thread:t")
        nodes = await store.nodes(NS, "thread:t")
        plan = plan_prune("thread:t", nodes, head.frontier)
        assert plan.nodes > 0
        import sqlite3

        raw = sqlite3.connect(path)
        blobs = {
            int(k) & 0xFFFFFFFF: bytes(payload)
            for k, payload in raw.execute("SELECT k, payload FROM tether_nodes")
        }
        raw.close()
        cut = set(plan.sequences)
        await prune(store, NS, thread="t")
    finally:
        await store.close()
    data = path.read_bytes()
    wal = Path(str(path) + "-wal")
    data += wal.read_bytes() if wal.exists() else b""
    # The payloads of the nodes kept are still there; the cut ones' ciphertext is not.
    assert all(blobs[s] in data for s in blobs if s not in cut)
    assert not [s for s in cut if blobs[s] in data]


# -- verify, export and import of a pruned scope ----------------------------------------


async def test_a_pruned_scope_verifies_exports_what_it_lacks_and_imports(
    store: Store, ns: str
) -> None:
    from tether.control import export_snapshot, import_snapshot, verify_scope
    from tether.core.errors import InvalidSnapshot
    from tether.core.graph import AgentState

    await _long_thread(store, ns=ns)
    done = await prune(store, ns, thread="t", keep_versions=1)
    assert done.nodes > 0
    check = await verify_scope(store, ns, "thread:t")
    assert check.ok, check
    data = await export_snapshot(store, ns, "thread:t")
    snap = orjson.loads(data)
    assert snap["version"] == 2 and list(snap)[:3] == ["version", "pruned", "nodes"]
    assert snap["pruned"]["sequences"] and snap["pruned"]["parents"]
    kept = await store.nodes(ns, "thread:t")
    assert [n["id"] for n in snap["nodes"]] == [n.id for n in kept]
    # A reader of whole graphs only (version 1) refuses it, and says why.
    with pytest.raises(InvalidSnapshot) as e:
        AgentState.from_dict(snap)
    assert e.value.code == "version"
    # It imports: the same nodes at the same sequences, which verify and export again
    # byte for byte.
    await import_snapshot(store, ns, "thread:copy", data)
    assert [(n.sequence, n.id) for n in await store.nodes(ns, "thread:copy")] == [
        (n.sequence, n.id) for n in kept
    ]
    assert (await verify_scope(store, ns, "thread:copy")).ok
    assert await export_snapshot(store, ns, "thread:copy") == data
    head = await store.head(ns, "thread:copy")
    assert head.sequence == kept[-1].sequence and head.frontier == (kept[-1].id,)
    # A snapshot whose pruned object is not what its records say is refused whole.
    forged = {**snap, "pruned": {**snap["pruned"], "parents": snap["pruned"]["parents"][1:]}}
    with pytest.raises(InvalidSnapshot):
        await import_snapshot(store, ns, "thread:forged", orjson.dumps(forged))
    shifted = [[a + 1, b + 1] for a, b in snap["pruned"]["sequences"]]
    with pytest.raises(InvalidSnapshot) as e:
        await import_snapshot(
            store,
            ns,
            "thread:forged",
            orjson.dumps({**snap, "pruned": {**snap["pruned"], "sequences": shifted}}),
        )
    assert e.value.code == "sequence"
    assert (await store.head(ns, "thread:forged")).sequence == 0


async def test_verify_finds_a_hole_no_prune_record_explains(tmp_path: Path) -> None:
    import sqlite3

    from tether.control import verify_scope

    path = tmp_path / "v.db"
    store = await tether.open_store(f"sqlite:///{path}")
    try:
        await _long_thread(store, 3)
        assert (await verify_scope(store, NS, "thread:t")).ok
        raw = sqlite3.connect(path)
        raw.execute("DELETE FROM tether_nodes WHERE k & 4294967295 = 3")
        raw.commit()
        raw.close()
        check = await verify_scope(store, NS, "thread:t")
        assert not check.ok and check.code == "sequence", check
    finally:
        await store.close()


# -- the CLI and HTTP ------------------------------------------------------------------


def test_the_cli_prunes_after_a_dry_run(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tether.cli import main

    path = str(tmp_path / "cli.db")

    async def fill() -> None:
        async with await tether.open_store(path) as store:
            await _long_thread(store, 5, ns="default")

    asyncio.run(fill())

    def cli(*args: str) -> Any:
        return CliRunner().invoke(main, ["--store", path, *args], catch_exceptions=False)

    dry = cli("--json", "prune", "--thread", "t", "--keep-versions", "1", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    plan = orjson.loads(dry.stdout)
    assert plan["dry_run"] and plan["nodes"] > 0 and plan["record"] is None
    asked = cli("prune", "--thread", "t")  # no terminal: refused, nothing cut
    assert asked.exit_code == 2 and "--yes" in asked.stderr
    done = cli("prune", "--thread", "t", "--keep-versions", "1", "--yes")
    assert done.exit_code == 0
    assert f"freed {plan['nodes']} node(s), {plan['payload_bytes']} payload bytes" in done.stdout
    assert cli("verify", "--thread", "t").exit_code == 0
    again = orjson.loads(cli("--json", "prune", "-t", "t", "--keep-versions", "1", "-y").stdout)
    assert again["nodes"] == 0
    bad = cli("prune", "--thread", "t", "--keep-versions", "0", "-y")
    assert bad.exit_code == 2 and "keep_versions" in bad.stderr


def test_the_cli_forgets_runs(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tether.cli import main

    path = str(tmp_path / "cli.db")

    async def fill() -> None:
        async with await tether.open_store(path) as store:
            await _indexed_thread(store, "default")

    asyncio.run(fill())

    def cli(*args: str) -> Any:
        return CliRunner().invoke(main, ["--store", path, *args], catch_exceptions=False)

    assert "--forget-runs" in cli("prune", "--help").stdout
    done = cli("prune", "-t", "t", "-y")
    assert done.exit_code == 0 and "5 run(s) cut" in done.stdout and "forgotten" not in done.stdout
    dry = orjson.loads(cli("--json", "prune", "-t", "t", "--forget-runs", "--dry-run").stdout)
    assert dry["dry_run"] and dry["forget_runs"] and dry["forgotten_runs"] == 5
    done = cli("prune", "-t", "t", "--forget-runs", "-y")
    assert done.exit_code == 0 and "5 pruned run id(s) forgotten" in done.stdout
    assert cli("verify", "--thread", "t").exit_code == 0

    async def check() -> None:
        async with await tether.open_store(path) as store:
            assert await _pruned_or_not(store, "default", "run_0") == "not_found"

    asyncio.run(check())


async def test_http_prunes_a_thread_with_its_grant() -> None:
    import httpx

    from _server_helpers import TOKEN
    from tether.server import Tokens, create_app

    store = MemoryStore()
    await _long_thread(store, 4, ns="default")
    app = create_app(store, tokens=Tokens.single(TOKEN))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://tether",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as client:
        url = "/v1/ns/default/threads/t/prune"
        dry = await client.post(url, json={"dry_run": True, "keep_versions": 1})
        assert dry.status_code == 200, dry.text
        assert dry.json()["dry_run"] and dry.json()["nodes"] > 0
        done = await client.post(url, json={"keep_versions": 1})
        assert done.status_code == 200 and done.json()["nodes"] == dry.json()["nodes"]
        assert (
            done.json()["record"]
            == (await store.resource_head("default", "thread:t", PRUNE_KEY)).id
        )  # type: ignore[union-attr]
        bad = await client.post(url, json={"keep_versions": 1, "bogus": 1})
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_request"
        bad = await client.post(url, json={"finished_before": "soon"})
        assert bad.status_code == 400 and bad.json()["details"]["field"] == "finished_before"


# -- the SQLite file shrinks ------------------------------------------------------------


def _file_size(path: Path) -> int:
    wal = Path(str(path) + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


async def test_a_pruned_sqlite_file_shrinks(tmp_path: Path) -> None:
    path = tmp_path / "shrink.db"
    url = f"sqlite:///{path}"
    async with await tether.open_store(url) as store:
        t = Thread(store, NS, "t")
        big = "x" * 2000
        for i in range(60):
            await t.turn(f"run_{i}", f"{big} {i}", f"{big} answer {i}")
        await compact(store, NS, "t", strategy="recent", max_messages=4, preserve_recent=2)
    before = _file_size(path)  # closed: the WAL is checkpointed into the file
    async with await tether.open_store(url) as store:
        result = await prune(store, NS, thread="t")
        assert result.nodes > 150 and result.payload_bytes > 200_000
    after = _file_size(path)
    assert after < before - 200_000, (before, after)


async def test_an_older_file_is_switched_to_incremental_vacuum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file of the last release: schema 3, auto_vacuum NONE. Opened now, it is migrated
    # in place (VACUUM once, its data as it was) and a prune shrinks it.
    import sqlite3

    import tether.store.sqlite as mod
    from tether.store import _sqlite_schema

    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    with monkeypatch.context() as m:
        m.setattr(mod, "MIGRATIONS", _sqlite_schema.MIGRATIONS[:3])
        m.setattr(mod, "LATEST", 3)
        async with await tether.open_store(url) as store:
            await _long_thread(store, 8)
            nodes = [(n.sequence, n.id) for n in await store.nodes(NS, "thread:t")]
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA auto_vacuum=NONE")
    raw.execute("VACUUM")
    assert raw.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    raw.close()
    async with await tether.open_store(url) as store:
        assert await store.schema_version() == _sqlite_schema.INCREMENTAL_VACUUM
        assert [(n.sequence, n.id) for n in await store.nodes(NS, "thread:t")] == nodes
        assert (await prune(store, NS, thread="t")).nodes > 0
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    assert raw.execute("PRAGMA freelist_count").fetchone()[0] == 0  # freed, not kept
    raw.close()


# -- finished runs older than a date leave the run index too ---------------------------

FAR = "2999-01-01T00:00:00.000Z"


async def _indexed_thread(store: Store, ns: str) -> Thread:
    """Eight runs, each indexed as the runtime does (an entry when it starts, another when
    it ends): run_0..run_4 finished (run_2 with a tool call and its result, run_3 failed),
    run_5 answered with a tool call that never got a result, run_6 waiting for approval,
    run_7 (the latest) finished; then a compaction that stands for all but the last."""
    t = Thread(store, ns, "t")
    await t.system("sys")
    for i in range(8):
        rid = f"run_{i}"
        await t.goal(rid, f"q{i}")
        await tasks.index_thread(store, ns, "t")
        if i == 2:
            await t.inference(rid, None, [("c2", "f", {})])
            await t.result(rid, "c2", "r2", name="f")
            await t.inference(rid, "a2")
        elif i == 5:
            await t.inference(rid, None, [("c5", "f", {})])  # no result, ever
        elif i == 6:
            await t.inference(rid, None, [("c6", "f", {})], needs_approval=True)
        else:
            await t.inference(rid, f"a{i}")
        if i == 3:
            await t.error(rid)
        elif i != 6:
            await t.answer(rid, f"a{i}")
        await tasks.index_thread(store, ns, "t")
    await compact(store, ns, "t", strategy="recent", max_messages=2, preserve_recent=1)
    return t


async def test_finished_before_takes_finished_runs_out_of_the_index(store: Store, ns: str) -> None:
    from tether.control import export_snapshot, import_snapshot, verify_scope
    from tether.core.errors import NotFound, RunPruned

    await _indexed_thread(store, ns)
    listed = [r.run for r in (await tasks.runs(store, namespace=ns, thread="t")).runs]
    assert listed == [f"run_{i}" for i in range(8)]
    versions = {r: len(await store.versions(ns, "thread:t", f"task:{r}")) for r in listed}
    assert set(versions.values()) == {2}
    done = await prune(store, ns, thread="t", keep_versions=1, finished_before=FAR)
    cut = ["run_0", "run_1", "run_2", "run_3", "run_4"]
    assert done.runs == len(cut)
    # The listing forgets the runs cut; the open ones (an unfinished tool call, a pending
    # approval) and the latest stay, each with every version of its entry but the finished.
    page = await tasks.runs(store, namespace=ns, thread="t")
    assert [r.run for r in page.runs] == ["run_5", "run_6", "run_7"]
    assert (await tasks.runs(store, namespace=ns)).runs == page.runs  # across threads too
    assert [len(await store.versions(ns, "thread:t", f"task:{r}")) for r in cut] == [0] * 5
    for r in cut:
        assert await store.resource_head(ns, "thread:t", f"task:{r}") is None
    assert set(await store.resource_heads(ns, "thread:t", "task:")) == {
        "task:run_5",
        "task:run_6",
        "task:run_7",
    }
    assert len(await store.versions(ns, "thread:t", "task:run_6")) == 2  # pending: untouched
    assert len(await store.versions(ns, "thread:t", "task:run_5")) == 2  # an open call
    assert len(await store.versions(ns, "thread:t", "task:run_7")) == 1
    assert [p.call_id for p in await tasks.pending_approvals(store, ns, "t")] == []
    assert (await tasks.task(store, ns, "t", "run_6")).status == "suspended"
    # A run cut, asked for by id, says it was pruned; one that never was is plainly not found.
    with pytest.raises(RunPruned) as e:
        await tasks.task(store, ns, "t", "run_1")
    assert e.value.code == "run_pruned" and e.value.details["record"] == done.record
    assert isinstance(e.value, NotFound)
    with pytest.raises(NotFound) as missing:
        await tasks.task(store, ns, "t", "run_99")
    assert not isinstance(missing.value, RunPruned)
    # What remains verifies, exports and imports with the same ids, which say the same.
    assert (await verify_scope(store, ns, "thread:t")).ok
    data = await export_snapshot(store, ns, "thread:t")
    await import_snapshot(store, ns, "thread:copy", data)
    assert [n.id for n in await store.nodes(ns, "thread:copy")] == [
        n.id for n in await store.nodes(ns, "thread:t")
    ]
    assert (await verify_scope(store, ns, "thread:copy")).ok
    with pytest.raises(RunPruned):
        await tasks.task(store, ns, "copy", "run_0")
    # The record is small: ranges, the cut ids a node names, and 8-byte tags of the runs.
    record = await store.resource_head(ns, "thread:t", PRUNE_KEY)
    assert record is not None and record.payload["pruned"]["runs"]["count"] == len(cut)
    assert (
        await prune(store, ns, thread="t", keep_versions=1, finished_before=FAR, dry_run=True)
    ).nodes == 0


async def test_a_compacted_prune_keeps_the_runs_listed(store: Store, ns: str) -> None:
    from tether.core.errors import RunPruned

    await _indexed_thread(store, ns)
    done = await prune(store, ns, thread="t")  # what the summary stands for, no date
    assert done.runs == 5 and set(done.reasons) == {"compacted"}
    # Their nodes are gone, their entries stay (the listing still says they ran) ...
    page = await tasks.runs(store, namespace=ns, thread="t")
    assert [r.run for r in page.runs] == [f"run_{i}" for i in range(8)]
    with pytest.raises(RunPruned):
        await tasks.task(store, ns, "t", "run_0")
    # Rebuilding the index from the thread keeps them listed, as the prune left them.
    assert await tasks.reindex(store, ns) == 0
    assert (await tasks.runs(store, namespace=ns, thread="t")).runs == page.runs
    # ... until a prune with a date takes them out, with the old versions of the rest.
    later = await prune(store, ns, thread="t", keep_versions=1, finished_before=FAR)
    assert later.reasons == {"finished_before": 10, "old_versions": 1}
    page = await tasks.runs(store, namespace=ns, thread="t")
    assert [r.run for r in page.runs] == ["run_5", "run_6", "run_7"]
    with pytest.raises(RunPruned):
        await tasks.task(store, ns, "t", "run_4")  # the first prune's record says so


async def test_a_date_keeps_what_ended_after_it(store: Store, ns: str) -> None:
    await _indexed_thread(store, ns)
    nodes = await store.nodes(ns, "thread:t")
    mid = next(n for n in nodes if n.kind == "answer" and n.payload["run"] == "run_1").created_at
    # Ended at the same millisecond as run_1's answer or later: not before the date.
    plan = plan_prune(
        "thread:t",
        nodes,
        (await store.head(ns, "thread:t")).frontier,
        compacted=False,
        finished_before=mid,
    )
    ended_before = {
        n.payload["run"]
        for n in nodes
        if n.kind in ("answer", "protocol_error") and n.created_at < mid
    }
    assert set(plan.runs) == ended_before - {"run_5", "run_6", "run_7"}


async def test_a_store_cutting_a_keys_head_leaves_its_newest_version_left(
    store: Store, ns: str
) -> None:
    from tether.core.graph import make_node

    async def write(txn: Transaction, key: str, v: int) -> None:
        await txn.append("thread:k", "resource", {"v": v}, resource_key=key)

    for v in range(3):
        await transact(store, ns, lambda txn, v=v: write(txn, "var:a", v))
        await transact(store, ns, lambda txn, v=v: write(txn, "var:b", v))
    await transact(store, ns, lambda txn: write(txn, "var:c", 0))
    nodes = await store.nodes(ns, "thread:k")
    a = [n for n in nodes if n.resource_key == "var:a"]
    b = [n for n in nodes if n.resource_key == "var:b"]
    head = await store.head(ns, "thread:k")
    record = make_node(
        "resource",
        {"pruned": {}},
        list(head.frontier),
        sequence=head.sequence + 1,
        resource_key=PRUNE_KEY,
    )
    # var:a loses its head (the older versions stay), var:b every version.
    cut = [a[-1].sequence, *(n.sequence for n in b)]
    await store.prune(ns, "thread:k", expected=head, sequences=cut, record=record)
    got = await store.resource_head(ns, "thread:k", "var:a")
    assert got is not None and got.id == a[-2].id
    assert await store.resource_head(ns, "thread:k", "var:b") is None
    assert sorted(await store.resource_heads(ns, "thread:k", "var:")) == ["var:a", "var:c"]
    across = await store.resource_heads_across(ns, "var:", scope_prefix="thread:")
    assert [(s, k, n.id) for s, k, n in across] == [
        ("thread:k", "var:a", a[-2].id),
        ("thread:k", "var:c", nodes[-1].id),
    ]
    assert [n.id for n in await store.versions(ns, "thread:k", "var:b")] == []
    # A later write of the key cut whole starts it again.
    await transact(store, ns, lambda txn: write(txn, "var:b", 9))
    got = await store.resource_head(ns, "thread:k", "var:b")
    assert got is not None and got.payload == {"v": 9}


@settings(max_examples=200, deadline=None)
@given(
    st.sets(st.integers(1, 10_000), max_size=60),
    st.sets(st.binary(min_size=12, max_size=12), max_size=20),
)
def test_a_records_packed_ranges_and_ids_read_back_exactly(
    seqs: set[int], raw_ids: set[bytes]
) -> None:
    from tether.control.prune import (
        pack_ids,
        pack_ranges,
        pruned_of,
        ranges,
        unpack_ids,
        unpack_ranges,
    )
    from tether.core.graph import make_node

    ordered = sorted(seqs)
    packed = pack_ranges(ordered)
    assert unpack_ranges(packed) == [tuple(r) for r in ranges(ordered)]
    assert all(x >= 0 for x in packed) and len(packed) <= 2 * len(ordered)
    ids = sorted("cw_" + b.hex() for b in raw_ids)
    assert unpack_ids(pack_ids(reversed(ids))) == ids
    # A record written before they were packed reads the same as one packed.
    old = {"sequences": ranges(ordered), "parents": ids}
    new = {"ranges": packed, "parents": pack_ids(ids)}
    said = [
        pruned_of([make_node("resource", {"pruned": p}, [], sequence=1, resource_key=PRUNE_KEY)])
        for p in (old, new)
    ]
    assert (said[0].ranges, said[0].parents) == (said[1].ranges, said[1].parents)
    assert said[1].parents == frozenset(ids)
    # Anything else is no range nor id at all.
    for bad in ([1], [0, 1], [1, -1], ["1", 2], "1,2"):
        assert unpack_ranges(bad) is None
    for bad in ("cw_", "!!", "AAAA", ["cw_" + "0" * 24]):
        assert unpack_ids(bad) is None


async def test_the_run_index_prunes_alike_on_an_encrypted_store(tmp_path: Path) -> None:
    from tether.crypto import MasterKey

    store = await tether.open_store(f"sqlite:///{tmp_path / 'enc.db'}", cipher=MasterKey.generate())
    try:
        await test_finished_before_takes_finished_runs_out_of_the_index(store, NS)
        await test_a_store_cutting_a_keys_head_leaves_its_newest_version_left(store, "other")
        await test_forget_runs_keeps_no_tags_and_the_ids_are_not_found(store, "forget")
        await test_forget_runs_with_a_date_in_one_prune(store, "dated")
        await test_the_store_prunes_only_sequences_it_holds(store, "newest")
    finally:
        await store.close()


# -- forget_runs: the record keeps no run tags (issue 43: a record that does not grow) --


def _tags_held(record: Any) -> str | None:
    return record.payload["pruned"]["runs"].get("sha256_64")


async def _pruned_or_not(store: Store, ns: str, run: str) -> str:
    """What asking for ``run`` by id says: its status, ``run_pruned`` or ``not_found``."""
    from tether.core.errors import NotFound

    try:
        return (await tasks.task(store, ns, "t", run)).status
    except NotFound as e:
        assert isinstance(e, RunPruned) == (e.code == "run_pruned")
        return e.code


async def test_forget_runs_keeps_no_tags_and_the_ids_are_not_found(store: Store, ns: str) -> None:
    from tether.control import export_snapshot, import_snapshot

    t = await _indexed_thread(store, ns)
    first = await prune(store, ns, thread="t")  # remembers: run_0 .. run_4 are RunPruned
    assert first.runs == 5 and not first.forget_runs and first.forgotten_runs == 0
    record = await store.resource_head(ns, "thread:t", PRUNE_KEY)
    assert record is not None and _tags_held(record)
    assert "forget_runs" not in record.payload["options"]  # a default record as before
    assert {await _pruned_or_not(store, ns, f"run_{i}") for i in range(5)} == {"run_pruned"}
    before = await projections(store, await run_ids(store))
    nodes_before = await store.nodes(ns, "thread:t")
    # The dry run says what it would forget and changes nothing. The record to replace
    # is the newest node (nothing was written since): the store cuts it all the same.
    assert nodes_before[-1].id == record.id
    dry = await prune(store, ns, thread="t", forget_runs=True, dry_run=True)
    assert dry.forget_runs and dry.forgotten_runs == 5 and dry.nodes > 0 and dry.record is None
    assert dry.to_dict()["forget_runs"] is True and dry.to_dict()["forgotten_runs"] == 5
    assert await store.nodes(ns, "thread:t") == nodes_before
    done = await prune(store, ns, thread="t", forget_runs=True)
    assert (done.nodes, done.digest, done.forgotten_runs) == (dry.nodes, dry.digest, 5)
    # One record now, with no tags, standing for the one before (cut, its id named).
    (only,) = await store.versions(ns, "thread:t", PRUNE_KEY)
    assert only.id == done.record and _tags_held(only) is None
    assert only.payload["options"]["forget_runs"] is True
    assert not await store.get_nodes(ns, "thread:t", [record.id])
    assert done.reasons["prune_records"] == 1
    # The ids answer as one never seen; the listing forgets them too (the entries went).
    never = await _pruned_or_not(store, ns, "run_99")
    assert never == "not_found"
    assert {await _pruned_or_not(store, ns, f"run_{i}") for i in range(5)} == {never}
    page = await tasks.runs(store, namespace=ns, thread="t")
    assert [r.run for r in page.runs] == ["run_5", "run_6", "run_7"]
    assert await tasks.reindex(store, ns) == 0  # nothing to bring in line
    # Every current projection reads as before; nothing else of the thread changed.
    assert await projections(store, await run_ids(store)) == before
    assert [await _pruned_or_not(store, ns, f"run_{i}") for i in (5, 6, 7)] == [
        "completed",
        "suspended",
        "completed",
    ]
    # What remains verifies; its export says what it lacks and imports, verifies, exports
    # again byte for byte, and forgets alike.
    assert (await verify_scope(store, ns, "thread:t")).ok
    data = await export_snapshot(store, ns, "thread:t")
    snap = orjson.loads(data)
    assert snap["version"] == 2 and record.id in snap["pruned"]["parents"]
    await import_snapshot(store, ns, "thread:copy", data)
    assert (await verify_scope(store, ns, "thread:copy")).ok
    assert await export_snapshot(store, ns, "thread:copy") == data
    with pytest.raises(tether.NotFound) as e:
        await tasks.task(store, ns, "copy", "run_0")
    assert e.value.code == "not_found"
    # Forgetting again has nothing to do.
    assert (await prune(store, ns, thread="t", forget_runs=True, dry_run=True)).nodes == 0
    # Runs pruned later without it are remembered again, beside the forgetting record ...
    await t.answer("run_6")  # (an approval decided elsewhere; the run is over)
    await t.turn("run_8", "q8", "a8")
    await t.turn("run_9", "q9", "a9")
    await tasks.index_thread(store, ns, "t")
    await compact(store, ns, "t", strategy="recent", max_messages=2, preserve_recent=1)
    later = await prune(store, ns, thread="t")
    assert later.runs == 2 and not later.forget_runs  # run_7 and run_8 (run_9 is the latest)
    assert len(await store.versions(ns, "thread:t", PRUNE_KEY)) == 2
    assert [await _pruned_or_not(store, ns, f"run_{i}") for i in (0, 7, 8, 9)] == [
        "not_found",
        "run_pruned",
        "run_pruned",
        "completed",
    ]
    assert (await verify_scope(store, ns, "thread:t")).ok
    data = await export_snapshot(store, ns, "thread:t")
    await import_snapshot(store, ns, "thread:copy2", data)
    assert (await verify_scope(store, ns, "thread:copy2")).ok
    # ... until the next prune with it, which forgets them too (that record is not the
    # newest node now: a turn came after it).
    await t.turn("run_10", "q10", "a10")
    again = await prune(store, ns, thread="t", forget_runs=True)
    assert again.forgotten_runs == 2 and again.reasons["prune_records"] == 2
    (only,) = await store.versions(ns, "thread:t", PRUNE_KEY)
    assert _tags_held(only) is None
    assert {await _pruned_or_not(store, ns, f"run_{i}") for i in (0, 7, 8)} == {"not_found"}
    assert (await verify_scope(store, ns, "thread:t")).ok
    data = await export_snapshot(store, ns, "thread:t")
    await import_snapshot(store, ns, "thread:copy3", data)
    assert (await verify_scope(store, ns, "thread:copy3")).ok
    assert await export_snapshot(store, ns, "thread:copy3") == data


async def test_forget_runs_with_a_date_in_one_prune(store: Store, ns: str) -> None:
    """The benchmark's prune, forgetting: the record holds no tags however many runs it
    cuts; without it the same prune keeps a tag of each."""
    await _indexed_thread(store, ns)
    await _indexed_thread(store, ns + "-b")
    opts: dict[str, Any] = {"keep_versions": 1, "finished_before": FAR}
    kept = await prune(store, ns + "-b", thread="t", **opts)
    done = await prune(store, ns, thread="t", forget_runs=True, **opts)
    assert done.runs == kept.runs == 5 and done.forgotten_runs == 5
    tagged = await store.resource_head(ns + "-b", "thread:t", PRUNE_KEY)
    bare = await store.resource_head(ns, "thread:t", PRUNE_KEY)
    assert tagged is not None and bare is not None
    assert tagged.payload["pruned"]["runs"]["count"] == 5 and _tags_held(tagged)
    assert bare.payload["pruned"]["runs"] == {"count": 5}
    # The same nodes went, and the same entries (a date takes them out either way).
    assert done.nodes == kept.nodes and done.reasons == kept.reasons
    assert [n.sequence for n in await store.nodes(ns, "thread:t")] == [
        n.sequence for n in await store.nodes(ns + "-b", "thread:t")
    ]
    assert [await _pruned_or_not(store, ns, f"run_{i}") for i in range(5)] == ["not_found"] * 5
    assert [await _pruned_or_not(store, ns + "-b", f"run_{i}") for i in range(5)] == [
        "run_pruned"
    ] * 5
    for where in (ns, ns + "-b"):
        assert (await verify_scope(store, where, "thread:t")).ok


async def test_a_bad_forget_runs_is_refused() -> None:
    store = MemoryStore()
    await _long_thread(store, 2)
    before = await store.nodes(NS, "thread:t")
    for bad in ("yes", 1, None):
        with pytest.raises(InvalidRequest) as e:
            await prune(store, NS, thread="t", forget_runs=bad)  # type: ignore[arg-type]
        assert e.value.details["field"] == "forget_runs"
    assert await store.nodes(NS, "thread:t") == before


async def test_resume_of_a_pruned_run_says_so() -> None:
    """``Agent.resume(run=...)`` of a run a prune cut raises ``RunPruned``, as
    ``control.task`` does, with the thread given or found in the run index; after a
    prune with ``forget_runs`` a plain ``NotFound``."""
    from tether.core.errors import NotFound
    from tether.models import Rule

    store = MemoryStore()
    agent = tether.Agent(None, tether.ScriptedModel([Rule(answer="ok")]), store=store)
    ids = [(await agent.step(f"q{k}", thread="t")).run_id for k in range(4)]
    await agent.compact_state("t", strategy="recent", max_messages=2)
    assert (await prune(store, "default", thread="t")).runs == 3
    for kw in ({"thread": "t", "run": ids[0]}, {"run": ids[0]}):
        with pytest.raises(RunPruned) as e:
            await agent.resume(**kw)
        assert e.value.details["run"] == ids[0] and e.value.details["thread"] == "t"
    assert (await agent.resume(run=ids[-1])).status == "completed"  # the latest stays
    await prune(store, "default", thread="t", forget_runs=True)
    for kw in ({"thread": "t", "run": ids[0]}, {"run": ids[0]}):
        with pytest.raises(NotFound) as missing:
            await agent.resume(**kw)
        assert not isinstance(missing.value, RunPruned)
