"""CPU time of the bench's phases for a few systems, alternating: figures a loaded machine
barely moves.

    .venv/bin/python benchmarks/cpu_pair.py --systems openai_sqlite,openai_tether_sqlite
    .venv/bin/python benchmarks/cpu_pair.py --systems adk_sqlite,adk_tether_sqlite --repeats 2

``run.py``'s figures are wall time: on a machine shared with other work they hold each
process's wait for a core and for the disk, and two runs of one system can differ by more
than two systems do. Here every phase of ``worker.py`` (A: one thread, B: threads
round-robin, C: a fresh process loading A's thread) runs in its own process, the
systems in turn, ``--repeats`` times, and what is reported is the process time the
worker measured around the system's own calls (``time.process_time``: CPU, user and
kernel, fsync's share included; waiting excluded): the median per turn of turns 1-10,
91-100 and the last ten of (A) and their sum, turns per CPU second over (B), and the
CPU of (C)'s load; the least of the repeats (load only adds CPU time), and bytes per
turn after (A). Same workload, systems and interpreters as ``run.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from systems import REGISTRY  # noqa: E402

PEERS_PY = BENCH / ".venv-peers" / "bin" / "python"


def _worker(system: str, phase: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    py = Path(sys.executable) if REGISTRY[system].venv == "tether" else PEERS_PY
    out = workdir / f"{phase}.json"
    cmd = [str(py), str(BENCH / "worker.py"), phase, "--system", system]
    cmd += ["--workdir", str(workdir / "data"), "--out", str(out), "--turns", str(args.turns)]
    cmd += ["--threads", str(args.threads), "--threads-turns", str(args.threads_turns)]
    subprocess.run(cmd, check=True, capture_output=True)
    result: dict[str, Any] = json.loads(out.read_text())
    if "error" in result:
        raise RuntimeError(f"{system} {phase}: {result['error']}")
    return result


def _window(cpu: list[float], lo: int, hi: int) -> float | None:
    part = cpu[lo:hi]
    return statistics.median(part) if len(part) == hi - lo else None


def run_once(system: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        a = _worker(system, "write", Path(tmp), args)
        loads = [_worker(system, "load", Path(tmp), args) for _ in range(args.load_runs)]
    with tempfile.TemporaryDirectory() as tmp:
        b = _worker(system, "threads", Path(tmp), args)
    cpu = a["cpu_ms"]
    return {
        "a_1_10": _window(cpu, 0, 10),
        "a_91_100": _window(cpu, 90, 100),
        "a_last": _window(cpu, len(cpu) - 10, len(cpu)),
        "a_total_s": sum(cpu) / 1e3,
        "b_turns_per_cpu_s": b["cpu_turns_per_s"],
        "c_load_cpu_ms": statistics.median(x["load_cpu_ms"] for x in loads),
        "bytes_per_turn": a["bytes_per_turn"],
    }


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The least CPU of each figure over the repeats (the most turns per CPU second)."""
    out: dict[str, Any] = {}
    for k in runs[0]:
        vals = [r[k] for r in runs if r[k] is not None]
        if not vals:
            out[k] = None
        elif k == "b_turns_per_cpu_s":
            out[k] = max(vals)
        else:
            out[k] = min(vals)
    return out


def table(figures: dict[str, dict[str, Any]], turns: int) -> list[str]:
    lines = [
        f"| system | A: CPU ms/turn @1-10 | @91-100 | @{turns - 9}-{turns} | A: CPU s in all "
        "| B: turns per CPU s | C: load CPU ms | bytes/turn |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def f(v: float | None, digits: int = 2) -> str:
        return "-" if v is None else f"{v:.{digits}f}"

    for name, r in figures.items():
        lines.append(
            f"| {REGISTRY[name].label} | {f(r['a_1_10'])} | {f(r['a_91_100'])} | "
            f"{f(r['a_last'])} | {f(r['a_total_s'])} | {f(r['b_turns_per_cpu_s'], 0)} | "
            f"{f(r['c_load_cpu_ms'])} | {r['bytes_per_turn']:.0f} B |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--systems", required=True, help="comma list of run.py's systems")
    p.add_argument("--turns", type=int, default=1000, help="(A) turns on one thread [1000]")
    p.add_argument("--threads", type=int, default=200, help="(B) threads [200]")
    p.add_argument("--threads-turns", type=int, default=20, help="(B) turns per thread [20]")
    p.add_argument("--repeats", type=int, default=2, help="runs of each system, alternating [2]")
    p.add_argument("--load-runs", type=int, default=3, help="(C) fresh processes per run [3]")
    p.add_argument("--json", default="", help="write the figures to this file")
    a = p.parse_args(argv)
    names = [n for n in a.systems.split(",") if n]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        p.error(f"unknown systems: {', '.join(unknown)}")
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for _ in range(a.repeats):
        for n in names:
            runs[n].append(run_once(n, a))
    figures = {n: best(rs) for n, rs in runs.items()}
    print("\n".join(table(figures, a.turns)))
    if a.json:
        Path(a.json).write_text(json.dumps({"best": figures, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
