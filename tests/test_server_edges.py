"""The edges of the HTTP door (issue 18): names that read differently from what they are,
forged log lines, requests the web server cannot parse, connections that never finish
their headers. Over a real socket where the web server owns the behaviour."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import orjson
import pytest

from _server_helpers import TOKEN, Served, demo_agent, fill, filled_sqlite, serve
from tether.core import scopes
from tether.core.errors import InvalidRequest
from tether.server import Tokens, create_app
from tether.server.app import for_log
from tether.store.base import check_name
from tether.store.in_memory import MemoryStore

AUTH = {"Authorization": f"Bearer {TOKEN}"}
HIDDEN = ["\u202e", "\u200b", "\u2066", "\u200f", "\ufeff", "\u2028", "\x85", "\x7f", "\n"]


@pytest.mark.parametrize("ch", HIDDEN)
def test_names_with_hidden_characters_are_refused(ch: str) -> None:
    for check in (scopes.thread, scopes.user):
        with pytest.raises(InvalidRequest):
            check(f"inv{ch}oice")
    for what in ("namespace", "scope"):
        with pytest.raises(InvalidRequest):
            check_name(what, f"thread:a{ch}b")
    # Visible non-ASCII stays welcome.
    assert scopes.thread("Zoë-日本-😀") == "thread:Zoë-日本-😀"


@pytest.mark.parametrize("ch", ["\u202e", "\u200b", "\x7f"])
async def test_http_refuses_hidden_characters_in_ids_and_writes_nothing(ch: str) -> None:
    store = MemoryStore()
    await fill(store)
    before = {s.scope: s.sequence for s in await store.list_scopes("default")}
    app = create_app(store, tokens=Tokens.single(TOKEN), agent=demo_agent)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether", headers=AUTH
    ) as c:
        q = quote(ch, safe="")
        for path in (
            f"/v1/ns/default/threads/a{q}b/step",
            f"/v1/ns/a{q}b/threads/t/step",
        ):
            r = await c.post(path, json={"input": "hello"})
            assert r.status_code == 400, r.text
            assert r.json()["code"] == "invalid_request"
        for path in (f"/v1/ns/default/threads/a{q}b", f"/v1/ns/a{q}b/threads"):
            r = await c.get(path)
            assert r.status_code == 400, r.text
            assert r.json()["code"] == "invalid_request"
        r = await c.post("/v1/ns/default/threads/t/step", json={"input": "hi", "user": f"u{ch}"})
        assert r.status_code == 400, r.text
    assert {s.scope: s.sequence for s in await store.list_scopes("default")} == before
    with pytest.raises(InvalidRequest):
        await demo_agent(store).step("hello", thread=f"a{ch}b")
    assert {s.scope: s.sequence for s in await store.list_scopes("default")} == before


def test_for_log_escapes_what_could_forge_a_line() -> None:
    assert for_log("/v1/ns/default/threads") == "/v1/ns/default/threads"
    assert for_log("/v1/ns/x\n<fake>\n/threads") == "/v1/ns/x\\n<fake>\\n/threads"
    assert "\u202e" not in for_log("a\u202eb") and "\r" not in for_log("a\rb")
    assert for_log("a\\nb") == "a\\\\nb"  # a literal backslash cannot pose as an escape
    assert for_log("Zoë") == "Zoë"


# --------------------------------------------------------------------------- a real socket


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    db = tmp_path / "served.db"
    filled_sqlite(db)
    with serve(db, tmp_path / "serve.log", "--header-timeout", "0.5") as s:
        yield s


def _connect(served: Served) -> socket.socket:
    u = urlsplit(served.url)
    assert u.hostname is not None and u.port is not None
    return socket.create_connection((u.hostname, u.port), timeout=10)


def _read_all(sock: socket.socket) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def test_forged_log_lines_are_escaped(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as c:
        r = c.get("/v1/ns/x%0A<fake>%20INFO%20forged%0A/threads")
        assert r.status_code in (401, 404)
        c.get("/healthz")  # a request after it, so the first one is surely logged
    time.sleep(0.3)
    lines = served.log.read_text().splitlines()
    assert not any(line.startswith("<fake>") for line in lines), lines
    assert any("x\\n<fake> INFO forged\\n/threads" in line for line in lines), lines


def test_invalid_content_length_gets_the_json_error_shape(served: Served) -> None:
    with _connect(served) as s:
        s.sendall(
            b"POST /v1/ns/default/threads/t/step HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: 12abc\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n\r\n"
        )
        raw = _read_all(s)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), raw
    assert b"application/json" in head
    data = orjson.loads(body)
    assert set(data) == {"error", "code", "message", "details"}
    assert data["code"] == "bad_request"


def test_connections_that_never_finish_their_headers_are_closed(served: Served) -> None:
    with _connect(served) as s:
        start = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # no blank line: headers unfinished
        assert _read_all(s) == b""  # closed by the server, nothing answered
        assert time.monotonic() - start < 5
    with _connect(served) as s:  # a silent connection too
        start = time.monotonic()
        assert _read_all(s) == b""
        assert time.monotonic() - start < 5
    # A request that completes its headers in time is served as always.
    with httpx.Client(base_url=served.url, timeout=10) as c:
        assert c.get("/healthz").json()["ok"] is True
