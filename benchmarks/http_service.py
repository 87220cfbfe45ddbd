"""The service path: `tether serve` against its parts, over real sockets on loopback.

    python benchmarks/http_service.py                     # full run, about two minutes
    python benchmarks/http_service.py --quick             # smoke run, a few seconds
    python benchmarks/http_service.py --postgres postgresql://postgres@127.0.0.1:5432/test

Three measurements, each server in its own process (the client in this one):

* **keep-alive**: one `httpx.Client` (one kept-alive connection), ``--requests``
  requests one at a time: ``GET /v1/whoami`` on ``tether serve`` against ``GET /`` on a
  bare Starlette app served by uvicorn the way ``tether serve`` serves (its listening
  socket, its h11 protocol). The goal: tether's p50 <= 2x the bare app's + 0.5 ms.
* **step**: ``POST /v1/ns/{ns}/threads/{t}/step`` over one kept-alive connection
  against ``Agent.step`` in this process, the same agent (``http_agent.py``: the demo
  model, the whole buffer) on a SQLite file of its own, in alternating blocks of ten
  turns (one ``httpx.Client`` request at a time). The goal: HTTP <= in-process + 1.5 ms.
* **load**: ``--clients`` clients at once (each its own connection and thread),
  ``--steps`` steps each, on SQLite and (with ``--postgres``) PostgreSQL, with 1 and
  ``--workers`` server processes (``tether serve --workers N``): requests per second,
  p50 and p99 latency, failed requests (a transport error, or a status other than
  200) and 503s (overload, answered with Retry-After and retried by the client after
  it). The goals: 0 failed, p99 <= 10x p50, and on PostgreSQL N workers >= 0.7 x N x
  one worker's throughput (up to the machine's cores).

``--json FILE`` writes the figures; ``--update-readme`` rewrites the README section
between ``<!-- http-bench:start -->`` and ``<!-- http-bench:end -->``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
README = ROOT / "README.md"
START, END = "<!-- http-bench:start -->", "<!-- http-bench:end -->"
TOKEN = "bench-" + uuid.uuid4().hex
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
TETHER = Path(sys.executable).with_name("tether")

# The bare app: Starlette under uvicorn, on a socket made and served as tether serve's is.
BARE_APP = """
import sys
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from tether.server._protocol import HeaderTimeoutH11
from tether.server.cli import listening_socket

async def root(request):
    return JSONResponse({"ok": True})

