"""The session pairs' README tables: each peer session beside tether's, before and after.

``run.py --update-readme`` calls ``update`` when a pair of ``PAIRS`` ran whole (both
systems, every phase): its figures are kept in ``docs/bench/pairs.json`` with the run's
date, commit and load, beside the pair's previous run (two runs a pair, no more), and
the README section between ``<!-- bench-pairs:start -->`` and ``<!-- bench-pairs:end
-->`` is written from that file: for each pair its previous run ("before") and this one
("after"), every figure as wall time and, after the slash, the CPU time the worker
measured around the system's own calls (``time.process_time``: user and kernel, an
fsync's own share included). What a turn's wall time holds beyond its CPU is waiting:
for the disk's fsync and, on a shared machine, for a core. A run of pair systems only
writes this section and leaves the main one (``<!-- bench:start -->``) to a full run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PAIRS_JSON = ROOT / "docs" / "bench" / "pairs.json"
START, END = "<!-- bench-pairs:start -->", "<!-- bench-pairs:end -->"
KEEP = 2  # runs kept a pair: before and after

# (peer, tether): each tether session beside what it replaces, on the same backend.
PAIRS: tuple[tuple[str, str], ...] = (
    ("openai_sqlite", "openai_tether_sqlite"),
    ("adk_sqlite", "adk_tether_sqlite"),
    ("openai_sqlalchemy_postgres", "openai_tether_postgres"),
    ("openai_redis", "openai_tether_redis"),
)
SYSTEMS = frozenset(n for pair in PAIRS for n in pair)


def _median(xs: list[float], a: int, b: int) -> float | None:
    part = xs[a - 1 : b]
    return statistics.median(part) if part and len(part) == b - a + 1 else None


def figures(res: dict[str, Any]) -> dict[str, Any] | None:
    """One system's figures from its run.py result, or None if a phase is missing; with
    ``--repeats``, each figure's best over the runs that went whole (the least time, the
    most turns per second): a loaded machine only adds time."""
    runs = [f for f in map(_one, [res, *res.get("repeats", [])]) if f is not None]
    if not runs:
        return None
    out = runs[0]

    def best(vals: list[list[float | None]], up: bool) -> list[float | None]:
        cols = []
        for k in range(2):
            xs = [v[k] for v in vals if v[k] is not None]
            cols.append((max(xs) if up else min(xs)) if xs else None)
        return cols

    for w in out["windows"]:
        out["windows"][w] = best([r["windows"][w] for r in runs if w in r["windows"]], False)
    out["a_total_s"] = best([r["a_total_s"] for r in runs], False)
    out["b_turns_per_s"] = best([r["b_turns_per_s"] for r in runs], True)
    out["c_load_ms"] = best([r["c_load_ms"] for r in runs], False)
    out["in_order"] = all(r["in_order"] for r in runs)
    out["runs"] = len(runs)
    return out


def _one(res: dict[str, Any]) -> dict[str, Any] | None:
    """The figures of one run of a system, or None if a phase is missing."""
    a, b, c = res.get("write"), res.get("threads"), res.get("load")
    if not a or not b or not c or any("error" in x or "skipped" in x for x in (a, b, c)):
        return None
    lat, cpu = a["latencies_ms"], a.get("cpu_ms") or []
    n = len(lat)
    wins = [(x, y) for x, y in ((1, 10), (91, 100), (n - 9, n)) if x >= 1 and y <= n]
    wins = list(dict.fromkeys(wins))
    return {
        "label": res.get("label", res["system"]),
        "turns": n,
        "windows": {
            f"{x}-{y}": [_median(lat, x, y), _median(cpu, x, y) if cpu else None] for x, y in wins
        },
        "a_total_s": [a["total_s"], sum(cpu) / 1e3 if cpu else None],
        "runs": 1,
        "b_turns_per_s": [b.get("turns_per_s"), b.get("cpu_turns_per_s")],
        "b_shape": [b.get("threads"), b.get("turns_per_thread")],
        "c_load_ms": [c.get("total_ms"), c.get("load_cpu_ms")],
        "c_messages": c.get("messages"),
        "in_order": bool(c.get("in_order")),
        "bytes_per_turn": a.get("bytes_per_turn"),
        "durability": (a.get("durability") or {}).get("setting", ""),
    }


def _commit() -> str:
    """The checkout's commit, ``+dirty`` when src/ or benchmarks/ differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "src", "benchmarks"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("+dirty" if dirty else "")


