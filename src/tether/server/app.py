"""The HTTP control plane and the web inspector, as one ASGI app.

    app = create_app("sqlite:///tether.db", tokens=Tokens.from_file("tokens.yaml"))
    # uvicorn.run(app) -- or `tether serve --store tether.db --tokens tokens.yaml`

Routes (docs/http.md has the details; ``/openapi.json`` the schema):

* ``POST /state/<operation>``: seed 002's endpoints, for every control-plane
  operation (describe, reset, compact, export, import, history, fork, verify);
  the namespace is the body's ``namespace``;
* ``/v1/ns/{namespace}/...``: threads, a thread's description, history, export,
  import, fork, verify, reset, a run's execution, resource heads and versions,
  erasing a user (``POST .../users/{user}/erase``, grant ``state.erase``, an
  encrypted store); task state: the namespace's runs (``GET .../runs?status=``), a
  run's metadata and status history (``.../threads/{thread}/task``) and what a run
  waits on (``.../threads/{thread}/approvals``); with an agent, ``step``, ``resume``,
  ``approve`` and ``reject``;
* ``GET /v1/whoami``: what the caller's token may do (and the server's trace URL
  template, for the inspector's links to a run's trace); ``GET /healthz``;
* ``GET /metrics``: tether's metrics for Prometheus (grant ``metrics``, on every
  namespace: they sum all of them; docs/telemetry.md);
* ``/``: the inspector (static files; it asks for a token and calls the API).

Every API route needs a bearer token with the route's grant on its namespace
(``tether.server.auth``): 401 without a known token, 403 without the grant or
namespace, and in both cases nothing is read or written. Library errors become
statuses in one place (``_http.status_for``) with the body ``err.to_dict()``.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Final

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles

from .. import __version__
from ..core.errors import InvalidRequest, TetherError
from ..core.telemetry import telemetry
from ..runtime.agent import Agent
from ..store import Store
from . import (
    routes_agent,
    routes_lifecycle,
    routes_ns,
    routes_recall,
    routes_state,
    routes_tasks,
)
from ._deps import AgentFactory, Server, authenticated, need
from ._http import error_response, json_response
from .auth import AuthConfigError, Forbidden, Token, Tokens
from .limits import (
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_INFLIGHT,
    DEFAULT_QUEUE_TIMEOUT,
    Admission,
    ASGIApp,
    BodyLimit,
    Message,
    Receive,
    Scope,
    Send,
)
from .metrics import CONTENT_TYPE, process_sink
from .openapi import errors, install, ok

__all__ = ["create_app"]

log = logging.getLogger("tether.server")

INSPECTOR_DIR: Final = Path(__file__).with_name("inspector")
# The inspector loads only its own files and talks only to this server.
_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_TRACE_URL: Final = re.compile(r"https?://[^\s{}]+(?:\{trace_id\}[^\s{}]*)+")


def create_app(
    store: Store | str,
    *,
    tokens: Tokens | str | Path | None = None,
    agent: Agent | AgentFactory | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    inspector: bool = True,
    cipher: Any = "env",
    trace_url: str | None = None,
    max_inflight: int = DEFAULT_MAX_INFLIGHT,
    queue_timeout: float = DEFAULT_QUEUE_TIMEOUT,
    gc_export_dir: str | os.PathLike[str] | None = None,
) -> FastAPI:
    """The ASGI app serving ``store`` (a ``Store``, kept open, or a URL, opened and closed here).

    ``tokens``: a ``Tokens``, a tokens file path, or None for the environment
    (``$TETHER_TOKENS_FILE``, ``$TETHER_TOKEN``); a server with no token refuses
    to start. ``agent``: an ``Agent`` (serving its own namespace) or a factory
    ``(store, namespace) -> Agent``; without one the agent routes are absent.
    ``max_body_bytes`` bounds every request body (413 beyond it). ``cipher``
    (for a URL): what ``open_store(url, cipher=...)`` takes, None for none, or
    ``"env"`` (the default) for ``tether.crypto.cipher_from_env()``: the master key
    in ``$TETHER_MASTER_KEY`` (or ``_FILE``), if set (docs/encryption.md).
    ``trace_url``: where a trace is shown, with ``{trace_id}`` in it (e.g.
    ``http://localhost:16686/trace/{trace_id}`` for Jaeger): the inspector links each
    run recorded while tracing to its trace (docs/telemetry.md). ``max_inflight``: API
    requests served at once, the rest waiting in arrival order, each at most
    ``queue_timeout`` seconds before a 503 with Retry-After (``limits.Admission``).
    ``gc_export_dir``: a directory of this machine where ``POST /gc`` writes each idle
    thread's snapshot (fsynced and checked) before deleting it, as ``tether gc
    --export-dir``; without it a gc whose policy exports idle threads is refused (400,
    field ``export_dir``), nothing deleted.
    """
    if trace_url is not None and (
        not isinstance(trace_url, str) or not _TRACE_URL.fullmatch(trace_url)
    ):
        raise InvalidRequest(
            "trace_url is an http(s) URL with {trace_id} where the trace id goes, e.g. "
            f"http://localhost:16686/trace/{{trace_id}}; got {trace_url!r}",
            field="trace_url",
        )
    if isinstance(tokens, Tokens):
        known = tokens
    elif tokens is None:
        known = Tokens.from_env()
    else:
        known = Tokens.from_file(tokens)
    if not known.configured:
        raise AuthConfigError(
            "no tokens: set TETHER_TOKEN (one all-grants token), pass a tokens file "
            "(--tokens FILE, $TETHER_TOKENS_FILE), a JWT secret ($TETHER_JWT_SECRET) or "
            "serve clients without a token (tether serve --anonymous GRANTS); see docs/http.md",
            field="tokens",
        )
    if agent is not None and not (isinstance(agent, Agent) or callable(agent)):
        raise InvalidRequest(f"agent is an Agent or a factory (store, namespace), got {agent!r}")
    if isinstance(cipher, str) and cipher == "env":
        from ..crypto import cipher_from_env

        cipher = cipher_from_env() if isinstance(store, str) else None
    elif cipher is not None and not isinstance(store, str):
        raise InvalidRequest(
            "cipher= applies to a store URL; a Store object is already open (encrypted or "
            "not): open it with open_store(url, cipher=...)",
            field="cipher",
        )
    if gc_export_dir is not None and not isinstance(gc_export_dir, str | os.PathLike):
        raise InvalidRequest(
            f"gc_export_dir is a directory path, got {gc_export_dir!r}", field="gc_export_dir"
        )
    server = Server(
        store,
        tokens=known,
        agent=agent,
        cipher=cipher,
        gc_export_dir=None if gc_export_dir is None else Path(gc_export_dir),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await server.store()  # a bad URL fails at startup, not on the first request
        try:
            yield
        finally:
            await server.close()

    app = FastAPI(
        title="tether",
        version=__version__,
        description=(
            "Durable state for AI agents: the control plane over HTTP. Every API route "
            "needs a bearer token whose grants name the operation and the namespace."
        ),
        lifespan=lifespan,
        docs_url=None,  # the Swagger UI loads scripts from a CDN; the inspector is at /
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.tether = server
    _handlers(app)

    @app.get("/healthz", tags=["meta"], summary="Liveness: no token needed, no state read")
    async def healthz() -> dict[str, Any]:
        return {"ok": True, "version": __version__}

    @app.get(
        "/v1/whoami",
        tags=["meta"],
        summary="What the caller's token may do, and whether agent routes exist",
        responses={**ok("WhoAmI", "The token's name, grants and namespaces."), **errors(401)},
    )
    async def whoami(token: Annotated[Token, Depends(authenticated)]) -> Response:
        return json_response(
            {
                **token.to_dict(),
                "agent": server.has_agent,
                "version": __version__,
                "trace_url": trace_url,
            }
        )

    sink = process_sink()

    @app.get(
        "/metrics",
        tags=["meta"],
        summary="tether's metrics in Prometheus' text format (commits, runs, model and tool calls)",
        responses={
            200: {
                "description": "Prometheus exposition format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            **errors(401, 403),
        },
    )
    async def metrics(token: Annotated[Token, need("metrics")]) -> Response:
        if token.user is not None:
            raise Forbidden(
                f"token {token.name!r} is bound to user {token.user!r}, and the metrics sum "
                "every user; use a token bound to no user",
                grant="metrics",
            )
        if "*" not in token.namespaces:
            raise Forbidden(
                f"token {token.name!r} is limited to some namespaces, and the metrics sum "
                "every namespace; give a metrics token namespaces: ['*']",
                grant="metrics",
            )
        return Response(sink.exposition(), media_type=CONTENT_TYPE)

    app.include_router(routes_state.router())
    app.include_router(routes_ns.router())
    app.include_router(routes_recall.router())
    app.include_router(routes_tasks.router())
    app.include_router(routes_lifecycle.router())
    if agent is not None:
        app.include_router(routes_agent.router())
    if inspector:
        _mount_inspector(app)
    install(app)
    # The last added runs first: the edge logs and heads every response, 413s included.
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(Admission, max_inflight=max_inflight, queue_timeout=queue_timeout)
    app.add_middleware(_Edge)
    return app


def _handlers(app: FastAPI) -> None:
    async def tether_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, TetherError)
        return error_response(exc)

    async def bad_parameters(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "path"))
        return error_response(
            InvalidRequest(f"{where or 'request'}: {first.get('msg', 'invalid')}", field=where)
        )

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http")
        body = {"error": "HTTPError", "code": code, "message": str(exc.detail), "details": {}}
        return json_response(body, exc.status_code, dict(exc.headers or {}))

    async def internal(request: Request, exc: Exception) -> Response:
        log.error(
            "internal error on %s %s",
            for_log(request.method),
            for_log(request.url.path),
            exc_info=exc,
        )
        body = {
            "error": "InternalError",
            "code": "internal",
            "message": "the server failed; its log has the details",
            "details": {},
        }
        return json_response(body, 500)

    app.add_exception_handler(TetherError, tether_error)
    app.add_exception_handler(RequestValidationError, bad_parameters)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, internal)


def _mount_inspector(app: FastAPI) -> None:
    index = INSPECTOR_DIR / "index.html"

    @app.get("/", include_in_schema=False)
    async def inspector_index() -> Response:
        return FileResponse(index, media_type="text/html")

    app.mount("/inspector", StaticFiles(directory=INSPECTOR_DIR), name="inspector")


def for_log(value: str) -> str:
    """``value`` safe to put in one log line: a request path or id from outside is
    decoded text, so a %0A in it would start a forged line. Characters that are not
    printable (controls, format and bidirectional marks, separators) and backslashes
    are written as Python escapes."""
    if value.isascii() and value.isprintable() and "\\" not in value:
        return value
    return "".join(
        c if c.isprintable() and c != "\\" else c.encode("unicode_escape").decode("ascii")
        for c in value
    )


class _Edge:
    """Logs each request (method, path, status, time, token *name*) and sets safe headers.

    Never logs headers or bodies, so a token cannot reach the log.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0
        api = not (scope["path"] == "/" or scope["path"].startswith("/inspector"))

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers += [
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"content-security-policy", _CSP.encode()),
                ]
                if api:
                    # State is private: no browser or proxy keeps a copy.
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        # A caller's trace (its traceparent header) continues in the spans of this request.
        carrier = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope.get("headers", ())
            if k in (b"traceparent", b"tracestate")
        }
        try:
            with telemetry.continued(carrier):
                await self.app(scope, receive, send_with_headers)
        finally:
            token = scope.get("state", {}).get("token_name", "-")
            log.info(
                "%s %s %d %.1fms token=%s",
                for_log(scope.get("method", "-")),
                for_log(scope["path"]),
                status or 500,
                (time.perf_counter() - start) * 1000,
                token,
            )
