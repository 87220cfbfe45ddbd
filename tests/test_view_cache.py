"""The conversation view a process keeps and brings forward equals the view rebuilt
from the graph (issue 43).

* ``Projector`` fed a thread a few nodes at a time, with the run in progress changing
  between feeds, holds exactly the units of the batch projection as it was before
  (``reference_project``, kept here as the oracle) over hostile node orders: results
  before their calls, answers before goals, a failure after an answer, placeholders.
* A store object's view cache, asked for views while another process writes the same
  SQLite file, resets, forks and compactions happen in between, serves each view equal
  to one rebuilt from the graph by another store object with no cache; and it did bring
  views forward (the test would pass vacuously otherwise).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import pickle
import subprocess
import sys
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tether
from tether.core.canonical import canonical_json
from tether.core.erased import ERASED_TEXT, is_erased, placeholder
from tether.core.graph import CausalNode, make_node
from tether.core.messages import Message, MessageList, ReadOnlyDict, ReadOnlyList, freeze
from tether.models import ModelRequest, ModelResponse, OpenAIModel, Rule, ToolCall
from tether.projections import Buffer, conversation_view
from tether.projections.projection import (
    Projector,
    Unit,
    _calls,
    _foreign_call_name,
    _str,
    foreign_text,
    is_foreign,
    text_of,
)
from tether.projections.view_cache import _COUNTS_REFERENCES, ViewCache, view_cache
from tether.store.in_memory import MemoryStore

ROOT = Path(__file__).resolve().parent.parent


def reference_project(
    nodes: Iterable[CausalNode], *, llm: str, run: str | None = None
) -> list[Unit]:
    """``project`` as it was before ``Projector`` (the batch walk, kept as the oracle),
    with foreign turns (goals and answers that name no run, issue 44)."""
    mine: list[CausalNode] = []  # goals and inferences of this llm, foreign goals and answers
    ended: dict[str, str] = {}  # run -> "completed" | "failed"
    results: dict[tuple[str | None, str], CausalNode] = {}  # (run, call id) -> first result
    failed_foreign: set[int] = set()  # foreign goals whose turn ended in an error
    foreign_goal: CausalNode | None = None  # the foreign turn the walk is in
    turn_of: dict[int, int] = {}  # foreign answer or call -> the foreign goal of its turn
    fcalls: dict[str, CausalNode] = {}  # foreign calls by id
    fresults: dict[str, CausalNode] = {}  # foreign call id -> its result
    for n in nodes:
        p = n.payload
        k = n.kind
        if k == "goal":
            foreign_goal = None
        if is_foreign(n):
            if k == "goal":
                foreign_goal = n
            elif k == "protocol_error":
                if foreign_goal is not None:
                    failed_foreign.add(foreign_goal.sequence)
                continue
            elif k == "tool_result":
                # Paired with its only parent, a foreign call of the same tool, first wins.
                if len(n.parents) == 1 and n.parents[0] in fcalls:
                    call = fcalls[n.parents[0]]
                    tool = p.get("tool", p.get("name")) if isinstance(p, dict) else None
                    if call.id not in fresults and (
                        not isinstance(tool, str) or tool == _foreign_call_name(call)
                    ):
                        fresults[call.id] = n
                continue
            elif k == "answer" and foreign_goal is not None:
                failed_foreign.discard(foreign_goal.sequence)  # a retry answered
            wanted = p.get("llm") if isinstance(p, dict) else None
            if isinstance(wanted, str) and wanted != llm:
                continue
            if k == "tool_call":
                if _foreign_call_name(n) is None:
                    continue
                fcalls[n.id] = n
            if foreign_goal is not None and k != "goal":
                turn_of[n.sequence] = foreign_goal.sequence
            mine.append(n)
            continue
        if not isinstance(p, dict):
            continue
        if is_erased(p):
            if k == "goal" or k == "inference":
                mine.append(n)  # a placeholder message, whichever llm wrote it
            continue
        if k == "goal" or k == "inference":
            if p.get("llm") == llm:
                mine.append(n)
        elif k == "tool_result":
            cid = p.get("call_id")
            if p.get("llm") == llm and isinstance(cid, str):
                results.setdefault((_str(p.get("run")), cid), n)
        elif k == "answer" or k == "protocol_error":
            r = _str(p.get("run"))
            # A failure is final even if an answer was also written.
            if r is not None and (k == "protocol_error" or r not in ended):
                ended[r] = "completed" if k == "answer" else "failed"

    def full(r: str | None) -> bool:
        status = ended.get(r) if r is not None else None
        return status == "completed" or (status is None and r is not None and r == run)

    def shown(node: CausalNode, r: str | None) -> bool:
        # A message stored outside any run ("run": null, e.g. a LangGraph thread's
        # messages written by tether.adapters.langgraph) is a finished message.
        return full(r) or (r is None and "run" in node.payload and node.payload["run"] is None)

    # Receipts of runs shown partially: which runs keep their goal.
    has_receipt: set[str | None] = set()
    for n in mine:
        if n.kind == "inference" and not is_erased(n.payload):
            r = _str(n.payload.get("run"))
            if not full(r) and any((r, c["id"]) in results for c in _calls(n.payload)):
                has_receipt.add(r)

    units: list[Unit] = []
    for n in mine:
        p = n.payload
        if is_foreign(n):
            if turn_of.get(n.sequence, n.sequence) in failed_foreign:
                continue
            if n.kind == "tool_call":
                res = fresults.get(n.id)
                if res is None:
                    continue
                name = _foreign_call_name(n)
                args = p.get("args", p.get("arguments")) if isinstance(p, dict) else None
                c = {"id": n.id, "name": name, "arguments": {} if args is None else args}
                rp = res.payload
                text = next(
                    (
                        text_of(rp[f])
                        for f in ("result", "output", "content", "text")
                        if isinstance(rp, dict) and rp.get(f) is not None
                    ),
                    text_of(rp),
                )
                call_msgs: tuple[Message, ...] = (
                    {"role": "assistant", "content": None, "tool_calls": [c]},
                    {"role": "tool", "tool_call_id": n.id, "name": name, "content": text},
                )
                units.append(
                    Unit(anchor=n.sequence, last=res.sequence, messages=call_msgs, run=None)
                )
                continue
            role = "user" if n.kind == "goal" else "assistant"
            msg: Message = {"role": role, "content": foreign_text(n)}
            units.append(Unit(anchor=n.sequence, last=n.sequence, messages=(msg,), run=None))
            continue
        if is_erased(p):
            role = "user" if n.kind == "goal" else "assistant"
            erased: Message = {"role": role, "content": ERASED_TEXT}
            units.append(Unit(anchor=n.sequence, last=n.sequence, messages=(erased,), run=None))
            continue
        r = _str(p.get("run"))
        shown_full = shown(n, r)
        if n.kind == "goal":
            if p.get("input") is None or not (shown_full or r in has_receipt):
                continue
            units.append(
                Unit(
                    anchor=n.sequence,
                    last=n.sequence,
                    messages=({"role": "user", "content": text_of(p["input"])},),
                    run=r,
                )
            )
            continue
        done = [c for c in _calls(p) if (r, c["id"]) in results]
        if not shown_full and not done:
            continue
        msgs: list[Message] = []
        if p.get("input") is not None:
            msgs.append({"role": "user", "content": text_of(p["input"])})
        content = p.get("content") if shown_full else None
        content = None if content is None else text_of(content)
        if done or content:
            a: Message = {"role": "assistant", "content": content}
            if done:
                a["tool_calls"] = done
            msgs.append(a)
        last = n.sequence
        for c in done:
            res = results[(r, c["id"])]
            rp = res.payload
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": c["id"],
                    "name": _str(rp.get("name")) or c["name"],
                    "content": text_of(rp.get("content")),
                }
            )
            last = max(last, res.sequence)
        if msgs:
            units.append(Unit(anchor=n.sequence, last=last, messages=tuple(msgs), run=r))
    return units


# -- Projector against the oracle ------------------------------------------------------

RUNS = ("r0", "r1", "r2", None, 5)  # 5: not a run id (a view treats it as no run)
LLMS = ("agent", "other")
CALLS = ("c0", "c1", "c2")

node_spec = st.one_of(
    st.tuples(
        st.just("goal"),
        st.sampled_from(RUNS),
        st.sampled_from(LLMS),
        st.one_of(st.none(), st.text(max_size=3), st.just({"q": [1, 2]})),
        st.booleans(),  # a "run" key at all
    ),
    st.tuples(
        st.just("inference"),
        st.sampled_from(RUNS),
        st.sampled_from(LLMS),
        st.lists(st.sampled_from(CALLS), max_size=3, unique=True),
        st.one_of(st.none(), st.just("text"), st.just({"a": 1})),
        st.one_of(st.none(), st.just("in")),
    ),
    st.tuples(
        st.just("tool_result"),
        st.sampled_from(RUNS),
        st.sampled_from(LLMS),
        st.sampled_from(CALLS),
        st.one_of(st.just("ok"), st.just({"t": 21})),
    ),
    st.tuples(st.sampled_from(["answer", "protocol_error"]), st.sampled_from(RUNS)),
    st.tuples(st.sampled_from(["erased_goal", "erased_inference", "erased_result", "resource"])),
    # StateWeave's own shapes: goals and answers of bare text, calls and results paired
    # by their parent (issue 44)
    st.tuples(st.sampled_from(["sw_goal", "sw_answer", "sw_error", "sw_inference"])),
    st.tuples(
        st.just("sw_call"),
        st.sampled_from(["read", "write", None]),
        st.sampled_from([None, *LLMS]),
    ),
    st.tuples(
        st.just("sw_result"),
        st.integers(1, 4),  # its parent: the node that many places back
        st.sampled_from(["read", "write", None]),
        st.booleans(),  # a second parent
    ),
)


def _node(seq: int, spec: tuple[Any, ...], before: list[CausalNode] | None = None) -> CausalNode:
    kind = spec[0]
    payload: Any
    if kind.startswith("sw_"):
        parents: tuple[str, ...] = ()
        kind = kind.removeprefix("sw_")
        if kind == "call":
            _, name, llm = spec
            payload = {"args": {"n": seq}, "raw": "TOOL_CALL"}
            if name is not None:
                payload["name"] = name
            if llm is not None:
                payload["llm"] = llm
            kind = "tool_call"
        elif kind == "result":
            _, back, tool, two = spec
            earlier = before or []
            picked = [earlier[-back].id] if len(earlier) >= back else []
            if two and earlier:
                picked.append(earlier[0].id)
            parents = tuple(sorted(set(picked)))
            payload = {"result": {"ok": seq}} if tool is None else {"tool": tool, "result": seq}
            kind = "tool_result"
        elif kind == "error":
            payload, kind = "Retry with one TOOL_CALL.", "protocol_error"
        else:
            payload = f"{kind} {seq}"
        return make_node(kind, payload, parents, sequence=seq)
    if kind == "goal":
        _, run, llm, text, has_run = spec
        payload = {"input": text, "llm": llm, "metadata": {}}
        if has_run:
            payload["run"] = run
    elif kind == "inference":
        _, run, llm, calls, content, text = spec
        payload = {
            "run": run,
            "llm": llm,
            "content": content,
            "tool_calls": [{"id": c, "name": "f", "arguments": {"c": c}} for c in calls],
        }
        if text is not None:
            payload["input"] = text
    elif kind == "tool_result":
        _, run, llm, cid, content = spec
        payload = {"run": run, "llm": llm, "call_id": cid, "name": "f", "content": content}
    elif kind in ("answer", "protocol_error"):
        payload = {"run": spec[1]}
    elif kind == "resource":
        payload = {"note": seq}
    else:
        kind, payload = kind.removeprefix("erased_"), placeholder()
        kind = "tool_result" if kind == "result" else kind
    return make_node(kind, payload, (), sequence=seq)


def _foreign_tool(n: CausalNode) -> bool:
    return is_foreign(n) and n.kind in ("tool_call", "tool_result")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(node_spec, max_size=40),
    st.lists(st.tuples(st.integers(0, 6), st.sampled_from((None, "r0", "r1", "r2")))),
    st.sampled_from(LLMS),
)
def test_projector_fed_piecewise_equals_the_batch_projection(
    specs: list[tuple[Any, ...]], feeds: list[tuple[int, str | None]], llm: str
) -> None:
    nodes: list[CausalNode] = []
    for i, s in enumerate(specs):
        nodes.append(_node(i + 1, s, nodes))
    p = Projector(llm)
    # q is fed rows (Store.payloads), and the nodes from the first foreign tool node on
    # (its id and parents pair it), as a whole view reads them (reads.feed_projector)
    q = Projector(llm)
    at = 0
    for size, run in [*feeds, (len(nodes), None)]:
        piece = nodes[at : at + size]
        p.feed(piece)
        stop = q.feed_rows([(n.sequence, n.kind, n.payload) for n in piece])
        first_tool = next((n.sequence for n in piece if _foreign_tool(n)), None)
        assert stop == first_tool
        if stop is not None:
            q.feed([n for n in piece if n.sequence >= stop])
        at = min(at + size, len(nodes))
        p.set_run(run)
        q.set_run(run)
        expected = reference_project(nodes[:at], llm=llm, run=run)
        assert p.units() == expected
        units, messages = p.view()
        assert list(units) == expected
        assert messages == [m for u in expected for m in u.messages]
        assert q.view() == (tuple(expected), messages)
    assert p.size == sum(
        1
        for n in nodes
        if (
            n.kind in ("goal", "inference")
            and not is_foreign(n)
            and isinstance(n.payload, dict)
            and (is_erased(n.payload) or n.payload.get("llm") == llm)
        )
        or (
            is_foreign(n)
            and n.kind not in ("protocol_error", "tool_result")
            and (not isinstance(n.payload, dict) or n.payload.get("llm") in (None, llm))
            and (n.kind != "tool_call" or _foreign_call_name(n) is not None)
        )
    )


def test_projector_shows_a_late_failure_and_a_late_result() -> None:
    # Two changes to units already built: a run that failed after its answer keeps only
    # its receipts, and a result that arrives for an older run's call adds that call.
    def goal(seq: int, run: str) -> CausalNode:
        return make_node("goal", {"run": run, "input": f"q{seq}", "llm": "agent"}, (), sequence=seq)

    call = {"id": "c", "name": "f", "arguments": {}}
    inf = make_node(
        "inference",
        {"run": "r1", "llm": "agent", "content": "hi", "tool_calls": [call]},
        (),
        sequence=2,
    )
    answer = make_node("answer", {"run": "r1"}, (), sequence=3)
    p = Projector("agent")
    p.feed([goal(1, "r1"), inf, answer])
    assert [m["content"] for m in p.view()[1]] == ["q1", "hi"]
    p.feed([make_node("protocol_error", {"run": "r1"}, (), sequence=4)])
    assert p.units() == []  # failed, and no call completed: nothing of it is shown
    late = {"run": "r1", "llm": "agent", "call_id": "c", "name": "f", "content": "done"}
    p.feed([goal(5, "r2"), make_node("tool_result", late, (), sequence=6)])
    assert p.view()[1] == [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "name": "f", "content": "done"},
    ]
    p.set_run("r2")
    assert p.view()[1][-1] == {"role": "user", "content": "q5"}


# -- the cache of a store object, with another process writing -------------------------

WRITER = r"""
import asyncio, json, sys
sys.path.insert(0, sys.argv[2])
import tether
from view_cache_writes import write

