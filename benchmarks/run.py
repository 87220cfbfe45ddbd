"""tether's side-by-side benchmark: one workload, every system, each in its own process.

    make bench                                   # = .venv/bin/python benchmarks/run.py
    python benchmarks/run.py --quick             # smoke run, well under a minute
    python benchmarks/run.py --systems sqlite_floor,langgraph_sqlite --turns 300
    python benchmarks/run.py --setup-peers       # only build benchmarks/.venv-peers
    python benchmarks/run.py --render out/results.json [--update-readme]  # re-print a run

Workload (messages of 200 bytes, see workload.py):
  (A) one thread, N turns (user + assistant), each durable before the next: median
      write latency of turns 1-10, 91-100 and N-9..N;
  (B) T threads x K turns, round-robin: turns per second;
  (C) a fresh process opens the store and loads the thread of (A): time, and a check
      that all 2N messages came back in order.
Plus bytes on disk per turn, and each system's durability setting as measured.

The peers (LangGraph, OpenAI Agents SDK, Google ADK, matplotlib) live in their own venv,
benchmarks/.venv-peers, built from benchmarks/peers/requirements.txt on first use; they
are never tether's dependencies. tether and the sqlite3 floor run on the interpreter
that runs this script. Every phase of every system is a separate subprocess
(worker.py), so no system's imports, caches or memory affect another's figures.

Output: a table on the terminal, benchmarks/out/results.json and
benchmarks/out/latency.png. With --update-readme (the default under ``make bench``
for a full default run) the chart and JSON are copied to docs/bench/ and the README
section between ``<!-- bench:start -->`` and ``<!-- bench:end -->`` is rewritten; when a
session pair (pairs.PAIRS: a peer session and tether's beside it) ran whole, its figures
go to docs/bench/pairs.json and the README section between ``<!-- bench-pairs:start -->``
and ``<!-- bench-pairs:end -->`` (pairs.py). A run of pair systems only writes that
section, and leaves the main one to a full run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import agent_turn  # noqa: E402
import floor  # noqa: E402
import floor_gap  # noqa: E402
import pairs  # noqa: E402
from precompile import compile_tether  # noqa: E402
from systems import ALL, REGISTRY  # noqa: E402
from systems.base import POSTGRES_URL  # noqa: E402
from verdict import agent_turn as agent_turn_verdict  # noqa: E402
from verdict import section as verdict  # noqa: E402

PEERS_VENV = BENCH / ".venv-peers"
PEERS_REQS = BENCH / "peers" / "requirements.txt"
PEERS_STAMP = PEERS_VENV / ".requirements.sha256"
README = ROOT / "README.md"
DOCS = ROOT / "docs" / "bench"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- the peers venv ----------------------------------------------------------------------


def peers_python(install: bool) -> tuple[Path | None, str]:
    """The peers venv's interpreter, building or updating it when allowed."""
    py = PEERS_VENV / "bin" / "python"
    want = hashlib.sha256(PEERS_REQS.read_bytes()).hexdigest()
    have = PEERS_STAMP.read_text().strip() if PEERS_STAMP.exists() else ""
    if py.exists() and have == want:
        return py, ""
    if not install:
        why = "missing" if not py.exists() else "out of date with peers/requirements.txt"
        return (py if py.exists() else None), f"peers venv {why} (--no-install)"
    log(f"building {PEERS_VENV.relative_to(ROOT)} from {PEERS_REQS.relative_to(ROOT)} ...")
    try:
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
            subprocess.run(
                [str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"],
                check=True,
            )
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "-r", str(PEERS_REQS)],
            check=True,
        )
    except (subprocess.CalledProcessError, OSError) as e:
        return None, f"could not build the peers venv: {e}"
    PEERS_STAMP.write_text(want + "\n")
    return py, ""


# --- running phases ----------------------------------------------------------------------