app = Starlette(routes=[Route("/", root)])
sock = listening_socket("127.0.0.1", 0)
print(f"http://127.0.0.1:{sock.getsockname()[1]}/", flush=True)
config = uvicorn.Config(app, log_level="warning", http=HeaderTimeoutH11, lifespan="off")
uvicorn.Server(config).run(sockets=[sock])
"""


# Server URL -> its process id, for the CPU each server's processes used (cpu_split).
_PIDS: dict[str, int] = {}
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc (0 if gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _tree(root: int) -> list[int]:
    """``root`` and every process below it (tether serve's supervisor and its workers)."""
    parents: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def _machine_busy() -> float:
    """CPU seconds the whole machine has been busy (every core), from /proc/stat."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / _TICK


def log(msg: str) -> None:
    print(f"[http-bench] {msg}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


@contextlib.contextmanager
def server(argv: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """A server process whose first stdout line is its URL; stopped (SIGTERM) after."""
    full_env = {**os.environ, "TETHER_TOKEN": TOKEN, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(BENCH), full_env.get("PYTHONPATH", "")) if p
    )
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=full_env, text=True
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"{argv[:4]}... did not start (exit {proc.poll()})")
        wait_ready(url)
        _PIDS[url.rstrip("/")] = proc.pid
        yield url.rstrip("/")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def wait_ready(url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url.rstrip("/") + "/healthz", timeout=2)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def tether_serve(store: str, *, workers: int = 1, agent: bool = True) -> list[str]:
    argv = [str(TETHER), "--store", store, "serve", "--port", "0", "--log-level", "warning"]
    if agent:
        argv += ["--agent", "http_agent:agent"]
    if workers > 1:
        argv += ["--workers", str(workers)]
    return argv


def sequential(url: str, n: int, *, method: str = "GET", body: Any = None) -> list[float]:
    """``n`` requests one at a time on one kept-alive connection: milliseconds each."""
    times = []
    with httpx.Client(headers=HEADERS, timeout=30) as client:
        for i in range(n + 5):
            t0 = time.perf_counter()
            r = client.request(method, url, json=body)
            dt = (time.perf_counter() - t0) * 1000
            r.raise_for_status()
            if i >= 5:  # the first few warm the connection and the server's caches
                times.append(dt)
    return times


def keepalive(n: int, tmp: Path) -> dict[str, Any]:
    with server([sys.executable, "-c", BARE_APP]) as url:
        bare = sequential(url + "/", n)
    with server(tether_serve(f"sqlite:///{tmp / 'whoami.db'}", agent=False)) as url:
        whoami = sequential(url + "/v1/whoami", n)
    return {
        "requests": n,
        "bare_p50_ms": statistics.median(bare),
        "tether_p50_ms": statistics.median(whoami),
        "bare_p99_ms": pct(bare, 0.99),
        "tether_p99_ms": pct(whoami, 0.99),
    }


def step(n: int, tmp: Path, block: int = 10) -> dict[str, Any]:
    """The same turn in-process and over HTTP (a plain ``httpx.Client``, one request at a
    time), in alternating blocks of ``block`` turns, each side on a thread of its own,
    both threads growing alike: both see the machine as it is, and each block runs as a
    client calling in a row would (a turn right after another, on a warm connection)."""
    from http_agent import agent

    import tether

    loop = asyncio.new_event_loop()
    store = loop.run_until_complete(tether.open_store(f"sqlite:///{tmp / 'inproc.db'}"))
    inproc: list[float] = []
    http: list[float] = []
    try:
        a = agent(store, "bench")
        with (
            server(tether_serve(f"sqlite:///{tmp / 'step.db'}")) as url,
            httpx.Client(headers=HEADERS, timeout=30) as client,
        ):
            step_url = url + "/v1/ns/bench/threads/t-http/step"
            i = 0
            while len(http) < n:
                for k in range(i, i + block):
                    t0 = time.perf_counter()
                    loop.run_until_complete(a.step(f"hello {k}", thread="t-in", user="u"))
                    inproc.append((time.perf_counter() - t0) * 1000)
                for k in range(i, i + block):
                    t0 = time.perf_counter()
                    r = client.post(step_url, json={"input": f"hello {k}", "user": "u"})
                    http.append((time.perf_counter() - t0) * 1000)
                    r.raise_for_status()
                i += block
    finally:
        loop.run_until_complete(store.close())
        loop.close()
    # the first block of each side warms the connection, the caches and the file
    return {
        "steps": n,
        "in_process_p50_ms": statistics.median(inproc[block:] or inproc),
        "http_p50_ms": statistics.median(http[block:] or http),
    }


def _cpu_now(url: str) -> tuple[float, float, float]:
    """CPU seconds so far: this process (the clients), the server's processes, the machine."""
    return time.process_time(), sum(map(_proc_cpu, _tree(_PIDS[url]))), _machine_busy()


async def _load(url: str, clients: int, steps: int) -> dict[str, Any]:
    latencies: list[float] = []
    failures: dict[str, int] = {}
    overloaded = 0
    run = uuid.uuid4().hex[:8]

    async def one(i: int, client: httpx.AsyncClient) -> None:
        nonlocal overloaded
        step_url = f"{url}/v1/ns/bench/threads/load-{run}-{i}/step"
        for k in range(steps):
            t0 = time.perf_counter()
            while True:
                try:
                    r = await client.post(step_url, json={"input": f"hello {k}", "user": "u"})
                except httpx.HTTPError as e:
                    failures[type(e).__name__] = failures.get(type(e).__name__, 0) + 1
                    break
                if r.status_code == 503 and "retry-after" in r.headers:
                    overloaded += 1
                    await asyncio.sleep(float(r.headers["retry-after"]))
                    continue
                if r.status_code != 200:
                    key = f"HTTP {r.status_code}"
                    failures[key] = failures.get(key, 0) + 1
                else:
                    latencies.append((time.perf_counter() - t0) * 1000)
                break

    # The clients are made before the clock starts: an httpx client builds its TLS
    # context when made (~10 ms of CPU), which would land in the first requests' times.
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    made = [httpx.AsyncClient(headers=HEADERS, timeout=60, limits=limits) for _ in range(clients)]
    try:
        cpu0 = _cpu_now(url)
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i, c) for i, c in enumerate(made)))
        wall = time.perf_counter() - t0
        cpu1 = _cpu_now(url)  # a worker replaced meanwhile counts from 0: none is, here
    finally:
        for c in made:
            await c.aclose()
    client, served, busy = (b - a for a, b in zip(cpu0, cpu1, strict=True))
    return {
        # Where the machine's CPU went while the clients ran: this process (the clients),
        # the server's processes, and the rest (the database server, everything else).
        "cpu_s": {
            "clients": round(client, 2),
            "server": round(served, 2),
            "rest": round(max(busy - client - served, 0.0), 2),
            "machine_busy": round(busy, 2),
            "wall": round(wall, 2),
        },
        "clients": clients,
        "steps": steps,
        "requests_per_s": len(latencies) / wall,
        "p50_ms": statistics.median(latencies) if latencies else None,
        "p99_ms": pct(latencies, 0.99) if latencies else None,
        "failed": sum(failures.values()),
        "failures": failures,
        "overloaded_503": overloaded,
    }