async def main():
    store = await tether.open_store(sys.argv[1])
    try:
        for line in sys.stdin:
            await write(store, json.loads(line))
            print("ok", flush=True)
    finally:
        await store.close()

asyncio.run(main())
"""


class Writer:
    """Another process writing the same SQLite file: one command a line, 'ok' back."""

    def __init__(self, url: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, url, str(ROOT / "tests")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def do(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok", "the writer process failed"

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        self.proc.stdout.close()
        assert code == 0


op = st.one_of(
    st.tuples(
        st.sampled_from(["here", "there"]),  # this process or the other one
        st.sampled_from(["answer", "tool", "fail", "open", "finish", "late_result"]),
        st.sampled_from(LLMS),
    ),
    st.tuples(st.sampled_from(["here", "there"]), st.just("reset"), st.just("agent")),
    st.tuples(st.just("there"), st.sampled_from(["compact", "undo"]), st.sampled_from(LLMS)),
    st.tuples(st.just("here"), st.sampled_from(["fork", "stale_view"]), st.integers(0, 30)),
)


# Request lists (``lead``) a caller kept, with what they held when handed out: a list
# brought forward in place later must never be one of these.
Held = list[tuple[list[Message], list[Message]]]


async def _view_pair(
    cached: tether.Store,
    fresh: tether.Store,
    ns: str,
    thread: str,
    at: Any = None,
    held: Held | None = None,
) -> None:
    """Every view of ``thread`` through ``cached``'s cache equals the one ``fresh`` rebuilds;
    so does every request list (``lead``), whether brought forward in place or made anew,
    and every list a caller kept (every third) still holds what it held."""
    held = [] if held is None else held
    runs = {None, *(n.payload.get("run") for n in await fresh.nodes(ns, "thread:" + thread))}
    for llm in LLMS:
        for run in sorted(runs, key=str)[:4]:
            fresh_cache = view_cache(fresh)
            assert fresh_cache is not None
            fresh_cache.clear()  # rebuilt from the graph
            kw: dict[str, Any] = {"llm": llm, "run": run, "policy": Buffer()}
            got = await conversation_view(cached, ns, thread, at=at, **kw)
            want = await conversation_view(fresh, ns, thread, at=at, **kw)
            assert (got.messages, got.units, got.kept, got.summary, got.sequence) == (
                want.messages,
                want.units,
                want.kept,
                want.summary,
                want.sequence,
            )
            _assert_read_only(got.messages)
            # the kept view's messages, as a caller holds them: unchanged by later views
            held.append((got.messages, copy.deepcopy(got.messages)))
            # A lead per run of the first two, so it changes now and then.
            lead = ({"role": "system", "content": f"lead {llm} {run if run == 'run1' else ''}"},)
            asked = await conversation_view(cached, ns, thread, at=at, lead=lead, **kw)
            assert isinstance(asked.messages, MessageList)
            assert asked.messages == [*lead, *want.messages] and asked.kept == want.kept
            _assert_read_only(asked.messages)
            if len(held) % 3 == 0:
                held.append((asked.messages, copy.deepcopy(asked.messages)))
            else:
                held.append(([], []))
            del asked
    for kept, then in held:
        assert kept == then


def _assert_read_only(messages: list[Message]) -> None:
    """Every message, tool call and argument value is read-only, and changing any of them
    raises: none of them can change what later views are made of."""
    for m in messages:
        assert type(m) is ReadOnlyDict, m
        with pytest.raises(TypeError, match="read-only"):
            m["content"] = "changed"
        for c in m.get("tool_calls", ()):
            assert type(m["tool_calls"]) is ReadOnlyList and type(c) is ReadOnlyDict
            with pytest.raises(TypeError, match="read-only"):
                m["tool_calls"].append(c)
            with pytest.raises(TypeError, match="read-only"):
                c["arguments"]["n"] = -1


def test_views_brought_forward_equal_views_rebuilt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'views.db'}"
    writer = Writer(url)
    served: list[ViewCache] = []

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(op, min_size=1, max_size=10))
    def run(ops: list[tuple[str, str, Any]]) -> None:
        asyncio.run(_run(url, writer, ops, served))

    try:
        run()
    finally:
        writer.close()
    # The views were served from the cache, brought forward, not only rebuilt; request
    # lists were brought forward in place (on CPython, which counts references).
    assert sum(c.forwarded for c in served) > 0
    assert sum(c.rebuilt for c in served) > 0
    assert sum(c.reused for c in served) > 0 or not _COUNTS_REFERENCES


async def _run(
    url: str, writer: Writer, ops: list[tuple[str, str, Any]], served: list[ViewCache]
) -> None:
    from view_cache_writes import write

    ns = "ns-" + uuid.uuid4().hex[:8]
    cached = await tether.open_store(url)
    fresh = await tether.open_store(url)
    held: Held = []
    try:
        threads = ["t"]
        opened: list[str] = []
        count = 0
        old_head = None
        for where, what, arg in ops:
            thread = threads[-1]
            scope = "thread:" + thread
            if what == "fork":
                nodes = await cached.nodes(ns, scope)
                if not nodes:
                    continue
                new = f"f{len(threads)}"
                await tether.control.fork(
                    cached,
                    namespace=ns,
                    thread=thread,
                    node=nodes[arg % len(nodes)].id,
                    new_thread=new,
                )
                threads.append(new)
                await _view_pair(cached, fresh, ns, thread, held=held)  # the source's goes on
                continue
            if what == "stale_view":
                if old_head is not None:
                    await _view_pair(cached, fresh, ns, thread, at=old_head, held=held)
                continue
            count += 1
            command = {"ns": ns, "thread": thread, "what": what, "llm": arg, "n": count}
            if what in ("finish", "late_result"):
                if not opened:
                    continue
                command["run"] = opened.pop(0) if what == "finish" else opened[0]
            elif what in ("answer", "tool", "fail", "open"):
                command["run"] = f"run{count}"
                if what == "open":
                    opened.append(command["run"])
            if where == "here":
                await write(cached, command)
            else:
                writer.do(command)
            old_head = await fresh.head(ns, scope)
            await _view_pair(cached, fresh, ns, thread, held=held)
        cache = view_cache(cached)
        assert cache is not None
        served.append(cache)
    finally:
        await cached.close()
        await fresh.close()


@pytest.mark.parametrize("how", ["reset", "delete_namespace"])
async def test_a_thread_regrown_past_the_cached_head_is_read_again(
    tmp_path: Path, how: str
) -> None:
    # A reset (or a deleted namespace) then more turns than before, by another store
    # object: the new nodes sit after the cached sequence, but under a new generation.
    from view_cache_writes import write

    url = f"sqlite:///{tmp_path / 'views.db'}"
    cached, other = await tether.open_store(url), await tether.open_store(url)
    try:
        c = {"ns": "ns", "thread": "t", "llm": "agent"}
        await write(cached, {**c, "what": "answer", "run": "r1", "n": 1})
        first = await conversation_view(cached, "ns", "t")
        assert [m["content"] for m in first.messages] == ["question 1", "answer 1"]
        if how == "reset":
            await write(other, {**c, "what": "reset", "n": 2})
        else:
            await other.delete_namespace("ns")
        for n in (3, 4):
            await write(other, {**c, "what": "tool", "run": f"r{n}", "n": n})
        head = await other.head("ns", "thread:t")
        assert head.sequence > (first.head.sequence if first.head else 0)
        view = await conversation_view(cached, "ns", "t")
        assert "question 1" not in [m["content"] for m in view.messages]
        await _view_pair(cached, other, "ns", "t")
    finally:
        await cached.close()
        await other.close()


async def test_an_encrypted_store_keeps_no_views(tmp_path: Path) -> None:
    # Erasing a user's key turns payloads into placeholders where they are, the heads
    # unmoved: a kept view could not tell, so an encrypted store keeps none, and the
    # view after the erasure shows the placeholders.
    from tether.crypto import MasterKey, erase_user, erased_placeholders

    store = await tether.open_store(f"sqlite:///{tmp_path / 'enc.db'}", cipher=MasterKey.generate())
    try:
        assert not store.reads_follow_heads and view_cache(store) is None
        agent = tether.Agent(None, tether.ScriptedModel.demo(), store=store)
        await agent.step("hello", thread="t", user="alice")
        before = await conversation_view(store, "default", "t")
        assert [m["content"] for m in before.messages] == ["hello", "Hello! How can I help?"]
        await erase_user(store, "default", "alice")
        with erased_placeholders():
            after = await conversation_view(store, "default", "t")
        assert [m["content"] for m in after.messages] == [ERASED_TEXT, ERASED_TEXT]
    finally:
        await store.close()


async def test_a_warm_whole_buffer_turn_reads_what_is_new() -> None:
    # The nodes a turn reads do not grow with the thread: the same at 10 turns and 40.
    from memory_helpers import CountingStore

    store = CountingStore()
    model = tether.ScriptedModel([Rule(answer="ok")])
    agent = tether.Agent(None, model, store=store)
    read: list[int] = []
    for k in range(40):
        store.reset_counts()
        await agent.step(f"question {k}", thread="t")
        read.append(store.read)
    assert read[9] == read[39] and read[39] <= 8, read
    assert len(model.requests[-1].messages) == 79  # the model still gets the whole buffer
    # A fresh agent (another process, say) on the same store object shares its views.
    other = tether.Agent(None, model, store=store)
    store.reset_counts()
    await other.step("one more", thread="t")
    assert store.read <= 8 + 16  # and the scan of the thread's latest run


def test_the_cache_is_bounded() -> None:
    async def go() -> None:
        store = MemoryStore()
        cache = ViewCache(max_entries=3, max_nodes=10)
        head = await store.head("ns", "thread:t")
        for k in range(5):
            await cache.view(store, "ns", f"thread:{k}", llm="agent", run=None, after=0, head=head)
        assert len(cache) == 3
        from view_cache_writes import write

        for n in range(6):  # 12 goals and inferences: more than the whole bound
            await write(
                store,
                {
                    "ns": "ns",
                    "thread": "big",
                    "what": "answer",
                    "llm": "agent",
                    "run": f"r{n}",
                    "n": n,
                },
            )
        big = await store.head("ns", "thread:big")
        units, _ = await cache.view(
            store, "ns", "thread:big", llm="agent", run=None, after=0, head=big
        )
        assert len(units) == 12 and len(cache) == 0  # served, not kept

    asyncio.run(go())


async def test_a_view_at_a_head_ahead_of_the_scope_is_not_kept(tmp_path: Path) -> None:
    """A view of a fork read at its source thread's head (a head the fork never had):
    the view is what the graph gives, and nothing of it is kept to build on, so the
    fork's next turn is seen whole. The cache once kept it, and the next view read
    after the foreign head's sequence: the fork's new question was missing."""
    from view_cache_writes import write

    url = f"sqlite:///{tmp_path / 'ahead.db'}"
    cached, fresh = await tether.open_store(url), await tether.open_store(url)
    try:
        c = {"ns": "ns", "llm": "agent"}
        await write(cached, {**c, "thread": "t", "what": "answer", "run": "r1", "n": 1})
        source_head = await fresh.head("ns", "thread:t")
        first = (await cached.nodes("ns", "thread:t"))[0]
        await tether.control.fork(cached, namespace="ns", thread="t", node=first.id, new_thread="f")
        await _view_pair(cached, fresh, "ns", "f", at=source_head)
        await write(cached, {**c, "thread": "f", "what": "answer", "run": "r2", "n": 2})
        await _view_pair(cached, fresh, "ns", "f")
        view = await conversation_view(cached, "ns", "f")
        assert "question 2" in [m["content"] for m in view.messages]
    finally:
        await cached.close()
        await fresh.close()


class _Keeping:
    """A model that answers and, when told to, keeps the lists it was sent."""

    def __init__(self) -> None:
        self.kept: list[tuple[list[Message], list[Message]]] = []
        self.keep = False
        self.edit = False

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.edit:
            request.messages.append({"role": "user", "content": "slipped in"})
        if self.keep:
            self.kept.append((request.messages, list(request.messages)))
        return ModelResponse(content=f"answer {len(request.messages)}")


async def test_a_request_list_is_brought_forward_in_place_only_when_nobody_holds_it() -> None:
    # The whole buffer of a thread handed to the model: the list the process kept, brought
    # forward by the new messages (no copy of the thread a turn) while nothing else holds
    # it; a list a model kept is never changed after (a new one is made instead); a model
    # that edits its request fails loudly and the next view is still the graph's.
    store = MemoryStore()
    model = _Keeping()
    agent = tether.Agent(tether.Spec.single(system="Be brief."), model, store=store)
    cache = view_cache(store)
    assert cache is not None
    for k in range(4):
        await agent.step(f"question {k}", thread="t")
    if _COUNTS_REFERENCES:
        assert cache.reused >= 2, cache.reused
    model.keep = True
    for k in range(4, 8):
        await agent.step(f"question {k}", thread="t")
    reused = cache.reused
    for k in range(8, 10):
        await agent.step(f"question {k}", thread="t")
    assert cache.reused == reused  # held by the model: new lists each turn
    assert len(model.kept) == 6
    for kept, then in model.kept:
        assert kept == then  # what the model was sent, unchanged by later turns
    last = model.kept[-1][1]
    assert last[0] == {"role": "system", "content": "Be brief."}
    assert last[-1] == {"role": "user", "content": "question 9"} and len(last) == 1 + 19
    model.keep = False
    model.kept.clear()
    model.edit = True
    failed = await agent.step("question 10", thread="t")
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.code == "model_raised" and "TypeError" in failed.error.message
    model.edit = False
    await agent.step("question 11", thread="t")
    fresh = view_cache(store)
    assert fresh is not None
    got = await conversation_view(store, "default", "t")
    fresh.clear()
    assert got.messages == (await conversation_view(store, "default", "t")).messages
    assert "slipped in" not in [m["content"] for m in got.messages]


def test_a_message_list_refuses_changes_and_copies_as_a_list() -> None:
    import copy
    import operator
    import pickle

    m = MessageList([{"role": "user", "content": "hi"}])
    for change in (
        lambda: m.append({}),
        lambda: m.extend([{}]),
        lambda: m.insert(0, {}),
        lambda: m.pop(),
        lambda: m.remove(m[0]),
        lambda: m.clear(),
        lambda: m.sort(),
        lambda: m.reverse(),
        lambda: m.__setitem__(0, {}),
        lambda: m.__delitem__(0),
        lambda: m.__iadd__([{}]),
        lambda: m.__imul__(2),
    ):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert m == [{"role": "user", "content": "hi"}]
    assert json.loads(json.dumps(m)) == m
    added = operator.add(m, [])
    copies = (list(m), m[:], added, copy.copy(m), copy.deepcopy(m), pickle.loads(pickle.dumps(m)))
    for copied in copies:
        assert type(copied) is list and copied == m


def test_read_only_messages_refuse_changes_and_copy_as_plain_dicts() -> None:
    import operator

    plain: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "name": "f", "arguments": {"a": [1, {"b": "é"}], "n": 2}}],
    }
    m = freeze(plain)
    calls, args = m["tool_calls"], m["tool_calls"][0]["arguments"]
    assert type(m) is ReadOnlyDict and type(calls) is ReadOnlyList
    assert type(args) is ReadOnlyDict and type(args["a"]) is ReadOnlyList
    assert type(args["a"][1]) is ReadOnlyDict
    assert freeze(m) is m  # already read-only: kept as it is
    dict_changes: list[tuple[str, tuple[Any, ...]]] = [
        ("__setitem__", ("role", "user")),
        ("__delitem__", ("role",)),
        ("update", ({"x": 1},)),
        ("pop", ("role",)),
        ("popitem", ()),
        ("clear", ()),
        ("setdefault", ("x", 1)),
        ("__ior__", ({"x": 1},)),
    ]
    for d in (m, calls[0], args, args["a"][1]):
        for name, call_args in dict_changes:
            with pytest.raises(TypeError, match=r"read-only .* copy it to edit"):
                getattr(d, name)(*call_args)
    list_changes: list[tuple[str, tuple[Any, ...]]] = [
        ("append", (1,)),
        ("extend", ([1],)),
        ("insert", (0, 1)),
        ("pop", ()),
        ("remove", (1,)),
        ("clear", ()),
        ("sort", ()),
        ("reverse", ()),
        ("__setitem__", (0, 1)),
        ("__delitem__", (0,)),
        ("__iadd__", ([1],)),
        ("__imul__", (2,)),
    ]
    for lst in (calls, args["a"]):
        for name, call_args in list_changes:
            with pytest.raises(TypeError, match="read-only"):
                getattr(lst, name)(*call_args)
    assert m == plain and plain == m
    # The same bytes as the plain message through every encoder tether and clients use.
    assert json.dumps(m) == json.dumps(plain)
    assert json.dumps(m, indent=2, sort_keys=True, ensure_ascii=False) == json.dumps(
        plain, indent=2, sort_keys=True, ensure_ascii=False
    )
    import orjson

    for option in (None, orjson.OPT_SORT_KEYS):
        assert orjson.dumps(m, option=option) == orjson.dumps(plain, option=option)
    assert canonical_json(m) == canonical_json(plain)
    # Copies to edit: shallow ones are plain at the top, deep and pickled ones all the way.
    for shallow in (dict(m), m.copy(), {**m}, copy.copy(m), operator.or_(m, {})):
        assert type(shallow) is dict and shallow == plain
        shallow["content"] = "mine"
    for deep in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert deep == plain
        assert type(deep) is dict and type(deep["tool_calls"]) is list
        inner = deep["tool_calls"][0]["arguments"]
        assert type(inner) is dict and type(inner["a"]) is list and type(inner["a"][1]) is dict
        inner["a"][1]["b"] = "edited"
        deep["tool_calls"].append({})
    assert m == plain  # none of the copies' edits reached it
    for copied in (list(calls), calls[:], operator.add(calls, []), copy.copy(calls)):
        assert type(copied) is list and copied == plain["tool_calls"]


def test_an_openai_request_of_read_only_messages_sends_the_same_bytes() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "name": "weather",
                    "arguments": {"city": "Paris", "at": ["é", {"d": 1}]},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "weather", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
    ]
    model = OpenAIModel(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    frozen = model.request_body(ModelRequest(messages=MessageList(freeze(m) for m in messages)))
    plain = model.request_body(ModelRequest(messages=messages))

    # as OpenAIModel.complete encodes the body it posts
    def sent(body: dict[str, Any]) -> bytes:
        return json.dumps(body, ensure_ascii=False, allow_nan=False).encode()

    assert sent(frozen) == sent(plain) and frozen == plain
    import orjson

    assert orjson.dumps(frozen) == orjson.dumps(plain)


class _Editing:
    """A model that calls ``lookup`` on a question starting "call", then answers; told to,
    it first edits its request in place (one of ``_EDITS``)."""

    def __init__(self) -> None:
        self.edit: str | None = None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        msgs = request.messages
        if self.edit is not None:
            _EDITS[self.edit](msgs)
        last = msgs[-1]
        if last["role"] == "user" and str(last["content"]).startswith("call"):
            args = {"city": "Paris", "tags": ["a", {"b": 1}]}
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="lookup", arguments=args)])
        return ModelResponse(content=f"answer {len(msgs)}")


def _with_calls(msgs: list[Message]) -> Message:
    return next(m for m in msgs if m.get("tool_calls"))


_EDITS: dict[str, Any] = {
    "content": lambda msgs: msgs[1].__setitem__("content", "edited"),
    "system": lambda msgs: msgs[0].__setitem__("content", "edited"),
    "pop": lambda msgs: msgs[1].pop("content"),
    "update": lambda msgs: msgs[1].update(content="edited"),
    "tool_message": lambda msgs: next(m for m in msgs if m["role"] == "tool").update(
        content="edited"
    ),
    "tool_calls": lambda msgs: _with_calls(msgs)["tool_calls"].append({"id": "x"}),
    "arguments": lambda msgs: _with_calls(msgs)["tool_calls"][0]["arguments"].__setitem__(
        "city", "Rome"
    ),
    "nested": lambda msgs: _with_calls(msgs)["tool_calls"][0]["arguments"]["tags"][1].clear(),
    "list": lambda msgs: msgs.append({"role": "user", "content": "slipped in"}),
}


@pytest.mark.parametrize("edit", sorted(_EDITS))
async def test_a_model_that_edits_its_request_in_place_fails_and_changes_nothing(
    edit: str,
) -> None:
    # A message, its tool calls, a call's arguments (nested too) or the list itself: the
    # model's run fails with a typed error, writes no inference, and the next view is the
    # graph's (the process's kept view unchanged).
    @tether.tool
    def lookup(city: str, tags: list[Any]) -> str:
        return f"sunny in {city}"

    store = MemoryStore()
    model = _Editing()
    agent = tether.Agent(tether.Spec.single(system="Be brief."), model, store=store, tools=[lookup])
    for q in ("call 1", "hello", "call 2"):
        assert (await agent.step(q, thread="t")).status == "completed"
    before = copy.deepcopy((await conversation_view(store, "default", "t")).messages)
    assert any(m.get("tool_calls") for m in before)
    model.edit = edit
    failed = await agent.step("hello again", thread="t")
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.code == "model_raised" and "TypeError" in failed.error.message
    assert "read-only" in failed.error.message
    run = [
        n for n in await store.nodes("default", "thread:t") if n.payload.get("run") == failed.run_id
    ]
    assert [n.kind for n in run if n.kind in ("inference", "tool_result", "answer")] == []
    model.edit = None
    after = await conversation_view(store, "default", "t")
    assert after.messages == before  # the failed run shows nothing, the rest unchanged
    cache = view_cache(store)
    assert cache is not None
    cache.clear()
    assert (await conversation_view(store, "default", "t")).messages == after.messages
    assert (await agent.step("call 3", thread="t")).status == "completed"


@pytest.mark.parametrize("page", [3, 4, 1000])
async def test_a_whole_view_read_page_by_page_equals_the_projection_of_the_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page: int
) -> None:
    # A whole view feeds the store's rows a page at a time; at the first foreign tool
    # call (paired with its result by node ids and parents) it reads the nodes from
    # there. Pages of 3 and 4 put that call and the turns around it across page ends.
    from tether.projections import reads
    from tether.store.txn import Transaction

    monkeypatch.setattr(reads, "PAGE", page)
    url = f"sqlite:///{tmp_path / 'pages.db'}"
    scope = "thread:t"

    async def turn(store: tether.Store, k: int) -> None:
        async def fn(txn: Transaction) -> None:
            r = f"run{k}"
            await txn.append(scope, "goal", {"run": r, "llm": "agent", "input": f"q{k}"})
            await txn.append(scope, "inference", {"run": r, "llm": "agent", "content": f"a{k}"})
            await txn.append(scope, "answer", {"run": r, "output": f"a{k}"})

        await tether.transact(store, "default", fn)

    async def foreign(store: tether.Store) -> None:
        async def fn(txn: Transaction) -> None:
            await txn.append(scope, "goal", {"input": "imported question"})
            call = await txn.append(scope, "tool_call", {"tool": "f", "args": {"n": 1}})
            await txn.append(scope, "tool_result", {"tool": "f", "output": "ok"}, parents=[call.id])
            await txn.append(scope, "answer", {"output": "imported answer"})

        await tether.transact(store, "default", fn)

    writer = await tether.open_store(url)
    try:
        for k in range(5):
            await turn(writer, k)
        await foreign(writer)
        for k in range(5, 9):
            await turn(writer, k)
    finally:
        await writer.close()
    store = await tether.open_store(url)  # a fresh process's: no view kept
    try:
        view = await conversation_view(store, "default", "t")
        nodes = await store.nodes("default", scope, limit=10_000)
        want = [m for u in reference_project(nodes, llm="agent") for m in u.messages]
        assert view.messages == want
        assert {"role": "tool", "tool_call_id": nodes[16].id, "name": "f", "content": "ok"} in want
        assert len(want) == 2 * 9 + 4  # nine turns; the imported one's four messages
    finally:
        await store.close()
