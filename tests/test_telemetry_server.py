"""Telemetry at the server (docs/telemetry.md): ``/metrics`` for Prometheus behind the
``metrics`` grant, and the inspector's link from a run to its trace (``trace_url``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from _server_helpers import TOKEN, demo_agent, serve
from tether import InvalidRequest, telemetry
from tether.cli import main
from tether.client import Client
from tether.server import Tokens, create_app
from tether.server.auth import dev_token
from tether.server.metrics import PrometheusSink
from tether.store import open_store
from tether.store.in_memory import MemoryStore

METRICS_ONLY = "metrics-only-token-" + "4" * 20
LIMITED = "metrics-limited-ns-" + "5" * 20
NO_METRICS = "state-only-token-" + "6" * 20
JAEGER = "http://localhost:16686/trace/{trace_id}"


def _tokens() -> Tokens:
    return Tokens(
        [
            dev_token(TOKEN, name="ops"),
            dev_token(METRICS_ONLY, name="prometheus", grants=["metrics"]),
            dev_token(LIMITED, name="acme-metrics", grants=["metrics"], namespaces=["default"]),
            dev_token(NO_METRICS, name="reader", grants=["state.*", "agent.*"]),
        ]
    )


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(MemoryStore(), tokens=_tokens(), agent=demo_agent, trace_url=JAEGER)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://tether",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as c:
        yield c


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the exposition ``text`` (0 when absent)."""
    for line in text.splitlines():
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return 0.0


async def _metrics(c: httpx.AsyncClient, token: str = METRICS_ONLY) -> str:
    r = await c.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return r.text


async def test_metrics_count_commits_runs_model_and_tool_calls(
    client: httpx.AsyncClient,
) -> None:
    before = await _metrics(client)
    r = await client.post(
        "/v1/ns/default/threads/m1/step",
        json={"input": "What's the weather in Paris?", "user": "ada"},
    )
    assert r.status_code == 200 and r.json()["status"] == "completed", r.text
    after = await _metrics(client)

    def delta(name: str, **labels: str) -> float:
        return _sample(after, name, **labels) - _sample(before, name, **labels)

    # goal, the inference with its call, the result, the answer: at least four commits.
    assert delta("tether_commit_duration_seconds_count", outcome="ok") >= 4
    assert delta("tether_commit_nodes_sum") >= 5
    assert delta("tether_runs_total", status="completed") == 1
    assert (
        delta(
            "gen_ai_client_operation_duration_seconds_count",
            gen_ai_request_model="scripted",
            gen_ai_provider_name="tether.scripted",
        )
        == 2
    )
    assert delta("tether_tool_duration_seconds_count", gen_ai_tool_name="get_weather") == 1
    assert delta("gen_ai_client_token_usage_count", gen_ai_token_type="input") == 2
    # No label names a namespace or a thread: a metrics reader learns no tenant's names.
    assert "m1" not in after and 'namespace="' not in after


async def test_metrics_need_the_grant_on_every_namespace(client: httpx.AsyncClient) -> None:
    assert (await client.get("/metrics", headers={"Authorization": ""})).status_code == 401
    for token in (NO_METRICS, LIMITED):
        r = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 403, token
        assert r.json()["code"] == "forbidden"
    assert "tether_" in await _metrics(client, TOKEN)  # '*' includes metrics


def test_a_sink_declares_every_metric_before_anything_is_recorded() -> None:
    """A scrape of a server that has done nothing yet lists every metric, so Prometheus's
    rate() and absent() see them from the start."""
    text = PrometheusSink().exposition().decode()
    for name, kind in [
        ("tether_commit_duration_seconds", "histogram"),
        ("tether_commit_nodes", "histogram"),
        ("tether_commit_conflicts_total", "counter"),
        ("tether_transact_retries_total", "counter"),
        ("tether_tool_duration_seconds", "histogram"),
        ("tether_runs_total", "counter"),
        ("gen_ai_client_operation_duration_seconds", "histogram"),
        ("gen_ai_client_token_usage", "histogram"),
    ]:
        assert f"# TYPE {name} {kind}" in text, name
    lines = text.splitlines()
    assert "tether_commit_conflicts_total 0.0" in lines and "tether_commit_nodes_count 0.0" in lines


def test_a_sink_maps_names_units_and_labels() -> None:
    sink = PrometheusSink()
    sink.record("histogram", "tether.tool.duration", 0.25, {"gen_ai.tool.name": "t"})
    sink.record("counter", "tether.runs", 2, {"status": "failed"})
    sink.record("counter", "tether.commit.conflicts", 1, {})
    text = sink.exposition().decode()
    assert _sample(text, "tether_tool_duration_seconds_sum", gen_ai_tool_name="t") == 0.25
    assert _sample(text, "tether_runs_total", status="failed") == 2
    assert _sample(text, "tether_commit_conflicts_total") == 1


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.configure(tracer_provider=provider)
    yield exporter
    telemetry.reset()


async def test_a_traced_run_names_its_trace_for_the_inspector(
    client: httpx.AsyncClient, spans: InMemorySpanExporter
) -> None:
    me = (await client.get("/v1/whoami")).json()
    assert me["trace_url"] == JAEGER
    r = await client.post("/v1/ns/default/threads/tr/step", json={"input": "hello", "user": "ada"})
    run = r.json()["run_id"]
    [root] = [s for s in spans.get_finished_spans() if s.name == "invoke_agent agent"]
    assert root.context is not None
    execution = (await client.get(f"/v1/ns/default/threads/tr/runs/{run}")).json()
    assert execution["trace_id"] == format(root.context.trace_id, "032x")
    telemetry.reset()  # tracing off: the next run records no trace
    r = await client.post("/v1/ns/default/threads/tr2/step", json={"input": "hello", "user": "ada"})
    execution = (await client.get(f"/v1/ns/default/threads/tr2/runs/{r.json()['run_id']}")).json()
    assert "trace_id" not in execution


