"""One agent turn, three agent loops: tether, the OpenAI Agents SDK and LangGraph.

    python benchmarks/agent_turn.py                 # full run, about a minute or two
    python benchmarks/agent_turn.py --quick         # smoke run, a few seconds
    python benchmarks/agent_turn.py --systems tether_window --workloads tool

Each system runs its own agent loop with a fake model that answers at once, over the
same durable SQLite store (WAL, synchronous=FULL, set and read back from the live
connection), so what is timed is the loop and its state: what it reads, what it
writes, how many commits it makes.

* ``tether_window`` / ``tether_buffer``: ``tether.Agent.step`` with a ``ScriptedModel``
  (one rule), ``Spec.single(memory=Window(20))`` or the whole buffer, on
  ``sqlite:///...`` with ``durability="full"``.
* ``openai_agents``: ``agents.Runner.run`` with a ``Model`` subclass and
  ``SQLiteSession`` (subclassed only to add synchronous=FULL), tracing off.
* ``langgraph_react``: ``langgraph.prebuilt.create_react_agent`` with a tiny
  ``BaseChatModel`` and ``SqliteSaver`` on a WAL + FULL connection, ``durability="sync"``.

``--postgres URL`` adds ``tether_window_postgres`` and ``tether_buffer_postgres``: the
same tether agent on PostgreSQL (a schema of its own, dropped after the run), where
every statement is a round trip to the server; there the statements are counted with
asyncpg's query logger on every pooled connection, and the commits are the
``tether_commit`` calls (one round trip each). They are not in ``make bench``'s table,
whose peers all run on SQLite.

Workloads: ``plain`` (the model answers) and ``tool`` (the model calls one tool, then
answers). For each history length H (10, 100, 1,000 turns) a fresh thread is brought
to H turns of the same shape (tether and the SDK by running turns; LangGraph by one
``update_state`` holding the same messages, since a run of 1,000 real turns writes
every checkpoint whole), then ``--samples`` turns are timed one by one: the median and
p90 per turn, and the process's CPU time per turn (``time.process_time``, which a
busy machine disturbs far less than wall time). Then ``COUNTED`` more turns run with
SQLite's statement trace on every connection the system opened: SQL statements and
commits per turn (with synchronous=FULL, each commit is one fsync of the WAL). Every
(system, workload) pair runs in its own process; its resident memory (RSS) after imports
and at the end is reported. tether's ``ScriptedModel`` keeps its last few requests (for
tests); the benchmark clears them after each turn, as a real model keeps none.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqltrace import commits as count_commits
from sqltrace import untriggered

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

HISTORIES = (10, 100, 1000)
QUICK_HISTORIES = (2, 20)
WORKLOADS = ("plain", "tool")
SYSTEMS: dict[str, tuple[str, str]] = {
    # name: (label, interpreter: "tether" or "peers")
    "tether_window": ("tether Agent.step, Window(20)", "tether"),
    "tether_buffer": ("tether Agent.step, whole buffer", "tether"),
    "openai_agents": ("OpenAI Agents SDK Runner.run + SQLiteSession", "peers"),
    "langgraph_react": ("LangGraph create_react_agent + SqliteSaver", "peers"),
}
ANSWER = ("It is sunny in Paris. " * 10)[:200]
TOOL_RESULT = "sunny, 21 C"
WINDOW = 20
# Only with --postgres URL: the same agent on PostgreSQL (no peer runs there here).
PG_SYSTEMS: dict[str, tuple[str, str]] = {
    "tether_window_postgres": ("tether Agent.step, Window(20), PostgreSQL", "tether"),
    "tether_buffer_postgres": ("tether Agent.step, whole buffer, PostgreSQL", "tether"),
}
# Only in a long-thread run (--long): a whole-buffer view read whole every turn, as before
# issue 43 (seeding it by its own turns would take the square of the history).
LONG_SYSTEMS: dict[str, tuple[str, str]] = {
    "tether_buffer_cold": ("tether Agent.step, whole buffer, no kept view", "tether"),
}
LONG = 10_000  # make bench's long thread
QUICK_LONG = 200
COUNTED = 5  # turns run with SQL tracing on, after the timed ones


ALL_SYSTEMS = {**SYSTEMS, **PG_SYSTEMS, **LONG_SYSTEMS}


def user_message(thread: str, turn: int) -> str:
    return (f"[user {thread} #{turn}] What is the weather in Paris? " + "x" * 200)[:200]


def rss_now_mib() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return -1.0


def rss_peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def pragmas(conn: sqlite3.Connection) -> dict[str, Any]:
    sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return {
        "journal_mode": str(conn.execute("PRAGMA journal_mode").fetchone()[0]).upper(),
        "synchronous": sync.get(conn.execute("PRAGMA synchronous").fetchone()[0], "?"),
    }


# --- the systems (each imports its library only when chosen) -------------------------------


class Tether:
    """``postgres``: a PostgreSQL URL to run on instead of SQLite at ``path``."""

    def __init__(
        self,
        path: Path,
        workload: str,
        memory: str,
        postgres: str | None = None,
        *,
        kept_views: bool = True,
        fast_seed: bool = False,
    ) -> None:
        self.path, self.workload, self.memory = path, workload, memory
        self.postgres = postgres
        self.kept_views, self.fast_seed = kept_views, fast_seed
        self.model_ms = self.model_cpu_ms = 0.0  # the model's own time in the latest turn
        self.schema = f"agent_turn_{os.getpid()}"
        self.tracer: Any = None  # PostgreSQL: the statement callback while counting

    async def setup(self) -> None:
        import tether
        from tether.models import ModelResponse, Rule, ToolCall, call
        from tether.projections import Window

        rules = (
            [Rule(match=None, tools=[call("get_weather", city="Paris")], then=ANSWER)]
            if self.workload == "tool"
            else [Rule(match=None, answer=ANSWER)]
        )

        def get_weather(city: str) -> str:
            """The weather in a city."""
            return TOOL_RESULT

        mem = Window(size=WINDOW) if self.memory == "window" else None
        if self.postgres:

            async def log_queries(conn: Any) -> None:  # every pooled connection, once
                conn.add_query_logger(self._logged)

            self.store = await tether.open_store(
                self.postgres, schema=self.schema, durability="full", init=log_queries
            )
        else:
            self.store = await tether.open_store(f"sqlite:///{self.path}", durability="full")
        if not self.kept_views:
            # As before issue 43: every whole-buffer view reads the thread again.
            from tether.projections.view_cache import view_cache

            cache = view_cache(self.store)
            assert cache is not None
            cache.max_nodes = 0
        bench = self

        class TimedModel(tether.ScriptedModel):
            """The scripted model, its own time recorded (the turn's time less it is
            tether's part of the turn)."""

            async def complete(self, request: Any) -> Any:
                t, c = time.perf_counter(), time.process_time()
                try:
                    return await super().complete(request)
                finally:
                    bench.model_ms += (time.perf_counter() - t) * 1e3
                    bench.model_cpu_ms += (time.process_time() - c) * 1e3

        class LastMessageModel:
            """Answers as the scripted model does here, reading only the latest message:
            its own work does not grow with the history it is sent."""

            async def complete(self, request: Any) -> Any:
                t, c = time.perf_counter(), time.process_time()
                try:
                    last = request.messages[-1]
                    if last["role"] == "tool":
                        return ModelResponse(content=ANSWER)
                    if self_.workload == "tool":
                        call = ToolCall(
                            id=f"call_{len(request.messages)}",
                            name="get_weather",
                            arguments={"city": "Paris"},
                        )
                        return ModelResponse(tool_calls=[call])
                    return ModelResponse(content=ANSWER)
                finally:
                    bench.model_ms += (time.perf_counter() - t) * 1e3
                    bench.model_cpu_ms += (time.process_time() - c) * 1e3

        self_ = self
        self.rules, self.get_weather = rules, get_weather
        self.model = TimedModel(rules)
        self.agent = tether.Agent(
            tether.Spec.single(memory=mem),
            self.model,
            store=self.store,
            tools=[get_weather],
        )
        # The same agent with a model whose own work is constant (--long): what is left
        # of tether's part when the model does not walk the history. The scripted model
        # reads every message (a prompt word count, a scan for tool results): on a long
        # thread that pass evicts tether's working set from the CPU caches, and the
        # cache misses it leaves fall in tether's part, which subtracting the model's
        # own time does not take out.
        self.const_agent = tether.Agent(
            tether.Spec.single(memory=mem),
            LastMessageModel(),
            store=self.store,
            tools=[get_weather],
        )

    async def turn(self, thread: str, k: int, *, const: bool = False) -> None:
        self.model_ms = self.model_cpu_ms = 0.0
        agent = self.const_agent if const else self.agent
        r = await agent.step(user_message(thread, k), thread=thread)
        # ScriptedModel keeps its last requests for tests to inspect; a real model keeps
        # nothing, and neither do the peers' fake models.
        self.model.requests.clear()
        if r.answer != ANSWER:
            raise AssertionError(f"unexpected answer {r.answer!r}")

    async def seed(self, thread: str, turns: int) -> None:
        if self.fast_seed and not self.postgres:
            # A long thread (--long): the same turns (same rule, same LLM node) by a
            # Window agent on its own connection at durability="normal", which is
            # quicker to write; then one untimed turn of the agent measured, which
            # reads the thread whole once (its kept view starts there).
            import tether
            from tether.projections import Window

            async with await tether.open_store(
                f"sqlite:///{self.path}", durability="normal"
            ) as store:
                seeder = tether.Agent(
                    tether.Spec.single(memory=Window(size=WINDOW)),
                    tether.ScriptedModel(self.rules, keep_requests=0),
                    store=store,
                    tools=[self.get_weather],
                )
                for k in range(turns - 1):
                    await seeder.step(user_message(thread, k), thread=thread)
            if turns:
                await self.turn(thread, turns - 1)
            return
        for k in range(turns):
            await self.turn(thread, k)

    def _logged(self, record: Any) -> None:
        if self.tracer is not None:
            self.tracer(record.query)

    async def durability(self) -> dict[str, Any]:
        if self.postgres:
            async with self.store._pool.acquire() as c:
                p = {k: await c.fetchval(f"SHOW {k}") for k in ("synchronous_commit", "fsync")}
                self.server = await c.fetchval("SHOW server_version")
            p["durability"] = "full"
            p["schema"] = self.schema  # dropped by close()
            return {
                "setting": f"synchronous_commit={p['synchronous_commit']}, fsync={p['fsync']}",
                **p,
            }
        conn = sqlite3.connect(self.path)
        try:
            p = pragmas(conn)
        finally:
            conn.close()
        # synchronous is per connection: tether's own is set by durability="full"
        p["synchronous"] = "FULL (durability='full')"
        return {"setting": f"WAL, {p['synchronous']}", **p}

    def trace(self, callback: Any) -> None:
        if self.postgres:
            self.tracer = callback
        else:
            self.store._conn.set_trace_callback(callback)  # the store's one connection

    def counts(self, stmts: list[str]) -> tuple[int, int]:
        """(statements, commits) among the traced statements."""
        if self.postgres:
            # every query is a round trip; a commit is one tether_commit call
            return len(stmts), sum("tether_commit(" in q for q in stmts)
        return sqlite_counts(stmts)

    async def close(self) -> None:
        if self.postgres:
            async with self.store._pool.acquire() as c:
                await c.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        await self.store.close()

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        if self.postgres:
            return {
                "tether": version("tether"),
                "asyncpg": version("asyncpg"),
                "postgres": getattr(self, "server", "?"),
            }
        return {"tether": version("tether"), "sqlite": sqlite3.sqlite_version}


class OpenAIAgents:
    def __init__(self, path: Path, workload: str) -> None:
        self.path, self.workload = path, workload
        self.sessions: dict[str, Any] = {}
        self.traced: list[sqlite3.Connection] = []  # every connection the sessions opened
        self.tracer: list[Any] = []  # the trace callback while counting

    async def setup(self) -> None:
        from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
        from agents.memory.sqlite_session import SQLiteSession
        from agents.models.interface import Model
        from agents.tracing import set_tracing_disabled
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )

        set_tracing_disabled(True)
        tool_workload = self.workload == "tool"

        class FakeModel(Model):
            """Answers at once: a tool call first (tool workload), then ``ANSWER``."""

            calls = 0

            async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any):  # type: ignore[no-untyped-def]
                FakeModel.calls += 1
                last = input[-1] if isinstance(input, list) and input else {}
                after_tool = isinstance(last, dict) and last.get("type") == "function_call_output"
                if tool_workload and not after_tool:
                    out: Any = ResponseFunctionToolCall(
                        type="function_call",
                        call_id=f"call_{FakeModel.calls}",
                        name="get_weather",
                        arguments='{"city": "Paris"}',
                        id=f"fc_{FakeModel.calls}",
                        status="completed",
                    )
                else:
                    out = ResponseOutputMessage(
                        id=f"msg_{FakeModel.calls}",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[
                            ResponseOutputText(type="output_text", text=ANSWER, annotations=[])
                        ],
                    )
                return ModelResponse(output=[out], usage=Usage(), response_id=None)

            def stream_response(self, *a: Any, **k: Any) -> Any:
                raise NotImplementedError

        @function_tool
        def get_weather(city: str) -> str:
            """The weather in a city."""
            return TOOL_RESULT

        traced, tracer = self.traced, self.tracer

        class FullSyncSession(SQLiteSession):
            @staticmethod
            def _configure_connection(conn: sqlite3.Connection) -> None:
                SQLiteSession._configure_connection(conn)
                conn.execute("PRAGMA synchronous=FULL")
                traced.append(conn)
                if tracer:  # a connection opened while statements are being counted
                    conn.set_trace_callback(tracer[0])

        self.Session = FullSyncSession
        self.Runner = Runner
        self.run_config = RunConfig(tracing_disabled=True)
        self.agent = Agent(
            name="assistant", instructions="You help.", model=FakeModel(), tools=[get_weather]
        )

    def _session(self, thread: str) -> Any:
        s = self.sessions.get(thread)
        if s is None:
            s = self.sessions[thread] = self.Session(thread, self.path)
        return s

    async def turn(self, thread: str, k: int) -> None:
        r = await self.Runner.run(
            self.agent,
            user_message(thread, k),
            session=self._session(thread),
            run_config=self.run_config,
        )
        if r.final_output != ANSWER:
            raise AssertionError(f"unexpected answer {r.final_output!r}")

    async def seed(self, thread: str, turns: int) -> None:
        # One real turn, then its stored items copied turns-1 times, in one add_items.
        if turns < 1:
            return
        await self.turn(thread, 0)
        s = self._session(thread)
        shape = await s.get_items()
        items: list[Any] = []
        for k in range(1, turns):
            for it in shape:
                it = json.loads(json.dumps(it))
                if it.get("role") == "user":
                    it["content"] = user_message(thread, k)
                if "call_id" in it:
                    it["call_id"] = f"{it['call_id']}_{k}"
                if "id" in it and isinstance(it["id"], str):
                    it["id"] = f"{it['id']}_{k}"
                items.append(it)
        await s.add_items(items)

    def durability(self) -> dict[str, Any]:
        p = pragmas(next(iter(self.sessions.values()))._get_connection())
        return {"setting": f"WAL, synchronous={p['synchronous']}, SQLiteSession", **p}

    def trace(self, callback: Any) -> None:
        self.tracer[:] = [callback] if callback else []
        for conn in self.traced:
            with contextlib.suppress(sqlite3.ProgrammingError):  # closed: its thread is gone
                conn.set_trace_callback(callback)

    async def close(self) -> None:
        for s in self.sessions.values():
            s.close()

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"openai-agents": version("openai-agents"), "sqlite": sqlite3.sqlite_version}


