"""Writes to a thread for tests/test_view_cache.py, the same in this process and in the
writer process it starts: turns of several shapes (a run left open, finished later by
either process, a result arriving after its run moved on), resets, compactions."""

from __future__ import annotations

import contextlib
from typing import Any

from tether import Transaction, transact
from tether.control import reset
from tether.projections import compact, undo_compaction
from tether.projections.compaction import NothingToUndo
from tether.store.base import Store


async def _append(store: Store, ns: str, scope: str, items: list[tuple[str, Any]]) -> None:
    async def fn(txn: Transaction) -> None:
        for kind, payload in items:
            await txn.append(scope, kind, payload)

    await transact(store, ns, fn)


async def write(store: Store, c: dict[str, Any]) -> None:
    ns, thread, what, llm = c["ns"], c["thread"], c["what"], c["llm"]
    scope = "thread:" + thread
    run, n = c.get("run"), c["n"]
    call = {"id": f"call{n}", "name": "f", "arguments": {"n": n}}

    def goal() -> tuple[str, Any]:
        return ("goal", {"run": run, "input": f"question {n}", "llm": llm, "metadata": {}})

    def inference(content: Any, calls: list[Any]) -> tuple[str, Any]:
        return (
            "inference",
            {"run": run, "llm": llm, "content": content, "tool_calls": calls, "usage": {}},
        )

    def result(cid: str, text: str) -> tuple[str, Any]:
        payload = {"run": run, "llm": llm, "call_id": cid, "name": "f", "content": text}
        return ("tool_result", payload)

    if what == "answer":
        items = [goal(), inference(f"answer {n}", []), ("answer", {"run": run})]
    elif what == "tool":
        items = [goal(), inference(None, [call]), result(call["id"], f"result {n}")]
        items += [inference(f"answer {n}", []), ("answer", {"run": run})]
    elif what == "fail":
        items = [goal(), inference(None, [call]), result(call["id"], f"result {n}")]
        items += [("protocol_error", {"run": run, "error": {"code": "x", "message": "x"}})]
    elif what == "open":
        items = [goal(), inference(f"thinking {n}", [{**call, "id": f"open-{run}"}])]
    elif what == "late_result":
        items = [result(f"open-{run}", f"late {n}")]
    elif what == "finish":
        items = [result(f"open-{run}", f"done {n}"), ("answer", {"run": run})]
    elif what == "reset":
        await reset(store, namespace=ns, thread=thread)
        return
    elif what == "compact":
        await compact(
            store, ns, thread, llm=llm, strategy="recent", max_messages=3, preserve_recent=1
        )
        return
    elif what == "undo":
        with contextlib.suppress(NothingToUndo):
            await undo_compaction(store, ns, thread, llm=llm)
        return
    else:
        raise AssertionError(what)
    await _append(store, ns, scope, items)
