"""A server stepping one thread for a long time: its memory (issue 43).

    python benchmarks/server_rss.py                       # 10,000 steps (make bench)
    python benchmarks/server_rss.py --steps 2000 --every 500
    python benchmarks/server_rss.py --quick               # 120 steps: a smoke run

``tether serve --agent server_rss_agent:agent`` (a ``ScriptedModel`` agent with one rule,
the whole buffer, on a SQLite file of its own) in its own process; this process steps
one thread over HTTP (one kept-alive ``httpx.Client``, one step at a time, the 200-byte
messages of ``agent_turn.py``) ``--steps`` times and reads the server's resident memory
(``VmRSS`` of its process, from /proc) after step 100 and every ``--every`` steps, and
the p50 of the steps' wall time in each stretch. The goal: RSS after the last step at
most 1.5x RSS after step 100 (the server keeps a whole-buffer view of the thread between
steps, so what it holds a turn is what grows).

``--json FILE`` writes the figures; ``--update-readme`` rewrites the README section
between ``<!-- server-rss:start -->`` and ``<!-- server-rss:end -->``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
README = ROOT / "README.md"
START, END = "<!-- server-rss:start -->", "<!-- server-rss:end -->"
TETHER = Path(sys.executable).with_name("tether")
BASE = 100  # the step whose RSS the last one is compared with
GOAL = 1.5


def log(msg: str) -> None:
    print(f"[server-rss] {msg}", file=sys.stderr, flush=True)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def user_message(turn: int) -> str:
    # agent_turn.py's message: 200 bytes, each turn's its own.
    return (f"[user t #{turn}] What is the weather in Paris? " + "x" * 200)[:200]


def checkpoints(steps: int, every: int) -> list[int]:
    """The steps after which RSS is read: BASE (when there), every ``every``, the last."""
    points = {s for s in range(every, steps + 1, every)} | {steps}
    if steps >= BASE:
        points.add(BASE)
    return sorted(points)


def run(steps: int, every: int, tmp: Path) -> dict[str, Any]:
    token = "bench-" + uuid.uuid4().hex
    env = {**os.environ, "TETHER_TOKEN": token}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH), env.get("PYTHONPATH", "")) if p)
    argv = [str(TETHER), "--store", f"sqlite:///{tmp / 'server.db'}", "serve", "--port", "0"]
    argv += ["--log-level", "warning", "--agent", "server_rss_agent:agent"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip().rstrip("/")
        if not url.startswith("http"):
            err = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
            raise RuntimeError(f"tether serve did not start (exit {proc.poll()}): {err[-400:]}")
        headers = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + 60
        with httpx.Client(headers=headers, timeout=120) as client:
            while True:
                try:
                    client.get(url + "/healthz")
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            start_rss = rss_mib(proc.pid)
            step_url = url + "/v1/ns/bench/threads/long/step"
            samples: list[dict[str, Any]] = []
            wanted = checkpoints(steps, every)
            lat: list[float] = []
            started = time.perf_counter()
            for k in range(1, steps + 1):
                t0 = time.perf_counter()
                r = client.post(step_url, json={"input": user_message(k)})
                lat.append((time.perf_counter() - t0) * 1000)
                r.raise_for_status()
                if k == wanted[0]:
                    wanted.pop(0)
                    samples.append(
                        {
                            "step": k,
                            "rss_mib": round(rss_mib(proc.pid), 1),
                            "step_p50_ms": round(statistics.median(lat), 2),
                        }
                    )
                    lat = []
                    log(f"  step {k:,}: RSS {samples[-1]['rss_mib']} MiB")
            elapsed = time.perf_counter() - started
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
    by_step = {s["step"]: s["rss_mib"] for s in samples}
    ratio = by_step[steps] / by_step[BASE] if BASE in by_step else None
    return {
        "steps": steps,
        "rss_start_mib": round(start_rss, 1),
        "samples": samples,
        "ratio": round(ratio, 3) if ratio is not None else None,
        "elapsed_s": round(elapsed, 1),
    }


def markdown(res: dict[str, Any]) -> str:
    r = res["result"]
    ratio = (
        f"**{r['ratio']:.2f}x** (goal <= {GOAL}x)" if r["ratio"] is not None else "- (under 100)"
    )
    lines = [
        f"`{res['command']}`, {res['date']}, {res['machine']}: RSS after step "
        f"{r['steps']:,} / after step {BASE}: {ratio}; {r['rss_start_mib']:.0f} MiB before "
        f"the first step, {r['elapsed_s']:.0f} s in all.",
        "",
        "| after step | server RSS MiB | step p50 ms (since the previous row) |",
        "|---:|---:|---:|",
    ]
    lines += [
        f"| {s['step']:,} | {s['rss_mib']:.1f} | {s['step_p50_ms']:.2f} |" for s in r["samples"]
    ]
    return "\n".join(lines)


def update_readme(section: str) -> None:
    import readme_section

    readme_section.replace(README, START, END, section)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--every", type=int, default=1000, help="read RSS every N steps too")
    p.add_argument("--quick", action="store_true", help="120 steps, RSS every 20: a smoke run")
    p.add_argument("--json", type=Path, metavar="FILE")
    p.add_argument("--update-readme", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.every = 120, 20
    if args.steps < 1 or args.every < 1:
        p.error("--steps and --every are at least 1")
    tmp = Path(tempfile.mkdtemp(prefix="tether-server-rss-"))
    try:
        log(f"tether serve --agent, one thread stepped {args.steps:,} times")
        result = run(args.steps, args.every, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benchmarks/server_rss.py " + " ".join(argv),
        "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "result": result,
    }
    md = markdown(res)
    print(md)
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    if args.update_readme:
        update_readme(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
