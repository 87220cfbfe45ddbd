"""A Python client for tether's HTTP control plane (seed 002's AgentClient).

    async with tether.Client("http://127.0.0.1:8765", token) as c:
        r = await c.step("pay 10 to bob", thread="t1", user="alice")
        if r.suspended:
            r = await c.approve("t1", r.pending_approvals[0].call_id)
        waiting = await c.runs(status="suspended")
        report = await c.describe(thread="t1", include_data=True)

    with tether.SyncClient("http://127.0.0.1:8765", token) as c:   # scripts, no event loop
        c.reset(thread="t1", stores=["tools"])

Every control-plane operation (``describe``, ``reset``, ``compact``, ``export``,
``import_``, ``history``, ``fork``, ``verify``: ``POST /state/<operation>``), the
agent's ``step``, ``resume``, ``approve`` and ``reject``, the task views (``runs``,
``task``, ``pending_approvals``) and ``erase_user`` return the same typed results as
the local API (``StateOperationResult``, ``StepResult``, ``RunList``, ``TaskState``,
``PendingApproval``, ``ErasureResult``), rebuilt with their ``from_dict``; so do ``prune``,
``stats``, ``scope_stats``, ``retention``, ``set_retention`` and ``gc`` (issue 43). An error
response (``{"error", "code", "message", "details"}``) becomes the same
``TetherError`` subclass a local call raises (``NotFound``, ``InvalidRequest`` with
its ``field``, ``RunSuspendedError``, ``InvalidSnapshot`` with its ``index``...), by
class name, else by status; a server that cannot be reached raises ``ClientError``
(code ``unavailable``).

Each call is written once, in ``_Api``, as a function that builds the request and
says how to read the answer (no I/O, as httpx's ``BaseClient``). ``Client`` and
``SyncClient`` differ only in how they send one (``_call``: awaited on an
``httpx.AsyncClient``, or blocking on an ``httpx.Client``); ``_Endpoint`` hands each
call to the client it is read from, typed for that client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, Final, Generic, ParamSpec, TypeVar, overload
from urllib.parse import quote

import httpx
import orjson

from .control.erasure import ErasureResult
from .control.prune import PruneResult
from .control.retention import GcResult, RetentionPolicy
from .control.stats import NamespaceUsage, ScopeUsage
from .control.tasks import RunList, TaskState
from .control.types import DEFAULT_NAMESPACE, StateOperationRequest, StateOperationResult
from .core.errors import (
    Conflict,
    InvalidRequest,
    InvalidSnapshot,
    NotFound,
    StoreError,
    TetherError,
)
from .core.telemetry import telemetry
from .projections.runs import PendingApproval, StepResult

__all__ = ["Client", "ClientError", "SyncClient"]

T = TypeVar("T")
Transport = TypeVar("Transport")
P = ParamSpec("P")
DEFAULT_TIMEOUT: Final = 60.0
# A request refused as overloaded (503, nothing read or written) is sent again this many
# times, each after the server's Retry-After (at most MAX_OVERLOAD_PAUSE seconds).
DEFAULT_OVERLOAD_RETRIES: Final = 3
MAX_OVERLOAD_PAUSE: Final = 30.0


class ClientError(TetherError):
    """The server could not be reached, or answered something that is not tether's."""

    default_code = "unavailable"


# --------------------------------------------------------------------------- errors


def _error_classes() -> dict[str, type[TetherError]]:
    """Every TetherError subclass loaded in this process, by class name, so an HTTP error
    comes back as itself. The client speaks HTTP only and imports neither the runtime nor
    the server: a caller who catches one of their errors has imported its class, which
    registers it here; any other error comes back by its status (``_BY_STATUS``)."""
    out: dict[str, type[TetherError]] = {}
    stack: list[type[TetherError]] = [TetherError]
    while stack:
        cls = stack.pop()
        out.setdefault(cls.__name__, cls)
        stack.extend(cls.__subclasses__())
    return out


_BY_STATUS: Final[dict[int, type[TetherError]]] = {
    400: InvalidRequest,
    404: NotFound,
    409: Conflict,
    413: InvalidSnapshot,
    422: InvalidSnapshot,
    503: StoreError,
}


def error_from_response(status: int, body: Any) -> TetherError:
    """The TetherError an error response stands for (the same class a local call raises)."""
    if (
        isinstance(body, dict)
        and isinstance(body.get("code"), str)
        and isinstance(body.get("message"), str)
    ):
        cls = _error_classes().get(str(body.get("error")))
        if cls is None:
            cls = _BY_STATUS.get(status, TetherError)
        details = body.get("details")
        err = cls.__new__(cls)
        TetherError.__init__(
            err,
            body["message"],
            code=body["code"],
            **(details if isinstance(details, dict) else {}),
        )
        return err
    return ClientError(f"HTTP {status} without a tether error body", code="http", status=status)