@pytest.mark.parametrize(
    "bad",
    [
        "localhost:16686/trace/{trace_id}",  # no scheme
        "javascript:alert({trace_id})",
        "http://jaeger/trace/",  # nowhere to put the id
        "http://jaeger/trace/{trace_id}/{span_id}",
        "http://jaeger/ trace/{trace_id}",
    ],
)
def test_a_trace_url_is_checked_when_the_app_is_made(bad: str) -> None:
    with pytest.raises(InvalidRequest) as e:
        create_app(MemoryStore(), tokens=_tokens(), trace_url=bad)
    assert e.value.details["field"] == "trace_url"


async def test_without_a_trace_url_whoami_says_none() -> None:
    app = create_app(MemoryStore(), tokens=_tokens())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether"
    ) as c:
        r = await c.get("/v1/whoami", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.json()["trace_url"] is None


def test_serve_takes_the_trace_url_from_the_option_or_the_environment(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"TETHER_TOKEN": TOKEN, "TETHER_TOKENS_FILE": None}
    store = ["--store", str(tmp_path / "t.db")]
    result = runner.invoke(main, [*store, "serve", "--trace-url", "ftp://x/{trace_id}"], env=env)
    assert result.exit_code == 2 and "trace_url" in result.output
    result = runner.invoke(main, [*store, "serve"], env={**env, "TETHER_TRACE_URL": "nope"})
    assert result.exit_code == 2 and "trace_url" in result.output


@pytest.mark.slow
def test_the_inspector_links_a_traced_run_to_its_trace(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """A real ``tether serve`` with ``$TETHER_TRACE_URL``, in headless Chromium."""
    from test_inspector_browser import ARGS, AUTH, CHROMIUM, _need_browser

    sync_playwright = _need_browser()
    db = tmp_path / "traced.db"

    async def work() -> str:
        store = await open_store(f"sqlite:///{db}")
        try:
            r = await demo_agent(store).step("What's the weather in Oslo?", thread="tr", user="ada")
        finally:
            await store.close()
        return r.run_id

    run = asyncio.run(work())
    [root] = [s for s in spans.get_finished_spans() if s.name == "invoke_agent agent"]
    assert root.context is not None
    want = JAEGER.replace("{trace_id}", format(root.context.trace_id, "032x"))
    with serve(db, tmp_path / "serve.log", env={"TETHER_TRACE_URL": JAEGER}) as served:
        me = httpx.get(served.url + "v1/whoami", headers=AUTH, timeout=10).json()
        assert me["trace_url"] == JAEGER
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                page = browser.new_page()
                page.goto(served.url)
                page.fill("#token", TOKEN)
                page.click("#connect")
                page.wait_for_selector(".whoami")
                page.click("[data-thread='tr']")
                page.click("[data-tab='runs']")
                page.click(f"tr[data-run='{run}']")
                link = page.wait_for_selector("a.trace-link")
                assert link is not None
                assert link.get_attribute("href") == want
                assert link.get_attribute("rel") == "noopener noreferrer"
            finally:
                browser.close()


CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


async def test_a_callers_traceparent_continues_on_the_server(
    client: httpx.AsyncClient, spans: InMemorySpanExporter
) -> None:
    r = await client.post(
        "/v1/ns/default/threads/tp/step",
        json={"input": "hello", "user": "ada"},
        headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
    )
    assert r.status_code == 200, r.text
    [root] = [s for s in spans.get_finished_spans() if s.name == "invoke_agent agent"]
    assert root.context is not None and root.parent is not None
    assert format(root.context.trace_id, "032x") == CALLER_TRACE
    assert format(root.parent.span_id, "016x") == CALLER_SPAN
    execution = (await client.get(f"/v1/ns/default/threads/tp/runs/{r.json()['run_id']}")).json()
    assert execution["trace_id"] == CALLER_TRACE
    # Without a traceparent, the server's spans start their own trace.
    spans.clear()
    await client.post("/v1/ns/default/threads/tq/step", json={"input": "hello", "user": "ada"})
    [root] = [s for s in spans.get_finished_spans() if s.name == "invoke_agent agent"]
    assert root.parent is None


async def test_the_client_sends_its_trace(spans: InMemorySpanExporter) -> None:
    app = create_app(MemoryStore(), tokens=_tokens(), agent=demo_agent)
    seen: list[dict[bytes, bytes]] = []

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(dict(scope["headers"]))
        await app(scope, receive, send)

    async with Client("http://tether", TOKEN, transport=httpx.ASGITransport(app=recording)) as c:
        await c.whoami()
        assert b"traceparent" not in seen[-1]  # no span here: nothing to send
        tracer = telemetry._tracer_provider.get_tracer("caller")  # the fixture's provider
        with tracer.start_as_current_span("caller") as caller:
            await c.step("hello", thread="tc", user="ada")
    traceparent = seen[-1][b"traceparent"].decode()
    assert traceparent.split("-")[1:3] == [
        format(caller.get_span_context().trace_id, "032x"),
        format(caller.get_span_context().span_id, "016x"),
    ]