def entries(results: dict[str, Any], commit: str) -> dict[str, dict[str, Any]]:
    """This run's entry for every pair that ran whole, keyed ``peer,tether``."""
    by_name = {s["system"]: s for s in results.get("systems", [])}
    meta = results.get("meta", {})
    mach = meta.get("machine", {})
    out: dict[str, dict[str, Any]] = {}
    for peer, tether in PAIRS:
        if peer not in by_name or tether not in by_name:
            continue
        fp, ft = figures(by_name[peer]), figures(by_name[tether])
        if fp is None or ft is None:
            continue
        out[f"{peer},{tether}"] = {
            "date": meta.get("date", "?"),
            "commit": commit,
            "command": meta.get("command", ""),
            "load": [mach.get("loadavg_1m_at_start"), mach.get("loadavg_1m_at_end")],
            "fdatasync_4k_ms": mach.get("fdatasync_4k_ms"),
            "peer": fp,
            "tether": ft,
        }
    return out


def merge(saved: dict[str, list[dict[str, Any]]], new: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``saved`` with each new entry appended to its pair, the last ``KEEP`` kept."""
    out = {k: list(v) for k, v in saved.items()}
    for key, entry in new.items():
        out[key] = [*out.get(key, []), entry][-KEEP:]
    return out


def _num(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    s = f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:,.0f}"
    return s + unit


def _pair_cell(v: list[float | None], unit: str = "") -> str:
    return f"{_num(v[0])} / {_num(v[1])}{unit}"


def _bytes(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v / 1e3:.1f} kB" if v >= 1e3 else f"{v:.0f} B"


# Figures compared for "at or below": (name, getter, larger is better)
def _compared(f: dict[str, Any]) -> list[tuple[str, float | None, bool]]:
    out: list[tuple[str, float | None, bool]] = [
        (f"(A) turns {w} wall", v[0], False) for w, v in f["windows"].items()
    ]
    out += [(f"(A) turns {w} CPU", v[1], False) for w, v in f["windows"].items()]
    out += [
        ("(A) in all, wall", f["a_total_s"][0], False),
        ("(A) in all, CPU", f["a_total_s"][1], False),
        ("(B) turns/s", f["b_turns_per_s"][0], True),
        ("(B) turns per CPU s", f["b_turns_per_s"][1], True),
        ("(C) load, wall", f["c_load_ms"][0], False),
        ("(C) load, CPU", f["c_load_ms"][1], False),
    ]
    return out


def behind(entry: dict[str, Any]) -> list[str]:
    """Every figure where tether is behind the peer in ``entry``, and bytes over 1.2x."""
    out = []
    for (name, t, up), (_, p, _) in zip(
        _compared(entry["tether"]), _compared(entry["peer"]), strict=True
    ):
        if t is None or p is None:
            continue
        if (t < p) if up else (t > p):
            out.append(f"{name} {_num(t)} against {_num(p)}")
    tb, pb = entry["tether"]["bytes_per_turn"], entry["peer"]["bytes_per_turn"]
    if tb and pb and tb > 1.2 * pb:
        out.append(f"bytes/turn {tb / pb:.2f}x")
    return out


def pair_table(runs: list[dict[str, Any]]) -> list[str]:
    last = runs[-1]
    wins = list(last["tether"]["windows"])
    shape = last["tether"]["b_shape"]
    head = (
        "| run | system | "
        + " | ".join(f"(A) ms @{w}" for w in wins)
        + f" | (A) s in all | (B) turns/s, {shape[0]} x {shape[1]} threads"
        + f" | (C) load ms, {last['tether']['c_messages']} msgs | bytes/turn |"
    )
    lines = [head, "|---|---|" + "---:|" * (len(wins) + 4)]
    for i, run in enumerate(runs):
        when = ("before" if i < len(runs) - 1 else "after") if len(runs) > 1 else "this run"
        for side in ("peer", "tether"):
            f = run[side]
            cells = [_pair_cell(f["windows"].get(w, [None, None])) for w in wins]
            lines.append(
                f"| {when} | {f['label']} | "
                + " | ".join(cells)
                + f" | {_pair_cell(f['a_total_s'])} | {_pair_cell(f['b_turns_per_s'])}"
                + f" | {_pair_cell(f['c_load_ms'])} | {_bytes(f['bytes_per_turn'])} |"
            )
    return lines


def section(saved: dict[str, list[dict[str, Any]]]) -> str:
    out = [
        "",
        "**The session pairs** (`benchmarks/pairs.py`, written by `benchmarks/run.py "
        "--update-readme` from `docs/bench/pairs.json`): each session tether ships beside "
        "the one it replaces, on the same backend and driven the same way (`benchmarks/"
        "systems/`), the pair's previous run (before) and its latest (after). Every cell is "
        "wall time / CPU time: the CPU the worker measured around the system's own calls "
        "(user and kernel, an fsync's own share included); the rest of a turn's wall time "
        "is waiting, for the disk's fsync and, on a shared machine, for a core. (B) is "
        "turns per second / turns per CPU second. On a machine shared with other work the "
        "wall figures of two runs of one system move by more than a pair's gap; the CPU "
        "figures barely move. With `--repeats N` each system runs N times, the pair's two in "
        "turn, and every figure is the best of the N (the least time, the most turns per "
        "second).",
    ]
    for peer, tether in PAIRS:
        runs = saved.get(f"{peer},{tether}")
        if not runs:
            continue
        last = runs[-1]
        out.append("")
        out.append(f"*{last['peer']['label']} and {last['tether']['label']}*")
        out.append("")
        for i, run in enumerate(runs):
            when = ("Before" if i < len(runs) - 1 else "After") if len(runs) > 1 else "Run"
            load = "-".join(_num(x) for x in run["load"])
            n = run["tether"].get("runs", 1)
            out.append(
                f"- {when}: {run['date']}, commit {run['commit']}, load average {load}, "
                + (f"best of {n} runs of each, alternating, " if n > 1 else "")
                + f"4 KiB fdatasync {_num(run['fdatasync_4k_ms'])} ms, `{run['command']}`; "
                f"durability: {run['tether']['durability']} (both"
                + ("" if run["tether"]["durability"] == run["peer"]["durability"] else " not")
                + " the same)"
            )
        out.append("")
        out += pair_table(runs)
        late = behind(last)
        tb, pb = last["tether"]["bytes_per_turn"], last["peer"]["bytes_per_turn"]
        ratio = f"bytes {tb / pb:.2f}x the peer's" if tb and pb else "bytes: -"
        out.append("")
        out.append(
            f"In the latest run {last['tether']['label']} is at or below "
            f"{last['peer']['label']} on every figure, {ratio}."
            if not late
            else f"In the latest run {last['tether']['label']} is behind "
            f"{last['peer']['label']} on: {'; '.join(late)} ({ratio})."
        )
    out.append("")
    return "\n".join(out)


def update(
    results: dict[str, Any], readme: Path, path: Path = PAIRS_JSON, *, commit: str = ""
) -> bool:
    """Record this run's whole pairs in ``path`` and rewrite the README section; False
    (nothing written) when no pair ran whole. ``commit``: ``$BENCH_COMMIT`` if set (a run
    of another commit's ``src/`` through this benchmark), else the checkout's."""
    new = entries(results, commit or os.environ.get("BENCH_COMMIT") or _commit())
    if not new:
        return False
    saved = json.loads(path.read_text()) if path.exists() else {}
    saved = merge(saved, new)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved, indent=1) + "\n")
    text = readme.read_text()
    body = section(saved)
    if START in text and END in text:
        pre, rest = text.split(START, 1)
        text = pre + START + body + END + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + START + body + END + "\n"
    readme.write_text(text)
    return True
