"""A separate process driving one agent over a SQLite file, for tests/test_runtime_processes.py.

    python tests/runtime_proc.py DB step THREAD USER TEXT
    python tests/runtime_proc.py DB resume THREAD
    python tests/runtime_proc.py DB approve THREAD CALL [--no-resume]

Prints the StepResult as one JSON line ({} when nothing is returned). The tool
``slow_job`` appends ``{"key", "pid", "name"}`` to $RUNTIME_PROC_LOG (fsynced) when it
starts, then sleeps for $RUNTIME_PROC_SLEEP seconds (default 0): the test kills the
process while it sleeps. ``transfer`` needs approval and logs the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import tether
from tether.models import Rule, ScriptedModel, call
from tether.runtime import Agent, StepResult, tool


def _log(entry: dict[str, Any]) -> None:
    path = os.environ["RUNTIME_PROC_LOG"]
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


@tool
async def slow_job(name: str, idempotency_key: str) -> str:
    """Run a long job."""
    _log({"tool": "slow_job", "key": idempotency_key, "pid": os.getpid(), "name": name})
    await asyncio.sleep(float(os.environ.get("RUNTIME_PROC_SLEEP", "0")))
    return f"job {name} finished"


@tool(needs_approval=True)
def transfer(amount: int, to: str, idempotency_key: str) -> str:
    """Move money."""
    _log({"tool": "transfer", "key": idempotency_key, "pid": os.getpid(), "amount": amount})
    return f"sent {amount} to {to}"


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                match=r"run job (\w+)",
                tools=[call("slow_job", name="{1}")],
                then="Job done: {result}",
            ),
            Rule(
                match=r"pay (\d+) to (\w+)",
                tools=[call("transfer", amount="{1}", to="{2}")],
                then="Payment: {result}",
            ),
            *ScriptedModel.demo().rules,
        ]
    )


async def main(argv: list[str]) -> None:
    db, cmd, *rest = argv
    store = await tether.open_store(f"sqlite:///{db}")
    try:
        agent = Agent(None, model(), store=store, tools=[slow_job, transfer])
        result: StepResult | None
        if cmd == "step":
            thread, user, text = rest
            result = await agent.step(text, thread=thread, user=user or None)
        elif cmd == "resume":
            result = await agent.resume(rest[0])
        elif cmd == "approve":
            result = await agent.approve(rest[0], rest[1], resume="--no-resume" not in rest)
        else:
            raise SystemExit(f"unknown command {cmd!r}")
        print(json.dumps({} if result is None else result.to_dict()), flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
