"""Request size limits, enforced before a body is read (an ASGI middleware).

A request whose ``Content-Length`` exceeds the limit is answered 413 at once,
without reading a byte of its body. A body without a length (chunked) is
counted as it arrives and refused as soon as it passes the limit, so a client
cannot make the server buffer more than ``max_bytes``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

import orjson

from ..core.errors import InvalidRequest, TetherError

__all__ = ["DEFAULT_HEADER_TIMEOUT", "DEFAULT_MAX_BODY", "BodyLimit", "TooLarge"]

# Large enough for a long thread's snapshot; bigger imports go through the CLI,
# which streams from a file.
DEFAULT_MAX_BODY: Final = 32 * 1024 * 1024
# Seconds `tether serve` gives a connection to send its request line and headers.
DEFAULT_HEADER_TIMEOUT: Final = 10.0

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


async def _send_error(send: Send, status: int, err: TetherError) -> None:
    body = orjson.dumps(err.to_dict())
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
