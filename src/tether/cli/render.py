"""How the CLI shows results to a person: rich tables, one line per fact.

Scripts use ``--json`` instead, which prints ``result.to_dict()`` unchanged.
"""

from __future__ import annotations

from typing import Any

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..control.tasks import RunList
from ..control.types import ScopeCheck, StateOperationResult, StateStoreReport


def size(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 / 1024:.1f} MiB"


def short(value: Any, width: int = 60) -> str:
    """A payload or value on one line, cut to ``width``."""
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _count(r: StateStoreReport) -> str:
    if not r.enabled:
        return "n/a"
    if r.message_count is not None:
        return f"{r.message_count} messages"
    if r.item_count is None:
        return "-"
    unit = {
        "variables": "variables",
        "memory": "keys",
        "tools": "keys",
        "task": "runs",
        "flow": "runs",
        "executions": "runs",
        "graph": "nodes",
    }
    return f"{r.item_count} {unit.get(r.name, 'items')}"


def _details(r: StateStoreReport) -> str:
    m = r.metadata
    if r.error:
        return r.error
    if not r.enabled:
        return str(m.get("reason", ""))
    if r.name == "graph":
        kinds = ", ".join(f"{k} {v}" for k, v in m.get("kinds", {}).items())
        extra = f"generation {m['generation']}, " if m.get("generation") else ""
        return extra + kinds
    if r.name == "variables":
        parts = [f"{k}: {t}" for k, t in m.get("types", {}).items()]
        if m.get("deleted"):
            parts.append(f"{m['deleted']} deleted")
        if m.get("run_variables"):
            parts.append(f"{m['run_variables']} run variables")
        return ", ".join(parts)
    if r.name == "memory":
        return ", ".join(f"{k} {v}" for k, v in m.get("types", {}).items())
    if r.name in ("executions", "task", "flow"):
        return ", ".join(f"{k} {v}" for k, v in m.get("status", {}).items())
    if r.name == "tools":
        return ", ".join(f"{k} {v}" for k, v in m.get("tools", {}).items())
    if r.name == "conversation":
        notes = [f"llm {m['llm']}"] if m.get("llm") else []
        if "before" in m:
            notes.append(f"{m['before']} -> {m['after']} messages ({m.get('strategy')})")
        return ", ".join(notes)
    return ""


def describe(console: Console, result: StateOperationResult) -> None:
    if result.scope is None:
        table = Table(title=f"namespace {result.namespace}", title_justify="left")
        for col in ("scope", "nodes", "size", "kinds"):
            table.add_column(col, justify="right" if col in ("nodes", "size") else "left")
        for r in result.stores:
            table.add_row(
                r.scope or "",
                str(r.node_count or 0),
                size(r.size_bytes),
                ", ".join(f"{k} {v}" for k, v in r.metadata.get("kinds", {}).items()),
            )
        console.print(table)
        m = result.metadata
        console.print(
            f"{m.get('scopes', 0)} scopes, {m.get('nodes', 0)} nodes, {size(m.get('size_bytes'))}"
        )
        return
    table = Table(title=f"{result.scope}  (namespace {result.namespace})", title_justify="left")
    for col in ("store", "exists", "count", "size", "details"):
        table.add_column(col)
    for r in result.stores:
        table.add_row(
            r.name,
            "yes" if r.exists else "no",
            _count(r),
            size(r.size_bytes) if r.size_bytes is not None else "",
            _details(r),
        )
    console.print(table)
    for r in result.stores:
        if r.data is not None:
            console.print(Text(f"{r.name}:", style="bold"))
            console.print_json(orjson.dumps(r.data).decode())