def load(store: str, workers: int, clients: int, steps: int) -> dict[str, Any]:
    with server(tether_serve(store, workers=workers)) as url:
        # One step per server process first: each worker's store is open and warm.
        with httpx.Client(headers=HEADERS, timeout=30) as client:
            for i in range(workers * 2):
                client.post(f"{url}/v1/ns/bench/threads/warm-{i}/step", json={"input": "hi"})
        return asyncio.run(_load(url, clients, steps))


@contextlib.contextmanager
def pg_schema(url: str) -> Iterator[str]:
    import asyncpg

    schema = "bench_http_" + uuid.uuid4().hex[:8]
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}schema={schema}"
    finally:

        async def drop() -> None:
            conn = await asyncpg.connect(url)
            try:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            finally:
                await conn.close()

        asyncio.run(drop())


def markdown(res: dict[str, Any]) -> str:
    ka, st = res["keepalive"], res["step"]
    lines = [
        f"`{res['command']}`, {res['date']}, {res['machine']}:",
        "",
        "| measurement | tether serve | its part | ratio / difference |",
        "|---|---|---|---|",
        f"| keep-alive request p50 ({ka['requests']} requests) | "
        f"{ka['tether_p50_ms']:.2f} ms (`GET /v1/whoami`) | {ka['bare_p50_ms']:.2f} ms "
        f"(bare Starlette + uvicorn) | {ka['tether_p50_ms'] / ka['bare_p50_ms']:.2f}x |",
        f"| agent step p50 ({st['steps']} steps) | {st['http_p50_ms']:.2f} ms (HTTP) | "
        f"{st['in_process_p50_ms']:.2f} ms (`Agent.step` in-process) | "
        f"+{st['http_p50_ms'] - st['in_process_p50_ms']:.2f} ms |",
        "",
        "| load: clients x steps | store | workers | requests/s | p50 | p99 | p99/p50 | "
        "failed | 503 (retried) | CPU s: clients / server / rest (wall) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in res["load"]:
        r = row["result"]
        c = r["cpu_s"]
        lines.append(
            f"| {r['clients']} x {r['steps']} | {row['store']} | {row['workers']} | "
            f"{r['requests_per_s']:.0f} | {r['p50_ms']:.0f} ms | {r['p99_ms']:.0f} ms | "
            f"{r['p99_ms'] / r['p50_ms']:.1f} | {r['failed']} | {r['overloaded_503']} | "
            f"{c['clients']:.1f} / {c['server']:.1f} / {c['rest']:.1f} ({c['wall']:.1f}) |"
        )
    return "\n".join(lines)


def update_readme(section: str) -> None:
    import readme_section

    readme_section.replace(README, START, END, section)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few requests: a smoke run")
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--steps-sequential", type=int, default=100)
    p.add_argument("--clients", type=int, default=100)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    p.add_argument("--postgres", metavar="URL", help="also load a PostgreSQL store")
    p.add_argument(
        "--parts", default="keepalive,step,load", help="which measurements, comma-separated"
    )
    p.add_argument("--json", type=Path, metavar="FILE")
    p.add_argument("--update-readme", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.requests, args.steps_sequential, args.clients, args.steps = 30, 10, 8, 3
    tmp = Path(tempfile.mkdtemp(prefix="tether-http-bench-"))
    try:
        parts = set(args.parts.split(","))
        ka = st = None
        if "keepalive" in parts:
            log("keep-alive: bare app, then tether serve")
            ka = keepalive(args.requests, tmp)
            log(f"  {ka}")
        if "step" in parts:
            log("step: in-process, then over HTTP")
            st = step(args.steps_sequential, tmp)
            log(f"  {st}")
        stores = [("SQLite", lambda: contextlib.nullcontext(f"sqlite:///{tmp / 'load.db'}"))]
        if args.postgres:
            stores.append(("PostgreSQL", lambda: pg_schema(args.postgres)))
        rows = []
        for name, make in stores if "load" in parts else []:
            for workers in sorted({1, args.workers}):
                with make() as store:
                    log(f"load: {name}, {workers} worker(s)")
                    r = load(store, workers, args.clients, args.steps)
                log(f"  {r}")
                rows.append({"store": name, "workers": workers, "result": r})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benchmarks/http_service.py " + " ".join(argv or sys.argv[1:]),
        "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "keepalive": ka,
        "step": st,
        "load": rows,
    }
    md = markdown(res) if ka and st else json.dumps(res, indent=2)
    print(md)
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    if args.update_readme:
        update_readme(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
