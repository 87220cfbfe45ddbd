"""Shared helpers of the control-plane and CLI tests: stores and a realistic thread."""

from __future__ import annotations

from typing import Any

import tether
from tether import Transaction


async def add_turn(
    store: tether.Store,
    ns: str,
    thread: str,
    run: str,
    text: str,
    *,
    tool: bool = True,
    answer: bool = True,
    llm: str = "agent",
) -> dict[str, Any]:
    """One run in the shape of docs/graph-encoding.md, committed a step at a time."""
    scope = f"thread:{thread}"
    ids: dict[str, Any] = {}
    txn = Transaction(store, ns)
    goal = await txn.append(scope, "goal", {"run": run, "input": text, "llm": llm, "metadata": {}})
    ids["goal"] = goal.id
    calls = [{"id": f"c-{run}", "name": "lookup", "arguments": {"q": text}}] if tool else []
    inf = await txn.append(
        scope,
        "inference",
        {
            "run": run,
            "llm": llm,
            "content": None if tool else f"re: {text}",
            "tool_calls": calls,
            "usage": {},
        },
    )
    ids["inference"] = inf.id
    await txn.commit()
    if tool:
        txn = Transaction(store, ns)
        call = await txn.append(
            scope,
            "tool_call",
            {
                "run": run,
                "llm": llm,
                "call_id": f"c-{run}",
                "name": "lookup",
                "arguments": {"q": text},
                "needs_approval": False,
            },
            parents=[inf.id],
        )
        res = await txn.append(
            scope,
            "tool_result",
            {
                "run": run,
                "llm": llm,
                "call_id": f"c-{run}",
                "name": "lookup",
                "content": f"found {text}",
                "is_error": False,
            },
            parents=[call.id],
        )
        ids["tool_call"], ids["tool_result"] = call.id, res.id
        fin = await txn.append(
            scope,
            "inference",
            {"run": run, "llm": llm, "content": f"answer to {text}", "tool_calls": [], "usage": {}},
        )
        ids["final"] = fin.id
        await txn.commit()
    if answer:
        txn = Transaction(store, ns)
        ans = await txn.append(scope, "answer", {"run": run, "output": f"answer to {text}"})
        ids["answer"] = ans.id
        await txn.commit()
    return ids


async def set_variable(
    store: tether.Store, ns: str, scope: str, name: str, value: Any, type_: str = "json"
) -> tether.CausalNode:
    txn = Transaction(store, ns)
    node = await txn.append(
        scope,
        "resource",
        {"name": name, "type": type_, "value": value, "coerced": False, "error": None},
        resource_key=f"var:{name}",
    )
    await txn.commit()
    return node


async def remember(
    store: tether.Store, ns: str, scope: str, type_: str, key: str, content: Any
) -> tether.CausalNode:
    txn = Transaction(store, ns)
    node = await txn.semantic(scope, type_, key, content)
    await txn.commit()
    return node


async def populate(store: tether.Store, ns: str, thread: str = "t1", turns: int = 3) -> None:
    """A thread with ``turns`` runs, two variables (one overwritten) and memory."""
    for i in range(turns):
        await add_turn(store, ns, thread, f"run_{i:04x}", f"question {i}")
    scope = f"thread:{thread}"
    await set_variable(store, ns, scope, "cart", ["apple"])
    await set_variable(store, ns, scope, "cart", ["apple", "pear"])
    await set_variable(store, ns, scope, "count", 2, "integer")
    await remember(store, ns, scope, "memory", "name", "Ada")
    await remember(store, ns, "user:u1", "preference", "units", "celsius")
    await set_variable(store, ns, "app", "greeting", "hello", "string")
