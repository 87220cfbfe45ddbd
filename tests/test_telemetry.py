"""OpenTelemetry traces and metrics (docs/telemetry.md): the span tree of an agent step,
commits and control-plane operations in the SDK's in-memory exporter, credentials kept
out of every attribute, the trace id on the run, traceparent on model calls, and
nothing imported or recorded when no SDK is configured."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether import Conflict, Transaction, control, telemetry, transact
from tether.models import OpenAIModel, Rule, ScriptedModel, call
from tether.runtime import Agent, tool
from tether.store.in_memory import MemoryStore

SECRET = "wx-key-" + "7" * 24


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.configure(tracer_provider=provider, capture_content=True)
    yield exporter
    telemetry.reset()


def _agent(store: MemoryStore) -> Agent:
    @tool(credentials=["weather_key"])
    def get_weather(city: str, credentials: dict[str, str]) -> str:
        """The weather in a city."""
        # Careless: echoes its key. The stored result is redacted, and so is every span.
        return f"sunny in {city} (key {credentials['weather_key']})"

    model = ScriptedModel(
        [
            Rule(
                match=r"weather in (\w+)",
                tools=[call("get_weather", city="{1}")],
                then="The weather in {1}: {result}.",
            )
        ]
    )
    return Agent(model=model, store=store, tools=[get_weather], name="forecaster")


def _everything(spans: Any) -> str:
    """Every attribute, event and status text of ``spans``, as one string."""
    return json.dumps(
        [
            [
                dict(s.attributes or {}),
                [[e.name, dict(e.attributes or {})] for e in s.events],
                s.status.description,
            ]
            for s in spans
        ],
        default=str,
    )


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    kids = [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]
    return sorted(kids, key=lambda s: s.start_time or 0)


async def test_an_agent_step_is_a_genai_span_tree(spans: InMemorySpanExporter) -> None:
    store = MemoryStore()
    agent = _agent(store)
    result = await agent.step(
        "What's the weather in Paris?",
        thread="t1",
        user="ada",
        context={"credentials": {"weather_key": SECRET}, "request_id": "r-1"},
    )
    assert result.completed, result
    done = list(spans.get_finished_spans())
    [root] = [s for s in done if s.parent is None]
    assert root.name == "invoke_agent forecaster"
    assert root.kind.name == "INTERNAL"
    a = dict(root.attributes or {})
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "forecaster"
    assert a["tether.thread"] == "t1"
    assert a["tether.run"] == result.run_id
    assert a["tether.run.status"] == "completed"

    work = [s for s in _children(done, root) if s.name != "tether.commit"]
    assert [s.name for s in work] == ["chat scripted", "execute_tool get_weather", "chat scripted"]
    first, tool_span, second = work
    for chat in (first, second):
        c = dict(chat.attributes or {})
        assert chat.kind.name == "CLIENT"
        assert c["gen_ai.operation.name"] == "chat"
        assert c["gen_ai.provider.name"] == c["gen_ai.system"] == "tether.scripted"
        assert c["gen_ai.request.model"] == "scripted"
        assert (
            isinstance(c["gen_ai.usage.input_tokens"], int) and c["gen_ai.usage.input_tokens"] > 0
        )
        assert isinstance(c["gen_ai.usage.output_tokens"], int)
    assert dict(first.attributes or {})["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert dict(second.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    t = dict(tool_span.attributes or {})
    assert t["gen_ai.operation.name"] == "execute_tool"
    assert t["gen_ai.tool.name"] == "get_weather"
    call_id = t["gen_ai.tool.call.id"]
    assert isinstance(call_id, str) and call_id.startswith("call_")

    # Every commit is a span under the step (the tool's result commit under its tool span),
    # naming the namespace, the scopes and the nodes written: together, every node of the run.
    commits = [s for s in done if s.name == "tether.commit"]
    assert commits
    written: set[str] = set()
    for c in commits:
        ca = dict(c.attributes or {})
        assert ca["tether.namespace"] == "default"
        assert "thread:t1" in (ca["tether.scopes"] or ())
        ids = ca["tether.node_ids"]
        assert isinstance(ids, tuple) and ca["tether.nodes"] == len(ids)
        written.update(ids)
        assert c.parent is not None and c.parent.span_id in {
            s.context.span_id for s in (root, tool_span) if s.context
        }
    thread_nodes = await store.nodes("default", "thread:t1")
    assert {n.id for n in thread_nodes} <= written
    # The goal holds the trace id: the inspector links the run to the trace.
    goal = next(n for n in thread_nodes if n.kind == "goal")
    assert goal.payload["trace"] == format(root.context.trace_id, "032x")  # type: ignore[union-attr]

    # The tool echoed its key: no attribute of any span holds it, contents captured or not.
    text = _everything(done)
    assert SECRET not in text
    assert "[redacted]" in text  # the captured messages quote the (redacted) tool result
    assert "r-1" not in text  # the call's context is not an attribute either


async def test_a_failing_tool_marks_its_span_and_leaks_nothing(
    spans: InMemorySpanExporter,
) -> None:
    @tool(credentials=["weather_key"])
    def get_weather(city: str, credentials: dict[str, str]) -> str:
        """The weather in a city."""
        raise PermissionError(f"key {credentials['weather_key']} refused for {city}")

    model = ScriptedModel(
        [Rule(match=r"weather in (\w+)", tools=[call("get_weather", city="{1}")], then="{result}")]
    )
    agent = Agent(model=model, store=MemoryStore(), tools=[get_weather])
    result = await agent.step(
        "weather in Bern", thread="tf", context={"credentials": {"weather_key": SECRET}}
    )
    assert result.completed  # the model saw the error and answered
    done = spans.get_finished_spans()
    [t] = [s for s in done if s.name == "execute_tool get_weather"]
    assert t.status.status_code.name == "ERROR"
    assert dict(t.attributes or {})["error.type"] == "tool_error"
    [root] = [s for s in done if s.parent is None]
    assert root.status.status_code.name == "UNSET"  # the step itself went fine
    assert SECRET not in _everything(done)


async def test_without_capture_content_no_message_is_recorded(
    spans: InMemorySpanExporter,
) -> None:
    # The default: configure() without capture_content records no message contents.
    telemetry.configure(tracer_provider=telemetry._tracer_provider)  # the fixture's provider
    await _agent(MemoryStore()).step(
        "What's the weather in Lyon?",
        thread="t2",
        context={"credentials": {"weather_key": SECRET}},
    )
    done = spans.get_finished_spans()
    text = _everything(done)
    assert "Lyon" not in text and SECRET not in text
    assert any(s.name == "execute_tool get_weather" for s in done)


async def test_control_operations_are_spans(spans: InMemorySpanExporter) -> None:
    store = MemoryStore()
    await _agent(store).step(
        "weather in Oslo", thread="t3", context={"credentials": {"weather_key": SECRET}}
    )
    spans.clear()
    await control.describe(store, namespace="default", thread="t3")
    snap = await control.export(store, namespace="default", thread="t3")
    await control.verify(store, namespace="default", thread="t3")
    await control.import_(store, namespace="default", thread="copy", snapshot=snap.snapshot)
    await control.compact(
        store, namespace="default", thread="copy", strategy="recent", max_messages=1
    )
    await control.history(store, namespace="default", thread="copy")
    goal = snap.snapshot["nodes"][0]["id"]
    await control.fork(store, namespace="default", thread="t3", node=goal, new_thread="f3")
    await control.reset(store, namespace="default", thread="copy")
    names = [s.name for s in spans.get_finished_spans() if s.parent is None]
    assert names == [
        "tether.describe",
        "tether.export",
        "tether.verify",
        "tether.import",
        "tether.compact",
        "tether.history",
        "tether.fork",
        "tether.reset",
    ]
    for s in spans.get_finished_spans():
        if s.parent is None:
            a = dict(s.attributes or {})
            assert a["tether.namespace"] == "default"
            source = s.name in ("tether.describe", "tether.export", "tether.verify", "tether.fork")
            assert a["tether.thread"] == ("t3" if source else "copy"), s.name
    [fork] = [s for s in spans.get_finished_spans() if s.name == "tether.fork"]
    assert dict(fork.attributes or {})["tether.created"] == "thread:f3"
    [exp] = [s for s in spans.get_finished_spans() if s.name == "tether.export"]
    assert dict(exp.attributes or {})["tether.nodes"] == len(snap.snapshot["nodes"]) > 0
    # import and reset write: their commits are their children.
    [imp] = [s for s in spans.get_finished_spans() if s.name == "tether.import"]
    assert any(s.name == "tether.commit" for s in _children(list(spans.get_finished_spans()), imp))


async def test_metrics_reach_the_opentelemetry_meter(spans: InMemorySpanExporter) -> None:
    reader = InMemoryMetricReader()
    telemetry.configure(
        tracer_provider=telemetry._tracer_provider,
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    await _agent(MemoryStore()).step(
        "weather in Rome", thread="t4", context={"credentials": {"weather_key": SECRET}}
    )
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                points[m.name] = list(m.data.data_points)
    assert {
        "tether.commit.duration",
        "tether.commit.nodes",
        "tether.tool.duration",
        "tether.runs",
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
    } <= set(points)
    [runs] = points["tether.runs"]
    assert runs.value == 1 and dict(runs.attributes) == {"status": "completed"}
    chat = points["gen_ai.client.operation.duration"]
    assert sum(p.count for p in chat) == 2
    assert dict(chat[0].attributes)["gen_ai.request.model"] == "scripted"


class _Capture(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).seen.append({k.lower(): v for k, v in self.headers.items()})
        body = json.dumps(
            {
                "choices": [{"message": {"role": "assistant", "content": "hi"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def model_server() -> Iterator[str]:
    _Capture.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    t.join()


async def test_model_calls_carry_the_trace_context(
    spans: InMemorySpanExporter, model_server: str
) -> None:
    model = OpenAIModel(model_server, api_key="sk-" + "x" * 30, model="tiny", max_retries=0)
    result = await Agent(model=model, store=MemoryStore()).step("hello", thread="t5")
    assert result.completed and result.answer == "hi"
    [headers] = _Capture.seen
    [chat] = [s for s in spans.get_finished_spans() if s.name == "chat tiny"]
    assert chat.context is not None
    a = dict(chat.attributes or {})
    assert a["gen_ai.provider.name"] == "openai"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (3, 1)
    # traceparent: version-trace id-parent span id-flags, the parent being the chat span.
    version, trace_id, parent, flags = headers["traceparent"].split("-")
    assert version == "00" and int(flags, 16) & 1  # sampled
    assert trace_id == format(chat.context.trace_id, "032x")
    assert parent == format(chat.context.span_id, "016x")
    text = json.dumps([dict(s.attributes or {}) for s in spans.get_finished_spans()])
    assert "sk-xxx" not in text  # the API key is a header, never an attribute


async def test_without_a_span_no_traceparent_is_sent(model_server: str) -> None:
    model = OpenAIModel(model_server, model="tiny", max_retries=0)
    await Agent(model=model, store=MemoryStore()).step("hello", thread="t6")
    [headers] = _Capture.seen
    assert "traceparent" not in headers


_OFF = """
import asyncio, json, sys
import tether
from tether.models import ScriptedModel
from tether.runtime import Agent
from tether.core.telemetry import telemetry

