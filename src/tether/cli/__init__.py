"""The ``tether`` command: the control plane from a shell.

    tether [--store URL] [--namespace NS] [--json] COMMAND [OPTIONS]

    tether runs --status suspended      every run waiting for a human

Every command works on a store URL (default ``./tether.db``, or ``$TETHER_STORE``)
and a namespace (default ``default``, or ``$TETHER_NAMESPACE``). An encrypted
store opens with the master key in ``$TETHER_MASTER_KEY`` (or the file named by
``$TETHER_MASTER_KEY_FILE``; ``..._OLD`` during a rotation, see docs/encryption.md);
``tether erase-user --user ID`` erases a user there. People get tables
and progress bars; scripts pass ``--json`` and read one JSON document on stdout
(the operation's ``StateOperationResult.to_dict()``). Library errors are turned
into one line at this edge and nowhere else.

Exit codes (also in ``tether --help``):

    0  success
    1  the operation failed (a tether error: not found, store unavailable ...)
    2  usage: bad options or an invalid request
    3  verification failed, or a snapshot is invalid
    4  conflict: another writer moved the state, or the target scope is not empty

``tether mcp`` serves the store as an MCP memory server (cli/mcp_cmd.py; the SDK, the
``mcp`` extra, is imported only when it starts).

A ``serve`` command is added when ``tether.server`` provides one (a click command
named ``serve`` in ``tether.server.cli``); without it, ``tether serve`` says what
to install.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import importlib.util
import os
import shlex
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .. import __version__, control
from ..control.types import STORES, STRATEGIES, ScopeCheck, StateOperationRequest
from ..core.errors import Conflict, InvalidRequest, InvalidSnapshot, NotFound, TetherError
from ..store import Store, open_store
from . import render

__all__ = ["main"]

T = TypeVar("T")

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INVALID = 3
EXIT_CONFLICT = 4
COMMANDLINE = click.core.ParameterSource.COMMANDLINE
DEFAULT_STORE = "tether.db"
DEFAULT_NAMESPACE = "default"

EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  the operation failed (a tether error)
  2  usage: bad options or an invalid request
  3  verification failed, or a snapshot is invalid
  4  conflict: state moved under us, or the target scope is not empty
"""


@dataclass(frozen=True, kw_only=True)
class Settings:
    store_url: str
    namespace: str
    json: bool


class VerificationFailed(TetherError):
    """Raised at the CLI edge when verify found a bad node (exit code 3)."""

    default_code = "verification_failed"


def exit_code(err: TetherError) -> int:
    if isinstance(err, InvalidSnapshot | VerificationFailed):
        return EXIT_INVALID
    if isinstance(err, Conflict):
        return EXIT_CONFLICT
    if isinstance(err, InvalidRequest):
        return EXIT_USAGE
    return EXIT_ERROR


def _fail(settings: Settings, err: TetherError) -> NoReturn:
    if settings.json:
        click.echo(orjson.dumps(err.to_dict(), option=orjson.OPT_INDENT_2).decode(), err=True)
    else:
        click.echo(f"error [{err.code}]: {err.message}", err=True)
    sys.exit(exit_code(err))


def hint(settings: Settings, args: str) -> str:
    """A ``tether ...`` command line to suggest, with the --store and -n in use."""
    parts = ["tether"]
    if settings.store_url != DEFAULT_STORE:
        parts += ["--store", shlex.quote(settings.store_url)]
    if settings.namespace != DEFAULT_NAMESPACE:
        parts += ["-n", shlex.quote(settings.namespace)]
    return " ".join([*parts, args])


async def written(store: Store, settings: Settings, scope: str) -> None:
    """Raise NotFound for a scope nothing was ever written to (a reset one was written)."""
    head = await store.head(settings.namespace, scope)
    if head.generation == 0 and head.sequence == 0:
        kind, _, name = scope.partition(":")
        what = f"{kind} {name}" if name else scope
        raise NotFound(
            f"no {what} in namespace {settings.namespace} of {settings.store_url}: nothing "
            f"was ever written there (the threads: `{hint(settings, 'threads')}`)",
            scope=scope,
            namespace=settings.namespace,
        )


def confirm(settings: Settings, action: str) -> None:
    """Ask a person at a terminal; without one, refuse (a usage error naming --yes)."""
    if not sys.stdin.isatty():
        _fail(
            settings,
            InvalidRequest(
                f"not asked whether to {action}: no terminal is attached; pass --yes to confirm",
                code="confirmation_required",
                field="yes",
            ),
        )
    if not click.confirm(action[0].upper() + action[1:] + "?", err=True):
        _fail(
            settings,
            TetherError("not confirmed: nothing was changed", code="not_confirmed"),
        )


