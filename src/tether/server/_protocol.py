"""The HTTP/1.1 connection `tether serve` runs: uvicorn's h11 protocol with two additions.

uvicorn (0.29 to 0.54 at least) has no header-read timeout: a client that opens a
connection and never finishes its request line and headers holds it open until it
leaves (a slowloris). Its keep-alive timeout only runs *between* requests. And a
request h11 cannot parse (an invalid ``Content-Length``, a malformed request line) is
answered by uvicorn with a plain-text 400 before tether's app sees it.

``HeaderTimeoutH11`` closes a connection whose request headers are not complete
within ``header_timeout`` seconds of its first byte (or of the connection opening),
and answers unparseable requests with tether's JSON error body
``{"error", "code", "message", "details"}`` (code ``bad_request``). Everything
else is uvicorn's. What stays uvicorn's: the size of one header block
(``h11_max_incomplete_event_size``, 16 KiB by default, still answered in the JSON
shape) and keep-alive handling (``timeout_keep_alive``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any, Final

import h11
import orjson
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol

from .limits import DEFAULT_HEADER_TIMEOUT

__all__ = ["HeaderTimeoutH11", "ServeConfig"]

_BAD_REQUEST: Final = orjson.dumps(
    {
        "error": "BadRequest",
        "code": "bad_request",
        "message": "the HTTP request could not be parsed (request line, headers or "
        "Content-Length); nothing was read",
        "details": {},
    }
)


def _no_delay(transport: asyncio.BaseTransport) -> None:
    """Nagle's algorithm off on a TCP connection: a response goes out whole at once.

    asyncio does this itself only for connections accepted on a socket created with
    ``IPPROTO_TCP``; a socket made with protocol 0 (``tether serve``'s before, and
    gunicorn's) left it on, and each response on a kept-alive connection then waited
    for the client's delayed ACK (~40 ms).
    """
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):  # the peer may be gone already
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class HeaderTimeoutH11(H11Protocol):
    """uvicorn's h11 protocol, with a header-read timeout and JSON 400s."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        # `tether serve` passes its --header-timeout on the config (ServeConfig), which
        # worker processes receive pickled; a plain uvicorn Config keeps the default.
        self.header_timeout = getattr(config, "header_timeout", self.header_timeout)
        self._header_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.logger.info("closing a connection whose request headers did not arrive in time")
            self.transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        _no_delay(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.cycle is None or self.cycle.response_complete:
            self._arm()  # bytes of a new request: its headers must come in time
        super().data_received(data)

    def handle_events(self) -> None:
        before = self.scope
        super().handle_events()
        if self.scope is not before:
            self._disarm()  # the request line and headers are in

    def send_400_response(self, msg: str) -> None:
        self._disarm()
        event = h11.Response(
            status_code=400,
            headers=[
                (b"content-type", b"application/json"),
                (b"connection", b"close"),
            ],
            reason=b"Bad Request",
        )
        for e in (event, h11.Data(data=_BAD_REQUEST), h11.EndOfMessage()):
            try:
                self.transport.write(self.conn.send(e) or b"")
            except h11.LocalProtocolError:
                break
        self.transport.close()


class ServeConfig(Config):
    """uvicorn's Config with tether's header timeout, which HeaderTimeoutH11 reads.

    A class of its own (not an attribute set on a Config): ``tether serve --workers N``
    hands the config to each worker process pickled, and the class must be importable
    there.
    """

    def __init__(
        self, app: Any, *, header_timeout: float = DEFAULT_HEADER_TIMEOUT, **kw: Any
    ) -> None:
        super().__init__(app, **kw)
        self.header_timeout = header_timeout
