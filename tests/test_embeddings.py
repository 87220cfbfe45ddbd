"""Embedders: the OpenAI-compatible client against a real HTTP server on 127.0.0.1, callables,
the hashing embedder and the offline WordLlama default."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tether.models import Embedder, ModelBadResponseError, ModelConfigError, ModelHTTPError
from tether.models.embeddings import (
    CallableEmbedder,
    HashingEmbedder,
    OpenAIEmbedder,
    WordLlamaEmbedder,
)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[dict[str, Any]] = []
        self.replies: list[tuple[int, Any]] = []  # queued (status, body) before the default

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    server: Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(
            {"path": self.path, "json": body, "auth": self.headers.get("Authorization")}
        )
        if self.server.replies:
            status, reply = self.server.replies.pop(0)
        else:  # a fake model: vector i of text t = [len(t), i, 1] reversed order in data
            status = 200
            reply = {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": [len(t), i, 1.0]}
                    for i, t in reversed(list(enumerate(body["input"])))
                ],
            }
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    t = threading.Thread(target=s.serve_forever, daemon=True)
    t.start()
    try:
        yield s
    finally:
        s.shutdown()
        s.server_close()


async def test_openai_embedder_batches_orders_and_authenticates(server: Server) -> None:
    e = OpenAIEmbedder(server.base_url, "sk-test", model="m", dim=3, batch_size=2)
    assert isinstance(e, Embedder) and e.name == "openai:m:3"
    out = await e.embed(["a", "bb", "ccc"])
    # ordered by index although the server sent them reversed; two batches
    assert out == [[1.0, 0.0, 1.0], [2.0, 1.0, 1.0], [3.0, 0.0, 1.0]]
    assert [r["json"]["input"] for r in server.requests] == [["a", "bb"], ["ccc"]]
    assert server.requests[0]["path"] == "/v1/embeddings"
    assert server.requests[0]["auth"] == "Bearer sk-test"
    assert "dimensions" not in server.requests[0]["json"]
    assert await e.embed([]) == []


async def test_openai_embedder_sends_dimensions_when_asked(server: Server) -> None:
    e = OpenAIEmbedder(server.base_url, model="m", dim=3, send_dimensions=True)
    await e.embed(["x"])
    assert server.requests[0]["json"]["dimensions"] == 3


async def test_openai_embedder_rejects_wrong_dimension_and_bad_body(server: Server) -> None:
    e = OpenAIEmbedder(server.base_url, model="m", dim=4)
    with pytest.raises(ModelBadResponseError) as ei:
        await e.embed(["x"])
    assert ei.value.code == "model_bad_response" and ei.value.details["got"] == 3
    server.replies.append((200, {"nothing": True}))
    with pytest.raises(ModelBadResponseError):
        await OpenAIEmbedder(server.base_url, model="m", dim=3).embed(["x"])


async def test_openai_embedder_retries_5xx_and_fails_4xx(server: Server) -> None:
    server.replies.append((503, {"error": {"message": "busy"}}))
    e = OpenAIEmbedder(server.base_url, model="m", dim=3, backoff=0.0)
    assert await e.embed(["hey"]) == [[3.0, 0.0, 1.0]]
    assert len(server.requests) == 2
    server.replies.append((401, {"error": {"message": "bad key"}}))
    with pytest.raises(ModelHTTPError) as ei:
        await e.embed(["hey"])
    assert ei.value.status == 401 and "bad key" in str(ei.value)


async def test_callable_embedder_sync_and_async() -> None:
    def sync_fn(texts: list[str]) -> list[list[float]]:
        return [[float(len(t)), 0.0] for t in texts]

    async def async_fn(texts: list[str]) -> list[list[float]]:
        return sync_fn(texts)

    for fn in (sync_fn, async_fn):
        e = CallableEmbedder(fn, dim=2, name="len")
        assert isinstance(e, Embedder)
        assert await e.embed(["ab", "c"]) == [[2.0, 0.0], [1.0, 0.0]]
    with pytest.raises(ModelBadResponseError):
        await CallableEmbedder(lambda ts: [[1.0]], dim=2, name="x").embed(["a"])
    with pytest.raises(ModelBadResponseError):
        await CallableEmbedder(lambda ts: [[1.0, math.nan]], dim=2, name="x").embed(["a"])
    with pytest.raises(ModelBadResponseError):
        await CallableEmbedder(lambda ts: [], dim=2, name="x").embed(["a"])
    with pytest.raises(ModelConfigError):
        CallableEmbedder(sync_fn, dim=0, name="x")


async def test_hashing_embedder_is_deterministic_and_unit_length() -> None:
    e = HashingEmbedder(64)
    a, b, c = await e.embed(["Peanut allergy", "peanut allergy", "the weather"])
    assert a == b and a != c and len(a) == 64
    assert abs(sum(x * x for x in a) - 1.0) < 1e-9
    assert (await HashingEmbedder(64).embed(["Peanut allergy"]))[0] == a


async def test_wordllama_runs_offline_and_finds_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wordllama")
    import requests

    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("WordLlamaEmbedder tried to download something")

    monkeypatch.setattr(requests, "get", no_network)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    e = WordLlamaEmbedder()
    assert isinstance(e, Embedder) and e.dim == 256
    facts = ["user is allergic to peanuts", "favourite colour is blue", "lives in Lisbon"]
    q, *vs = await e.embed(["what did I say about my allergies?", *facts])
    scores = [sum(x * y for x, y in zip(q, v, strict=True)) for v in vs]
    assert max(range(3), key=lambda i: scores[i]) == 0
    assert all(abs(sum(x * x for x in v) - 1.0) < 1e-4 for v in vs)
    short = WordLlamaEmbedder(64)
    assert short.name != e.name and len((await short.embed(["x"]))[0]) == 64
    with pytest.raises(ModelConfigError):
        WordLlamaEmbedder(300)