def run_phase(
    python: Path, phase: str, system: str, workdir: Path, out_dir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    out = out_dir / f"{system}.{phase}.json"
    logf = out_dir / f"{system}.{phase}.log"
    out.unlink(missing_ok=True)
    cmd = [
        str(python),
        str(BENCH / "worker.py"),
        phase,
        "--system",
        system,
        "--workdir",
        str(workdir),
        "--out",
        str(out),
        "--turns",
        str(args.turns),
        "--threads",
        str(args.threads),
        "--threads-turns",
        str(args.threads_turns),
        "--budget",
        str(args.budget),
    ]
    timeout = 3 * args.budget + 300 if args.budget else None
    t = time.perf_counter()
    try:
        with logf.open("w") as lf:
            proc = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s (log: {logf})"}
    wall = time.perf_counter() - t
    if not out.exists():
        tail = logf.read_text()[-800:]
        return {"error": f"worker exited {proc.returncode} without a result: {tail}"}
    res: dict[str, Any] = json.loads(out.read_text())
    res["process_wall_s"] = wall
    return res


def window(lat: list[float], a: int, b: int) -> float | None:
    xs = lat[a - 1 : b]
    return statistics.median(xs) if xs and len(xs) == b - a + 1 else None


def windows(turns: int) -> list[tuple[int, int]]:
    ws: list[tuple[int, int]] = []
    for a, b in ((1, 10), (91, 100), (turns - 9, turns)):
        if a >= 1 and b <= turns and (a, b) not in ws:
            ws.append((a, b))
    return ws


def bench_system(
    name: str, python: Path | None, why_not: str, args: argparse.Namespace, out_dir: Path
) -> dict[str, Any]:
    entry = REGISTRY[name]
    res: dict[str, Any] = {
        "system": name,
        "label": entry.label,
        "venv": entry.venv,
        "backend": entry.backend,
    }
    if python is None:
        res["skipped"] = why_not
        log(f"  {name}: skipped: {why_not}")
        return res
    work = out_dir / "work" / name
    try:
        log(f"  {name}: (A) {args.turns} turns on one thread ...")
        a = run_phase(python, "write", name, work / "a", out_dir, args)
        res["write"] = a
        if _stop(res, a):
            return res
        lat = a["latencies_ms"]
        res["windows"] = {f"{x}-{y}": window(lat, x, y) for x, y in windows(args.turns)}
        log(
            f"  {name}: (A) {a['turns']} turns in {a['total_s']:.1f} s"
            + (" (capped)" if a["capped"] else "")
        )
        log(f"  {name}: (C) load in a fresh process, {args.load_runs} times ...")
        load_args = argparse.Namespace(**{**vars(args), "turns": a["turns"]})
        runs: list[dict[str, Any]] = []
        for _ in range(args.load_runs):
            c = run_phase(python, "load", name, work / "a", out_dir, load_args)
            if _stop(res, c):
                res["load"] = c
                return res
            runs.append(c)
        # One cold process is one sample of a few milliseconds on a shared machine: the
        # figure is the run with the median total, every run's total kept beside it.
        runs.sort(key=lambda r: float(r["total_ms"]))
        c = {**runs[len(runs) // 2], "runs_total_ms": [r["total_ms"] for r in runs]}
        c["in_order"] = all(r["in_order"] for r in runs)
        res["load"] = c
        log(
            f"  {name}: (C) {c['messages']} messages in {c['total_ms']:.1f} ms (median of "
            f"{len(runs)}), in order: {c['in_order']}"
        )
        log(f"  {name}: (B) {args.threads} threads x {args.threads_turns} turns ...")
        b = run_phase(python, "threads", name, work / "b", out_dir, args)
        res["threads"] = b
        if _stop(res, b):
            return res
        log(f"  {name}: (B) {b['turns_per_s']:.0f} turns/s")
    finally:
        if not args.keep_data:
            run_phase(python, "cleanup", name, work / "b", out_dir, args)
            shutil.rmtree(work, ignore_errors=True)
    return res


def _stop(res: dict[str, Any], phase: dict[str, Any]) -> bool:
    for key in ("skipped", "error"):
        if key in phase:
            res[key] = phase[key]
            log(f"  {res['system']}: {key}: {phase[key]}")
            return True
    return False


# --- machine and meta --------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    mem = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
    }


def fsync_ms(folder: Path, n: int = 200) -> float:
    """Median cost of one 4 KiB write + fdatasync in ``folder``: the disk's floor for any
    durable commit here."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    times = []
    try:
        for i in range(n):
            t = time.perf_counter()
            os.pwrite(fd, b"x" * 4096, (i % 16) * 4096)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return round(statistics.median(times) * 1e3, 3)


def command(argv: list[str]) -> str:
    if os.environ.get("MAKELEVEL") and not argv:
        return "make bench"
    return shlex.join(["python", "benchmarks/run.py", *argv])


# --- output ------------------------------------------------------------------------------


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _bytes(v: float | None) -> str:
    if v is None:
        return "-"
    for unit, k in (("MB", 1e6), ("kB", 1e3)):
        if v >= k:
            return f"{v / k:.1f} {unit}"
    return f"{v:.0f} B"


def rows(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    ws = windows(results["meta"]["workload"]["turns"])
    head = ["system", *[f"A: ms/turn @{a}-{b}" for a, b in ws]]
    head += ["B: turns/s", "C: load ms", "C: all in order", "bytes/turn", "durability"]
    body: list[list[str]] = []
    for s in results["systems"]:
        if "skipped" in s or ("error" in s and "write" not in s):
            why = s.get("skipped") or "error: " + s.get("error", "")
            body.append([s["label"], *["-"] * (len(head) - 2), f"skipped: {why[:120]}"])
            continue
        a, b, c = s.get("write") or {}, s.get("threads") or {}, s.get("load") or {}
        w = s.get("windows") or {}
        row = [s["label"]]
        row += [_ms(w.get(f"{x}-{y}")) for x, y in ws]
        row.append(f"{b['turns_per_s']:.0f}" if b.get("turns_per_s") else "-")
        row.append(_ms(c.get("total_ms")))
        if c:
            ok = "yes" if c.get("in_order") else "NO"
            row.append(f"{ok} ({c.get('messages')}/{c.get('expected')})")
        else:
            row.append("-")
        row.append(_bytes(a.get("bytes_per_turn")))
        d = a.get("durability") or {}
        row.append(str(d.get("setting", "?")) + ("" if d.get("strongest") else " (weaker)"))
        if "error" in s:
            row[-1] += f"; error: {s['error'][:60]}"
        body.append(row)
    return head, body


def print_table(results: dict[str, Any]) -> None:
    head, body = rows(results)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
        for r in [head, *body]:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
        return
    t = Table(title="tether side-by-side benchmark", show_lines=False)
    for i, h in enumerate(head):
        t.add_column(h, justify="left" if i in (0, len(head) - 1) else "right")
    for r in body:
        t.add_row(*r)
    Console(width=200).print(t)


def notes(results: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for s in results["systems"]:
        a = s.get("write") or {}
        d = a.get("durability") or {}
        bits = []
        if d:
            bits.append(f"durability: {d.get('setting')} — {d.get('note')}")
        if a.get("capped"):
            bits.append(
                f"(A) capped at {a['turns']} of {a['turns_requested']} turns "
                f"(time budget {results['meta']['workload']['budget_s']:.0f} s)"
            )
        if (s.get("threads") or {}).get("capped"):
            bits.append("(B) capped by the time budget")
        if "import_ms" in (s.get("load") or {}):
            bits.append(f"library import before (C): {s['load']['import_ms']:.0f} ms (not counted)")
        if s.get("skipped"):
            bits.append(f"skipped: {s['skipped']}")
        if s.get("error"):
            bits.append(f"error: {s['error'][:200]}")
        bits.extend(a.get("remarks") or [])
        v = a.get("versions") or {}
        if v:
            bits.append(", ".join(f"{k} {x}" for k, x in v.items()))
        out.append(f"- **{s['label']}**: " + "; ".join(bits))
    return out


def markdown(results: dict[str, Any], chart: str) -> str:
    meta = results["meta"]
    m = meta["machine"]
    wl = meta["workload"]
    head, body = rows(results)
    lines = [
        START,
        "",
        f"Measured {meta['date']} on {m['nproc']} cores ({m['cpu']}), {m['memory']} RAM, "
        f"{m['os']}, Python {m['python']}, SQLite {m['sqlite']}"
        + (f", PostgreSQL {meta['postgres']}" if meta.get("postgres") else "")
        + f"; one 4 KiB write + fdatasync on this disk: {m.get('fdatasync_4k_ms', '?')} ms "
        f"(median); 1-minute load average {m.get('loadavg_1m_at_start', '?')} at the start, "
        f"{m.get('loadavg_1m_at_end', '?')} at the end. Command: `{meta['command']}`.",
        "",
        f"Workload: messages of {wl['message_bytes']} bytes. (A) one thread, {wl['turns']} "
        "turns of user + assistant, each durable before the next: median write latency per "
        f"turn. (B) {wl['threads']} threads x {wl['threads_turns']} turns, round-robin. "
        "(C) a fresh process opens the store and loads the thread of (A) (interpreter start "
        "and library import not counted for any system; each import time is listed below; "
        f"{meta.get('bytecode', 'bytecode as installed')}; the median of "
        f"{wl.get('load_runs', 1)} such processes). Bytes on disk per turn after "
        "(A): SQLite files "
        "incl. WAL after a TRUNCATE checkpoint; PostgreSQL: pg_total_relation_size of the "
        "system's tables. Every system and phase runs in its own process.",
        "",
        "| " + " | ".join(head) + " |",
        "|"
        + "|".join("---" if i in (0, len(head) - 1) else "---:" for i in range(len(head)))
        + "|",
        *["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in body],
        "",
        f"![write latency against history length]({chart})",
        "",
        "In the SQLite lines, the step down a few hundred turns in is the WAL's first "
        "automatic checkpoint (at 1,000 pages): until then every commit extends the WAL "
        "file, and extending a file costs each fsync a metadata update; afterwards the WAL "
        "is rewritten in place. Each system gets there after its own number of turns, as "
        "each writes different pages per turn.",
        "",
        *notes(results),
        "",
        "**Where tether is slower, and why.** Computed from this run: every figure where a "
        "tether system is behind a peer on the same backend, with the reason.",
        "",
        *verdict(results),
        "",
        *floor_section(results),
        *floor_gap_section(results),
        *agent_turn_section(results),
        "Raw figures, per-turn latencies included: "
        "[docs/bench/results.json](docs/bench/results.json). "
        "Rerun with `make bench` (peers install into `benchmarks/.venv-peers`).",
        "",
        END,
    ]
    return "\n".join(lines)


def floor_section(results: dict[str, Any]) -> list[str]:
    """The two floors of issue 40 (benchmarks/floor.py) of this run, if it ran."""
    fl = results.get("floor")
    if not fl or "error" in fl:
        return []
    m = fl["meta"]
    return [
        "**tether against the two floors** (`benchmarks/floor.py`, each system in its own "
        "process, WAL at synchronous FULL and NORMAL): the *plain floor* stores the turn as "
        "a hand-written app would (two rows, orjson payloads) and its cold load "
        "`orjson.loads` every payload; the *identity floor* adds the identity rule's own "
        "work per node in bare Python (canonical JSON, SHA-256). Write latency: the median "
        f"turn of each range, the median of {m['repeats']} processes; threads: the best "
        f"process; cold load: the least of {m['load_runs']} fresh processes.",
        "",
        *floor.table(fl),
        "",
        "Where tether's time goes (us per turn over the turns no other process held up; "
        "SQL: every statement on the store's connection, the fsync included at FULL; "
        "codec: orjson of the payloads; identity: canonical JSON and SHA-256; the cold "
        "read's SQL is its own SELECT stepped by bare sqlite3):",
        "",
        *floor.split_lines(fl),
        "",
    ]


def floor_gap_section(results: dict[str, Any]) -> list[str]:
    """The floor-gap table (benchmarks/floor_gap.py) of this run, if it ran."""
    gap = results.get("floor_gap")
    if not gap or "error" in gap:
        return []
    m = gap["meta"]
    return [
        "**Where tether's gap to the floor goes** (`benchmarks/floor_gap.py`, the same "
        "workload and adapters, each measurement in its own process): WAL frames (pages) "
        "per commit, by table or index, counted in the WAL file's frame headers and mapped "
        "with `dbstat`, over the second half of each workload; SQL statements per turn "
        "from SQLite's statement trace (counts, exact); CPU time per turn (`process_time`, "
        f"the least of {m['repeats']} processes; wall, the median, in brackets) at "
        "synchronous=NORMAL (no fsync) and FULL, tether's split into SQLite (its own "
        "recorded statements replayed through the bare sqlite3 module on an identical file) "
        "and Python (the rest), the floor's replayed the same way as a check; a cold open "
        f"and read in a fresh process (wall and CPU time, median of {m['load_runs']}), "
        "tether's read split into the SQL of `store.nodes` alone and its decoding into "
        "`CausalNode`s, beside `store.payloads`.",
        "",
        *floor_gap.table(gap),
        "",
    ]


def agent_turn_section(results: dict[str, Any]) -> list[str]:
    """The agent-turn table (benchmarks/agent_turn.py) of this run, if it ran."""
    turn = results.get("agent_turn")
    if not turn:
        return []
    return [
        "**One agent turn, three agent loops** (`benchmarks/agent_turn.py`): each loop with "
        "a fake model that answers at once, on one SQLite file in WAL mode with "
        "synchronous=FULL (read back from the live connection); `plain`: the model answers, "
        "`tool`: it calls one tool, then answers. Median of "
        f"{turn['samples']} turns timed one by one on a thread already holding H turns. "
        "tether and the SDK reach H by running turns, LangGraph by one `update_state` with "
        "the same messages. In brackets: the process's CPU time per turn (median). Commits and "
        "SQL statements per turn: counted with SQLite's statement trace on every connection "
        "the system opened, over 5 more turns (each commit is one fsync of the WAL). RSS: "
        "the process's resident memory after the run.",
        "",
        *agent_turn.table(turn),
        "",
        "**Where tether's turn is slower, and why** (computed from this run):",
        "",
        *agent_turn_verdict(turn),
        "",
        *long_turn_section(results),
    ]


def long_turn_section(results: dict[str, Any]) -> list[str]:
    """The long-thread table (benchmarks/agent_turn.py --long) of this run, if it ran."""
    turn = results.get("agent_turn_long")
    if not turn:
        return []
    last = turn["histories"][-1]
    return [
        f"**One turn on a thread of {last:,} turns** (`benchmarks/agent_turn.py --long "
        f"{last}`): the plain workload at 10 turns and at {last:,}, median of "
        f"{turn['samples']} turns. tether's threads are seeded by a Window agent at "
        "durability=normal (the same nodes), then timed at durability=full; the peers as "
        "above. tether's own part of a turn is the turn less the scripted model's own time "
        "(wall, and CPU in brackets: the fsyncs and a busy machine disturb wall time far "
        "more). `no kept view`: every whole-buffer view reads and projects the thread again, "
        "as before issue 43. The scripted model reads every message of its request (a word "
        "count, a scan for tool results): on a long thread that pass evicts tether's working "
        "set from the CPU caches and the misses it leaves land in tether's part, which "
        "subtracting the model's own time does not remove; the column after the ratio is "
        "tether's own CPU with the same agent answering through a model that reads only the "
        "latest message.",
        "",
        *agent_turn.long_table(turn),
        "",
    ]


def update_readme(section: str) -> None:
    text = README.read_text() if README.exists() else "# tether\n"
    if START in text and END in text:
        pre, rest = text.split(START, 1)
        post = rest.split(END, 1)[1]
        text = pre + section + post
    else:
        text = text.rstrip("\n") + "\n\n## Benchmarks\n\n" + section + "\n"
    README.write_text(text)


# --- main --------------------------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--systems", default=",".join(ALL), help=f"comma list from: {', '.join(ALL)}")
    p.add_argument("--turns", type=int, default=None, help="(A) turns on one thread [1000]")
    p.add_argument("--threads", type=int, default=None, help="(B) threads [200]")
    p.add_argument("--threads-turns", type=int, default=None, help="(B) turns per thread [20]")
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds per phase before (A)/(B) stop early and say so [600; quick: 15]",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: 100 turns, 20x5 threads")
    p.add_argument(
        "--load-runs",
        type=int,
        default=None,
        help="(C) fresh processes per system; the median is reported [5; quick: 1]",
    )
    p.add_argument("--out", default=str(BENCH / "out"), help="output folder [benchmarks/out]")
    p.add_argument(
        "--update-readme",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="copy chart + JSON to docs/bench/ and rewrite the README section "
        "[on under `make bench` for a full default run]",
    )
    p.add_argument("--no-install", action="store_true", help="never build the peers venv")
    p.add_argument(
        "--agent-turn",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run benchmarks/agent_turn.py [on for the default systems]",
    )
    p.add_argument(
        "--long-thread",
        type=int,
        default=None,
        metavar="N",
        help="with the agent turn, a thread of N turns too (agent_turn.py --long N) "
        f"[{agent_turn.LONG:,}; {agent_turn.QUICK_LONG} with --quick; 0: none]",
    )
    p.add_argument(
        "--floor",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run benchmarks/floor.py [on when tether_sqlite runs]",
    )
    p.add_argument(
        "--floor-gap",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run benchmarks/floor_gap.py [on when tether_sqlite and sqlite_floor run]",
    )
    p.add_argument(
        "--langgraph-replay",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run benchmarks/langgraph_replay.py [on when langgraph_sqlite and "
        "langgraph_tether_sqlite run]",
    )
    p.add_argument(
        "--http",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run benchmarks/http_service.py (tether serve against its parts) "
        "[on for the default systems]",
    )
    p.add_argument(
        "--prune",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run benchmarks/prune.py (a long thread after compact + prune against a "
        "fresh one) [on for the default systems]",
    )
    p.add_argument(
        "--cold-floor",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run benchmarks/cold_floor.py (a 10,000-turn agent thread's cold load "
        "against bare sqlite3 + orjson; 50 turns with --quick) [on for the default systems]",
    )
    p.add_argument(
        "--server-rss",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run benchmarks/server_rss.py (a server stepping one thread 10,000 times; "
        "120 with --quick) [on for the default systems]",
    )
    p.add_argument("--setup-peers", action="store_true", help="build the peers venv and exit")
    p.add_argument("--keep-data", action="store_true", help="keep the stores in out/work")
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run every system this many times, in turn; the session pairs' README table "
        "takes each figure's best (a loaded machine only adds time) [1]",
    )
    p.add_argument(
        "--render",
        metavar="JSON",
        help="only re-print a saved results.json, redraw its chart (and, with "
        "--update-readme, rewrite the README section from it)",
    )
    args = p.parse_args(argv)
    q = args.quick
    args.turns = args.turns or (100 if q else 1000)
    args.threads = args.threads or (20 if q else 200)
    args.threads_turns = args.threads_turns or (5 if q else 20)
    args.budget = args.budget if args.budget is not None else (15.0 if q else 600.0)
    args.load_runs = max(1, args.load_runs or (1 if q else 5))
    if args.agent_turn is None:
        args.agent_turn = args.systems == ",".join(ALL)
    if args.http is None:
        args.http = args.systems == ",".join(ALL)
    if args.prune is None:
        args.prune = args.systems == ",".join(ALL)
    if args.server_rss is None:
        args.server_rss = args.systems == ",".join(ALL)
    if args.cold_floor is None:
        args.cold_floor = args.systems == ",".join(ALL)
    if args.long_thread is None:
        args.long_thread = agent_turn.QUICK_LONG if args.quick else agent_turn.LONG
    chosen = {n.strip() for n in args.systems.split(",")}
    if args.floor_gap is None:
        args.floor_gap = {"tether_sqlite", "sqlite_floor"} <= chosen
    if args.floor is None:
        args.floor = "tether_sqlite" in chosen
    if args.langgraph_replay is None:
        args.langgraph_replay = {"langgraph_sqlite", "langgraph_tether_sqlite"} <= chosen
    if args.turns < 10:
        p.error("--turns must be at least 10")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.setup_peers:
        py, why = peers_python(install=True)
        log(f"peers venv: {py}" if py else why)
        return 0 if py else 1
    if args.render:
        return render(Path(args.render), Path(args.out).resolve(), update=bool(args.update_readme))
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        log(f"unknown systems: {', '.join(unknown)}; known: {', '.join(ALL)}")
        return 2
    out_dir = Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    # Built only when a peer system runs; otherwise used, if there, for the chart.
    need_peers = any(REGISTRY[n].venv == "peers" for n in names)
    peers_py, peers_why = peers_python(install=need_peers and not args.no_install)

    started = time.perf_counter()
    bytecode = compile_tether()
    mach = machine()
    mach["fdatasync_4k_ms"] = fsync_ms(out_dir / "work")
    systems: list[dict[str, Any]] = []
    # --repeats: the systems run again in the same order, so a pair's two systems
    # alternate; the later runs ride along with the first (pairs.py takes each figure's
    # best), the main table shows the first.
    for rep in range(max(1, args.repeats)):
        for i, n in enumerate(names):
            py = Path(sys.executable) if REGISTRY[n].venv == "tether" else peers_py
            res = bench_system(n, py, peers_why, args, out_dir)
            if rep == 0:
                systems.append(res)
            else:
                systems[i].setdefault("repeats", []).append(res)
    turn: dict[str, Any] | None = None
    if args.agent_turn:
        log("agent turn (benchmarks/agent_turn.py) ...")
        if peers_py is None:
            peers_py, peers_why = peers_python(install=not args.no_install)
        turn = agent_turn.run_all(
            list(agent_turn.SYSTEMS),
            list(agent_turn.WORKLOADS),
            list(agent_turn.QUICK_HISTORIES if args.quick else agent_turn.HISTORIES),
            3 if args.quick else 20,
            {"tether": Path(sys.executable), "peers": peers_py},
            out_dir,
            log=log,
        )
    long_turn: dict[str, Any] | None = None
    if args.agent_turn and args.long_thread:
        log(f"agent turn on a long thread (benchmarks/agent_turn.py --long {args.long_thread}) ...")
        long_turn = agent_turn.run_all(
            agent_turn.long_systems(),
            ["plain"],
            [10, args.long_thread],
            3 if args.quick else 10,
            {"tether": Path(sys.executable), "peers": peers_py},
            out_dir / "long",
            log=log,
            fast_seed=True,
        )

    fl = _floor_run(floor, "the two floors (benchmarks/floor.py)", args) if args.floor else None
    gap = (
        _floor_run(floor_gap, "floor gap (benchmarks/floor_gap.py)", args)
        if args.floor_gap
        else None
    )

    replays: list[dict[str, Any]] | dict[str, Any] | None = None
    cold: dict[str, Any] | None = None
    if args.langgraph_replay:
        log("langgraph replay (benchmarks/langgraph_replay.py) ...")
        try:
            replays = langgraph_replays(out_dir, quick=args.quick)
        except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as e:
            replays = {"error": str(e)[-800:]}
            log(f"  langgraph replay: error: {e}")
        try:
            cold = langgraph_cold(out_dir, quick=args.quick, turns=args.turns)
        except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as e:
            cold = {"error": str(e)[-800:]}
            log(f"  langgraph cold read: error: {e}")

    pg = next(
        (
            s["write"]["versions"].get("postgres")
            for s in systems
            if (s.get("write") or {}).get("versions", {}).get("postgres")
        ),
        None,
    )
    results: dict[str, Any] = {
        "meta": {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": command(argv),
            "machine": {**mach, "loadavg_1m_at_end": round(os.getloadavg()[0], 2)},
            "postgres": pg,
            "peers_python": str(peers_py) if peers_py else None,
            "bytecode": bytecode,
            "workload": {
                "message_bytes": 200,
                "turns": args.turns,
                "threads": args.threads,
                "threads_turns": args.threads_turns,
                "budget_s": args.budget,
                "quick": args.quick,
                "load_runs": args.load_runs,
                "repeats": args.repeats,
            },
            "elapsed_s": round(time.perf_counter() - started, 1),
        },
        "systems": systems,
    }
    if turn is not None:
        results["agent_turn"] = turn
    if long_turn is not None:
        results["agent_turn_long"] = long_turn
    if fl is not None:
        results["floor"] = fl
    if gap is not None:
        results["floor_gap"] = gap
    if replays is not None:
        results["langgraph_replay"] = replays
    if cold is not None:
        results["langgraph_cold"] = cold
    rj = out_dir / "results.json"
    rj.write_text(json.dumps(results, indent=1))
    update = args.update_readme
    if update is None:
        full = not args.quick and names == ALL and args.turns == 1000
        update = bool(os.environ.get("MAKELEVEL")) and full
    # A run of session pairs only: their section, not the main one (a full run's).
    pairs_only = all(n in pairs.SYSTEMS for n in names)
    report(results, rj, peers_py, update=update and not pairs_only)
    if update and pairs.update(results, README):
        log(f"updated {README.relative_to(ROOT)}'s session pairs and docs/bench/pairs.json")
    if args.http:
        http_service(out_dir, quick=args.quick, update=update)
    if args.prune:
        prune_bench(out_dir, quick=args.quick, update=update)
    if args.server_rss:
        server_rss(out_dir, quick=args.quick, update=update)
    if args.cold_floor:
        cold_floor(out_dir, quick=args.quick, update=update)
    log(f"done in {results['meta']['elapsed_s']:.0f} s")
    return 0


def _floor_run(module: Any, what: str, args: argparse.Namespace) -> dict[str, Any]:
    """``module.run_all`` (floor.py or floor_gap.py) on the run's workload; its error, if
    it fails, stands in the results instead of stopping the run."""
    log(f"{what} ...")
    try:
        result: dict[str, Any] = module.run_all(
            turns=args.turns,
            threads=args.threads,
            threads_turns=args.threads_turns,
            repeats=1 if args.quick else 3,
            load_runs=args.load_runs,
            log=log,
        )
    except (RuntimeError, subprocess.SubprocessError) as e:
        log(f"  {what}: error: {e}")
        return {"error": str(e)[-800:]}
    return result


def http_service(out_dir: Path, *, quick: bool, update: bool) -> None:
    """benchmarks/http_service.py in its own process (it starts servers of its own), with
    PostgreSQL too; its table goes into its own README section."""
    log("service path (benchmarks/http_service.py) ...")
    argv = [sys.executable, str(BENCH / "http_service.py"), "--json", str(out_dir / "http.json")]
    argv += ["--postgres", POSTGRES_URL]
    argv += ["--quick"] if quick else []
    argv += ["--update-readme"] if update else []
    if subprocess.run(argv, check=False).returncode != 0:
        log("  http_service.py failed (its output is above)")


def prune_bench(out_dir: Path, *, quick: bool, update: bool) -> None:
    """benchmarks/prune.py in its own process: a long thread after compact + prune against
    a fresh thread of the same messages; its table goes into its own README section."""
    log("after compact + prune (benchmarks/prune.py) ...")
    argv = [sys.executable, str(BENCH / "prune.py"), "--json", str(out_dir / "prune.json")]
    # 10,000 turns: about 2 minutes of CPU to build (the README's table has it).
    argv += ["--forget-runs"] + (["--quick"] if quick else ["--turns", "1000,10000"])
    argv += ["--update-readme"] if update else []
    if subprocess.run(argv, check=False).returncode != 0:
        log("  prune.py failed (its output is above)")


def server_rss(out_dir: Path, *, quick: bool, update: bool) -> None:
    """benchmarks/server_rss.py in its own process (it starts the server); its table goes
    into its own README section."""
    log("a server stepping one thread (benchmarks/server_rss.py) ...")
    argv = [sys.executable, str(BENCH / "server_rss.py"), "--json", str(out_dir / "rss.json")]
    argv += ["--quick"] if quick else []
    argv += ["--update-readme"] if update else []
    if subprocess.run(argv, check=False).returncode != 0:
        log("  server_rss.py failed (its output is above)")


def cold_floor(out_dir: Path, *, quick: bool, update: bool) -> None:
    """benchmarks/cold_floor.py in its own process: a 10,000-turn agent thread's cold load
    against the floor (its file built once and kept under out/cold_floor); its table goes
    into its own README section."""
    log("a long thread's cold load against its floor (benchmarks/cold_floor.py) ...")
    argv = [sys.executable, str(BENCH / "cold_floor.py"), "--json", str(out_dir / "cold.json")]
    argv += ["--quick"] if quick else []
    argv += ["--update-readme"] if update else []
    if subprocess.run(argv, check=False).returncode != 0:
        log("  cold_floor.py failed (its output is above)")


# (turns, threads) of each replay: (A)'s first turns (short threads, 20 of them for a
# sample of 1,200 calls), and (B) as make bench runs it (200 threads x 20 turns).
REPLAYS = ((10, 20), (20, 200))
QUICK_REPLAYS = ((3, 2),)


def _replay_script(path: Path, *args: str) -> Any:
    """Run ``benchmarks/langgraph_replay.py`` with ``args`` in its own process; what it
    wrote to ``path`` (``--json``)."""
    subprocess.run(
        [sys.executable, str(BENCH / "langgraph_replay.py"), *args, "--json", str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(path.read_text())


def langgraph_replays(out_dir: Path, *, quick: bool) -> list[dict[str, Any]]:
    """``benchmarks/langgraph_replay.py`` at each of ``REPLAYS``, each in its own
    process (the best of 3 replays; quick: one small replay)."""
    out: list[dict[str, Any]] = []
    for turns, threads in QUICK_REPLAYS if quick else REPLAYS:
        out += _replay_script(
            out_dir / f"langgraph_replay_{turns}x{threads}.json",
            *("--turns", str(turns), "--threads", str(threads)),
            *("--repeats", "1" if quick else "3"),
        )
    return out


def langgraph_cold(out_dir: Path, *, quick: bool, turns: int) -> dict[str, Any]:
    """``benchmarks/langgraph_replay.py --cold``: a thread as long as (A)'s, read cold
    in fresh processes (5 each; quick: 20 turns, one each)."""
    cold: dict[str, Any] = _replay_script(
        out_dir / "langgraph_cold.json",
        *("--cold", str(20 if quick else turns), "--cold-runs", "1" if quick else "5"),
    )
    return cold


def report(results: dict[str, Any], rj: Path, peers_py: Path | None, *, update: bool) -> None:
    """Table and verdict on the terminal, the chart next to ``rj``, and the README."""
    print_table(results)
    print("\nWhere tether is slower, and why:")
    print("\n".join(verdict(results)) or "- (no tether system ran)")
    fl = results.get("floor")
    if fl and "error" not in fl:
        print("\ntether against the two floors (benchmarks/floor.py):")
        print("\n".join(floor.table(fl)))
        print("\n".join(floor.split_lines(fl)))
    gap = results.get("floor_gap")
    if gap and "error" not in gap:
        print("\nWhere tether's gap to the sqlite3 floor goes (benchmarks/floor_gap.py):")
        print("\n".join(floor_gap.table(gap)))
    log(f"results: {rj}")

    png = rj.parent / "latency.png"
    chart_py = peers_py or Path(sys.executable)
    r = subprocess.run(
        [str(chart_py), str(BENCH / "chart.py"), str(rj), str(png)],
        capture_output=True,
        text=True,
    )
    if r.returncode == 0:
        log(f"chart:   {png}")
    else:
        log(f"chart not drawn (matplotlib lives in the peers venv): {r.stderr.strip()[-300:]}")

    if update:
        DOCS.mkdir(parents=True, exist_ok=True)
        if png.exists():
            shutil.copyfile(png, DOCS / "latency.png")
        (DOCS / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        update_readme(markdown(results, "docs/bench/latency.png"))
        log(f"updated {README.relative_to(ROOT)} and {DOCS.relative_to(ROOT)}/")


def render(path: Path, out_dir: Path, *, update: bool) -> int:
    """Re-print a saved run (and redraw its chart, and rewrite the README with
    --update-readme): the figures are the run's own, its date and command included."""
    results = json.loads(path.read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    rj = out_dir / "results.json"
    if rj.resolve() != path.resolve():
        rj.write_text(json.dumps(results, indent=1))
    py = PEERS_VENV / "bin" / "python"
    report(results, rj, py if py.exists() else None, update=update)
    return 0


if __name__ == "__main__":
    sys.exit(main())