def _is_sqlite_file(url: str) -> bool:
    return "://" not in url or url.lower().startswith("sqlite://")


async def _open(settings: Settings, *, create: bool) -> Store:
    if _is_sqlite_file(settings.store_url) and not create:
        from ..store.sqlite import parse_url

        path, _ = parse_url(settings.store_url)
        if path != ":memory:" and not Path(path).exists():
            raise NotFound(
                f"no store at {path}: pass --store with an existing store's URL, or make "
                f"this one with the demo's threads: `{hint(settings, 'demo')}`",
                path=path,
            )
    from ..crypto import cipher_from_env

    # Encrypted when $TETHER_MASTER_KEY (or _FILE) is set; without it an encrypted
    # store refuses to open (MissingKey), so the key never goes on a command line.
    return await open_store(settings.store_url, cipher=cipher_from_env())


def run(settings: Settings, fn: Callable[[Store], Awaitable[T]], *, create: bool = False) -> T:
    """Open the store, run ``fn`` on it, close it; a TetherError becomes one line and an exit code."""

    async def go() -> T:
        store = await _open(settings, create=create)
        try:
            return await fn(store)
        finally:
            await store.close()

    try:
        return asyncio.run(go())
    except TetherError as e:
        _fail(settings, e)


def console() -> Console:
    # Made per call so that output goes to the sys.stdout of the moment (CliRunner swaps it).
    return Console(soft_wrap=False, highlight=False)


def emit(settings: Settings, data: dict[str, Any], show: Callable[[Console], None]) -> None:
    if settings.json:
        click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
    else:
        show(console())


def progress(settings: Settings, label: str) -> Progress:
    """A progress bar on stderr, shown only to a person at a terminal."""
    err = Console(stderr=True)
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=settings.json or not err.is_terminal,
    )


def request(settings: Settings, **fields: Any) -> StateOperationRequest:
    """Build a request; its validation errors are usage errors (exit 2)."""
    try:
        return StateOperationRequest(namespace=settings.namespace, **fields)
    except InvalidRequest as e:
        _fail(settings, e)


def scope_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--app", is_flag=True, help="The app scope (the whole deployment).")(f)
    f = click.option("--user", "-u", metavar="ID", help="A user's scope.")(f)
    f = click.option("--thread", "-t", metavar="ID", help="A thread (conversation).")(f)
    return f


def _stores(value: str | None) -> tuple[str, ...]:
    return tuple(s.strip() for s in value.split(",") if s.strip()) if value else ()


# --------------------------------------------------------------------------- the group


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES_HELP,
)
@click.option(
    "--store",
    "store_url",
    envvar="TETHER_STORE",
    default="tether.db",
    show_default=True,
    metavar="URL",
    help="Store URL: a SQLite file path, sqlite:///x.db, postgresql://..., redis://..., memory://",
)
@click.option(
    "--namespace",
    "-n",
    envvar="TETHER_NAMESPACE",
    default="default",
    show_default=True,
    help="Namespace (tenant) inside the store.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of tables.")
@click.version_option(__version__, prog_name="tether")
@click.pass_context
def main(ctx: click.Context, store_url: str, namespace: str, as_json: bool) -> None:
    """tether: durable state for AI agents. Inspect, export, verify, fork, compact and reset it.

    Start with `tether demo`, then look at what it left with `tether --store tether-demo.db threads`.
    An encrypted store is opened with the master key in $TETHER_MASTER_KEY (or
    $TETHER_MASTER_KEY_FILE).
    """
    ctx.obj = Settings(store_url=store_url, namespace=namespace, json=as_json)
    for name, value in (("namespace", namespace), ("store", store_url)):
        if not value.strip():
            _fail(ctx.obj, InvalidRequest(f"--{name} is empty: give it a name", field=name))


def _settings(ctx: click.Context) -> Settings:
    s = ctx.find_object(Settings)
    assert s is not None
    return s


# --------------------------------------------------------------------------- threads


