"""Temporary readers used until ``tether.memory`` exports its projections.

Minimal on purpose (buffer policy only, no receipts): ``tether.memory`` is the one
implementation; ``_memory_api`` switches to it as soon as it is importable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import InvalidRequest
from .._txn import Transaction
from ..store._base import Store
from .spec import VarNode


async def load_conversation(
    store: Store, namespace: str, thread_id: str, *, llm: str, **_: Any
) -> list[dict[str, Any]]:
    scope = f"thread:{thread_id}"
    nodes = []
    after = 0
    while True:
        page = await store.nodes(namespace, scope, after=after, limit=1000)
        if not page:
            break
        nodes.extend(page)
        after = page[-1].sequence
    failed = {n.payload.get("run") for n in nodes if n.kind == "protocol_error"}
    answered = {
        n.payload.get("call_id") for n in nodes if n.kind == "tool_result" and n.payload.get("llm")
    }
    out: list[dict[str, Any]] = []
    for n in nodes:
        p = n.payload
        if not isinstance(p, dict) or p.get("run") in failed:
            continue
        if n.kind == "goal" and p.get("llm") == llm:
            out.append({"role": "user", "content": _text(p.get("input"))})
        elif n.kind == "inference" and p.get("llm") == llm:
            if "input" in p:
                out.append({"role": "user", "content": _text(p["input"])})
            calls = [c for c in p.get("tool_calls") or [] if c.get("id") in answered]
            msg: dict[str, Any] = {"role": "assistant", "content": p.get("content")}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
        elif n.kind == "tool_result" and p.get("llm") == llm:
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": p.get("call_id"),
                    "name": p.get("name"),
                    "content": p.get("content"),
                }
            )
    return out


def _text(v: Any) -> str:
    import orjson

    return v if isinstance(v, str) else orjson.dumps(v).decode()


async def semantic_memory(store: Store, namespace: str, scope: str) -> dict[str, Any]:
    heads = await store.resource_heads(namespace, scope, "semantic:")
    return {f"{n.payload['type']}:{n.payload['key']}": n.payload["content"] for n in heads.values()}


class Variables:
    def __init__(
        self,
        store: Store,
        namespace: str,
        decls: Sequence[VarNode],
        *,
        thread: str | None,
        user: str | None,
        run: str | None,
    ) -> None:
        self.store, self.namespace = store, namespace
        self.decls = {d.var_name: d for d in decls}
        self.thread, self.user, self.run = thread, user, run

    def _where(self, name: str) -> tuple[str, str]:
        d = self.decls[name]
        if d.scope == "app":
            return "app", f"var:{name}"
        if d.scope == "user":
            if self.user is None:
                raise InvalidRequest(f"variable {name!r} is user-scoped: pass user=")
            return f"user:{self.user}", f"var:{name}"
        if d.scope == "run":
            return f"thread:{self.thread}", f"run:{self.run}:var:{name}"
        return f"thread:{self.thread}", f"var:{name}"

    async def get(self, name: str) -> Any:
        scope, key = self._where(name)
        node = await self.store.resource_head(self.namespace, scope, key)
        if node is None or node.payload.get("deleted"):
            return self.decls[name].default
        return node.payload.get("value")

    async def all(self) -> dict[str, Any]:
        out = {}
        for name, d in self.decls.items():
            if d.scope == "user" and self.user is None:
                out[name] = d.default
            else:
                out[name] = await self.get(name)
        return out

    async def set(self, name: str, value: Any, txn: Transaction | None = None) -> Any:
        assert txn is not None
        d = self.decls[name]
        scope, key = self._where(name)
        coerced, error = _coerce(d.type, value)
        await txn.append(
            scope,
            "resource",
            {
                "name": name,
                "type": d.type,
                "value": coerced if error is None else value,
                "coerced": error is None,
                "error": error,
            },
            resource_key=key,
        )
        return coerced if error is None else value


def _coerce(type_: str, value: Any) -> tuple[Any, str | None]:
    try:
        if type_ == "string":
            return (value if isinstance(value, str) else str(value)), None
        if type_ == "integer":
            return int(value), None
        if type_ == "float":
            return float(value), None
        if type_ == "boolean":
            if isinstance(value, str):
                return value.strip().lower() in ("true", "1", "yes"), None
            return bool(value), None
        return value, None
    except (TypeError, ValueError) as e:
        return value, str(e)
