"""``tether mcp``: tether as an MCP memory server, and ``tether mcp import-memory``.

    tether --store ~/tether-memory.db mcp --user me             # stdio, for desktop clients
    tether --store postgresql://... -n acme mcp --http --port 8766   # streamable HTTP, tokens
    tether --store ~/tether-memory.db mcp import-memory memory.jsonl --user me

The MCP SDK (the ``mcp`` extra) is imported only when a server starts
(``tether.mcp.server``), so ``tether --help`` and ``import-memory`` work without it, and a
server started without it says which extra to install.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import sys
from functools import cache
from pathlib import Path
from typing import Any

import click

from ..core import scopes
from ..core.errors import InvalidRequest, NotFound, TetherError
from ..store.base import Store
from . import _fail, _open, _settings, emit, main, run

__all__ = ["mcp_group"]

EMBEDDER_HELP = (
    "For recall: wordllama[:dim] (offline, needs tether[recall]), hashing[:dim], or "
    "openai:<model>:<dim>. Default: $TETHER_EMBEDDER or wordllama."
)


def _require_sdk() -> None:
    if importlib.util.find_spec("mcp") is None:
        raise TetherError(
            "tether mcp needs the MCP SDK: pip install 'tether[mcp]'", code="not_installed"
        )


def _embedder_factory(name: str | None) -> Any:
    @cache
    def make() -> Any:
        from ..models.embeddings import embedder_from_name

        return embedder_from_name(name or os.environ.get("TETHER_EMBEDDER") or "wordllama")

    return make


@main.group(name="mcp", invoke_without_command=True)
@click.option(
    "--user",
    "-u",
    metavar="ID",
    help="The user whose memory this server keeps (stdio: required; HTTP: default each "
    "token's name).",
)
@click.option("--http", "http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: interface.")
@click.option("--port", default=8766, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--tokens",
    "tokens_file",
    envvar="TETHER_TOKENS_FILE",
    metavar="FILE",
    help="HTTP: the tokens file of tether serve (docs/http.md); $TETHER_TOKEN adds one "
    "token with every grant, $TETHER_JWT_SECRET accepts HS256 JWTs.",
)
@click.option("--embedder", metavar="NAME", help=EMBEDDER_HELP)
@click.pass_context
def mcp_group(
    ctx: click.Context,
    user: str | None,
    http: bool,
    host: str,
    port: int,
    tokens_file: str | None,
    embedder: str | None,
) -> None:
    """Serve tether as an MCP memory server (stdio, or --http), scoped to one namespace
    and user: the reference memory server's tools, plus remember, recall, forget,
    history, undo and read_thread. Needs tether[mcp].
    """
    ctx.meta["tether.mcp.user"] = user
    if ctx.invoked_subcommand is not None:
        return
    s = _settings(ctx)
    try:
        _require_sdk()
        if user is not None:
            scopes.user(user)
        if not http and user is None:
            raise InvalidRequest(
                "stdio serves one user: pass --user ID (e.g. tether mcp --user me)",
                field="user",
            )
        make = _embedder_factory(embedder)

        async def go() -> None:
            store = await _open(s, create=True)
            try:
                if http:
                    await _serve_http(store, s.namespace, user, make, host, port, tokens_file)
                else:
                    await _serve_stdio(store, s.namespace, user, make)
            finally:
                await store.close()

        asyncio.run(go())
    except TetherError as e:
        _fail(s, e)
    except KeyboardInterrupt:
        pass


async def _serve_stdio(store: Store, namespace: str, user: str | None, make: Any) -> None:
    from mcp.server.stdio import stdio_server

    from ..mcp.server import McpHost, build_server

    server = build_server(McpHost(store=store, namespace=namespace, user=user, embedder=make))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _serve_http(
    store: Store,
    namespace: str,
    user: str | None,
    make: Any,
    host: str,
    port: int,
    tokens_file: str | None,
) -> None:
    import uvicorn

    from ..mcp.server import (
        DEFAULT_KEEP_ALIVE,
        McpHost,
        bearer_auth,
        build_server,
        listening_socket,
        load_tokens,
    )

    tokens = load_tokens(tokens_file, os.environ)
    if not tokens.configured:
        raise InvalidRequest(
            "the HTTP server needs tokens: set $TETHER_TOKEN, pass --tokens FILE, or set "
            "$TETHER_JWT_SECRET (docs/http.md)",
            code="no_tokens",
            field="tokens",
        )
    mcp_host = McpHost(store=store, namespace=namespace, user=user, embedder=make, tokens=tokens)
    server = build_server(mcp_host)
    app = bearer_auth(server.streamable_http_app(host=host), tokens)
    try:
        # tether serve's socket: TCP by name, so each connection has Nagle off.
        sock = listening_socket(host, port)
    except OSError as e:
        raise TetherError(f"cannot listen on {host}:{port}: {e.strerror}", code="bind") from None
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    click.echo(f"http://{shown}:{sock.getsockname()[1]}/mcp")
    sys.stdout.flush()
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_keep_alive=DEFAULT_KEEP_ALIVE,
        # tether serve's HTTP protocol: TCP_NODELAY on every connection, a header timeout
        http="tether.server._protocol:HeaderTimeoutH11",
    )
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()


@mcp_group.command(name="import-memory")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--user", "-u", metavar="ID", help="The user to import into (or mcp's --user).")
@click.pass_context
def import_memory(ctx: click.Context, file: Path, user: str | None) -> None:
    """Import the reference memory server's file (memory.jsonl) into a user's knowledge
    graph, in one commit, keeping its order. The user's graph must be empty."""
    from ..mcp.graph import KnowledgeGraph, load_memory_file

    s = _settings(ctx)
    user = user or ctx.meta.get("tether.mcp.user")
    try:
        if user is None:
            raise InvalidRequest(
                "pass --user ID: whose knowledge graph to import into", field="user"
            )
        scope = scopes.user(user)
        try:
            data = file.read_bytes()
        except OSError as e:
            raise NotFound(f"cannot read {file}: {e.strerror}", path=str(file)) from None
        graph = load_memory_file(data)
    except TetherError as e:
        _fail(s, e)

    async def go(store: Store) -> dict[str, int]:
        return await KnowledgeGraph(store, s.namespace, scope=scope).import_graph(graph)

    counts = run(s, go, create=True)
    out = {"operation": "import-memory", "namespace": s.namespace, "scope": scope, **counts}
    emit(
        s,
        out,
        lambda c: c.print(
            f"imported {counts['entities']} entities and {counts['relations']} relations "
            f"into {scope} of namespace {s.namespace}"
        ),
    )
