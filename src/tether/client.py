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
agent's ``step``, ``resume``, ``approve`` and ``reject``, and the task views
(``runs``, ``task``) return the same typed results as the local API
(``StateOperationResult``, ``StepResult``, ``RunList``, ``TaskState``), rebuilt
with their ``from_dict``. An error response (``{"error", "code", "message",
"details"}``) becomes the same ``TetherError`` subclass a local call raises
(``NotFound``, ``InvalidRequest`` with its ``field``, ``RunSuspendedError``,
``InvalidSnapshot`` with its ``index``...), by class name, else by status; a
server that cannot be reached raises ``ClientError`` (code ``unavailable``).

As in httpx, the request building and response parsing (``_Core``) do no I/O;
``Client`` and ``SyncClient`` only send.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Generic, TypeVar
from urllib.parse import quote

import httpx
import orjson

from ._errors import (
    Conflict,
    InvalidRequest,
    InvalidSnapshot,
    NotFound,
    StoreError,
    TetherError,
)
from .control.tasks import RunList, TaskState, page_runs, summary_of
from .control.tasks import index_prefix as _index_prefix
from .control.types import DEFAULT_NAMESPACE, StateOperationRequest, StateOperationResult
from .runtime.results import StepResult

__all__ = ["Client", "ClientError", "SyncClient"]

T = TypeVar("T")
DEFAULT_TIMEOUT: Final = 60.0


class ClientError(TetherError):
    """The server could not be reached, or answered something that is not tether's."""

    default_code = "unavailable"


@dataclass(frozen=True, kw_only=True, slots=True)
class _Req(Generic[T]):
    """One HTTP request and how to read its answer: built by ``_Core``, sent by a client."""

    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    params: Mapping[str, str] | None = None


# --------------------------------------------------------------------------- errors


@functools.cache
def _error_classes() -> dict[str, type[TetherError]]:
    """Every TetherError subclass by class name, so an HTTP error comes back as itself."""
    # Importing these registers their errors; the server's auth errors only when the
    # server extra is installed (the client does not need it).
    from . import memory, models, runtime  # noqa: F401

    with contextlib.suppress(ImportError):  # without fastapi: statuses decide
        from .server import auth, limits  # noqa: F401
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


# --------------------------------------------------------------------------- the core


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