@main.command()
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--after", metavar="ID", help="List threads after this id (paging).")
@click.option("--all", "all_scopes", is_flag=True, help="List every scope, not only threads.")
@click.pass_context
def threads(ctx: click.Context, limit: int, after: str | None, all_scopes: bool) -> None:
    """List the threads of the namespace (or every scope with --all)."""
    s = _settings(ctx)
    prefix = "" if all_scopes else "thread:"

    async def go(store: Store) -> list[dict[str, Any]]:
        cursor = None if after is None else (after if all_scopes else "thread:" + after)
        page = await store.list_scopes(s.namespace, prefix=prefix, after=cursor, limit=limit + 1)
        out = []
        for info in page[:limit]:
            st = await store.stats(s.namespace, info.scope)
            out.append(
                {
                    "scope": info.scope,
                    "thread": info.scope[7:] if info.scope.startswith("thread:") else None,
                    "nodes": st.nodes,  # not the sequence: a pruned scope has holes
                    "generation": info.generation,
                    "size_bytes": st.payload_bytes,
                    "runs": st.kinds.get("goal", 0),
                }
            )
        return out + ([{"more": True}] if len(page) > limit else [])

    rows = run(s, go)
    more = bool(rows and rows[-1].get("more"))
    rows = [r for r in rows if "more" not in r]
    nxt = (rows[-1]["thread"] or rows[-1]["scope"]) if more and rows else None

    def show(c: Console) -> None:
        from rich.table import Table

        table = Table(title=f"namespace {s.namespace}", title_justify="left")
        for col in ("scope" if all_scopes else "thread", "nodes", "runs", "size", "generation"):
            table.add_column(col, justify="left" if col in ("thread", "scope") else "right")
        for r in rows:
            table.add_row(
                r["scope"] if all_scopes else r["thread"],
                str(r["nodes"]),
                str(r["runs"]),
                render.size(r["size_bytes"]),
                str(r["generation"]),
            )
        c.print(table)
        if not rows:
            c.print(f"no threads yet: `{hint(s, 'demo')}` makes some", soft_wrap=True)
        if nxt is not None:
            c.print(f"more: tether threads --after {nxt}")

    emit(s, {"namespace": s.namespace, "threads": rows, "next_after": nxt}, show)


# --------------------------------------------------------------------------- runs


@main.command()
@click.option(
    "--status",
    "-s",
    "statuses",
    multiple=True,
    type=click.Choice(control.RUN_STATUSES),
    help="Only runs in this status (repeatable), e.g. --status suspended.",
)
@click.option("--thread", "-t", metavar="ID", help="Only the runs of this thread.")
@click.option("--user", "-u", metavar="ID", help="Only the runs of this user.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--after", metavar="CURSOR", help="Continue a listing (its next_after).")
@click.option("--reindex", is_flag=True, help="Rebuild the run index from the threads first.")
@click.pass_context
def runs(
    ctx: click.Context,
    statuses: tuple[str, ...],
    thread: str | None,
    user: str | None,
    limit: int,
    after: str | None,
    reindex: bool,
) -> None:
    """List the namespace's runs from its run index, e.g. every run waiting for a human.

    Reads each thread's index entry (one indexed query), not the threads' nodes
    (--reindex reads every thread to rebuild the entries).
    """
    s = _settings(ctx)

    async def go(store: Store) -> control.RunList:
        if reindex:
            await control.reindex(store, s.namespace)
        return await control.runs(
            store,
            namespace=s.namespace,
            status=statuses or None,
            thread=thread,
            user=user,
            after=after,
            limit=limit,
        )

    result = run(s, go)
    emit(s, result.to_dict(), lambda c: render.runs(c, result))


# --------------------------------------------------------------------------- describe


@main.command()
@scope_options
@click.option(
    "--data", is_flag=True, help="Include the stores' data (messages, values, memory, runs)."
)
@click.option("--only", metavar="STORES", help=f"Comma-separated stores: {', '.join(STORES)}.")
@click.option(
    "--llm", default="agent", show_default=True, help="The LLM node whose conversation to show."
)
@click.pass_context
def describe(
    ctx: click.Context,
    thread: str | None,
    user: str | None,
    app: bool,
    data: bool,
    only: str | None,
    llm: str,
) -> None:
    """What a scope holds, store by store (or every scope of the namespace)."""
    s = _settings(ctx)
    req = request(
        s, thread=thread, user=user, app=app, include_data=data, stores=_stores(only), llm=llm
    )

    async def go(store: Store) -> control.StateOperationResult:
        if req.scope is not None:
            await written(store, s, req.scope)
        return await control.describe(store, req)

    result = run(s, go)
    emit(s, result.to_dict(), lambda c: render.describe(c, result))


# --------------------------------------------------------------------------- history


@main.command()
@scope_options
@click.option("--after", default=0, show_default=True, help="Nodes with a sequence after this.")
@click.option("--before", type=int, help="Nodes with a sequence before this.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--desc", is_flag=True, help="Newest first.")
@click.option("--full", is_flag=True, help="Whole payloads, not one-line summaries.")
@click.pass_context
def history(
    ctx: click.Context,
    thread: str | None,
    user: str | None,
    app: bool,
    after: int,
    before: int | None,
    limit: int,
    desc: bool,
    full: bool,
) -> None:
    """A page of a scope's nodes, in sequence order."""
    s = _settings(ctx)
    req = request(
        s,
        thread=thread,
        user=user,
        app=app,
        after=after,
        before=before,
        limit=limit,
        descending=desc,
    )

    async def go(store: Store) -> control.StateOperationResult:
        if req.scope is not None:
            await written(store, s, req.scope)
        return await control.history(store, req)

    result = run(s, go)
    emit(s, result.to_dict(), lambda c: render.history(c, result, full=full))