class LangGraphReact:
    def __init__(self, path: Path, workload: str) -> None:
        self.path, self.workload = path, workload

    async def setup(self) -> None:
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.prebuilt import create_react_agent

        tool_workload = self.workload == "tool"

        class FakeChat(BaseChatModel):
            """Answers at once: a tool call first (tool workload), then ``ANSWER``."""

            n: int = 0

            @property
            def _llm_type(self) -> str:
                return "fake"

            def bind_tools(self, tools: Any, **kw: Any) -> Any:
                return self

            def _generate(
                self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
            ) -> ChatResult:
                self.n += 1
                if tool_workload and not isinstance(messages[-1], ToolMessage):
                    msg = AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "get_weather",
                                "args": {"city": "Paris"},
                                "id": f"call_{self.n}",
                                "type": "tool_call",
                            }
                        ],
                    )
                else:
                    msg = AIMessage(content=ANSWER)
                return ChatResult(generations=[ChatGeneration(message=msg)])

        def get_weather(city: str) -> str:
            """The weather in a city."""
            return TOOL_RESULT

        self.HumanMessage, self.AIMessage, self.ToolMessage = HumanMessage, AIMessage, ToolMessage
        self.conn = sqlite3.connect(self.path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        saver = SqliteSaver(self.conn)
        saver.setup()
        self.graph = create_react_agent(FakeChat(), [get_weather], checkpointer=saver)

    @staticmethod
    def _config(thread: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread}}

    async def turn(self, thread: str, k: int) -> None:
        out = self.graph.invoke(
            {"messages": [self.HumanMessage(content=user_message(thread, k))]},
            self._config(thread),
            durability="sync",
        )
        if out["messages"][-1].content != ANSWER:
            raise AssertionError(f"unexpected answer {out['messages'][-1].content!r}")

    async def seed(self, thread: str, turns: int) -> None:
        # The messages `turns` real turns leave in the state, written as one checkpoint.
        msgs: list[Any] = []
        for k in range(turns):
            msgs.append(self.HumanMessage(content=user_message(thread, k), id=f"h{k}"))
            if self.workload == "tool":
                call = {
                    "name": "get_weather",
                    "args": {"city": "Paris"},
                    "id": f"s{k}",
                    "type": "tool_call",
                }
                msgs.append(self.AIMessage(content="", tool_calls=[call], id=f"c{k}"))
                msgs.append(self.ToolMessage(content=TOOL_RESULT, tool_call_id=f"s{k}", id=f"t{k}"))
            msgs.append(self.AIMessage(content=ANSWER, id=f"a{k}"))
        if msgs:
            self.graph.update_state(self._config(thread), {"messages": msgs}, as_node="agent")

    def durability(self) -> dict[str, Any]:
        p = pragmas(self.conn)
        return {"setting": f"WAL, synchronous={p['synchronous']}, durability='sync'", **p}

    def trace(self, callback: Any) -> None:
        self.conn.set_trace_callback(callback)

    async def close(self) -> None:
        self.conn.close()

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {
            "langgraph": version("langgraph"),
            "langgraph-prebuilt": version("langgraph-prebuilt"),
            "langgraph-checkpoint-sqlite": version("langgraph-checkpoint-sqlite"),
            "sqlite": sqlite3.sqlite_version,
        }


