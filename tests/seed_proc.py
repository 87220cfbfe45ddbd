"""A separate process running a looping agent over a SQLite file, for tests/test_runtime_loops.py.

    python tests/seed_proc.py DB step THREAD
    python tests/seed_proc.py DB resume THREAD

Prints the StepResult as one JSON line. The loop's body tool ``work`` appends
``{"i", "key", "pid"}`` to $SEED_PROC_LOG (fsynced) when it starts, then sleeps
$SEED_PROC_SLEEP seconds on iteration $SEED_PROC_SLOW_AT (the test SIGKILLs the
process while it sleeps).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import tether
from tether.models import ScriptedModel
from tether.runtime import Agent, LoopNode, Spec, ToolNode, tool


@tool
async def work(i: int, idempotency_key: str) -> str:
    """One iteration's work."""
    with open(os.environ["SEED_PROC_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"i": i, "key": idempotency_key, "pid": os.getpid()}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    if i == int(os.environ.get("SEED_PROC_SLOW_AT", "-1")):
        await asyncio.sleep(float(os.environ.get("SEED_PROC_SLEEP", "0")))
    return f"did {i}"


SPEC = Spec(
    nodes=[
        LoopNode(name="loop", body="work", condition="{{ loop_index < 5 }}", max_iterations=10),
        ToolNode(name="work", tool="work", arguments={"i": "{{ loop_index }}"}),
    ],
    start="loop",
)


async def main(argv: list[str]) -> None:
    db, cmd, thread = argv
    store = await tether.open_store(f"sqlite:///{db}")
    try:
        agent = Agent(SPEC, ScriptedModel.demo(), store=store, tools=[work])
        if cmd == "step":
            result = await agent.step("go", thread=thread)
        elif cmd == "resume":
            result = await agent.resume(thread)
        else:
            raise SystemExit(f"unknown command {cmd!r}")
        print(json.dumps(result.to_dict()), flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