# --------------------------------------------------------------------------- export / import


@main.command()
@scope_options
@click.option(
    "--output", "-o", metavar="FILE", default="-", help="Where to write (default stdout)."
)
@click.pass_context
def export(
    ctx: click.Context, thread: str | None, user: str | None, app: bool, output: str
) -> None:
    """Write a scope's snapshot ({"version","nodes","frontier"} JSON), streamed page by page."""
    s = _settings(ctx)
    req = request(s, thread=thread, user=user, app=app)
    if req.scope is None:
        _fail(s, InvalidRequest("export needs a scope: --thread, --user or --app", field="thread"))
    scope = req.scope

    async def go(store: Store) -> tuple[int, int]:
        await written(store, s, scope)
        size = 0
        nodes = 0
        with progress(s, f"export {scope}") as bar:
            task = bar.add_task("export", total=None)

            def tick(done: int, total: int) -> None:
                nonlocal nodes
                nodes = done
                bar.update(task, completed=done, total=total)

            # A file is written beside its target and renamed at the end, so a failed
            # export never leaves a truncated snapshot under the requested name.
            part = output + ".part"
            out = sys.stdout.buffer if output == "-" else open(part, "wb")  # noqa: SIM115
            try:
                async for chunk in control.export_chunks(store, s.namespace, scope, progress=tick):
                    out.write(chunk)
                    size += len(chunk)
                if output == "-":
                    out.write(b"\n")
            except BaseException:
                if output != "-":
                    out.close()
                    Path(part).unlink(missing_ok=True)
                raise
            if output == "-":
                out.flush()
            else:
                out.close()
                os.replace(part, output)
        return nodes, size

    try:
        nodes, size = run(s, go)
    except OSError as e:
        _fail(s, TetherError(f"cannot write {output}: {e.strerror}", code="io"))
    if output != "-":
        emit(
            s,
            {
                "namespace": s.namespace,
                "scope": scope,
                "nodes": nodes,
                "bytes": size,
                "path": output,
            },
            lambda c: c.print(
                f"exported {nodes} nodes of {scope} to {output} ({render.size(size)})"
            ),
        )


@main.command(name="import")
@click.argument("file")
@scope_options
@click.option("--new-thread", metavar="ID", help="Import as this new thread (instead of --thread).")
@click.option("--replace", is_flag=True, help="Reset the target scope first if it holds nodes.")
@click.pass_context
def import_cmd(
    ctx: click.Context,
    file: str,
    thread: str | None,
    user: str | None,
    app: bool,
    new_thread: str | None,
    replace: bool,
) -> None:
    """Validate a snapshot FILE (or - for stdin) and write it into an empty scope in one commit."""
    s = _settings(ctx)
    req = request(s, thread=thread or new_thread, user=user, app=app, replace=replace)
    if req.scope is None:
        _fail(
            s,
            InvalidRequest(
                "import needs a target: --thread, --new-thread, --user or --app", field="thread"
            ),
        )
    scope = req.scope
    # Read as a stream (limits enforced while it is read), never whole into memory.
    data = sys.stdin.buffer if file == "-" else Path(file)

    async def go(store: Store) -> int:
        # Exactly what the file holds: a thread's run index entries travel in its graph,
        # so its runs are in `tether runs` at once (`tether runs --reindex` for others).
        state = await control.import_snapshot(store, s.namespace, scope, data, replace=replace)
        return len(state)

    nodes = run(s, go, create=True)
    emit(
        s,
        {
            "operation": "import",
            "namespace": s.namespace,
            "scope": scope,
            "created": scope,
            "nodes": nodes,
            "replaced": replace,
        },
        lambda c: c.print(f"imported {nodes} nodes into {scope}"),
    )


# --------------------------------------------------------------------------- verify