def sqlite_counts(stmts: list[str]) -> tuple[int, int]:
    """(statements, commits) among SQLite's traced statements, less trigger reports."""
    stmts = untriggered(stmts)
    return len(stmts), count_commits(stmts)


def make(
    system: str, path: Path, workload: str, postgres: str | None = None, fast_seed: bool = False
) -> Any:
    if system == "tether_window":
        return Tether(path, workload, "window", fast_seed=fast_seed)
    if system == "tether_buffer":
        return Tether(path, workload, "buffer", fast_seed=fast_seed)
    if system == "tether_buffer_cold":
        return Tether(path, workload, "buffer", kept_views=False, fast_seed=fast_seed)
    if system in PG_SYSTEMS:
        if not postgres:
            raise SystemExit(f"{system} needs --postgres URL")
        return Tether(path, workload, system.split("_")[1], postgres)
    if system == "openai_agents":
        return OpenAIAgents(path, workload)
    if system == "langgraph_react":
        return LangGraphReact(path, workload)
    raise SystemExit(f"unknown system {system!r}; known: {', '.join(ALL_SYSTEMS)}")


# --- one (system, workload) in this process ------------------------------------------------


async def measure(
    system: str,
    workload: str,
    histories: list[int],
    samples: int,
    workdir: Path,
    postgres: str | None = None,
    fast_seed: bool = False,
) -> dict[str, Any]:
    rss_start = rss_now_mib()
    sys_ = make(system, workdir / "agent.db", workload, postgres, fast_seed)
    t = time.perf_counter()
    await sys_.setup()
    setup_ms = (time.perf_counter() - t) * 1e3
    rss_setup = rss_now_mib()
    per: dict[str, Any] = {}
    for h in histories:
        thread = f"h{h}"
        t = time.perf_counter()
        await sys_.seed(thread, h)
        seed_s = time.perf_counter() - t
        lat, cpu, own, own_cpu = [], [], [], []
        rss_seeded = rss_now_mib()
        for k in range(samples):
            c = time.process_time()
            t = time.perf_counter()
            await sys_.turn(thread, h + k)
            lat.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
            if hasattr(sys_, "model_ms"):
                own.append(lat[-1] - sys_.model_ms)  # tether's part: the model's aside
                own_cpu.append(cpu[-1] - sys_.model_cpu_ms)
        # Then COUNTED turns more by the same agent, with every SQL statement traced (not
        # timed): what a turn sends to SQLite, and how many commits (each one fsync of the
        # WAL). Before the constant model's turns below: a second Agent object on the
        # thread leaves this one's idea of the head stale, and its next commit would
        # conflict once and go again (a commit counted that a lone agent never makes).
        stmts: list[str] = []
        sys_.trace(stmts.append)
        for k in range(COUNTED):
            await sys_.turn(thread, h + samples + k)
        sys_.trace(None)
        # tether's own part once more, with a model whose own work is constant (Tether's
        # const_agent: the same spec, store and thread).
        const_cpu: list[float] = []
        if hasattr(sys_, "const_agent"):
            for k in range(samples):
                c = time.process_time()
                await sys_.turn(thread, h + samples + COUNTED + k, const=True)
                const_cpu.append((time.process_time() - c) * 1e3 - sys_.model_cpu_ms)
        n_stmts, commits = getattr(sys_, "counts", sqlite_counts)(stmts)
        per[str(h)] = {
            "median_ms": statistics.median(lat),
            "p90_ms": sorted(lat)[min(len(lat) - 1, int(0.9 * len(lat)))],
            "cpu_median_ms": statistics.median(cpu),
            "samples_ms": lat,
            "commits_per_turn": commits / COUNTED,
            "statements_per_turn": n_stmts / COUNTED,
            "seed_s": seed_s,
            "rss_seeded_mib": rss_seeded,
        }
        if own:
            per[str(h)]["own_median_ms"] = statistics.median(own)
            per[str(h)]["own_cpu_median_ms"] = statistics.median(own_cpu)
        if const_cpu:
            per[str(h)]["own_cpu_const_median_ms"] = statistics.median(const_cpu)
    dur = sys_.durability()
    if asyncio.iscoroutine(dur):
        dur = await dur
    versions = sys_.versions()
    await sys_.close()
    return {
        "system": system,
        "label": ALL_SYSTEMS[system][0],
        "workload": workload,
        "setup_ms": setup_ms,
        "histories": per,
        "durability": dur,
        "versions": versions,
        "rss_mib": {
            "imports": rss_start,
            "after_setup": rss_setup,
            "end": rss_now_mib(),
            "peak": rss_peak_mib(),
        },
    }


