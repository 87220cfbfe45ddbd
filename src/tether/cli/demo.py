"""``tether demo``: what tether does, in a few screens, offline, on one SQLite file.

An agent with the scripted model (no network) works on ``tether-demo.db``:

1. memory across two processes: one process is told a name, another recalls it;
2. a tool that needs approval: a process suspends on a payment, this one approves;
3. a crash in the middle of a tool: a process is SIGKILLed while a slow tool runs,
   another resumes the run, re-issuing the tool with the same idempotency key;
4. compaction: a summary node stands for the older messages, history stays;
5. export and verify: the thread as a snapshot file, every identity recomputed;
6. a tampered export is rejected, with its code and the node, and nothing written.

It ends by printing where the state is and the commands to look at it.

The agent's processes are this module run as ``python -m tether.cli.demo phase DB ...``;
each prints JSON lines (``{"event": ...}`` while it works, ``{"result": ...}`` last).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from .. import control
from ..core.errors import InvalidSnapshot, TetherError
from ..models import Rule, ScriptedModel, call
from ..projections.conversation import load_conversation
from ..runtime import Agent, Spec, StepResult, tool
from ..store import Store, open_store

NAMESPACE: Final = "default"
USER: Final = "ada"
SYSTEM: Final = "You are the tether demo agent. Be brief."
_CHILD_TIMEOUT: Final = 60.0

# --------------------------------------------------------------------------- the agent


def _ledger_path() -> Path | None:
    p = os.environ.get("TETHER_DEMO_LEDGER")
    return Path(p) if p else None


def _ledger(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Append to the tools' own side-effect ledger (fsynced); return earlier entries of the key."""
    path = _ledger_path()
    if path is None:
        return []
    earlier = []
    if path.exists():
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if e["key"] == entry["key"]:
                earlier.append(e)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return earlier


def _event(**data: Any) -> None:
    print(json.dumps({"event": data}), flush=True)


@tool
async def slow_report(name: str, idempotency_key: str) -> str:
    """Build a report (slow: it runs for a while)."""
    earlier = _ledger({"tool": "slow_report", "key": idempotency_key, "pid": os.getpid()})
    _event(tool="slow_report", key=idempotency_key, pid=os.getpid(), attempt=len(earlier) + 1)
    await asyncio.sleep(float(os.environ.get("TETHER_DEMO_SLEEP", "0")))
    note = f" (attempt {len(earlier) + 1}, same idempotency key)" if earlier else ""
    return f"report {name} is ready{note}"


@tool(needs_approval=True)
def transfer(amount: int, to: str, idempotency_key: str) -> str:
    """Send money. A person must approve it first."""
    _ledger({"tool": "transfer", "key": idempotency_key, "pid": os.getpid(), "amount": amount})
    return f"sent {amount} EUR to {to}"


@tool
def get_weather(city: str) -> str:
    """The weather in a city (made up, deterministic)."""
    return f"18°C and sunny in {city}"


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                match=r"build the (\w+) report",
                tools=[call("slow_report", name="{1}")],
                then="Done: {result}.",
            ),
            Rule(
                match=r"pay (\d+) (?:eur )?to (\w+)",
                tools=[call("transfer", amount="{1}", to="{2}")],
                then="Payment made: {result}.",
            ),
            *ScriptedModel.demo().rules,
        ]
    )


def agent(store: Store) -> Agent:
    return Agent(
        Spec.single(system=SYSTEM),
        model(),
        store=store,
        namespace=NAMESPACE,
        tools=[slow_report, transfer, get_weather],
    )


# --------------------------------------------------------------------------- child side


async def _phase(argv: list[str]) -> None:
    db, cmd, *rest = argv
    store = await open_store(db)
    try:
        a = agent(store)
        result: StepResult
        if cmd == "step":
            thread, user, text = rest
            result = await a.step(text, thread=thread, user=user or None)
        elif cmd == "resume":
            result = await a.resume(rest[0])
        else:
            raise SystemExit(f"unknown phase {cmd!r}")
        print(json.dumps({"result": result.to_dict(), "pid": os.getpid()}), flush=True)
    finally:
        await store.close()


# --------------------------------------------------------------------------- parent side


@dataclass
class Child:
    pid: int
    events: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    killed: bool = False