def _overload_pause(response: httpx.Response, attempt: int, retries: int) -> float | None:
    """Seconds to wait before sending a request again that the server refused as
    overloaded (nothing was read or written), or None: the answer stands."""
    if response.status_code != 503 or attempt >= retries:
        return None
    try:
        overloaded = orjson.loads(response.content).get("code") == "overloaded"
    except (orjson.JSONDecodeError, AttributeError):
        return None
    if not overloaded:
        return None
    try:
        after = float(response.headers.get("retry-after", "1"))
    except ValueError:
        after = 1.0
    return min(max(after, 0.0), MAX_OVERLOAD_PAUSE)


@contextlib.contextmanager
def _reaching(base_url: str) -> Iterator[None]:
    """Transport failures (refused, timed out, reset) as ``ClientError``."""
    try:
        yield
    except httpx.HTTPError as e:
        raise ClientError(
            f"cannot reach the tether server at {base_url}: {type(e).__name__}: {e}; is "
            "`tether serve` running there?",
            url=base_url,
        ) from None


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True, kw_only=True, slots=True)
class _Req(Generic[T]):
    """One HTTP request and how to read its answer: built by ``_Api``, sent by a client."""

    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    params: Mapping[str, str] | None = None

    def http(self) -> dict[str, Any]:
        """The arguments of ``httpx.(Async)Client.request``."""
        headers = {} if self.json is None else {"Content-Type": "application/json"}
        return {
            "method": self.method,
            "url": self.path,
            "content": None if self.json is None else orjson.dumps(self.json),
            # The caller's trace continues on the server (W3C traceparent), when traced.
            "headers": telemetry.inject_headers(headers) or None,
            "params": self.params,
        }

    def read(self, response: httpx.Response) -> T:
        try:
            data = orjson.loads(response.content) if response.content else None
        except orjson.JSONDecodeError:
            data = None
        if response.status_code >= 400:
            raise error_from_response(response.status_code, data)
        if data is None:
            raise ClientError(
                f"{self.method} {self.path}: HTTP {response.status_code} without a JSON body",
                code="http",
                status=response.status_code,
            )
        return self.parse(data)


def _segment(what: str, value: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"{what} is a non-empty string, got {value!r}", field=what)
    if "/" in value:
        raise InvalidRequest(
            f"{what} {value!r} holds '/', which a URL path cannot carry; use the "
            "/state/<operation> calls (describe, reset, ...) for such ids",
            field=what,
        )
    return quote(value, safe="")


