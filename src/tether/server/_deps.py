"""What every route needs: the server's store, its agents, and the token check.

``Server`` owns the store when it was given a URL (opened at startup or on the
first request, closed at shutdown); a ``Store`` object passed in stays the
caller's. ``need(grant)`` is the FastAPI dependency that authenticates the
bearer token and checks its grant (and the path's namespace) before a route
reads anything; routes take it in ``dependencies=[need(...)]``, so it runs first.
``NamespaceAt`` and ``ThreadAt`` hand a route where it acts (``At``: the server,
the path's namespace and thread, and the caller's token), so a route states only
what is its own. A token bound to a user (``_access``) gets the path's thread only
when the user owns it (``ThreadAt``; ``StartAt`` also lets a step start an empty
thread); a route on a scope or the namespace asks ``At.allow``.
"""

from __future__ import annotations

import asyncio
import inspect
import pathlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Final, TypeAlias

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.responses import Response

from .. import control
from ..control.types import StateOperationRequest
from ..core import scopes
from ..core.errors import NotFound
from ..runtime.agent import Agent
from ..store import Store, open_store
from ..store.base import check_name
from ._access import require_scope
from ._http import json_response
from .auth import Token, Tokens, presented_credential

__all__ = [
    "AgentFactory",
    "At",
    "NamespaceAt",
    "NamespacePath",
    "Server",
    "StartAt",
    "ThreadAt",
    "ThreadPath",
    "authenticated",
    "need",
]

NamespacePath = Annotated[str, Path(min_length=1, max_length=256)]
ThreadPath = Annotated[str, Path(min_length=1, max_length=200)]

AgentFactory: TypeAlias = Callable[..., Agent]
"""Builds an agent over the server's store: ``factory(store, namespace)``, or
``factory(store)`` for an agent of one namespace (``tether.cli.demo:agent``)."""

_MAX_AGENTS: Final = 256

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="A token named in the server's tokens file, or $TETHER_TOKEN.",
)


class Server:
    """The state behind one app: store, tokens, agents. Kept in ``app.state.tether``."""

    def __init__(
        self,
        store: Store | str,
        *,
        tokens: Tokens,
        agent: Agent | AgentFactory | None = None,
        cipher: Any = None,
        gc_export_dir: pathlib.Path | None = None,
    ) -> None:
        if isinstance(store, Store):
            self._store: Store | None = store
            self._url: str | None = None
        else:
            self._store, self._url = None, store
        self._lock = asyncio.Lock()
        self.cipher = cipher  # for a store opened from its URL (open_store's cipher=)
        self.tokens = tokens
        self.agent = agent
        # Where POST /gc writes each idle thread's snapshot before deleting it (a
        # directory of this machine: tether serve --gc-export-dir); None: no export.
        self.gc_export_dir = gc_export_dir
        self._agents: OrderedDict[str, Agent] = OrderedDict()

    @property
    def has_agent(self) -> bool:
        return self.agent is not None

    async def store(self) -> Store:
        if self._store is None:
            async with self._lock:
                if self._store is None:
                    assert self._url is not None
                    self._store = await open_store(self._url, cipher=self.cipher)
        return self._store

    async def close(self) -> None:
        """Close the store if this server opened it from a URL."""
        if self._url is not None and self._store is not None:
            store, self._store = self._store, None
            await store.close()

    async def agent_for(self, namespace: str) -> Agent:
        """The agent that runs steps in ``namespace``; NotFound if none does."""
        if self.agent is None:
            raise NotFound("this server runs no agent: start it with --agent", field="agent")
        if isinstance(self.agent, Agent):
            if namespace != self.agent.namespace:
                raise NotFound(
                    f"the agent serves namespace {self.agent.namespace!r}, not {namespace!r}",
                    namespace=namespace,
                )
            return self.agent
        found = self._agents.get(namespace)
        if found is None:
            store = await self.store()
            made = self.agent(store, namespace) if _arity(self.agent) >= 2 else self.agent(store)
            if not isinstance(made, Agent):
                raise TypeError(f"the agent factory returned {made!r}, not an Agent")
            if made.namespace != namespace:
                raise NotFound(
                    f"the agent serves namespace {made.namespace!r}, not {namespace!r}",
                    namespace=namespace,
                )
            found = self._agents[namespace] = made
            # Agents hold configuration only; the oldest is rebuilt if needed again.
            while len(self._agents) > _MAX_AGENTS:
                self._agents.popitem(last=False)
        else:
            self._agents.move_to_end(namespace)
        return found


