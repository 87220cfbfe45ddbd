"""Per-store reports and the projection reads the control plane needs.

The projections themselves (conversation, tools, task, flow, variables, memory,
executions) are
defined by docs/graph-encoding.md; where ``tether.projections`` provides one it is
used, so the control plane reports exactly what an agent would see.

``describe`` reads inside ``tether.crypto.erased_placeholders()``: an erased
variable, memory or tool-state entry is listed with the value ``{"$erased": true}``
(its name and key are in its resource key, which is not encrypted), an erased
message reads ``"[erased]"``, runs whose goal was erased are left out (their ids
went with it), and each report counts what it found erased in
``metadata["erased"]`` (absent when nothing was). docs/encryption.md has the table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Final

import orjson

from ..core.erased import ERASED_TEXT, is_erased, placeholder
from ..core.errors import InvalidRequest, TetherError
from ..core.graph import CausalNode
from ..store.base import Store
from ..store.txn import Transaction
from .types import StateOperationRequest, StateStoreReport

SUMMARY: Final = "summary"
TOOL_STATE: Final = "tool_state"
TOOL_STATE_PREFIX: Final = "semantic:tool_state:"
UNFINISHED: Final = frozenset({"running", "suspended"})


def is_memory(node: CausalNode) -> bool:
    """A live semantic memory of the ``memory`` store (summaries and tool state are not)."""
    p = node.payload
    return (
        isinstance(p, dict)
        and p.get("type") not in (SUMMARY, TOOL_STATE)
        and p.get("content") is not None
    )


async def tool_state(store: Store, namespace: str, scope: str) -> dict[str, dict[str, Any]]:
    """Live tool state of a scope: ``{tool: {key: value}}`` (one indexed read)."""
    heads = await store.resource_heads(namespace, scope, TOOL_STATE_PREFIX)
    out: dict[str, dict[str, Any]] = {}
    for rk, node in heads.items():
        p = node.payload
        if is_erased(p):
            tool, _, key = rk[len(TOOL_STATE_PREFIX) :].partition("/")
            out.setdefault(tool, {})[key] = placeholder()
            continue
        if not isinstance(p, dict) or p.get("content") is None:
            continue
        tool, _, key = str(p.get("key")).partition("/")
        out.setdefault(tool, {})[key] = p["content"]
    return {t: dict(sorted(v.items())) for t, v in sorted(out.items())}


async def thread_nodes(store: Store, namespace: str, scope: str) -> list[CausalNode]:
    from ..projections.reads import read_nodes

    head = await store.head(namespace, scope)
    return await read_nodes(store, namespace, scope, after=0, before=head.sequence + 1)


def is_deleted_variable(node: CausalNode) -> bool:
    p = node.payload
    return isinstance(p, dict) and p.get("deleted") is True


async def run_status(store: Store, namespace: str, scope: str) -> dict[str, dict[str, Any]]:
    """Each run of a thread and its status (``tether.projections.list_runs``), oldest first.

    ``reset`` says whether the control plane ended it (a ``protocol_error`` with code
    ``reset``).
    """
    from ..projections.execution import list_runs

    runs = await list_runs(store, namespace, scope.split(":", 1)[1])
    return {
        r.run: {**r.to_dict(), "reset": bool(r.error and r.error.get("code") == "reset")}
        for r in runs
    }


async def _erased_goals(store: Store, namespace: str, scope: str) -> int:
    """Goals whose payload was erased (their run ids with them)."""
    return sum(
        1
        for n in await thread_nodes(store, namespace, scope)
        if n.kind == "goal" and is_erased(n.payload)
    )


def _bytes(value: Any) -> int:
    return len(orjson.dumps(value))


def _erased(count: int) -> dict[str, int]:
    return {"erased": count} if count else {}


def _tally(labels: Iterable[str]) -> dict[str, int]:
    """How many times each label occurs, in first-seen order."""
    return dict(Counter(labels))


def _listing(
    name: str,
    scope: str,
    req: StateOperationRequest,
    items: Any,
    metadata: dict[str, Any],
    **fields: Any,
) -> StateStoreReport:
    """A report on a store read as ``items``: whether any exist, how many, their size,
    and (with ``include_data``) the items themselves."""
    return StateStoreReport(
        name=name,
        scope=scope,
        exists=bool(items),
        item_count=len(items),
        size_bytes=_bytes(items),
        data=items if req.include_data else None,
        metadata=metadata,
        **fields,
    )


async def report(
    store: Store, req: StateOperationRequest, scope: str, name: str, kinds: dict[str, int]
) -> StateStoreReport:
    """Describe one store of one scope."""
    ns = req.namespace
    if name == "variables":
        heads = await store.resource_heads(ns, scope, "var:")
        # A variable is a resource whose payload is an object (docs/graph-encoding.md);
        # a ``var:`` key holding anything else (an imported graph's) is no variable.
        live = {
            k[4:]: n
            for k, n in heads.items()
            if n.kind == "resource"
            and (isinstance(n.payload, dict) or is_erased(n.payload))
            and not is_deleted_variable(n)
        }
        run_vars = [k for k in await store.resource_heads(ns, scope, "run:") if ":var:" in k]
        values = {
            k: placeholder() if is_erased(n.payload) else n.payload.get("value")
            for k, n in live.items()
        }
        return _listing(
            name,
            scope,
            req,
            values,
            {
                "types": {k: n.payload.get("type") for k, n in live.items()},
                "deleted": len(heads) - len(live),
                "run_variables": len(run_vars),
                **_erased(sum(1 for n in live.values() if is_erased(n.payload))),
            },
        )
    if name == "memory":
        heads = await store.resource_heads(ns, scope, "semantic:")
        entries: dict[str, Any] = {
            f"{n.payload['type']}:{n.payload['key']}": n.payload["content"]
            for n in heads.values()
            if is_memory(n)
        }
        erased = [
            rk[len("semantic:") :]
            for rk, n in heads.items()
            if is_erased(n.payload)
            and not rk.startswith((f"semantic:{SUMMARY}:", TOOL_STATE_PREFIX))
        ]
        entries.update((k, placeholder()) for k in erased)
        by_type = _tally(k.split(":", 1)[0] for k in entries)
        return _listing(name, scope, req, entries, {"types": by_type, **_erased(len(erased))})
    if name == "tools":
        state = await tool_state(store, ns, scope)
        return StateStoreReport(
            name=name,
            scope=scope,
            exists=bool(state),
            item_count=sum(len(v) for v in state.values()),
            size_bytes=_bytes(state),
            data=state if req.include_data else None,
            metadata={
                "tools": {t: len(v) for t, v in state.items()},
                **_erased(sum(1 for v in state.values() for x in v.values() if is_erased(x))),
            },
        )
    if name == "task" and scope == "app":
        from .tasks import list_index

        index = await list_index(store, ns)
        by_status = _tally(entry.status for entry in index)
        return StateStoreReport(
            name=name,
            scope=scope,
            exists=bool(index),
            item_count=len(index),
            data=[e.to_dict() for e in index] if req.include_data else None,
            metadata={"status": by_status, "index": True},
        )
    if not scope.startswith("thread:"):
        where = "threads (and the run index in app)" if name == "task" else "threads"
        return StateStoreReport(
            name=name, scope=scope, enabled=False, metadata={"reason": f"{name} lives in {where}"}
        )
    if name in ("task", "flow"):
        nodes = await thread_nodes(store, ns, scope) if kinds.get("goal") else []
        items: list[dict[str, Any]]
        if name == "task":
            from .tasks import task_states

            items = [t.to_dict() for t in await task_states(store, ns, scope[7:], nodes=nodes)]
        else:
            from .flow import flow_states

            var_heads = {
                k: n
                for k, n in (await store.resource_heads(ns, scope, "run:")).items()
                if ":var:" in k
            }
            items = [f.to_dict() for f in flow_states(nodes, var_heads)]
        # Runs whose goal was erased lost their run id: counted, not listed.
        return _listing(
            name,
            scope,
            req,
            items,
            {
                "status": _tally(it["status"] for it in items),
                **_erased(sum(1 for n in nodes if n.kind == "goal" and is_erased(n.payload))),
            },
        )
    if name == "executions":
        runs = await run_status(store, ns, scope) if kinds.get("goal") else {}
        counts = _tally(r["status"] for r in runs.values())
        return StateStoreReport(
            name=name,
            scope=scope,
            exists=bool(runs),
            item_count=len(runs),
            data=list(runs.values()) if req.include_data else None,
            # Every goal not listed is a run whose goal was erased (with its run id).
            # (only read when there are more goals than runs: erased, or not runs at all).
            metadata={
                "status": counts,
                **_erased(
                    await _erased_goals(store, ns, scope) if kinds.get("goal", 0) > len(runs) else 0
                ),
            },
        )
    messages = await conversation(store, ns, scope, req.llm)
    return _listing(
        name,
        scope,
        req,
        messages,
        {"llm": req.llm, **_erased(sum(1 for m in messages if m.get("content") == ERASED_TEXT))},
        message_count=len(messages),
    )


async def conversation(store: Store, namespace: str, scope: str, llm: str) -> list[dict[str, Any]]:
    """The messages an LLM node of the thread would see now."""
    from ..projections.conversation import load_conversation

    thread = scope.split(":", 1)[1]
    msgs = await load_conversation(store, namespace, thread, llm=llm)
    return [dict(m) for m in msgs]


async def cut_conversation(
    txn: Transaction, store: Store, scope: str, llm: str, through: int
) -> int:
    """Start the conversation view of ``llm`` after sequence ``through``; return messages cut."""
    from ..projections.conversation import conversation_view

    view = await conversation_view(store, txn.namespace, scope.split(":", 1)[1], llm=llm)
    if not view.kept:
        return 0
    # A summary with no text: the view starts after ``through`` and shows nothing
    # in place of what came before. The nodes stay (history, export, fork).
    await txn.semantic(
        scope,
        SUMMARY,
        llm,
        {"text": "", "through": through, "count": view.kept, "strategy": "reset"},
    )
    return view.kept


async def compact(
    store: Store, req: StateOperationRequest, scope: str, model: Any
) -> StateStoreReport:
    """Run the memory module's compaction with the request's parameters.

    The memory module validates again and writes through ``transact``, checking
    that no other compaction or reset happened meanwhile (seed 002 ignores its
    session lock here); a raw ``ValueError``/``TypeError`` is never let out.
    """
    from ..projections.compaction import compact as compact_thread

    thread = scope.split(":", 1)[1]
    try:
        outcome = await compact_thread(
            store,
            req.namespace,
            thread,
            llm=req.llm,
            strategy=req.strategy,
            max_messages=req.max_messages,
            max_tokens=req.max_tokens,
            preserve_recent=req.preserve_recent,
            summary_max_tokens=req.summary_max_tokens,
            model=model,
        )
    except TetherError:
        raise
    except (ValueError, TypeError) as e:
        raise InvalidRequest(f"compaction refused its parameters: {e}", field="strategy") from None
    return StateStoreReport(
        name="conversation",
        scope=scope,
        exists=outcome.messages_before > 0,
        message_count=outcome.messages_after,
        compacted=outcome.compacted,
        metadata={
            "llm": req.llm,
            "strategy": req.strategy,
            "before": outcome.messages_before,
            "after": outcome.messages_after,
            "covered": outcome.covered,
            "count": outcome.count,
            "through": outcome.through,
            "summary_node": outcome.summary_node,
            "reason": outcome.reason,
        },
    )


__all__ = [
    "compact",
    "conversation",
    "cut_conversation",
    "is_memory",
    "report",
    "run_status",
    "thread_nodes",
    "tool_state",
]