async def _child(db: str, *args: str, env: dict[str, str], kill_on: str | None = None) -> Child:
    """Run one agent process; SIGKILL it when it reports the event ``kill_on`` (a tool start)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tether.cli.demo",
        "phase",
        db,
        *args,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )
    assert proc.stdout is not None
    child = Child(pid=proc.pid)
    try:
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), _CHILD_TIMEOUT)
            if not line:
                break
            msg = json.loads(line)
            if "event" in msg:
                child.events.append(msg["event"])
                if kill_on is not None and msg["event"].get("tool") == kill_on:
                    os.kill(proc.pid, signal.SIGKILL)  # no cleanup, no goodbye: a crash
                    child.killed = True
            elif "result" in msg:
                child.result = msg["result"]
        await asyncio.wait_for(proc.wait(), _CHILD_TIMEOUT)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    if not child.killed and proc.returncode != 0:
        raise TetherError(
            f"demo process {proc.pid} ({' '.join(args[:1])}) exited with {proc.returncode}",
            code="demo_failed",
        )
    return child


class Screen:
    """Prints for a person; stays quiet in --json mode (the summary is printed at the end)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.console = Console(highlight=False)

    def title(self, n: int, text: str) -> None:
        if not self.quiet:
            self.console.print()
            self.console.rule(f"[bold]{n}. {text}", align="left")

    def say(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text)

    def turn(self, who: str, user_text: str, reply: str) -> None:
        self.say(
            f"  [dim]{who}[/dim]\n  [cyan]user[/cyan]  {user_text}\n  [green]agent[/green] {reply}"
        )

    def print(self, obj: Any) -> None:
        if not self.quiet:
            self.console.print(obj)


def _answer(child: Child) -> str:
    r = child.result or {}
    if r.get("status") == "suspended":
        return "[yellow](suspended: the run waits for a person's decision)[/yellow]"
    return str(r.get("answer") if r.get("status") == "completed" else r.get("status"))


async def _fresh(db: str, screen: Screen) -> None:
    if not Path(db).exists():
        return
    # Never delete a file: clear the demo's namespace in it (a tether store, or an error).
    async with await open_store(db) as store:
        n = await store.delete_namespace(NAMESPACE)
    if n:
        screen.say(f"[dim]starting afresh: reset {n} scopes of an earlier demo run in {db}[/dim]")