@main.command()
@scope_options
@click.option(
    "--file", "-f", "file", metavar="FILE", help="Verify a snapshot file instead of the store."
)
@click.pass_context
def verify(
    ctx: click.Context, thread: str | None, user: str | None, app: bool, file: str | None
) -> None:
    """Recompute every identity and link; name the first bad node. Exit 3 if anything fails.

    Without a scope, every scope of the namespace is verified.
    """
    s = _settings(ctx)
    req = request(s, thread=thread, user=user, app=app)
    if file is not None:
        source = sys.stdin.buffer if file == "-" else Path(file)
        found = [control.verify_snapshot(source, name=file)]
    else:

        async def go(store: Store) -> list[ScopeCheck]:
            if req.scope is not None:
                wanted = [req.scope]
            else:
                wanted = [r.scope or "" for r in (await control.describe(store, req)).stores]
            out = []
            with progress(s, "verify") as bar:
                task = bar.add_task("verify", total=len(wanted))
                for scope in wanted:
                    out.append(await control.verify_scope(store, s.namespace, scope))
                    bar.advance(task)
            return out

        found = run(s, go)
    result = control.StateOperationResult(
        operation="verify",
        namespace=s.namespace,
        scope=req.scope,
        checks=tuple(found),
        missing=tuple(c.scope for c in found if c.ok and not c.checked and file is None),
        metadata={
            "nodes": sum(c.checked for c in found),
            "file": file,
            **(
                {"erased": {c.scope: c.erased for c in found if c.erased}}
                if any(c.erased for c in found)
                else {}
            ),
        },
    )

    def show(c: Console) -> None:
        render.checks(c, found)
        for m in result.missing:
            c.print(f"note: {m} holds no nodes (nothing to verify)")

    emit(s, result.to_dict(), show)
    if not result.ok:
        sys.exit(EXIT_INVALID)


# --------------------------------------------------------------------------- fork


@main.command()
@click.option("--thread", "-t", metavar="ID", required=True, help="The thread to fork from.")
@click.option("--node", metavar="NODE_ID", required=True, help="The node the new thread starts at.")
@click.option("--new-thread", metavar="ID", help="The new thread's id (generated if not given).")
@click.pass_context
def fork(ctx: click.Context, thread: str, node: str, new_thread: str | None) -> None:
    """Start a new thread from any node: everything it depends on, with that node as the head."""
    s = _settings(ctx)
    req = request(s, thread=thread, node=node, new_thread=new_thread)
    result = run(s, lambda store: control.fork(store, req))
    emit(
        s,
        result.to_dict(),
        lambda c: c.print(
            f"forked {result.created} from {node} ({result.metadata['nodes']} nodes); "
            f"see it with: "
            f"{hint(s, 'history --thread ' + shlex.quote(result.metadata['thread']))}",
            soft_wrap=True,  # a command to copy: never cut into lines
        ),
    )


# --------------------------------------------------------------------------- reset


@main.command()
@scope_options
@click.option("--variable", "-v", metavar="NAME", help="Only this variable (a delete tombstone).")
@click.option(
    "--run", "-r", "run_id", metavar="RUN", help="Only this run (ended with a reset error)."
)
@click.option(
    "--only", metavar="STORES", help=f"Only these stores of the scope: {', '.join(STORES)}."
)
@click.option("--whole-namespace", is_flag=True, help="Every scope of the namespace.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def reset(
    ctx: click.Context,
    thread: str | None,
    user: str | None,
    app: bool,
    variable: str | None,
    run_id: str | None,
    only: str | None,
    whole_namespace: bool,
    yes: bool,
) -> None:
    """Clear exactly what is named: a scope, some of its stores, a variable, a run, or a namespace."""
    s = _settings(ctx)
    req = request(
        s,
        thread=thread,
        user=user,
        app=app,
        variable=variable,
        run=run_id,
        stores=_stores(only),
        whole_namespace=whole_namespace,
    )
    if req.scope is None and not whole_namespace:
        _fail(
            s,
            InvalidRequest(
                "say what to reset: --thread, --user or --app (with --variable, --run or --only "
                "to narrow it), or --whole-namespace",
                field="thread",
            ),
        )
    what = f"every scope of namespace {s.namespace}" if whole_namespace else str(req.scope)
    if req.variable:
        what = f"variable {req.variable} of {what}"
    elif req.run:
        what = f"run {req.run} of {what}"
    elif req.stores:
        what = f"{', '.join(req.stores)} of {what}"
    if not yes:
        confirm(s, f"reset {what} in {s.store_url}")

    async def go(store: Store) -> control.StateOperationResult:
        if req.scope is not None:
            await written(store, s, req.scope)
        return await control.reset(store, req)

    result = run(s, go)
    emit(s, result.to_dict(), lambda c: render.reset(c, result))


# --------------------------------------------------------------------------- erase-user