def _body(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


class _Core:
    """Builds requests and reads answers; no I/O."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def _ns(self, namespace: str | None) -> str:
        return _segment("namespace", namespace or self.namespace)

    def operation(
        self, operation: str, request: StateOperationRequest | None, fields: dict[str, Any]
    ) -> _Req[StateOperationResult]:
        if request is None:
            fields.setdefault("namespace", self.namespace)
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

    def _thread_path(self, namespace: str | None, thread: str, action: str) -> str:
        return f"/v1/ns/{self._ns(namespace)}/threads/{_segment('thread', thread)}/{action}"

    def step(
        self,
        input: Any,
        *,
        thread: str,
        user: str | None,
        context: Mapping[str, Any] | None,
        metadata: Mapping[str, Any] | None,
        namespace: str | None,
    ) -> _Req[StepResult]:
        return _Req(
            method="POST",
            path=self._thread_path(namespace, thread, "step"),
            json={
                "input": input,
                **_body(
                    {
                        "user": user,
                        "context": None if context is None else dict(context),
                        "metadata": None if metadata is None else dict(metadata),
                    }
                ),
            },
            parse=StepResult.from_dict,
        )

    def resume(
        self, thread: str, *, context: Mapping[str, Any] | None, namespace: str | None
    ) -> _Req[StepResult]:
        return _Req(
            method="POST",
            path=self._thread_path(namespace, thread, "resume"),
            json=_body({"context": None if context is None else dict(context)}),
            parse=StepResult.from_dict,
        )

    def decide(
        self,
        approve: bool,
        thread: str,
        call: str,
        *,
        reason: str | None,
        context: Mapping[str, Any] | None,
        resume: bool,
        namespace: str | None,
    ) -> _Req[StepResult | None]:
        def parse(data: Any) -> StepResult | None:
            if isinstance(data, dict) and data.get("status") == "decided":
                return None
            return StepResult.from_dict(data)

        return _Req(
            method="POST",
            path=self._thread_path(namespace, thread, "approve" if approve else "reject"),
            json=_body(
                {
                    "call": call,
                    "reason": reason,
                    "context": None if context is None else dict(context),
                    "resume": resume,
                }
            ),
            parse=parse,
        )

    def runs(
        self,
        *,
        status: str | Iterable[str] | None,
        thread: str | None,
        user: str | None,
        after: str | None,
        limit: int,
        namespace: str | None,
    ) -> _Req[RunList]:
        ns = namespace or self.namespace
        # One indexed read of the app scope's resource heads (the run index): the same
        # read the local ``control.runs`` makes, then the same filtering and paging.
        prefix = _index_prefix(thread)
        if isinstance(status, str):
            status = (status,)
        wanted = None if status is None else tuple(status)
        page_runs((), namespace=ns, status=wanted, user=user, limit=limit)  # validate first

        def parse(data: Any) -> RunList:
            found = []
            for node in (data.get("resources") or {}).values():
                s = summary_of(node.get("payload"), str(node.get("createdAt")))
                if s is not None:
                    found.append(s)
            return page_runs(
                found, namespace=ns, status=wanted, user=user, after=after, limit=limit
            )

        return _Req(
            method="GET",
            path=f"/v1/ns/{self._ns(namespace)}/resources",
            params={"scope": "app", "prefix": prefix},
            parse=parse,
        )

    def task(self, thread: str, run: str | None, namespace: str | None) -> _Req[TaskState]:
        def parse(data: Any) -> TaskState:
            result = StateOperationResult.from_dict(data)
            report = next((r for r in result.stores if r.name == "task"), None)
            items = report.data if report is not None and isinstance(report.data, list) else []
            if not items:
                raise NotFound(f"thread {thread!r} has no runs", thread=thread)
            for item in items if run is not None else items[-1:]:
                if run is None or item.get("run") == run:
                    return TaskState.from_dict(item)
            raise NotFound(f"thread {thread!r} has no run {run!r}", thread=thread, run=run)

        req = self.operation(
            "describe",
            None,
            {
                "namespace": namespace or self.namespace,
                "thread": thread,
                "stores": ["task"],
                "include_data": True,
            },
        )
        return _Req(method=req.method, path=req.path, json=req.json, parse=parse)

    def get(self, path: str, params: Mapping[str, str] | None = None) -> _Req[dict[str, Any]]:
        return _Req(method="GET", path=path, params=params, parse=dict)

    @staticmethod
    def read(req: _Req[T], response: httpx.Response) -> T:
        try:
            data = orjson.loads(response.content) if response.content else None
        except orjson.JSONDecodeError:
            data = None
        if response.status_code >= 400:
            raise error_from_response(response.status_code, data)
        if data is None:
            raise ClientError(
                f"{req.method} {req.path}: HTTP {response.status_code} without a JSON body",
                code="http",
                status=response.status_code,
            )
        return req.parse(data)


def _headers(token: str) -> dict[str, str]:
    if not isinstance(token, str) or not token:
        raise InvalidRequest("a client needs the bearer token the server was given", field="token")
    return {"Authorization": f"Bearer {token}", "Accept": "application/json"}


def _unavailable(base_url: str, e: httpx.HTTPError) -> ClientError:
    return ClientError(
        f"cannot reach the tether server at {base_url}: {type(e).__name__}: {e}; is `tether serve` "
        "running there?",
        url=base_url,
    )


# --------------------------------------------------------------------------- async


class Client:
    """The HTTP control plane from async code: ``async with tether.Client(url, token) as c``.

    ``namespace`` is the default for every call (each call may name another).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._core = _Core(namespace)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=_headers(token), timeout=timeout, transport=transport
        )

    @property
    def namespace(self) -> str:
        return self._core.namespace

    async def _send(self, req: _Req[T]) -> T:
        try:
            response = await self._http.request(
                req.method,
                req.path,
                content=None if req.json is None else orjson.dumps(req.json),
                headers={"Content-Type": "application/json"} if req.json is not None else None,
                params=req.params,
            )
        except httpx.HTTPError as e:
            raise _unavailable(self.base_url, e) from None
        return self._core.read(req, response)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the control plane (fields: those of StateOperationRequest)

    async def operation(
        self, operation: str, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return await self._send(self._core.operation(operation, request, fields))

    async def describe(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return await self.operation("describe", request, **fields)

    async def reset(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return await self.operation("reset", request, **fields)

    async def compact(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return await self.operation("compact", request, **fields)

    async def export(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return await self.operation("export", request, **fields)

    async def import_(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return await self.operation("import", request, **fields)

    async def history(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return await self.operation("history", request, **fields)

    async def fork(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return await self.operation("fork", request, **fields)

    async def verify(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return await self.operation("verify", request, **fields)

    # -- the agent

    async def step(
        self,
        input: Any,
        *,
        thread: str = "default",
        user: str | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> StepResult:
        """One turn on ``thread`` (``agent.step`` over HTTP)."""
        return await self._send(
            self._core.step(
                input,
                thread=thread,
                user=user,
                context=context,
                metadata=metadata,
                namespace=namespace,
            )
        )

    async def resume(
        self,
        thread: str = "default",
        *,
        context: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> StepResult:
        return await self._send(self._core.resume(thread, context=context, namespace=namespace))

    async def approve(
        self,
        thread: str,
        call: str,
        *,
        reason: str | None = None,
        context: Mapping[str, Any] | None = None,
        resume: bool = True,
        namespace: str | None = None,
    ) -> StepResult | None:
        """Approve a pending call; None with ``resume=False`` (only the decision is committed)."""
        return await self._send(
            self._core.decide(
                True,
                thread,
                call,
                reason=reason,
                context=context,
                resume=resume,
                namespace=namespace,
            )
        )

    async def reject(
        self,
        thread: str,
        call: str,
        *,
        reason: str | None = None,
        context: Mapping[str, Any] | None = None,
        resume: bool = True,
        namespace: str | None = None,
    ) -> StepResult | None:
        return await self._send(
            self._core.decide(
                False,
                thread,
                call,
                reason=reason,
                context=context,
                resume=resume,
                namespace=namespace,
            )
        )

    # -- task state

    async def runs(
        self,
        *,
        status: str | Iterable[str] | None = None,
        thread: str | None = None,
        user: str | None = None,
        after: str | None = None,
        limit: int = 100,
        namespace: str | None = None,
    ) -> RunList:
        """Runs of the namespace from its run index (``control.runs`` over HTTP)."""
        return await self._send(
            self._core.runs(
                status=status,
                thread=thread,
                user=user,
                after=after,
                limit=limit,
                namespace=namespace,
            )
        )

    async def task(
        self, thread: str, run: str | None = None, *, namespace: str | None = None
    ) -> TaskState:
        """A run's metadata and status history (the thread's latest run by default)."""
        return await self._send(self._core.task(thread, run, namespace))

    # -- meta

    async def whoami(self) -> dict[str, Any]:
        return await self._send(self._core.get("/v1/whoami"))

    async def health(self) -> dict[str, Any]:
        return await self._send(self._core.get("/healthz"))


# --------------------------------------------------------------------------- sync


class SyncClient:
    """``Client`` for code without an event loop: the same methods, no ``await``."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._core = _Core(namespace)
        self._http = httpx.Client(
            base_url=self.base_url, headers=_headers(token), timeout=timeout, transport=transport
        )

    @property
    def namespace(self) -> str:
        return self._core.namespace

    def _send(self, req: _Req[T]) -> T:
        try:
            response = self._http.request(
                req.method,
                req.path,
                content=None if req.json is None else orjson.dumps(req.json),
                headers={"Content-Type": "application/json"} if req.json is not None else None,
                params=req.params,
            )
        except httpx.HTTPError as e:
            raise _unavailable(self.base_url, e) from None
        return self._core.read(req, response)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def operation(
        self, operation: str, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return self._send(self._core.operation(operation, request, fields))

    def describe(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return self.operation("describe", request, **fields)

    def reset(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return self.operation("reset", request, **fields)

    def compact(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return self.operation("compact", request, **fields)

    def export(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return self.operation("export", request, **fields)

    def import_(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return self.operation("import", request, **fields)

    def history(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return self.operation("history", request, **fields)

    def fork(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return self.operation("fork", request, **fields)

    def verify(
        self, request: StateOperationRequest | None = None, **fields: Any
    ) -> StateOperationResult:
        return self.operation("verify", request, **fields)

    def step(
        self,
        input: Any,
        *,
        thread: str = "default",
        user: str | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> StepResult:
        return self._send(
            self._core.step(
                input,
                thread=thread,
                user=user,
                context=context,
                metadata=metadata,
                namespace=namespace,
            )
        )

    def resume(
        self,
        thread: str = "default",
        *,
        context: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> StepResult:
        return self._send(self._core.resume(thread, context=context, namespace=namespace))

    def approve(
        self,
        thread: str,
        call: str,
        *,
        reason: str | None = None,
        context: Mapping[str, Any] | None = None,
        resume: bool = True,
        namespace: str | None = None,
    ) -> StepResult | None:
        return self._send(
            self._core.decide(
                True,
                thread,
                call,
                reason=reason,
                context=context,
                resume=resume,
                namespace=namespace,
            )
        )

    def reject(
        self,
        thread: str,
        call: str,
        *,
        reason: str | None = None,
        context: Mapping[str, Any] | None = None,
        resume: bool = True,
        namespace: str | None = None,
    ) -> StepResult | None:
        return self._send(
            self._core.decide(
                False,
                thread,
                call,
                reason=reason,
                context=context,
                resume=resume,
                namespace=namespace,
            )
        )

    def runs(
        self,
        *,
        status: str | Iterable[str] | None = None,
        thread: str | None = None,
        user: str | None = None,
        after: str | None = None,
        limit: int = 100,
        namespace: str | None = None,
    ) -> RunList:
        return self._send(
            self._core.runs(
                status=status,
                thread=thread,
                user=user,
                after=after,
                limit=limit,
                namespace=namespace,
            )
        )

    def task(
        self, thread: str, run: str | None = None, *, namespace: str | None = None
    ) -> TaskState:
        return self._send(self._core.task(thread, run, namespace))

    def whoami(self) -> dict[str, Any]:
        return self._send(self._core.get("/v1/whoami"))

    def health(self) -> dict[str, Any]:
        return self._send(self._core.get("/healthz"))
