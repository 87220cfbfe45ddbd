"""tether's own work per warm whole-buffer turn, in instructions: a thread of 10 turns
against a long one (issue 43), immune to the machine's load and to the CPU caches.

    python benchmarks/turn_instructions.py                  # 10 and 10,000 turns, callgrind
    python benchmarks/turn_instructions.py --long 2000 --turns 50
    python benchmarks/turn_instructions.py --no-callgrind --long 30 --turns 3   # smoke run

CPU time per turn (agent_turn.py --long) holds what the caches cost: on a long thread the
model's pass over 20,000 messages, and a bigger heap, evict tether's working set, and the
misses land in tether's part. Instructions do not. For each history H a thread of H turns
is seeded (``agent_turn.py``'s messages, a Window agent at durability=normal), then a
fresh process opens it (``tether.Agent``, the whole buffer, SQLite at durability=full,
a model whose own work is constant: it answers without reading the history) and runs
one untimed turn (the view is read whole once), then ``--turns`` turns; the same process
is run with 0 turns after the untimed one, and the difference of the two runs' totals
(valgrind's callgrind, the whole process) over ``--turns`` is one turn's instructions.
Garbage collection is off and hash seeds fixed in both, so the two runs' common part is
the same work. ``--no-callgrind``: CPU time instead (process_time), for a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from agent_turn import ANSWER, WINDOW, user_message  # noqa: E402


async def seed(path: Path, turns: int) -> None:
    import tether
    from tether.models import Rule
    from tether.projections import Window

    async with await tether.open_store(f"sqlite:///{path}", durability="normal") as store:
        agent = tether.Agent(
            tether.Spec.single(memory=Window(size=WINDOW)),
            tether.ScriptedModel([Rule(match=None, answer=ANSWER)], keep_requests=0),
            store=store,
        )
        for k in range(turns):
            await agent.step(user_message("t", k), thread="t")


async def turns(path: Path, n: int) -> float:
    """One untimed turn, then ``n`` turns: their CPU seconds."""
    import tether
    from tether.models import ModelResponse

    class Constant:
        async def complete(self, request: Any) -> Any:
            return ModelResponse(content=ANSWER)

    async with await tether.open_store(f"sqlite:///{path}", durability="full") as store:
        agent = tether.Agent(tether.Spec.single(), Constant(), store=store)
        await agent.step(user_message("t", 0), thread="t")
        c = time.process_time()
        for k in range(n):
            await agent.step(user_message("t", k + 1), thread="t")
        return time.process_time() - c


def _run(path: Path, n: int, callgrind: bool, work: Path) -> float:
    """A fresh process running ``turns(copy of path, n)``: its instructions (callgrind,
    the whole process) or its CPU seconds for the ``n`` turns."""
    db = work / f"run{n}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copy(path, db)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, __file__, "--worker", str(db), "--turns", str(n)]
    if callgrind:
        out = work / f"callgrind.{n}.out"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        m = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        if m is None:
            raise RuntimeError(f"no total in {out}")
        return float(m.group(1))
    p = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return float(json.loads(p.stdout.strip().splitlines()[-1])["cpu_s"])


def measure(histories: list[int], n: int, callgrind: bool) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tether-turn-ir-"))
    try:
        per: dict[str, float] = {}
        for h in histories:
            path = tmp / f"h{h}.db"
            asyncio.run(seed(path, h))
            if callgrind:
                per[str(h)] = (_run(path, n, True, tmp) - _run(path, 0, True, tmp)) / n
            else:
                per[str(h)] = _run(path, n, False, tmp) / n * 1e3
            print(f"[turn-ir] {h:,} turns: {per[str(h)]:,.3f} per turn", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    first, last = per[str(histories[0])], per[str(histories[-1])]
    return {
        "unit": "instructions" if callgrind else "CPU ms",
        "turns": n,
        "per_turn": per,
        "ratio": last / first,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--long", type=int, default=10_000, help="the long thread's turns")
    p.add_argument("--turns", type=int, default=100, help="turns measured per history")
    p.add_argument("--no-callgrind", action="store_true", help="CPU time: a smoke run")
    p.add_argument("--json", type=Path, metavar="FILE")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        import gc

        gc.disable()  # the same work in both runs, not collections at other moments
        cpu = asyncio.run(turns(Path(args.worker), args.turns))
        print(json.dumps({"cpu_s": cpu}))
        return 0
    res = measure([10, args.long], args.turns, not args.no_callgrind)
    per = res["per_turn"]
    print(
        f"tether's own {res['unit']} per warm whole-buffer turn (a model that reads nothing): "
        + ", ".join(f"{float(v):,.3g} at {int(h):,} turns" for h, v in per.items())
        + f"; ratio {res['ratio']:.2f}x"
    )
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
