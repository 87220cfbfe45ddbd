"""``tether recall`` and ``tether reindex``: search memory by meaning from a shell."""

from __future__ import annotations

import os
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..core.errors import TetherError
from ..projections import recall, reindex
from ..projections.recall_index import vector_table, verify_index
from ..store.base import Store
from . import EXIT_INVALID, _fail, _settings, emit, main, request, run, scope_options

EMBEDDER_HELP = (
    "wordllama[:dim] (offline, the default), hashing[:dim], or openai:<model>:<dim> "
    "($OPENAI_BASE_URL, $OPENAI_API_KEY). Default: $TETHER_EMBEDDER or wordllama."
)


def _embedder(ctx: click.Context, name: str | None) -> Any:
    from ..models.embeddings import embedder_from_name

    try:
        return embedder_from_name(name or os.environ.get("TETHER_EMBEDDER") or "wordllama")
    except TetherError as e:
        _fail(_settings(ctx), e)


@main.command(name="recall")
@click.argument("query")
@scope_options
@click.option("-k", "k", default=5, show_default=True, type=click.IntRange(1, 1000))
@click.option("--type", "types", multiple=True, metavar="TYPE", help="Only this type (repeat).")
@click.option("--key-prefix", metavar="PREFIX", help="Only keys starting with this.")
@click.option("--embedder", metavar="NAME", help=EMBEDDER_HELP)
@click.pass_context
def recall_cmd(
    ctx: click.Context,
    query: str,
    thread: str | None,
    user: str | None,
    app: bool,
    k: int,
    types: tuple[str, ...],
    key_prefix: str | None,
    embedder: str | None,
) -> None:
    """Search a scope's long-term memory by meaning: the K closest memories, best first."""
    s = _settings(ctx)
    req = request(s, thread=thread, user=user, app=app)
    scope = req.scope or "app"
    e = _embedder(ctx, embedder)

    async def go(store: Store) -> list[dict[str, Any]]:
        hits = await recall(
            store,
            s.namespace,
            scope,
            query,
            embedder=e,
            k=k,
            types=list(types) or None,
            key_prefix=key_prefix,
        )
        return [h.to_dict() for h in hits]

    found = run(s, go)

    def show(c: Console) -> None:
        t = Table("score", "type", "key", "content")
        for h in found:
            t.add_row(f"{h['score']:.3f}", h["type"], h["key"], str(h["content"]))
        c.print(t)

    emit(
        s,
        {
            "operation": "recall",
            "namespace": s.namespace,
            "scope": scope,
            "query": query,
            "hits": found,
        },
        show,
    )


@main.command(name="reindex")
@scope_options
@click.option("--embedder", metavar="NAME", help=EMBEDDER_HELP)
@click.option(
    "--check", is_flag=True, help="Only compare the index with the graph; rebuild nothing."
)
@click.pass_context
def reindex_cmd(
    ctx: click.Context,
    thread: str | None,
    user: str | None,
    app: bool,
    embedder: str | None,
    check: bool,
) -> None:
    """Rebuild a scope's recall index from the graph, then verify it. Exit 3 if it differs.

    With --check, verify the index as it stands (every vector recomputed and compared).
    """
    s = _settings(ctx)
    req = request(s, thread=thread, user=user, app=app)
    scope = req.scope or "app"
    e = _embedder(ctx, embedder)

    async def go(store: Store) -> tuple[int, list[str]]:
        if check:
            problems = await verify_index(store, s.namespace, scope, embedder=e)
            table = vector_table(store)
            return len(await table.entries(s.namespace, scope, e.name)), problems
        n = await reindex(store, s.namespace, scope, embedder=e)
        return n, await verify_index(store, s.namespace, scope, embedder=e)

    entries, problems = run(s, go)
    emit(
        s,
        {
            "operation": "reindex",
            "namespace": s.namespace,
            "scope": scope,
            "embedder": e.name,
            "entries": entries,
            "problems": problems,
        },
        lambda c: c.print(
            f"{'checked' if check else 'indexed'} {entries} memories of {scope} with {e.name}"
            + "".join(f"\nproblem: {p}" for p in problems)
        ),
    )
    if problems:
        sys.exit(EXIT_INVALID)
