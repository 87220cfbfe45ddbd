"""Write thread nodes the way docs/graph-encoding.md says the runtime does (tests only).

The runtime is written concurrently; these helpers follow the node-shape contract so
the memory projections can be tested against it now.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether import Transaction, transact
from tether.core import scopes
from tether.core.graph import CausalNode
from tether.store.base import Store
from tether.store.in_memory import MemoryStore

Call = tuple[str, str, dict[str, Any]]  # (call id, tool name, arguments)


class Thread:
    def __init__(self, store: Store, namespace: str, thread_id: str) -> None:
        self.store = store
        self.ns = namespace
        self.thread_id = thread_id
        self.scope = scopes.thread(thread_id)
        self.calls: dict[tuple[str, str, str], str] = {}  # (run, llm, call id) -> tool_call node id

    async def _append(
        self, items: list[tuple[str, Any, list[str] | None, str | None]]
    ) -> list[CausalNode]:
        async def fn(txn: Transaction) -> list[CausalNode]:
            out = []
            for kind, payload, parents, rk in items:
                out.append(
                    await txn.append(self.scope, kind, payload, parents=parents, resource_key=rk)
                )
            return out

        return await transact(self.store, self.ns, fn)

    async def system(self, content: str | None, llm: str = "agent") -> CausalNode:
        (n,) = await self._append(
            [("system", {"llm": llm, "content": content}, None, f"system:{llm}")]
        )
        return n

    async def goal(self, run: str, text: Any, llm: str | None = "agent") -> CausalNode:
        (n,) = await self._append(
            [("goal", {"run": run, "input": text, "llm": llm, "metadata": {}}, None, None)]
        )
        return n

    async def inference(
        self,
        run: str,
        content: str | None = None,
        calls: Sequence[Call] = (),
        *,
        llm: str = "agent",
        input: Any = None,
        needs_approval: bool = False,
    ) -> CausalNode:
        payload: dict[str, Any] = {
            "run": run,
            "llm": llm,
            "content": content,
            "tool_calls": [{"id": c, "name": n, "arguments": a} for c, n, a in calls],
            "usage": {},
        }
        if input is not None:
            payload["input"] = input

        async def fn(txn: Transaction) -> CausalNode:
            inf = await txn.append(self.scope, "inference", payload)
            for cid, name, args in calls:
                tc = await txn.append(
                    self.scope,
                    "tool_call",
                    {
                        "run": run,
                        "llm": llm,
                        "call_id": cid,
                        "name": name,
                        "arguments": args,
                        "needs_approval": needs_approval,
                    },
                    parents=[inf.id],
                )
                self.calls[(run, llm, cid)] = tc.id
            return inf

        return await transact(self.store, self.ns, fn)

    async def result(
        self,
        run: str,
        call_id: str,
        content: Any,
        *,
        name: str = "tool",
        llm: str = "agent",
        is_error: bool = False,
    ) -> CausalNode:
        parent = self.calls[(run, llm, call_id)]
        (n,) = await self._append(
            [
                (
                    "tool_result",
                    {
                        "run": run,
                        "llm": llm,
                        "call_id": call_id,
                        "name": name,
                        "content": content,
                        "is_error": is_error,
                    },
                    [parent],
                    None,
                )
            ]
        )
        return n

    async def verify(self, run: str, call_id: str, decision: str, llm: str = "agent") -> CausalNode:
        tc = self.calls[(run, llm, call_id)]
        (n,) = await self._append(
            [
                (
                    "verification",
                    {
                        "run": run,
                        "call_id": call_id,
                        "tool_call": tc,
                        "decision": decision,
                        "reason": "",
                    },
                    [tc],
                    None,
                )
            ]
        )
        return n

    async def answer(self, run: str, output: Any = None) -> CausalNode:
        (n,) = await self._append([("answer", {"run": run, "output": output}, None, None)])
        return n

    async def error(self, run: str, code: str = "boom", message: str = "failed") -> CausalNode:
        (n,) = await self._append(
            [
                (
                    "protocol_error",
                    {"run": run, "error": {"code": code, "message": message}},
                    None,
                    None,
                )
            ]
        )
        return n

    async def turn(self, run: str, user: str, reply: str, llm: str = "agent") -> None:
        """A whole completed turn: user message, assistant reply, answer."""
        await self.goal(run, user, llm)
        await self.inference(run, reply, llm=llm)
        await self.answer(run, reply)

    async def tool_turn(
        self,
        run: str,
        user: str,
        calls: Sequence[Call],
        results: Sequence[Any],
        reply: str,
        llm: str = "agent",
    ) -> None:
        await self.goal(run, user, llm)
        await self.inference(run, None, calls, llm=llm)
        for (cid, name, _), res in zip(calls, results, strict=True):
            await self.result(run, cid, res, name=name, llm=llm)
        await self.inference(run, reply, llm=llm)
        await self.answer(run, reply)


class CountingStore(MemoryStore):
    """A memory store that counts the nodes its reads return (to check read costs)."""

    def __init__(self) -> None:
        super().__init__()
        self.read = 0
        self.calls = 0

    def reset_counts(self) -> None:
        self.read = 0
        self.calls = 0

    async def nodes(self, namespace: str, scope: str, **kw: Any) -> list[CausalNode]:
        out = await super().nodes(namespace, scope, **kw)
        self.read += len(out)
        self.calls += 1
        return out


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def contents(messages: list[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in messages]


__all__ = ["CountingStore", "Thread", "contents", "roles"]
