"""Request limits, enforced at the edge (ASGI middlewares): size and admission.

``BodyLimit``: a request whose ``Content-Length`` exceeds the limit is answered 413
at once, without reading a byte of its body. A body without a length (chunked) is
counted as it arrives and refused as soon as it passes the limit, so a client
cannot make the server buffer more than ``max_bytes``.

``Admission``: at most ``max_inflight`` API requests are served at once by one
process; the others wait their turn in arrival order (first come, first served, so
no request starves behind later ones), and one that has waited ``queue_timeout``
seconds, or finds ``max_queue`` already waiting, is answered 503 with
``Retry-After`` and the error body (code ``overloaded``): never a dropped socket.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

import orjson

from ..core.errors import InvalidRequest, Overloaded, TetherError

__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_KEEP_ALIVE",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_INFLIGHT",
    "DEFAULT_QUEUE_TIMEOUT",
    "Admission",
    "BodyLimit",
    "Overloaded",
    "TooLarge",
]

# Large enough for a long thread's snapshot; bigger imports go through the CLI,
# which streams from a file.
DEFAULT_MAX_BODY: Final = 32 * 1024 * 1024
# Seconds `tether serve` gives a connection to send its request line and headers.
DEFAULT_HEADER_TIMEOUT: Final = 10.0
# Seconds `tether serve` keeps an idle kept-alive connection: longer than clients keep
# theirs (httpx: 5 s), so the client, not the server, closes an idle connection, and
# never sends a request on one the server is closing.
DEFAULT_KEEP_ALIVE: Final = 30
# API requests one server process serves at once; the rest wait in arrival order. A
# process runs one event loop: more at once interleave on it and all finish later.
DEFAULT_MAX_INFLIGHT: Final = 16
# Seconds a request may wait for its turn before it is answered 503.
DEFAULT_QUEUE_TIMEOUT: Final = 30.0
# Requests that may wait at once (beyond them: 503 at once).
DEFAULT_MAX_QUEUE: Final = 4096

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class TooLarge(TetherError):
    """The request body is larger than the server accepts (HTTP 413). Nothing was read."""

    default_code = "too_large"


def _too_large(limit: int) -> TooLarge:
    return TooLarge(
        f"the request body is larger than {limit} bytes; send less, or import big snapshots "
        "with `tether import` on the server's machine",
        limit=limit,
    )


class BodyLimit:
    """Refuse request bodies larger than ``max_bytes`` with 413 and the usual error body."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = DEFAULT_MAX_BODY) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared < 0:
                    await _send_error(send, 400, _bad_length())
                    return
                if declared > limit:
                    await _send_error(send, 413, _too_large(limit))
                    return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # The app's error handlers turn this into a 413 response.
                    raise _too_large(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except TooLarge as e:
            if started:
                raise
            await _send_error(send, 413, e)


def _bad_length() -> TetherError:
    return InvalidRequest("Content-Length must be a non-negative integer", field="content-length")


async def _send_error(
    send: Send, status: int, err: TetherError, *, close: bool = True, retry_after: int = 0
) -> None:
    body = orjson.dumps(err.to_dict())
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    if retry_after:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# Served whatever the load: liveness, metrics, the inspector's static files.
_UNQUEUED: Final = ("/healthz", "/metrics", "/inspector/")


class Admission:
    """At most ``max_inflight`` API requests at once; the rest wait in arrival order.

    A finished request hands its slot straight to the longest-waiting one, so a
    request is never overtaken by one that came later. A request that waits
    ``queue_timeout`` seconds, or arrives when ``max_queue`` already wait, is answered
    503 with ``Retry-After`` (code ``overloaded``) on a connection kept open; a client
    that leaves while waiting gives its place up.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
        queue_timeout: float = DEFAULT_QUEUE_TIMEOUT,
        max_queue: int = DEFAULT_MAX_QUEUE,
    ) -> None:
        if max_inflight < 1 or max_queue < 0 or queue_timeout < 0:
            raise ValueError("max_inflight >= 1, max_queue >= 0 and queue_timeout >= 0")
        self.app = app
        self.max_inflight = max_inflight
        self.queue_timeout = queue_timeout
        self.max_queue = max_queue
        self.inflight = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def waiting(self) -> int:
        return sum(1 for f in self._waiting if not f.done())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path == "/" or path.startswith(_UNQUEUED):
            await self.app(scope, receive, send)
            return
        if not await self._enter():
            err = Overloaded(
                f"the server is serving {self.max_inflight} requests and "
                f"{self.waiting} more are waiting; nothing was read or written: "
                "send the request again after Retry-After seconds",
                max_inflight=self.max_inflight,
            )
            await _send_error(send, 503, err, close=False, retry_after=1)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self._leave()

    async def _enter(self) -> bool:
        if self.inflight < self.max_inflight and not self._waiting:
            self.inflight += 1
            return True
        if len(self._waiting) >= self.max_queue:
            return False
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            await asyncio.wait((turn,), timeout=self.queue_timeout)
        except BaseException:  # cancelled while waiting: the client left
            if turn.done() and not turn.cancelled():
                self._leave()  # the slot was handed over just now: pass it on
            turn.cancel()
            self._drop(turn)
            raise
        if turn.done():
            return True  # the slot was handed over (inflight counts it already)
        turn.cancel()
        self._drop(turn)
        return False

    def _drop(self, turn: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiting.remove(turn)

    def _leave(self) -> None:
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)  # the slot goes to the longest-waiting request
                return
        self.inflight -= 1
