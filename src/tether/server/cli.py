"""``tether serve``: the HTTP control plane and the inspector on a store (uvicorn).

    TETHER_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe(32))') \\
        tether --store tether-demo.db serve --port 8765

The main ``tether`` group adds this command when the server extra is installed.
The socket is bound before the app starts, and the first line on stdout is the
URL actually served (so ``--port 0`` picks a free port and says which).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import socket
import sys
from collections.abc import Mapping
from typing import Any, Final

import click

from ..core.errors import InvalidRequest, TetherError
from .limits import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_INFLIGHT,
    DEFAULT_QUEUE_TIMEOUT,
)

__all__ = ["listening_socket", "load_agent", "serve", "worker_app"]


def load_agent(ref: str) -> Any:
    """``module:attr``: an ``Agent``, or a factory ``(store, namespace) -> Agent``."""
    from ..runtime.agent import Agent  # imported here: `tether --help` stays fast

    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise InvalidRequest(
            f"--agent takes module:attribute (an Agent or a factory), got {ref!r}", field="agent"
        )
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise InvalidRequest(f"--agent: cannot import {module!r}: {e}", field="agent") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InvalidRequest(f"--agent: {module!r} has no attribute {attr!r}", field="agent")
        obj = getattr(obj, part)
    if not isinstance(obj, Agent) and not callable(obj):
        raise InvalidRequest(
            f"--agent: {ref} is neither an Agent nor a factory (store, namespace) -> Agent",
            field="agent",
        )
    return obj


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound and listening.

    Made as a TCP socket by name (``IPPROTO_TCP``, not protocol 0): asyncio turns
    Nagle's algorithm off (TCP_NODELAY) on the connections it accepts only when the
    listening socket says it is TCP, and with Nagle on, a kept-alive client's request
    waits for its own delayed ACK, about 40 ms a request (``HeaderTimeoutH11`` sets
    TCP_NODELAY on each connection as well, for sockets made elsewhere).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # Listening before the URL is printed: a client that connects at once waits in
        # the backlog until uvicorn accepts, instead of being refused.
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def server_tokens(tokens_file: str | None, env: Mapping[str, str]) -> Any:
    """The tokens file (if given) plus ``$TETHER_TOKEN`` and ``$TETHER_JWT_SECRET`` (if set),
    or what the environment names."""
    from .auth import ENV_TOKENS_FILE, Tokens

    if tokens_file is None:
        return Tokens.from_env(env)
    rest = {k: v for k, v in env.items() if k != ENV_TOKENS_FILE}
    return Tokens.from_file(tokens_file, env=env).merged(Tokens.from_env(rest))


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--tokens",
    "tokens_file",
    envvar="TETHER_TOKENS_FILE",
    metavar="FILE",
    help="Tokens file (JSON/YAML, see docs/http.md). $TETHER_TOKEN adds one all-grants token.",
)
@click.option(
    "--agent",
    "agent_ref",
    metavar="MODULE:ATTR",
    help="Serve agent steps: an Agent, or a factory (store, namespace) -> Agent.",
)
@click.option(
    "--max-body",
    default=DEFAULT_MAX_BODY,
    show_default=True,
    type=click.IntRange(1024),
    help="Largest request body in bytes (413 beyond).",
)
@click.option(
    "--header-timeout",
    default=DEFAULT_HEADER_TIMEOUT,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds a connection has to send its request line and headers (then closed).",
)
@click.option(
    "--keep-alive",
    default=DEFAULT_KEEP_ALIVE,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds an idle kept-alive connection stays open (longer than clients' own).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Server processes sharing the listening socket, each with its own store "
    "connection (SQLite in WAL mode, PostgreSQL, Redis: any backend).",
)
@click.option(
    "--max-inflight",
    default=DEFAULT_MAX_INFLIGHT,
    show_default=True,
    type=click.IntRange(1),
    help="Requests one process serves at once; more wait their turn, in arrival order.",
)
@click.option(
    "--queue-timeout",
    default=DEFAULT_QUEUE_TIMEOUT,
    show_default=True,
    type=click.FloatRange(0.0),
    help="Seconds a request may wait for its turn; then 503 with Retry-After.",
)
@click.option(
    "--anonymous",
    metavar="GRANTS",
    help="Serve clients that send no token with these grants (comma-separated) on every "
    "namespace, from this machine only (docs/http.md).",
)
@click.option(
    "--anonymous-remote",
    is_flag=True,
    help="With --anonymous: from any address, not only loopback.",
)
@click.option(
    "--anonymous-namespace",
    metavar="NS",
    help="With --anonymous: anonymous clients act in namespace NS only (a request naming "
    "none, as Protolink's, acts there) instead of every namespace (requests naming none "
    "act in default).",
)
@click.option("--no-inspector", is_flag=True, help="Serve the API only.")
@click.option(
    "--trace-url",
    envvar="TETHER_TRACE_URL",
    metavar="URL",
    help="Where a trace is shown, with {trace_id} in it (e.g. "
    "http://localhost:16686/trace/{trace_id}): the inspector links traced runs to it.",
)
@click.option(
    "--gc-export-dir",
    metavar="DIR",
    type=click.Path(file_okay=False, writable=True),
    help="POST /gc writes each idle thread's snapshot here (DIR/<namespace>/, fsynced and "
    "checked) before deleting it; without it a policy that exports idle threads is refused.",
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    tokens_file: str | None,
    agent_ref: str | None,
    max_body: int,
    header_timeout: float,
    keep_alive: float,
    workers: int,
    max_inflight: int,
    queue_timeout: float,
    anonymous: str | None,
    anonymous_remote: bool,
    anonymous_namespace: str | None,
    no_inspector: bool,
    trace_url: str | None,
    gc_export_dir: str | None,
    log_level: str,
) -> None:
    """Serve the control plane over HTTP, and the inspector at /.

    An encrypted store is opened with the master key in $TETHER_MASTER_KEY (or
    $TETHER_MASTER_KEY_FILE), read once at start.
    """
    import uvicorn

    from ._protocol import ServeConfig

    store_url = getattr(ctx.obj, "store_url", None) or "tether.db"
    options = {
        "store_url": store_url,
        "tokens_file": tokens_file,
        "agent_ref": agent_ref,
        "max_body": max_body,
        "inspector": not no_inspector,
        "trace_url": trace_url or None,
        "log_level": log_level,
        "max_inflight": max_inflight,
        "queue_timeout": queue_timeout,
        "anonymous": anonymous,
        "anonymous_remote": anonymous_remote,
        "anonymous_namespace": anonymous_namespace,
        "gc_export_dir": gc_export_dir,
    }
    try:
        # Built here for one process; with workers, built here only to refuse a bad
        # configuration before a socket is bound (each worker builds its own).
        app = _app(options)
    except TetherError as e:
        click.echo(f"error [{e.code}]: {e.message}", err=True)
        sys.exit(2)
    try:
        sock = listening_socket(host, port)
    except OSError as e:
        click.echo(f"error [bind]: cannot listen on {host}:{port}: {e.strerror}", err=True)
        sys.exit(1)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    click.echo(f"http://{shown}:{bound}/", nl=True)
    sys.stdout.flush()
    click.echo(
        f"tether serving {store_url} (inspector at /, OpenAPI at /openapi.json); "
        f"tokens: {', '.join(app.state.tether.tokens.names) or '-'}"
        + ("; HS256 JWTs" if app.state.tether.tokens.jwt is not None else "")
        + (f"; {workers} worker processes" if workers > 1 else ""),
        err=True,
    )
    _server_log(log_level)
    # uvicorn has no header-read timeout of its own, and answers requests it cannot
    # parse in plain text: HeaderTimeoutH11 adds the first and tether's JSON shape.
    # The keep-alive timeout is longer than clients' own (httpx keeps an idle
    # connection 5 s): a server that closes first races the client's next request on
    # that connection, which then fails mid-read.
    common: dict[str, Any] = {
        "log_level": log_level,
        "lifespan": "on",
        "http": "tether.server._protocol:HeaderTimeoutH11",
        "timeout_keep_alive": keep_alive,
        "header_timeout": header_timeout,
        # tether's edge logs each request once (method, path, status, time, token name):
        # uvicorn's access log would write a second line for each.
        "access_log": False,
    }
    try:
        if workers == 1:
            uvicorn.Server(ServeConfig(app, **common)).run(sockets=[sock])
        else:
            from uvicorn.supervisors import Multiprocess

            # Workers are started fresh (spawn): each imports the app factory, which
            # reads these options from its environment and opens its own store.
            os.environ[_WORKER_OPTIONS] = json.dumps(options)
            config = ServeConfig(_WORKER_APP, factory=True, workers=workers, **common)
            Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()


_WORKER_OPTIONS: Final = "TETHER_SERVE_WORKER_OPTIONS"
_WORKER_APP: Final = "tether.server.cli:worker_app"


def _app(options: Mapping[str, Any]) -> Any:
    from .app import create_app

    tokens = server_tokens(options["tokens_file"], os.environ)
    if options.get("anonymous") is not None:
        tokens = tokens.with_anonymous(
            options["anonymous"],
            remote=options["anonymous_remote"],
            namespace=options.get("anonymous_namespace"),
        )
    elif options.get("anonymous_namespace") is not None:
        raise InvalidRequest(
            "--anonymous-namespace names where anonymous clients act: give --anonymous GRANTS too",
            field="anonymous_namespace",
        )
    return create_app(
        options["store_url"],
        tokens=tokens,
        agent=load_agent(options["agent_ref"]) if options["agent_ref"] else None,
        max_body_bytes=options["max_body"],
        inspector=options["inspector"],
        trace_url=options["trace_url"],
        max_inflight=options["max_inflight"],
        queue_timeout=options["queue_timeout"],
        gc_export_dir=options.get("gc_export_dir"),
    )


def worker_app() -> Any:
    """The app of one ``tether serve --workers N`` process, from the options the
    parent put in its environment."""
    options = json.loads(os.environ[_WORKER_OPTIONS])
    _server_log(options["log_level"])
    return _app(options)


def _server_log(level: str) -> None:
    server_log = logging.getLogger("tether.server")
    server_log.setLevel(level.upper())
    if not server_log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        server_log.addHandler(handler)