@main.command(name="erase-user")
@click.option("--user", "-u", metavar="ID", required=True, help="The user to erase.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def erase_user(ctx: click.Context, user: str, yes: bool) -> None:
    """Erase a user of an encrypted store: destroy their data key, for good.

    Every payload of user:ID and of the threads bound to the user becomes unreadable
    at once (here and in every copy of the database); the nodes and their ids stay.
    Needs $TETHER_MASTER_KEY. See docs/encryption.md.
    """
    s = _settings(ctx)
    req = request(s, user=user)  # validates the user id (a usage error, exit 2)
    if not yes:
        confirm(
            s,
            f"erase user {req.user} of namespace {s.namespace} in {s.store_url} "
            "(their data cannot be recovered)",
        )
    result = run(s, lambda store: control.erase_user(store, s.namespace, user))
    emit(
        s,
        result.to_dict(),
        lambda c: c.print(
            f"erased user {user}: {result.keys_destroyed} data key(s) destroyed, "
            f"{result.threads} bound thread(s) unreadable, "
            f"{result.unindexed_runs} run(s) taken out of the run index"
            if result.erased
            else f"nothing left to erase for user {user} "
            f"({result.unindexed_runs} run(s) taken out of the run index)"
        ),
    )


# --------------------------------------------------------------------------- prune


@main.command()
@click.option("--thread", "-t", metavar="ID", help="The thread to prune.")
@click.option("--user", "-u", metavar="ID", help="The user scope to prune (not a thread).")
@click.option(
    "--keep-versions",
    type=int,
    metavar="N",
    help="Keep the newest N versions of each variable, memory and run index entry; older ones go.",
)
@click.option(
    "--finished-before",
    metavar="TIME",
    help="Runs finished before this ISO 8601 time lose what no view shows; those a "
    "summary stands for go whole and leave the runs listing.",
)
@click.option(
    "--compacted/--no-compacted",
    default=True,
    show_default=True,
    help="Remove the finished runs a compaction summary stands for.",
)
@click.option(
    "--forget-runs",
    is_flag=True,
    help="Forget every pruned run id so far: the record keeps no tag of the runs cut "
    "(asked for, they are not found, not run_pruned) and they leave the runs listing.",
)
@click.option("--dry-run", is_flag=True, help="Say what would be freed; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def prune(
    ctx: click.Context,
    thread: str | None,
    user: str | None,
    keep_versions: int | None,
    finished_before: str | None,
    compacted: bool,
    forget_runs: bool,
    dry_run: bool,
    yes: bool,
) -> None:
    """Physically remove what nothing current needs from a thread (or user, or app) scope.

    What a compaction summary stands for, versions past --keep-versions, and of runs
    finished before --finished-before what no view shows (a run a summary stands for
    goes whole, and leaves the runs listing). The current version of everything else,
    runs not over (waiting for approval, a tool call without its result) and the latest
    run stay; every remaining node keeps its id, and a record of what was cut lets
    verify prove the rest. A run cut, asked for by id, says it was pruned (run_pruned)
    unless --forget-runs, which forgets every pruned run id so far. --dry-run first.
    """
    s = _settings(ctx)
    where = f"thread {thread}" if thread else f"user {user}" if user else "the app scope"
    if not dry_run and not yes:
        confirm(s, f"prune {where} of namespace {s.namespace} in {s.store_url}")

    def go(store: Store) -> Awaitable[control.PruneResult]:
        return control.prune(
            store,
            s.namespace,
            thread=thread,
            user=user,
            compacted=compacted,
            keep_versions=keep_versions,
            finished_before=finished_before,
            forget_runs=forget_runs,
            dry_run=dry_run,
        )

    result = run(s, go)
    verb = "would free" if result.dry_run else "freed"
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(result.reasons.items()))
    emit(
        s,
        result.to_dict(),
        lambda c: c.print(
            f"{where}: {verb} {result.nodes} node(s), {result.payload_bytes} payload bytes"
            + (f" ({reasons})" if reasons else "")
            + (f"; {result.runs} run(s) cut" if result.runs else "")
            + (
                f"; {result.forgotten_runs} pruned run id(s) forgotten"
                if result.forget_runs
                else ""
            )
        ),
    )


# --------------------------------------------------------------------------- retention, gc


