"""Core benchmark: in-memory append, and validating snapshots of growing size.

    .venv/bin/python benchmarks/core.py [--nodes 100000]

Prints per-node costs; validation must be linear in the snapshot's size, so the
per-node figure should stay flat from 10,000 to 100,000 nodes.
"""

from __future__ import annotations

import argparse
import time

from tether import AgentState


def build(n: int) -> tuple[AgentState, float]:
    s = AgentState()
    msg = "x" * 180
    t = time.perf_counter()
    for i in range(n):
        if i % 4 == 0:
            s.append("goal", {"run": f"run_{i}", "input": msg, "llm": "agent", "metadata": {}})
        elif i % 4 == 1:
            s.append(
                "inference", {"run": f"run_{i}", "llm": "agent", "content": msg, "tool_calls": []}
            )
        elif i % 4 == 2:
            s.append(
                "resource",
                {"name": "count", "type": "integer", "value": i},
                resource_key="var:count",
            )
        else:
            s.append("answer", {"run": f"run_{i}", "output": msg})
    return s, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    args = ap.parse_args()
    print(f"{'nodes':>8} {'append µs/node':>15} {'validate µs/node':>17} {'snapshot MB':>12}")
    for n in sorted({args.nodes // 10, args.nodes // 2, args.nodes}):
        s, t_append = build(n)
        data = s.to_json()
        t = time.perf_counter()
        AgentState.from_json(data)
        t_val = time.perf_counter() - t
        print(
            f"{n:>8} {t_append / n * 1e6:>15.1f} {t_val / n * 1e6:>17.1f} {len(data) / 1e6:>12.1f}"
        )


if __name__ == "__main__":
    main()