def gist(kind: str, payload: Any) -> str:
    """What a node says, in a few words (docs/graph-encoding.md shapes; anything else as JSON)."""
    p = payload if isinstance(payload, dict) else {}
    try:
        if kind == "goal" and "input" in p:
            return f"user: {short(p['input'], 50)}"
        if kind == "inference" and ("content" in p or "tool_calls" in p):
            calls = [
                f"{c['name']}({short(c.get('arguments', {}), 30)})"
                for c in p.get("tool_calls") or []
            ]
            said = short(p["content"], 50) if p.get("content") else ""
            return "assistant: " + "; ".join(x for x in [said, *calls] if x)
        if kind == "tool_call" and "name" in p:
            gate = " [needs approval]" if p.get("needs_approval") else ""
            return f"{p['name']}({short(p.get('arguments', {}), 40)}){gate}"
        if kind == "tool_result" and "content" in p:
            return f"{p.get('name', 'tool')} -> {short(p['content'], 50)}"
        if kind == "verification" and "decision" in p:
            return f"{p['decision']}" + (f": {p['reason']}" if p.get("reason") else "")
        if kind == "answer" and "output" in p:
            return f"answer: {short(p['output'], 50)}"
        if kind == "protocol_error" and isinstance(p.get("error"), dict):
            return f"error [{p['error'].get('code')}] {short(p['error'].get('message', ''), 40)}"
        if kind == "resource" and "name" in p:
            if p.get("deleted"):
                return f"{p['name']} deleted"
            return f"{p['name']} = {short(p.get('value'), 50)}"
        if kind == "semantic" and "type" in p:
            return f"{p['type']}:{p['key']} = {short(p.get('content'), 50)}"
        if kind == "system" and "content" in p:
            return f"system: {short(p['content'], 50)}"
    except (KeyError, TypeError, AttributeError):
        pass
    return short(payload)


def history(console: Console, result: StateOperationResult, *, full: bool = False) -> None:
    table = Table(title=f"{result.scope}  (namespace {result.namespace})", title_justify="left")
    for col in ("seq", "kind", "id", "what"):
        table.add_column(col, justify="right" if col == "seq" else "left", no_wrap=col != "what")
    for n in result.nodes:
        payload = n["payload"]
        table.add_row(
            str(n["sequence"]),
            n["kind"],
            n["id"],
            orjson.dumps(payload).decode() if full else gist(n["kind"], payload),
        )
    console.print(table)
    if result.next_after is not None:
        console.print(f"more: tether history ... --after {result.next_after}")
    nb = result.metadata.get("next_before")
    if nb is not None:
        console.print(f"more: tether history ... --desc --before {nb}")


def checks(console: Console, found: list[ScopeCheck]) -> None:
    table = Table(title="verify", title_justify="left")
    for col in ("scope", "result", "nodes", "first bad node"):
        table.add_column(col)
    for c in found:
        where = ""
        if not c.ok:
            where = f"[{c.code}] "
            if c.index is not None:
                where += f"node {c.index} "
            if c.node_id:
                where += f"{c.node_id} "
            where += c.message or ""
        nodes = f"{c.checked} ({c.erased} erased)" if c.erased else str(c.checked)
        table.add_row(c.scope, "ok" if c.ok else Text("FAILED", style="bold red"), nodes, where)
    console.print(table)


def reset(console: Console, result: StateOperationResult) -> None:
    for c in result.cleared:
        console.print(f"cleared {c}")
    for m in result.missing:
        console.print(f"nothing to clear at {m}")
    for e in result.errors:
        console.print(f"not done: {e.get('store', '')} {e['message']}")


def runs(console: Console, result: RunList) -> None:
    """The run index: one row per run, what a suspended one waits for."""
    table = Table(title=f"runs of namespace {result.namespace}", title_justify="left")
    for col in ("thread", "status", "waiting for", "since", "run", "metadata"):
        table.add_column(col, overflow="fold")
    for r in result.runs:
        meta = {k: v for k, v in r.metadata.items() if v is not None}
        table.add_row(
            r.thread,
            r.status,
            ", ".join(f"{p.get('name')} ({p.get('call_id')})" for p in r.pending),
            r.updated_at.replace("T", " ").rstrip("Z"),
            r.run,
            short(meta, 40) if meta else "",
        )
    console.print(table)
    counts = ", ".join(f"{k} {v}" for k, v in result.counts.items())
    console.print(f"{len(result.runs)} shown; in the index: {counts or 'no runs'}")
    if result.next_after is not None:
        console.print(f"more: tether runs --after '{result.next_after}'")
