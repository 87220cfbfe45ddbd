"""The MCP server: ``tools.TOOLS`` on the official ``mcp`` SDK, over stdio or streamable HTTP.

stdio (what desktop clients start): one namespace and one user, given at start.
HTTP: every request carries a bearer token, checked as ``tether serve`` checks it
(``tether.server.auth``: a tokens file, ``$TETHER_TOKEN``, HS256 JWTs); a request
without a known token is answered 401 before the MCP layer sees it. A token's grants
say what it may call (``memory.read`` for reads, ``memory.write`` for writes,
``state.history`` too for ``read_thread``); the namespace is the token's one
namespace, else the server's; the user is the one given at start, else the token's
name, so each token has its own memory unless ``--user`` says otherwise.

This module imports the SDK: ``tether.mcp.cli`` imports it only when a server starts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types
import orjson
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from .. import __version__
from ..core import scopes
from ..server.auth import ENV_TOKENS_FILE, Forbidden, Token, Tokens, Unauthorized
from ..server.cli import listening_socket
from ..server.limits import DEFAULT_KEEP_ALIVE
from ..store.base import Store
from .tools import REFERENCE_TOOLS, TOOLS, Memory, ToolResult, call_tool, graph_text

__all__ = [
    "DEFAULT_KEEP_ALIVE",
    "McpHost",
    "bearer_auth",
    "build_server",
    "listening_socket",
    "load_tokens",
]

INSTRUCTIONS: Final = (
    "Long-term memory kept by tether: a knowledge graph of entities, relations and "
    "observations (the reference memory server's tools), and remembered facts with "
    "recall by meaning, history and undo. Every write is a durable, versioned commit."
)
_TOKEN_KEY: Final = "tether_token"
# The reference server's one resource: the whole graph as JSON, which a client may
# subscribe to (notifications/resources/updated after each of its own writes).
GRAPH_URI: Final = "memory://knowledge-graph"
MAX_SUBSCRIBERS: Final = 1024  # HTTP sessions whose subscriptions are kept
_GRAPH_RESOURCE: Final = {
    "uri": GRAPH_URI,
    "name": "knowledge-graph",
    "title": "Knowledge Graph",
    "description": "The full knowledge graph with all entities and relations",
    "mimeType": "application/json",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class McpHost:
    """What every caller shares: the store, the namespace and user given at start
    (``user`` None: each token's name), the tokens (None: stdio, no tokens), and the
    embedder factory for ``recall``."""

    store: Store
    namespace: str
    user: str | None
    embedder: Callable[[], Any]
    tokens: Tokens | None = None

    def memory(self, token: Token | None, grants: tuple[str, ...]) -> Memory:
        """The memory a call works on; ``Forbidden`` when the token lacks a grant."""
        namespace, user = self.namespace, self.user
        if token is not None:
            namespace = token.only_namespace or self.namespace
            for g in grants:
                token.require(g, namespace)
            user = user or token.name
        if user is None:
            raise Unauthorized("no user: start the server with --user, or send a token")
        return Memory(
            store=self.store,
            namespace=namespace,
            scope=scopes.user(user),
            embedder=self.embedder,
        )


def load_tokens(tokens_file: str | None, env: Mapping[str, str]) -> Tokens:
    """The tokens ``tether serve`` would accept: the tokens file (if given) plus
    ``$TETHER_TOKEN`` and ``$TETHER_JWT_SECRET`` (if set), or what the environment names."""
    if tokens_file is None:
        return Tokens.from_env(env)
    rest = {k: v for k, v in env.items() if k != ENV_TOKENS_FILE}
    return Tokens.from_file(tokens_file, env=env).merged(Tokens.from_env(rest))


def _token_of(ctx: ServerRequestContext[Any, Any]) -> Token | None:
    request = ctx.request
    state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
    token = state.get(_TOKEN_KEY) if isinstance(state, MutableMapping) else None
    return token if isinstance(token, Token) else None


def _result(r: ToolResult) -> types.CallToolResult:
    meta = {"tether": {"error": r.error}} if r.error is not None else None
    return types.CallToolResult.model_validate(
        {
            "content": [{"type": "text", "text": r.text}],
            "structuredContent": r.structured,
            "isError": r.is_error,
            **({"_meta": meta} if meta else {}),
        }
    )


def build_server(host: McpHost) -> Server[Any]:
    """The low-level MCP server on ``host``: ``tools/list`` and ``tools/call``, and the
    reference's ``memory://knowledge-graph`` resource (list, read, subscribe)."""
    listing = types.ListToolsResult(
        tools=[types.Tool.model_validate(t.listing()) for t in TOOLS.values()]
    )
    # what each connection subscribed to, by _connection_key, oldest first
    subscribed: dict[str, set[str]] = {}

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def call(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = TOOLS.get(params.name)
        try:
            memory = host.memory(_caller(ctx, host), tool.grants if tool else ("memory.read",))
        except (Forbidden, Unauthorized) as e:
            return _result(ToolResult(text=e.message, is_error=True, error=e.to_dict()))
        result = await call_tool(memory, params.name, params.arguments)
        graph_write = tool in REFERENCE_TOOLS and tool is not None and tool.writes
        watched = subscribed.get(_connection_key(ctx), ())
        if graph_write and not result.is_error and GRAPH_URI in watched:
            await ctx.session.send_resource_updated(GRAPH_URI)
        return _result(result)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult.model_validate({"resources": [_GRAPH_RESOURCE]})

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        if str(params.uri) != GRAPH_URI:
            raise MCPError(types.INVALID_PARAMS, f"Resource {params.uri} not found")
        try:
            memory = host.memory(_caller(ctx, host), ("memory.read",))
        except (Forbidden, Unauthorized) as e:
            raise MCPError(types.INVALID_REQUEST, e.message, e.to_dict()) from None
        text = graph_text(await memory.graph.read_graph())
        return types.ReadResourceResult.model_validate(
            {"contents": [{"uri": GRAPH_URI, "mimeType": "application/json", "text": text}]}
        )

    async def subscribe(
        ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        key = _connection_key(ctx)
        subscribed[key] = subscribed.pop(key, set()) | {str(params.uri)}
        while len(subscribed) > MAX_SUBSCRIBERS:  # the oldest HTTP sessions' go first
            del subscribed[next(iter(subscribed))]
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        subscribed.get(_connection_key(ctx), set()).discard(str(params.uri))
        return types.EmptyResult()

    return Server(
        "tether",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
    )


def _connection_key(ctx: ServerRequestContext[Any, Any]) -> str:
    """Which connection a request came on, for subscriptions: an HTTP session's id, or ""
    for stdio (one connection per process). The SDK builds a session object per request,
    so that object cannot say it."""
    headers = getattr(ctx.request, "headers", None)
    sid = headers.get("mcp-session-id") if headers is not None else None
    return sid if isinstance(sid, str) else ""


def _caller(ctx: ServerRequestContext[Any, Any], host: McpHost) -> Token | None:
    token = _token_of(ctx)
    if host.tokens is not None and token is None:  # the HTTP layer lets none through
        raise Unauthorized("send a bearer token: Authorization: Bearer <token>")
    return token


ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


def bearer_auth(app: ASGIApp, tokens: Tokens) -> ASGIApp:
    """An ASGI wrapper: every HTTP request needs a token ``tokens`` knows (else 401,
    with tether's error shape); the token rides in the request's state to the tools."""

    async def wrapped(
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        header = ""
        for k, v in scope.get("headers", []):
            if k.lower() == b"authorization":
                header = v.decode("latin-1")
        scheme, _, presented = header.partition(" ")
        try:
            if scheme.lower() != "bearer":
                raise Unauthorized("send a bearer token: Authorization: Bearer <token>")
            token = tokens.authenticate(presented.strip())
        except Unauthorized as e:
            body = orjson.dumps({"error": e.to_dict()})
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer realm="tether"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope.setdefault("state", {})[_TOKEN_KEY] = token
        await app(scope, receive, send)

    return wrapped