def _present(data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields that were given (None: left to the server's default)."""
    return {k: dict(v) if isinstance(v, Mapping) else v for k, v in data.items() if v is not None}


def _decision(data: Any) -> StepResult | None:
    if isinstance(data, dict) and data.get("status") == "decided":
        return None  # resume=False: only the decision was committed
    return StepResult.from_dict(data)


def _approvals(data: Any) -> list[PendingApproval]:
    return [PendingApproval.from_dict(p) for p in data["pending_approvals"]]


class _Endpoint(Generic[P, T]):
    """One call of the API, declared once as its request builder.

    Read from a ``Client`` it is an async method, from a ``SyncClient`` a blocking one,
    with the builder's parameters, name and docstring.
    """

    def __init__(
        self, build: Callable[Concatenate[_Api[Any], P], _Req[T]], name: str | None = None
    ) -> None:
        self.build = build
        self.__name__ = name or build.__name__
        self.__doc__ = build.__doc__
        params = list(inspect.signature(build).parameters.values())[1:]
        self.__signature__ = inspect.Signature(params)

    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None) -> _Endpoint[P, T]: ...
    @overload
    def __get__(
        self, obj: Client, owner: type[Any] | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(self, obj: SyncClient, owner: type[Any] | None = None) -> Callable[P, T]: ...
    def __get__(self, obj: _Api[Any] | None, owner: type[Any] | None = None) -> Any:
        if obj is None:
            return self
        bound = functools.partial(obj._call, self.build)
        bound.__name__ = self.__name__  # type: ignore[attr-defined]
        bound.__doc__ = self.__doc__
        bound.__signature__ = self.__signature__  # type: ignore[attr-defined]
        return bound


def _operation(
    api: _Api[Any], /, operation: str, request: StateOperationRequest | None = None, **fields: Any
) -> _Req[StateOperationResult]:
    """Any control-plane operation by name (``POST /state/<operation>``); ``fields`` are
    those of a ``StateOperationRequest`` (over ``request``'s, if given)."""
    if request is None:
        fields.setdefault("namespace", api.namespace)
        req = StateOperationRequest.from_dict(fields)
    elif fields:
        req = StateOperationRequest.from_dict({**request.to_dict(), **fields})
    else:
        req = request
    return _Req(
        method="POST",
        path=f"/state/{_segment('operation', operation)}",
        json=req.to_dict(),
        parse=StateOperationResult.from_dict,
    )


def _by_name(
    api: _Api[Any], operation: str, /, request: StateOperationRequest | None = None, **fields: Any
) -> _Req[StateOperationResult]:
    return _operation(api, operation, request, **fields)


def _op_doc(what: str) -> str:
    return f"{what} (``POST /state/<operation>``; ``fields``: a request's fields)."


def _decide(
    api: _Api[Any],
    action: str,
    /,
    thread: str,
    call: str,
    *,
    reason: str | None = None,
    context: Mapping[str, Any] | None = None,
    resume: bool = True,
    namespace: str | None = None,
) -> _Req[StepResult | None]:
    return _Req(
        method="POST",
        path=api._thread_path(namespace, thread, action),
        json=_present({"call": call, "reason": reason, "context": context, "resume": resume}),
        parse=_decision,
    )


def _named(
    build: Callable[Concatenate[_Api[Any], str, P], _Req[T]], first: str, doc: str, name: str = ""
) -> _Endpoint[P, T]:
    """``build`` with its second argument given: ``describe`` is the operation "describe",
    ``approve`` the decision "approve"."""

    def named(api: _Api[Any], /, *args: P.args, **kwargs: P.kwargs) -> _Req[T]:
        return build(api, first, *args, **kwargs)

    api, _, *rest = inspect.signature(build).parameters.values()
    named.__doc__ = doc
    named.__signature__ = inspect.Signature([api, *rest])  # type: ignore[attr-defined]
    return _Endpoint(named, name or first)


class _Api(Generic[Transport]):
    """Every call, as a request builder (no I/O); the clients below send them."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        timeout: float = DEFAULT_TIMEOUT,
        transport: Transport | None = None,
        overload_retries: int = DEFAULT_OVERLOAD_RETRIES,
    ) -> None:
        """``namespace``: the default of every call (each call may name another).
        ``transport``: an httpx transport in place of the network (``httpx.MockTransport``,
        ``httpx.ASGITransport``). ``overload_retries``: how many times a request the server
        refused as overloaded (503, code ``overloaded``: nothing read or written) is sent
        again after the server's ``Retry-After``; then ``tether.Overloaded`` is raised."""
        if not isinstance(overload_retries, int) or overload_retries < 0:
            raise InvalidRequest(
                f"overload_retries is a non-negative integer, got {overload_retries!r}",
                field="overload_retries",
            )
        self.overload_retries = overload_retries
        self.base_url, self.namespace = base_url.rstrip("/"), namespace
        self._http = self._connect(headers=_headers(token), timeout=timeout, transport=transport)

    def _connect(self, **options: Any) -> Any:
        raise NotImplementedError

    def _call(
        self, build: Callable[..., _Req[T]], /, *args: Any, **kwargs: Any
    ) -> T | Coroutine[Any, Any, T]:
        raise NotImplementedError

    def _ns(self, namespace: str | None) -> str:
        return _segment("namespace", namespace or self.namespace)

    def _thread_path(self, namespace: str | None, thread: str, action: str) -> str:
        return f"/v1/ns/{self._ns(namespace)}/threads/{_segment('thread', thread)}/{action}"

    # -- the control plane (fields: those of StateOperationRequest)

    operation = _Endpoint(_operation, "operation")
    describe = _named(_by_name, "describe", _op_doc("What exists: per-store counts, sizes, data"))
    reset = _named(_by_name, "reset", _op_doc("Clear exactly what is named"))
    compact = _named(_by_name, "compact", _op_doc("Compact a thread's conversation"))
    export = _named(_by_name, "export", _op_doc("A scope's snapshot"))
    import_ = _named(_by_name, "import", _op_doc("Validate and write a snapshot"), "import_")
    history = _named(_by_name, "history", _op_doc("One page of a scope's nodes"))
    fork = _named(_by_name, "fork", _op_doc("A new thread from any node"))
    verify = _named(_by_name, "verify", _op_doc("Recompute identities and links"))

    # -- the agent

    @_Endpoint
    def step(
        self,
        input: Any,
        *,
        thread: str = "default",
        user: str | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> _Req[StepResult]:
        """One turn on ``thread`` (``agent.step`` over HTTP)."""
        body = _present({"user": user, "context": context, "metadata": metadata})
        return _Req(
            method="POST",
            path=self._thread_path(namespace, thread, "step"),
            json={"input": input, **body},
            parse=StepResult.from_dict,
        )

    @_Endpoint
    def resume(
        self,
        thread: str = "default",
        *,
        context: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> _Req[StepResult]:
        """Finish the thread's latest run from the graph (after a crash or shutdown)."""
        return _Req(
            method="POST",
            path=self._thread_path(namespace, thread, "resume"),
            json=_present({"context": context}),
            parse=StepResult.from_dict,
        )

    approve = _named(
        _decide,
        "approve",
        "Approve a pending call (its ``call_id`` or node id) and continue the run; None with "
        "``resume=False`` (only the decision is committed).",
    )
    reject = _named(
        _decide,
        "reject",
        "Reject a pending call: the model gets an error result saying so (with ``reason``); "
        "None with ``resume=False``.",
    )

    # -- task state and erasure

    @_Endpoint
    def runs(
        self,
        *,
        status: str | Iterable[str] | None = None,
        thread: str | None = None,
        user: str | None = None,
        after: str | None = None,
        limit: int = 100,
        namespace: str | None = None,
    ) -> _Req[RunList]:
        """Runs of the namespace from its run index (``control.runs`` over HTTP), e.g.
        ``runs(status="suspended")`` for every run waiting for a human."""
        wanted = status if status is None or isinstance(status, str) else ",".join(status)
        params = _present({"status": wanted, "thread": thread, "user": user, "after": after})
        return _Req(
            method="GET",
            path=f"/v1/ns/{self._ns(namespace)}/runs",
            params={**params, "limit": str(limit)},
            parse=RunList.from_dict,
        )

    @_Endpoint
    def task(
        self, thread: str, run: str | None = None, *, namespace: str | None = None
    ) -> _Req[TaskState]:
        """A run's metadata and status history (the thread's latest run by default)."""
        return _Req(
            method="GET",
            path=self._thread_path(namespace, thread, "task"),
            params=_present({"run": run}),
            parse=TaskState.from_dict,
        )

    @_Endpoint
    def pending_approvals(
        self, thread: str = "default", *, namespace: str | None = None
    ) -> _Req[list[PendingApproval]]:
        """The tool calls of the thread's latest run that wait for a decision."""
        return _Req(
            method="GET", path=self._thread_path(namespace, thread, "approvals"), parse=_approvals
        )

    @_Endpoint
    def erase_user(self, user: str, *, namespace: str | None = None) -> _Req[ErasureResult]:
        """Erase a user of an encrypted store, for good: their data key is destroyed
        (grant ``state.erase``; ``CipherError`` ``not_encrypted`` on a plaintext store)."""
        return _Req(
            method="POST",
            path=f"/v1/ns/{self._ns(namespace)}/users/{_segment('user', user)}/erase",
            parse=ErasureResult.from_dict,
        )

    # -- lifecycle: prune, usage, retention (issue 43)

    @_Endpoint
    def prune(
        self,
        thread: str,
        *,
        keep_versions: int | None = None,
        finished_before: str | None = None,
        compacted: bool = True,
        forget_runs: bool = False,
        dry_run: bool = False,
        namespace: str | None = None,
    ) -> _Req[PruneResult]:
        """Remove what nothing current needs from ``thread`` (grant ``state.prune``);
        ``dry_run``: what would be freed, nothing changed; ``forget_runs``: forget every
        pruned run id so far (``tether.control.prune``)."""
        body = _present({"keep_versions": keep_versions, "finished_before": finished_before})
        if forget_runs:  # sent only when set: a server before it takes the request as it was
            body["forget_runs"] = True
        return _Req(
            method="POST",
            path=self._thread_path(namespace, thread, "prune"),
            json={**body, "compacted": compacted, "dry_run": dry_run},
            parse=PruneResult.from_dict,
        )

    @_Endpoint
    def stats(
        self, thread: str | None = None, *, namespace: str | None = None
    ) -> _Req[NamespaceUsage | ScopeUsage]:
        """The namespace's usage totals, or ``thread``'s (a ``ScopeUsage``): nodes, stored
        payload bytes, last activity (grant ``state.describe``)."""
        if thread is not None:
            return _Req(
                method="GET",
                path=self._thread_path(namespace, thread, "stats"),
                parse=ScopeUsage.from_dict,
            )
        return _Req(
            method="GET",
            path=f"/v1/ns/{self._ns(namespace)}/stats",
            parse=NamespaceUsage.from_dict,
        )

    @_Endpoint
    def scope_stats(
        self,
        *,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        namespace: str | None = None,
    ) -> _Req[tuple[list[ScopeUsage], str | None]]:
        """One page of the namespace's scopes with their usage, and the ``after`` of the
        next page (None: the last)."""
        params = _present({"prefix": prefix or None, "after": after})
        return _Req(
            method="GET",
            path=f"/v1/ns/{self._ns(namespace)}/stats/scopes",
            params={**params, "limit": str(limit)},
            parse=lambda d: ([ScopeUsage.from_dict(s) for s in d["scopes"]], d["next_after"]),
        )

    @_Endpoint
    def retention(self, *, namespace: str | None = None) -> _Req[RetentionPolicy | None]:
        """The namespace's retention policy (None: everything is kept)."""
        return _Req(
            method="GET",
            path=f"/v1/ns/{self._ns(namespace)}/retention",
            parse=lambda d: None if d["policy"] is None else RetentionPolicy.from_dict(d["policy"]),
        )

    @_Endpoint
    def set_retention(
        self,
        *,
        idle_thread_days: float | None = None,
        memory_ttl_days: float | None = None,
        memory_ttl_refresh_on_read: bool = False,
        export_idle_threads: bool = False,
        namespace: str | None = None,
    ) -> _Req[RetentionPolicy]:
        """Set the namespace's whole retention policy (grant ``state.gc``)."""
        policy = RetentionPolicy(
            idle_thread_days=idle_thread_days,
            memory_ttl_days=memory_ttl_days,
            memory_ttl_refresh_on_read=memory_ttl_refresh_on_read,
            export_idle_threads=export_idle_threads,
        )
        return _Req(
            method="PUT",
            path=f"/v1/ns/{self._ns(namespace)}/retention",
            json=policy.to_dict(),
            parse=lambda d: RetentionPolicy.from_dict(d["policy"]),
        )

    @_Endpoint
    def gc(
        self, *, dry_run: bool = False, now: str | None = None, namespace: str | None = None
    ) -> _Req[GcResult]:
        """Apply the namespace's retention policy (grant ``state.gc``); ``dry_run``: what
        would be deleted and forgotten, nothing changed."""
        return _Req(
            method="POST",
            path=f"/v1/ns/{self._ns(namespace)}/gc",
            json=_present({"dry_run": dry_run, "now": now}),
            parse=GcResult.from_dict,
        )

    # -- meta

    @_Endpoint
    def whoami(self) -> _Req[dict[str, Any]]:
        """The token's name, grants and namespaces, and whether the server runs an agent."""
        return _Req(method="GET", path="/v1/whoami", parse=dict)

    @_Endpoint
    def health(self) -> _Req[dict[str, Any]]:
        """Liveness (``GET /healthz``: no token needed)."""
        return _Req(method="GET", path="/healthz", parse=dict)


def _headers(token: str) -> dict[str, str]:
    if not isinstance(token, str) or not token:
        raise InvalidRequest("a client needs the bearer token the server was given", field="token")
    return {"Authorization": f"Bearer {token}", "Accept": "application/json"}


# --------------------------------------------------------------------------- the clients


class Client(_Api[httpx.AsyncBaseTransport]):
    """The HTTP control plane from async code: ``async with tether.Client(url, token) as c``."""

    _http: httpx.AsyncClient

    def _connect(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base_url, **options)

    async def _call(self, build: Callable[..., _Req[T]], /, *args: Any, **kwargs: Any) -> T:
        req = build(self, *args, **kwargs)  # inside the coroutine: errors come on await
        for attempt in range(self.overload_retries + 1):
            with _reaching(self.base_url):
                response = await self._http.request(**req.http())
            pause = _overload_pause(response, attempt, self.overload_retries)
            if pause is None:
                break
            await asyncio.sleep(pause)
        return req.read(response)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class SyncClient(_Api[httpx.BaseTransport]):
    """``Client`` for code without an event loop: the same methods, no ``await``."""

    _http: httpx.Client

    def _connect(self, **options: Any) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, **options)

    def _call(self, build: Callable[..., _Req[T]], /, *args: Any, **kwargs: Any) -> T:
        req = build(self, *args, **kwargs)
        for attempt in range(self.overload_retries + 1):
            with _reaching(self.base_url):
                response = self._http.request(**req.http())
            pause = _overload_pause(response, attempt, self.overload_retries)
            if pause is None:
                break
            time.sleep(pause)
        return req.read(response)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