def worker(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    try:
        res = asyncio.run(
            measure(
                args.worker,
                args.workload,
                args.histories,
                args.samples,
                workdir,
                args.postgres,
                args.fast_seed,
            )
        )
    except ImportError as e:
        res = {
            "system": args.worker,
            "workload": args.workload,
            "skipped": f"not importable here: {e}",
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    Path(args.out).write_text(json.dumps(res))
    return 0


# --- the driver -----------------------------------------------------------------------------


def run_all(
    systems: list[str],
    workloads: list[str],
    histories: list[int],
    samples: int,
    pythons: dict[str, Path | None],
    out_dir: Path,
    log: Any = print,
    postgres: str | None = None,
    fast_seed: bool = False,
) -> dict[str, Any]:
    """Every (system, workload) in its own process; ``pythons`` maps "tether"/"peers" to
    an interpreter (None: skipped). ``postgres``: the server's URL for ``PG_SYSTEMS``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    for wl in workloads:
        for name in systems:
            py = pythons.get(ALL_SYSTEMS[name][1])
            if py is None:
                results.append(
                    {
                        "system": name,
                        "label": ALL_SYSTEMS[name][0],
                        "workload": wl,
                        "skipped": "no interpreter",
                    }
                )
                continue
            out = out_dir / f"agent_turn.{name}.{wl}.json"
            out.unlink(missing_ok=True)
            work = Path(tempfile.mkdtemp(prefix=f"agent-{name}-", dir=out_dir))
            cmd = [str(py), str(Path(__file__).resolve()), "--worker", name, "--workload", wl]
            cmd += ["--histories", ",".join(map(str, histories)), "--samples", str(samples)]
            cmd += ["--workdir", str(work / "db"), "--out", str(out)]
            if postgres:
                cmd += ["--postgres", postgres]
            if fast_seed:
                cmd += ["--fast-seed"]
            log(f"  agent turn: {name} / {wl} ...")
            env = (
                {**os.environ, "PYTHONPATH": str(ROOT / "src")}
                if ALL_SYSTEMS[name][1] == "tether"
                else None
            )
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            shutil.rmtree(work, ignore_errors=True)
            if not out.exists():
                results.append(
                    {
                        "system": name,
                        "label": ALL_SYSTEMS[name][0],
                        "workload": wl,
                        "error": (p.stderr or p.stdout)[-800:],
                    }
                )
                log(f"    error: {(p.stderr or p.stdout)[-400:]}")
                continue
            r = json.loads(out.read_text())
            r.setdefault("label", ALL_SYSTEMS[name][0])
            results.append(r)
            if "histories" in r:
                log(
                    "    "
                    + ", ".join(f"@{h}: {v['median_ms']:.2f} ms" for h, v in r["histories"].items())
                )
    return {
        "histories": histories,
        "samples": samples,
        "window": WINDOW,
        "fast_seed": fast_seed,
        "runs": results,
    }


def table(res: dict[str, Any]) -> list[str]:
    """Markdown: one row per (workload, system): median wall ms per turn at each history
    (CPU ms of the process in brackets), SQLite commits and statements per turn."""
    hs = res["histories"]
    head = [
        "workload",
        "system",
        *[f"ms/turn @{h:,} (CPU)" for h in hs],
        "commits/turn",
        "SQL statements/turn",
        "RSS MiB (end)",
        "durability",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in res["runs"]:
        if "histories" not in r:
            why = r.get("skipped") or (
                "error: " + str(r.get("error", ""))[-100:].replace("\n", " ")
            )
            lines.append(
                f"| {r['workload']} | {r['label']} | "
                + " | ".join(["-"] * (len(hs) + 2))
                + f" | - | {why} |"
            )
            continue
        per = [r["histories"][str(h)] for h in hs]
        cells = [
            f"{v['median_ms']:.2f} ({v['cpu_median_ms']:.2f})"
            if "cpu_median_ms" in v
            else f"{v['median_ms']:.2f}"
            for v in per
        ]

        lines.append(
            f"| {r['workload']} | {r['label']} | "
            + " | ".join(cells)
            + f" | {_counts(per, 'commits_per_turn')} | {_counts(per, 'statements_per_turn')}"
            + f" | {r['rss_mib']['end']:.0f} | {r['durability']['setting']} |"
        )
    return lines


def long_systems() -> list[str]:
    """A long-thread run's systems: tether's whole buffer with its kept view and without,
    its Window(20), and the peers."""
    return [
        "tether_buffer",
        "tether_buffer_cold",
        "tether_window",
        "openai_agents",
        "langgraph_react",
    ]


def long_table(res: dict[str, Any]) -> list[str]:
    """Markdown for ``--long``: per system, the median ms per turn at each history, and
    tether's own part of it (the turn less the scripted model's time: wall, and CPU in
    brackets, which a busy machine and its fsyncs disturb far less), with the ratio of
    its CPU at the last history to the first; the same CPU with a model that reads only
    the latest message (tether's systems: ``Tether.const_agent``) at each history and its
    ratio; RSS after seeding the longest thread and at the end."""
    hs = res["histories"]
    head = [
        "system",
        *[f"ms/turn @{h:,}" for h in hs],
        *[f"tether's own ms @{h:,} (CPU)" for h in hs],
        f"own CPU @{hs[-1]:,} / @{hs[0]:,}",
        "own CPU, model reading the last message only: "
        + " / ".join(f"@{h:,}" for h in hs)
        + " (ratio)",
        "RSS MiB (seeded, end)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in res["runs"]:
        if "histories" not in r:
            why = r.get("skipped") or ("error: " + str(r.get("error", ""))[-100:])
            lines.append(f"| {r['label']} | {why.replace(chr(10), ' ')} |")
            continue
        per = [r["histories"][str(h)] for h in hs]
        cpu = [v.get("own_cpu_median_ms") for v in per]
        ratio = f"{cpu[-1] / cpu[0]:.2f}x" if cpu[0] and cpu[-1] is not None else "-"
        const = [v.get("own_cpu_const_median_ms") for v in per]
        const_cell = (
            " / ".join(f"{c:.2f}" for c in const) + f" ({const[-1] / const[0]:.2f}x)"
            if all(const) and const[0]
            else "-"
        )
        lines.append(
            f"| {r['label']} | "
            + " | ".join(f"{v['median_ms']:.2f}" for v in per)
            + " | "
            + " | ".join(
                f"{v['own_median_ms']:.2f} ({v['own_cpu_median_ms']:.2f})"
                if "own_median_ms" in v
                else "-"
                for v in per
            )
            + f" | {ratio} | {const_cell}"
            + f" | {per[-1].get('rss_seeded_mib', -1):.0f}, {r['rss_mib']['end']:.0f} |"
        )
    return lines


def _counts(per: list[dict[str, Any]], key: str) -> str:
    """A count per turn over the histories: one value, or its range."""
    vals = sorted({f"{v[key]:g}" for v in per if key in v}, key=float)
    return vals[0] if len(vals) == 1 else f"{vals[0]}-{vals[-1]}" if vals else "-"


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="histories 2 and 20, 3 samples")
    ap.add_argument(
        "--systems",
        default=None,
        help="comma list (default: every SQLite system, and the PostgreSQL ones with --postgres)",
    )
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--histories", default=None, help="comma-separated, default 10,100,1000")
    ap.add_argument(
        "--samples", type=int, default=None, help="timed turns per history (default 20)"
    )
    ap.add_argument(
        "--peers-python",
        default=None,
        help="interpreter for the peers (default: benchmarks/.venv-peers if built, else this one)",
    )
    ap.add_argument("--out", default=str(BENCH / "out"))
    ap.add_argument(
        "--postgres",
        default=None,
        metavar="URL",
        help="also run tether on this PostgreSQL server (its own schema, dropped after)",
    )
    ap.add_argument(
        "--long",
        type=int,
        default=None,
        metavar="N",
        help="a long thread: histories 10 and N (make bench: 10,000), the plain workload, "
        "tether's systems (the kept view and none) unless --systems names others, and "
        "tether's threads seeded quickly (--fast-seed); prints tether's own ms (model aside)",
    )
    ap.add_argument(
        "--fast-seed",
        action="store_true",
        help="seed tether's threads by a Window agent at durability=normal (same nodes)",
    )
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--workload", default="plain", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.long is not None:
        args.histories = args.histories or f"10,{args.long}"
        args.fast_seed = True
        if args.workloads == ",".join(WORKLOADS):
            args.workloads = "plain"
        if args.systems is None and not args.worker:
            args.systems = ",".join(long_systems())
    hs = args.histories or ",".join(map(str, QUICK_HISTORIES if args.quick else HISTORIES))
    args.histories = [int(x) for x in hs.split(",") if x.strip()]
    if args.samples is None:
        args.samples = 3 if args.quick else 20
    return args


def default_peers_python() -> Path:
    venv = BENCH / ".venv-peers" / "bin" / "python"
    return venv if venv.exists() else Path(sys.executable)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.worker:
        return worker(args)
    if args.systems is None:
        args.systems = ",".join([*SYSTEMS, *(PG_SYSTEMS if args.postgres else ())])
    systems = [s for s in args.systems.split(",") if s]
    workloads = [w for w in args.workloads.split(",") if w]
    for s in systems:
        if s not in ALL_SYSTEMS:
            raise SystemExit(f"unknown system {s!r}; known: {', '.join(ALL_SYSTEMS)}")
        if s in PG_SYSTEMS and not args.postgres:
            raise SystemExit(f"{s} needs --postgres URL")
    peers = Path(args.peers_python) if args.peers_python else default_peers_python()
    res = run_all(
        systems,
        workloads,
        args.histories,
        args.samples,
        {"tether": Path(sys.executable), "peers": peers},
        Path(args.out),
        log=lambda m: print(m, file=sys.stderr, flush=True),
        postgres=args.postgres,
        fast_seed=args.fast_seed,
    )
    name = "agent_turn_long.json" if args.long else "agent_turn.json"
    (Path(args.out) / name).write_text(json.dumps(res, indent=1))
    print("\n".join(long_table(res) if args.long else table(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