@main.command(name="retention")
@click.option(
    "--idle-thread-days",
    type=float,
    metavar="DAYS",
    help="Delete threads idle longer than this (tether gc applies it); omit to show.",
)
@click.option(
    "--memory-ttl-days",
    type=float,
    metavar="DAYS",
    help="Forget memories not written for this long (tether gc applies it).",
)
@click.option(
    "--refresh-on-read/--no-refresh-on-read",
    "refresh_on_read",
    default=None,
    help="A read of memories restarts their TTL (as LangGraph's refresh_on_read).",
)
@click.option(
    "--export-idle-threads/--no-export-idle-threads",
    "export_idle",
    default=None,
    help="Write each idle thread's snapshot (tether gc --export-dir) before deleting it.",
)
@click.option("--forever", is_flag=True, help="Keep threads and memories forever (no limits).")
@click.pass_context
def retention_cmd(
    ctx: click.Context,
    idle_thread_days: float | None,
    memory_ttl_days: float | None,
    refresh_on_read: bool | None,
    export_idle: bool | None,
    forever: bool,
) -> None:
    """Show or set the namespace's retention policy (applied by tether gc)."""
    from ..control import retention as ret

    s = _settings(ctx)

    async def go(store: Store) -> ret.RetentionPolicy | None:
        current = await ret.retention(store, s.namespace) or ret.RetentionPolicy()
        if forever:
            return await ret.set_retention(store, s.namespace)
        if (idle_thread_days, memory_ttl_days, refresh_on_read, export_idle) == (None,) * 4:
            return current if current != ret.RetentionPolicy() else None
        return await ret.set_retention(
            store,
            s.namespace,
            idle_thread_days=idle_thread_days
            if idle_thread_days is not None
            else current.idle_thread_days,
            memory_ttl_days=memory_ttl_days
            if memory_ttl_days is not None
            else current.memory_ttl_days,
            memory_ttl_refresh_on_read=refresh_on_read
            if refresh_on_read is not None
            else current.memory_ttl_refresh_on_read,
            export_idle_threads=export_idle
            if export_idle is not None
            else current.export_idle_threads,
        )

    policy = run(s, go)
    data = {"namespace": s.namespace, "policy": policy.to_dict() if policy else None}
    emit(
        s,
        data,
        lambda c: c.print(
            f"namespace {s.namespace}: "
            + (
                f"threads idle over {policy.idle_thread_days:g} day(s) are "
                + ("exported, then deleted" if policy.export_idle_threads else "deleted")
                if policy and policy.idle_thread_days is not None
                else "threads are kept forever"
            )
            + (
                f", memories not written for {policy.memory_ttl_days:g} day(s) forgotten"
                if policy and policy.memory_ttl_days is not None
                else ""
            )
            + (
                " (a read restarts their time)"
                if policy and policy.memory_ttl_refresh_on_read
                else ""
            )
        ),
    )


@main.command()
@click.option("--all-namespaces", "every", is_flag=True, help="Every namespace with a policy.")
@click.option("--now", metavar="TIME", help="Judge idleness at this ISO 8601 time.")
@click.option("--dry-run", is_flag=True, help="Say which threads would go; change nothing.")
@click.option(
    "--export-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write each idle thread's snapshot here, checked, before deleting it.",
)
@click.pass_context
def gc(
    ctx: click.Context, every: bool, now: str | None, dry_run: bool, export_dir: Path | None
) -> None:
    """Apply retention policies: delete idle threads (each only if still idle). Cron-safe."""
    s = _settings(ctx)
    results = run(
        s,
        lambda store: control.gc(
            store,
            None if every else s.namespace,
            now=now,
            dry_run=dry_run,
            export_dir=export_dir,
        ),
    )
    verb = "would delete" if dry_run else "deleted"

    def show(c: Console) -> None:
        if not results:
            c.print("no retention policy: nothing to do")
        for r in results:
            c.print(f"namespace {r.namespace}: {verb} {len(r.deleted)} idle thread(s)")
            for scope in r.deleted:
                c.print(f"  {scope}")
            for path in r.exported:
                c.print(f"  exported to {path}")
            for scope in r.moved:
                c.print(f"  {scope} (written meanwhile: kept)")
            for scope in r.erased:
                c.print(f"  {scope} (erased: nothing to export, kept)")
            if r.forgotten:
                c.print(f"  {len(r.forgotten)} memory item(s) past their TTL forgotten")

    emit(s, {"operation": "gc", "namespaces": [r.to_dict() for r in results]}, show)


# --------------------------------------------------------------------------- stats


@main.command()
@click.option(
    "--all-namespaces",
    "every",
    is_flag=True,
    help="Every namespace (totals), not only --namespace.",
)
@click.option("--scopes/--no-scopes", default=None, help="One row per scope too.")
@click.pass_context
def stats(ctx: click.Context, every: bool, scopes: bool | None) -> None:
    """Bytes, nodes and last activity per namespace and scope."""
    s = _settings(ctx)
    report = run(
        s, lambda store: control.usage(store, None if every else s.namespace, scopes=scopes)
    )

    def show(c: Console) -> None:
        from rich.table import Table

        table = Table(title_justify="left")
        for col in ("namespace / scope", "nodes", "size", "last activity"):
            table.add_column(col, justify="right" if col in ("nodes", "size") else "left")
        for n in report.namespaces:
            table.add_row(
                n.namespace, str(n.nodes), render.size(n.payload_bytes), n.last_activity or "-"
            )
            for sc in n.by_scope:
                table.add_row(
                    "  " + sc.scope,
                    str(sc.nodes),
                    render.size(sc.payload_bytes),
                    sc.last_activity or "-",
                )
        c.print(table)

    emit(s, report.to_dict(), show)


# --------------------------------------------------------------------------- compact