async def demo_main(db: str, *, fresh: bool, quiet: bool) -> dict[str, Any]:
    screen = Screen(quiet)
    out: dict[str, Any] = {"db": str(Path(db).resolve()), "namespace": NAMESPACE}
    export_path = str(Path(db).with_name(Path(db).stem + "-export.json"))
    started = time.monotonic()
    if fresh:
        await _fresh(db, screen)
    screen.print(
        Panel.fit(
            "tether keeps an agent's state in one append-only, content-addressed\n"
            "causal graph per scope. This demo runs a scripted agent (no network)\n"
            f"on [bold]{db}[/bold].",
            title="tether demo",
        )
    )
    with tempfile.TemporaryDirectory(prefix="tether-demo-") as tmp:
        env = {"TETHER_DEMO_LEDGER": str(Path(tmp) / "ledger.jsonl")}
        os.environ.update(env)  # the parent's own tools write to the same ledger

        # 1 ------------------------------------------------------------------ memory
        screen.title(1, "Memory across two processes")
        a = await _child(db, "step", "support-1", USER, "Hi! My name is Ada.", env=env)
        screen.turn(
            f"process {a.pid}, thread support-1, user {USER}", "Hi! My name is Ada.", _answer(a)
        )
        b = await _child(db, "step", "support-2", USER, "What is my name?", env=env)
        screen.turn(
            f"process {b.pid}, thread support-2, user {USER}", "What is my name?", _answer(b)
        )
        screen.say(
            "  The name is semantic memory in the user's scope, committed before the\n"
            "  first process exited; the second one, on another thread, read it back."
        )
        out["memory"] = {"told": a.pid, "recalled": b.pid, "answer": _answer(b)}

        # 2 ------------------------------------------------------------------ approval
        screen.title(2, "A tool that needs approval")
        c = await _child(db, "step", "support-1", USER, "Please pay 120 EUR to bob.", env=env)
        pending = (c.result or {}).get("pending_approvals", [])
        screen.turn(f"process {c.pid}", "Please pay 120 EUR to bob.", _answer(c))
        for p in pending:
            screen.say(f"  waiting for a person: {p['name']}({json.dumps(p['arguments'])})")
            screen.say(f"  [dim]call {p['call_id']}, durable in the graph[/dim]")
        async with await open_store(db) as store:
            ag = agent(store)
            approved = await ag.approve("support-1", pending[0]["call_id"], reason="looks right")
        screen.say(f"  process {os.getpid()} (this one) approves; the run continues here:")
        screen.say(f"  [green]agent[/green] {approved.answer}")
        out["approval"] = {
            "suspended_in": c.pid,
            "call": pending[0]["call_id"],
            "answer": approved.answer,
        }

        # 3 ------------------------------------------------------------------ crash
        screen.title(3, "A crash in the middle of a tool, and the resume")
        slow = {**env, "TETHER_DEMO_SLEEP": "60"}
        d = await _child(
            db, "step", "jobs", "", "Build the nightly report.", env=slow, kill_on="slow_report"
        )
        key = d.events[-1]["key"] if d.events else "?"
        screen.say(f"  process {d.pid} started slow_report and was SIGKILLed in the middle")
        screen.say(f"  [dim]idempotency key {key}[/dim]")
        async with await open_store(db) as store:
            runs = await control.describe(
                store, namespace=NAMESPACE, thread="jobs", stores=["executions"], include_data=True
            )
        (ex,) = [r for r in runs.stores if r.name == "executions"]
        status = ex.data[-1]["status"] if ex.data else "?"
        screen.say(f"  the graph says the run is [bold]{status}[/bold]: a tool call, no result")
        e = await _child(db, "resume", "jobs", env=env)
        again = e.events[-1] if e.events else {}
        same = "the same key" if again.get("key") == key else "a DIFFERENT key"
        screen.say(
            f"  process {e.pid} resumes: completed steps are skipped; slow_report is\n"
            f"  re-issued (attempt {again.get('attempt', '?')}) with {same}, so it can deduplicate"
        )
        screen.say(f"  [green]agent[/green] {_answer(e)}")
        out["crash"] = {
            "killed": d.pid,
            "status_after_kill": status,
            "resumed_in": e.pid,
            "same_key": again.get("key") == key,
            "answer": _answer(e),
        }

        # 4 ------------------------------------------------------------------ compaction
        screen.title(4, "Compaction")
        async with await open_store(db) as store:
            ag = agent(store)
            for text in (
                "I like green tea.",
                "What is the weather in Lisbon?",
                "What do I like?",
                "Hello again!",
            ):
                await ag.step(text, thread="support-1", user=USER)
            before_nodes = (await store.head(NAMESPACE, "thread:support-1")).sequence
            result = await control.compact(
                store,
                namespace=NAMESPACE,
                thread="support-1",
                strategy="summary",
                max_messages=8,
                preserve_recent=4,
            )
            (rep,) = result.stores
            view = await load_conversation(store, NAMESPACE, "support-1")
            after_nodes = (await store.head(NAMESPACE, "thread:support-1")).sequence
        m = rep.metadata
        summary = next(
            (x["content"] for x in view if x["role"] == "system" and "Summary" in x["content"]), ""
        )
        first = summary.splitlines()[0] if summary else ""
        screen.say(f"  thread support-1: {m['before']} messages; strategy summary, keep 4")
        screen.say(f"  the model now sees {len(view)} messages: the summary, then the latest ones")
        screen.say(f"  [dim]{first[:70]}{'…' if len(summary) > len(first[:70]) else ''}[/dim]")
        screen.say(
            f"  non-destructive: {before_nodes} -> {after_nodes} nodes (one summary node);\n"
            "  every message is still in the graph (`tether history`)"
        )
        out["compaction"] = {
            "before": m["before"],
            "after": m["after"],
            "nodes_before": before_nodes,
            "nodes_after": after_nodes,
        }

        # 5 ------------------------------------------------------------------ export
        screen.title(5, "Export and verify")
        async with await open_store(db) as store:
            with open(export_path, "wb") as f:
                async for chunk in control.export_chunks(store, NAMESPACE, "thread:support-1"):
                    f.write(chunk)
            checked = await control.verify(store, namespace=NAMESPACE)
            data = Path(export_path).read_bytes()
            await control.import_snapshot(
                store, NAMESPACE, "thread:support-1-copy", data, replace=True
            )
            copy = await control.export_snapshot(store, NAMESPACE, "thread:support-1-copy")
        file_check = control.verify_snapshot(data)
        nodes = len(orjson.loads(data)["nodes"])
        screen.say(f"  thread support-1: {nodes} nodes, {len(data)} bytes -> {export_path}")
        screen.say(
            f"  the file verifies: {'ok' if file_check.ok else file_check.code} "
            f"({file_check.checked} identities recomputed); so does every scope:"
        )
        table = Table(box=None, padding=(0, 2))
        for col in ("scope", "nodes", "verify"):
            table.add_column(col)
        for chk in checked.checks:
            table.add_row(chk.scope, str(chk.checked), "ok" if chk.ok else f"[red]{chk.code}[/red]")
        screen.print(table)
        screen.say(
            "  imported as thread support-1-copy and exported again: "
            f"{'byte-identical' if copy == data else 'DIFFERENT'}"
        )
        out["export"] = {
            "path": str(Path(export_path).resolve()),
            "nodes": nodes,
            "bytes": len(data),
            "verified_scopes": len(checked.checks),
            "all_ok": checked.ok and file_check.ok,
            "round_trip_identical": copy == data,
        }

        # 6 ------------------------------------------------------------------ tampering
        screen.title(6, "A tampered export is rejected")
        snap = orjson.loads(data)
        victim = next(
            i
            for i, n in enumerate(snap["nodes"])
            if n["kind"] == "tool_call" and n["payload"].get("name") == "transfer"
        )
        snap["nodes"][victim]["payload"]["arguments"]["amount"] = 12000
        tampered = Path(tmp) / "tampered.json"
        tampered.write_bytes(orjson.dumps(snap))
        screen.say("  someone edits the approved payment in the file: amount 120 -> 12000")
        rejected: InvalidSnapshot | None = None
        async with await open_store(db) as store:
            try:
                await control.import_snapshot(
                    store, NAMESPACE, "thread:support-1-tampered", tampered.read_bytes()
                )
            except InvalidSnapshot as err:
                rejected = err
            written = (await store.head(NAMESPACE, "thread:support-1-tampered")).sequence
        if rejected is None:
            raise TetherError("the tampered export was accepted: this is a bug", code="demo_failed")
        screen.say(
            f"  import refused: [bold red]{rejected.code}[/bold red] at node {rejected.index}, "
            f"{rejected.node_id}"
        )
        screen.say(f"  [dim]{rejected.message.split(' (node')[0]}[/dim]")
        screen.say(f"  nodes written: {written}; `tether import` exits with code 3 on it")
        out["tamper"] = {
            "code": rejected.code,
            "index": rejected.index,
            "node_id": rejected.node_id,
            "written": written,
        }
    os.environ.pop("TETHER_DEMO_LEDGER", None)

    # the end ----------------------------------------------------------------------
    store_arg = f"--store {db}"
    commands = [
        f"tether {store_arg} threads",
        f"tether {store_arg} describe --thread support-1 --data",
        f"tether {store_arg} history --thread jobs",
        f"tether {store_arg} verify",
        f"tether verify --file {export_path}",
        f"tether {store_arg} fork --thread support-1 --node <id>",
        f"tether {store_arg} reset --thread support-2",
    ]
    out["commands"] = commands
    out["seconds"] = round(time.monotonic() - started, 2)
    screen.title(7, "Where the state is")
    screen.say(f"  state:  [bold]{out['db']}[/bold] (SQLite, namespace {NAMESPACE})")
    screen.say(f"  export: [bold]{out['export']['path']}[/bold]")
    screen.say("  look at it:")
    for cmd in commands:
        screen.say(f"    {cmd}")
    screen.say(f"[dim]done in {out['seconds']} s[/dim]")
    return out


def run_demo(db: str = "tether-demo.db", *, fresh: bool = True, as_json: bool = False) -> int:
    """Run the demo (the ``tether demo`` command). Returns the exit code."""
    out = asyncio.run(demo_main(db, fresh=fresh, quiet=as_json))
    if as_json:
        print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
    return 0


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "phase":
        asyncio.run(_phase(args[1:]))
        return
    from . import main as cli_main

    cli_main(["demo", *args])


if __name__ == "__main__":
    main()
