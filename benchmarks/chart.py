"""Draws write latency against history length from results.json (needs matplotlib).

    python benchmarks/chart.py benchmarks/out/results.json benchmarks/out/latency.png

run.py calls it with the peers venv's interpreter, where matplotlib is installed.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SMOOTH = 10  # rolling median over this many turns


def rolling_median(xs: list[float], k: int) -> list[float]:
    return [statistics.median(xs[max(0, i - k + 1) : i + 1]) for i in range(len(xs))]


def draw(results: dict, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(11, 5.2), dpi=110)
    for s in results["systems"]:
        lat = (s.get("write") or {}).get("latencies_ms")
        if not lat:
            continue
        x = [2 * i for i in range(len(lat))]  # messages already stored before the turn
        label = s["label"]
        if not ((s.get("write") or {}).get("durability") or {}).get("strongest", True):
            label += " (weaker durability)"
        (line,) = ax.plot(x, rolling_median(lat, SMOOTH), label=label, linewidth=1.6)
        ax.scatter(x, lat, s=1.5, alpha=0.15, color=line.get_color(), linewidths=0)
    ax.set_yscale("log")
    ax.set_xlabel("history length (messages already in the thread)")
    ax.set_ylabel("write latency per turn, ms (log)")
    meta = results["meta"]
    ax.set_title(
        f"Durable write of one turn (user + assistant, ~200 B each): rolling median of {SMOOTH}\n"
        f"{meta['date']} · {meta['machine']['cpu']} · {meta['machine']['nproc']} cores",
        fontsize=9,
    )
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)


def main(argv: list[str]) -> int:
    src, dst = Path(argv[1]), Path(argv[2])
    draw(json.loads(src.read_text()), dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
