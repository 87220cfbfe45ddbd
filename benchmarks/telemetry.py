"""What tether's OpenTelemetry instrumentation costs: an agent step and a commit, off and on.

    python benchmarks/telemetry.py                # about a minute
    python benchmarks/telemetry.py --quick        # a few seconds
    python benchmarks/telemetry.py --modes off,spans --rounds 5

Modes, each in its own process (so "off" really has nothing of OpenTelemetry loaded):

* ``off``: no SDK; ``opentelemetry`` is never imported (tether's default).
* ``api``: ``opentelemetry-api`` imported, no provider set (what another library that
  uses the API leaves behind): still off, one provider look-up per check.
* ``spans``: the SDK's ``TracerProvider`` with a ``BatchSpanProcessor`` whose exporter
  drops the spans (what the process pays to make and queue them, not the network).
* ``full``: ``spans`` plus the SDK's ``MeterProvider`` (an in-memory reader) and the
  server's Prometheus sink: every span and every metric.

Operations: ``commit`` (one node appended and committed, on the memory store and on a
SQLite file) and ``step`` (``Agent.step`` with a ``ScriptedModel`` that calls one tool and
answers: 2 model calls, 1 tool call, 4 commits, on the memory store). The modes run in
alternating rounds (off, api, spans, full, off, ...) so that drift on a shared machine hits
them alike; each figure is the median over rounds of each round's median per op, in CPU
time of the process (all its threads), not wall time: the SQLite commit's fsync wait is
not in it, so its figure is what the instrumentation adds to the CPU work of a commit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = ("off", "api", "spans", "full")
# CPU time of the whole process (the span processor's export thread included): a machine
# shared with other work disturbs it far less than wall time, and instrumentation is CPU.
_clock = time.process_time
OPS = ("commit_memory", "commit_sqlite", "step_memory")


def _setup(mode: str) -> None:
    if mode == "api":
        import opentelemetry.metrics
        import opentelemetry.trace  # noqa: F401
    if mode in ("spans", "full"):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

        class Drop(SpanExporter):
            def export(self, spans: Any) -> Any:
                from opentelemetry.sdk.trace.export import SpanExportResult

                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Drop()))
        trace.set_tracer_provider(provider)
    if mode == "full":
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        from tether.server.metrics import process_sink

        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
        process_sink()


async def _commits(store: Any, n: int) -> list[float]:
    from tether.store.txn import Transaction

    out = []
    for i in range(n):
        t0 = _clock()
        txn = Transaction(store, "bench")
        await txn.append("thread:c", "resource", {"i": i}, resource_key=f"k{i % 8}")
        await txn.commit()
        out.append(_clock() - t0)
    return out


async def _steps(n: int) -> list[float]:
    from tether.models import Rule, ScriptedModel, call
    from tether.runtime import Agent, tool

    @tool
    async def get_weather(city: str) -> str:
        """The weather in a city (async: a sync tool runs in a thread, whose hand-off time
        on a busy machine would drown what is measured here)."""
        return f"sunny in {city}"

    model = ScriptedModel(
        [Rule(match=r"weather in (\w+)", tools=[call("get_weather", city="{1}")], then="{result}")]
    )
    out = []
    async with Agent(model=model, store="memory://", tools=[get_weather]) as agent:
        for i in range(n):
            t0 = _clock()
            await agent.step("What's the weather in Paris?", thread=f"t{i % 16}")
            out.append(_clock() - t0)
    return out


async def _child(mode: str, commits: int, steps: int) -> dict[str, Any]:
    _setup(mode)
    from tether import telemetry
    from tether.store import open_store

    result: dict[str, Any] = {"mode": mode, "tracing": telemetry.tracing}
    mem = await open_store("memory://")
    await _commits(mem, 50)  # warm-up
    result["commit_memory"] = statistics.median(await _commits(mem, commits))
    with tempfile.TemporaryDirectory() as d:
        sq = await open_store(f"sqlite:///{Path(d) / 'bench.db'}")
        await _commits(sq, 20)
        result["commit_sqlite"] = statistics.median(await _commits(sq, max(commits // 4, 20)))
        await sq.close()
    await _steps(10)
    result["step_memory"] = statistics.median(await _steps(steps))
    result["otel_loaded"] = sorted(
        {m.split(".")[1] for m in sys.modules if m.startswith("opentelemetry.")}
    )
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--commits", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    commits = args.commits or (200 if args.quick else 1000)
    steps = args.steps or (30 if args.quick else 150)
    if args.child:
        print(json.dumps(asyncio.run(_child(args.child, commits, steps))))
        return 0
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        ap.error(f"unknown modes {sorted(unknown)}; use {', '.join(MODES)}")
    rounds = args.rounds or (2 if args.quick else 5)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    mode,
                    "--commits",
                    str(commits),
                    "--steps",
                    str(steps),
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            runs[mode].append(json.loads(out.splitlines()[-1]))
    table = {
        mode: {op: statistics.median(r[op] for r in rs) * 1e6 for op in OPS}
        for mode, rs in runs.items()
    }
    base = table.get("off")
    print(f"{rounds} rounds; {commits} commits and {steps} agent steps per round and mode")
    print(f"{'mode':<7}" + "".join(f"{op + ' µs':>20}" for op in OPS) + "   otel modules loaded")
    for mode, row in table.items():
        cells = ""
        for op in OPS:
            extra = f" ({row[op] / base[op] - 1:+.0%})" if base and mode != "off" else ""
            cells += f"{row[op]:>12.1f}{extra:>8}"
        print(f"{mode:<7}{cells}   {', '.join(runs[mode][-1]['otel_loaded']) or '-'}")
    if args.json:
        args.json.write_text(json.dumps({"table": table, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
