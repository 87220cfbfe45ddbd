"""Request size limits: refused with 413 before the body is read, and nothing written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from _server_helpers import TOKEN
from tether.server import Tokens, create_app
from tether.server.limits import BodyLimit
from tether.store.in_memory import MemoryStore

AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Inner:
    """An ASGI app that reads the whole body and reports its size."""

    def __init__(self) -> None:
        self.called = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.called = True
        size = 0
        while True:
            msg = await receive()
            size += len(msg.get("body", b""))
            if not msg.get("more_body"):
                break
        body = str(size).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})


async def call(
    app: Any, headers: list[tuple[bytes, bytes]], chunks: list[bytes]
) -> tuple[int, bytes, int]:
    """Run one request through ``app``; return status, body and how many chunks were read."""
    pending = list(chunks)
    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        body = pending.pop(0) if pending else b""
        return {"type": "http.request", "body": body, "more_body": bool(pending)}

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, read


async def test_a_declared_length_over_the_limit_is_refused_unread() -> None:
    inner = Inner()
    app = BodyLimit(inner, max_bytes=100)
    status, body, read = await call(app, [(b"content-length", b"101")], [b"x" * 101])
    assert status == 413 and read == 0 and not inner.called
    assert orjson.loads(body)["code"] == "too_large"


async def test_a_body_at_the_limit_passes() -> None:
    inner = Inner()
    status, body, _ = await call(
        BodyLimit(inner, max_bytes=100), [(b"content-length", b"100")], [b"x" * 100]
    )
    assert status == 200 and body == b"100"


async def test_a_chunked_body_is_cut_off_as_soon_as_it_passes_the_limit() -> None:
    inner = Inner()
    chunks = [b"x" * 40] * 10
    status, body, read = await call(BodyLimit(inner, max_bytes=100), [], chunks)
    assert status == 413 and orjson.loads(body)["code"] == "too_large"
    assert read == 3  # 40 + 40 + 40 > 100: the rest is never read


async def test_a_bad_content_length_is_a_400() -> None:
    inner = Inner()
    status, body, _ = await call(BodyLimit(inner, max_bytes=100), [(b"content-length", b"-5")], [])
    assert status == 400 and not inner.called
    assert orjson.loads(body)["code"] == "invalid_request"


@pytest.fixture
async def client() -> AsyncIterator[tuple[httpx.AsyncClient, MemoryStore]]:
    store = MemoryStore()
    app = create_app(store, tokens=Tokens.single(TOKEN), max_body_bytes=2048)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether", headers=AUTH
    ) as c:
        yield c, store
    await store.close()


async def test_the_app_refuses_large_imports_and_writes_nothing(
    client: tuple[httpx.AsyncClient, MemoryStore],
) -> None:
    c, store = client
    big = {
        "thread": "t",
        "snapshot": {"version": 1, "nodes": [], "frontier": []},
        "metadata": {"pad": "x" * 4000},
    }
    r = await c.post("/state/import", json=big)
    assert r.status_code == 413 and r.json()["code"] == "too_large"

    async def stream() -> AsyncIterator[bytes]:
        yield b'{"version": 1, "nodes": [], "frontier": [], "pad": "'
        for _ in range(100):
            yield b"y" * 100
        yield b'"}'

    r = await c.post("/v1/ns/default/threads/t/import", content=stream())
    assert r.status_code == 413 and r.json()["code"] == "too_large"
    assert await store.list_scopes("default") == []
    # Small bodies still work.
    ok = await c.post("/state/describe", json={"thread": "t"})
    assert ok.status_code == 200


async def test_oversized_snapshots_inside_the_limit_are_refused_by_import_validation(
    client: tuple[httpx.AsyncClient, MemoryStore],
) -> None:
    c, store = client
    # Deeply nested payload: within the byte limit, beyond the snapshot's nesting bound.
    deep: Any = "leaf"
    for _ in range(100):
        deep = [deep]
    node = {
        "id": "cw_" + "0" * 24,
        "kind": "goal",
        "parents": [],
        "payload": deep,
        "createdAt": "2024-01-01T00:00:00.000Z",
        "sequence": 1,
    }
    r = await c.post(
        "/v1/ns/default/threads/t/import",
        json={"version": 1, "nodes": [node], "frontier": [node["id"]]},
    )
    assert r.status_code in (413, 422), r.text
    assert await store.list_scopes("default") == []