@main.command()
@click.option("--thread", "-t", metavar="ID", required=True)
@click.option("--strategy", type=click.Choice(STRATEGIES), default="tokens", show_default=True)
@click.option("--max-messages", default=20, show_default=True, type=int)
@click.option("--max-tokens", default=4000, show_default=True, type=int)
@click.option("--preserve-recent", default=6, show_default=True, type=int)
@click.option("--summary-max-tokens", default=512, show_default=True, type=int)
@click.option(
    "--llm", default="agent", show_default=True, help="The LLM node whose conversation to compact."
)
@click.pass_context
def compact(
    ctx: click.Context,
    thread: str,
    strategy: str,
    max_messages: int,
    max_tokens: int,
    preserve_recent: int,
    summary_max_tokens: int,
    llm: str,
) -> None:
    """Compact a thread's conversation behind a summary node (non-destructive; history stays).

    The summary strategy writes an extractive summary (no model is called from the CLI).
    """
    s = _settings(ctx)
    req = request(
        s,
        thread=thread,
        strategy=strategy,
        max_messages=max_messages,
        max_tokens=max_tokens,
        preserve_recent=preserve_recent,
        summary_max_tokens=summary_max_tokens,
        llm=llm,
    )

    async def go(store: Store) -> control.StateOperationResult:
        await written(store, s, f"thread:{thread}")
        return await control.compact(store, req)

    result = run(s, go)

    def show(c: Console) -> None:
        (r,) = result.stores
        m = r.metadata
        if r.compacted:
            c.print(
                f"compacted {result.scope}: {m['before']} -> {m['after']} messages "
                f"({m['covered']} folded into summary {m['summary_node']})"
            )
        else:
            c.print(f"nothing to compact in {result.scope}: {m.get('reason') or 'no messages'}")

    emit(s, result.to_dict(), show)


# --------------------------------------------------------------------------- demo / serve


@main.command()
@click.option(
    "--db", default="tether-demo.db", show_default=True, help="The SQLite file the demo writes."
)
@click.option("--keep", is_flag=True, help="Keep an existing demo file instead of starting afresh.")
@click.pass_context
def demo(ctx: click.Context, db: str, keep: bool) -> None:
    """Run the tour: memory across processes, approval, crash and resume, compaction, export, verify."""
    from .demo import run_demo

    s = _settings(ctx)
    parent = ctx.parent
    if parent is not None and parent.get_parameter_source("store_url") == COMMANDLINE:
        if not _is_sqlite_file(s.store_url):
            _fail(
                s, InvalidRequest("the demo runs on a SQLite file: --store FILE.db", field="store")
            )
        from ..store.sqlite import parse_url

        store_db = parse_url(s.store_url)[0]
        if ctx.get_parameter_source("db") == COMMANDLINE and store_db != db:
            _fail(s, InvalidRequest(f"--store {store_db} and --db {db}: give one", field="db"))
        db = store_db
    folder = Path(db).resolve().parent
    if not folder.is_dir():
        _fail(s, NotFound(f"cannot make the demo's store {db}: no directory {folder}", path=db))
    try:
        code = run_demo(db, fresh=not keep, as_json=s.json)
    except TetherError as e:
        _fail(s, e)
    sys.exit(code)


def _add_serve() -> None:
    # The command's options come from tether.server.cli, which imports neither FastAPI nor
    # uvicorn (they load when `tether serve` runs); whether they are installed is asked
    # of the import system, so the other commands start without them.
    try:
        if not all(importlib.util.find_spec(m) for m in ("fastapi", "uvicorn")):
            raise ImportError("the server extra is not installed")
        mod = importlib.import_module("tether.server.cli")
        cmd = mod.serve
    except (ImportError, AttributeError):

        @main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
        @click.pass_context
        def serve(ctx: click.Context) -> None:
            """Serve the control plane over HTTP (needs tether[server])."""
            _fail(
                _settings(ctx),
                TetherError(
                    "the HTTP server is not available: pip install 'tether[server]'",
                    code="not_installed",
                ),
            )

        return
    if isinstance(cmd, click.Command):
        main.add_command(cmd, name="serve")


_add_serve()

from . import mcp_cmd as _mcp_cmd  # noqa: E402,F401  (registers mcp; imports no MCP SDK)
from . import recall_cmd as _recall_cmd  # noqa: E402,F401  (registers recall and reindex)
from . import token_cmd as _token_cmd  # noqa: E402,F401  (registers token)


def _json_after(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.obj = dataclasses.replace(_settings(ctx), json=True)


# `--json` after the subcommand too (`tether history -t x --json`), as before it
for _cmd in main.commands.values():
    if _cmd.name != "serve" and not any("--json" in p.opts for p in _cmd.params):
        _cmd.params.append(
            click.Option(
                ["--json"],
                is_flag=True,
                expose_value=False,
                is_eager=True,
                callback=_json_after,
                help="Print JSON for scripts (the same as tether --json COMMAND).",
            )
        )