def _arity(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` requires."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in positional and p.default is p.empty)


def server_of(request: Request) -> Server:
    s = request.app.state.tether
    assert isinstance(s, Server)
    return s


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


async def authenticated(request: Request, creds: Credentials) -> Token:
    """Any known token (no grant needed): sent as a bearer token, ``Authorization: ApiKey``
    or ``X-API-Key``; nothing sent is the anonymous token on a server that has one."""
    client = request.client.host if request.client is not None else None
    token = server_of(request).tokens.authenticate(
        presented_credential(request.headers), client=client
    )
    # The name (never the secret) is logged with the request.
    request.state.token_name = token.name
    return token


def need(grant: str) -> Any:
    """A dependency: a known token with ``grant`` on the path's namespace (if it has one)."""

    async def check(request: Request, creds: Credentials) -> Token:
        token = await authenticated(request, creds)
        ns = request.path_params.get("namespace")
        token.require(grant, ns if isinstance(ns, str) else None)
        request.state.token = token  # for At: which user, if any, the token is bound to
        return token

    check.__name__ = "need_" + grant.replace(".", "_")
    return Depends(check)


@dataclass(frozen=True, slots=True)
class At:
    """Where a route acts: the server, the path's namespace and (thread routes) thread."""

    server: Server
    namespace: str
    thread: str | None = None
    token: Token | None = None

    async def store(self) -> Store:
        return await self.server.store()

    async def allow(self, scope: str | None, *, start: bool = False) -> None:
        """``Forbidden`` unless the caller's token may touch ``scope`` (None: the namespace)."""
        if self.token is not None and self.token.user is not None:
            await require_scope(self.token, await self.store(), self.namespace, scope, start=start)

    @property
    def user(self) -> str | None:
        """The user the caller's token is bound to (None: any user)."""
        return self.token.user if self.token is not None else None

    def request(self, **fields: Any) -> StateOperationRequest:
        """A ``StateOperationRequest`` on this namespace and thread (validated)."""
        return StateOperationRequest(
            **{"namespace": self.namespace, "thread": self.thread, **fields}
        )

    async def operation(self, operation: str, **fields: Any) -> Response:
        """Run a control-plane operation here; its result is the response body."""
        result = await control.execute(await self.store(), operation, self.request(**fields))
        return json_response(result.to_dict())


def _token(request: Request) -> Token | None:
    token = getattr(request.state, "token", None)
    return token if isinstance(token, Token) else None


# Dependencies are coroutines, though they never wait: FastAPI runs a plain ``def``
# dependency in a worker thread, a thread hop on every request (and, under load, a
# wait for one of anyio's 40 threads).
async def _namespace_at(request: Request, namespace: NamespacePath) -> At:
    # Names are checked before anything else sees them (no hidden characters).
    return At(server_of(request), check_name("namespace", namespace), token=_token(request))


async def _thread_at(request: Request, namespace: NamespacePath, thread: ThreadPath) -> At:
    scope = scopes.thread(thread)
    at = At(server_of(request), check_name("namespace", namespace), thread, _token(request))
    await at.allow(scope)
    return at


async def _start_at(request: Request, namespace: NamespacePath, thread: ThreadPath) -> At:
    scope = scopes.thread(thread)
    at = At(server_of(request), check_name("namespace", namespace), thread, _token(request))
    await at.allow(scope, start=True)
    return at


NamespaceAt = Annotated[At, Depends(_namespace_at)]
ThreadAt = Annotated[At, Depends(_thread_at)]
StartAt = Annotated[At, Depends(_start_at)]