async def main():
    agent = Agent(model=ScriptedModel.demo(), store="memory://", tools=[])
    r = await agent.step("hello", thread="t")
    store = await agent._get_store()
    goal = (await store.nodes("default", "thread:t"))[0]
    return r.status, goal.payload

status, goal = asyncio.run(main())
print(json.dumps({
    "status": status,
    "goal_keys": sorted(goal),
    "otel": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
    "tracing": telemetry.tracing,
    "enabled": telemetry.enabled,
}))
"""


def test_off_without_an_sdk_nothing_is_imported_or_written() -> None:
    out = subprocess.run([sys.executable, "-c", _OFF], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["status"] == "completed"
    assert got["otel"] == []  # not even opentelemetry-api
    assert got["goal_keys"] == ["input", "llm", "metadata", "run"]  # no trace id
    assert got["tracing"] is False and got["enabled"] is False


def test_the_api_alone_is_still_off() -> None:
    # opentelemetry-api imported (another library uses it) but no SDK provider set: off.
    code = "import opentelemetry.trace, opentelemetry.metrics\n" + _OFF
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.splitlines()[-1])
    assert not [m for m in got["otel"] if m.startswith("opentelemetry.sdk")]
    assert got["goal_keys"] == ["input", "llm", "metadata", "run"]
    assert got["tracing"] is False and got["enabled"] is False


def test_a_global_sdk_provider_turns_tracing_on() -> None:
    code = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n" + _OFF
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["tracing"] is True
    assert got["goal_keys"] == ["input", "llm", "metadata", "run", "trace"]


class _Points:
    """A metrics sink that keeps every point."""

    def __init__(self) -> None:
        self.points: list[tuple[str, str, float, dict[str, Any]]] = []

    def record(self, kind: str, name: str, value: float, attrs: Any) -> None:
        self.points.append((kind, name, value, dict(attrs)))

    def total(self, name: str, **attrs: Any) -> float:
        return sum(
            v
            for _, n, v, a in self.points
            if n == name and all(a.get(k) == x for k, x in attrs.items())
        )


async def test_conflicts_and_retries_are_counted() -> None:
    sink = _Points()
    telemetry.attach_sink(sink)
    try:
        store = MemoryStore()
        first, second = Transaction(store, "ns"), Transaction(store, "ns")
        await first.append("thread:x", "goal", {"n": 1})
        await second.append("thread:x", "goal", {"n": 2})
        await first.commit()
        with pytest.raises(Conflict):
            await second.commit()
        assert sink.total("tether.commit.conflicts") == 1
        assert [a for _, n, _, a in sink.points if n == "tether.commit.duration"] == [
            {"outcome": "ok"},
            {"outcome": "conflict"},
        ]
        assert sink.total("tether.commit.nodes") == 1

        calls = 0

        async def build(txn: Transaction) -> None:
            nonlocal calls
            calls += 1
            await txn.append("thread:x", "goal", {"attempt": calls})
            if calls == 1:  # another writer moves the head under the first attempt
                await transact(store, "ns", lambda t: t.append("thread:x", "goal", {"other": 1}))

        await transact(store, "ns", build)
        assert calls == 2
        assert sink.total("tether.transact.retries") == 1
        assert sink.total("tether.commit.conflicts") == 2
    finally:
        telemetry.detach_sink(sink)
