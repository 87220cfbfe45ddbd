"""OpenAIModel against a real HTTP server on 127.0.0.1 (no mocked transport)."""

from __future__ import annotations

import email.utils
import json
import pickle
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tether import TetherError
from tether.models import (
    MEMORY_TOOL,
    MemoryWrite,
    Model,
    ModelBadArgumentsError,
    ModelBadResponseError,
    ModelConfigError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelRequest,
    ModelTimeoutError,
    OpenAIModel,
    ToolCall,
    ToolSpec,
)
from tether.models._http import _retry_after
from tether.runtime import Agent
from tether.store import open_store

# --------------------------------------------------------------------------- the server


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # a dict is sent as JSON, a str as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def reply(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and hung up is expected here


class Handler(BaseHTTPRequestHandler):
    server: Server

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append(
            {"path": self.path, "headers": dict(self.headers), "json": json.loads(raw)}
        )
        reply = self.server.replies.pop(0) if self.server.replies else Reply(status=599)
        if reply.delay:
            self.server.release.wait(reply.delay)
        body = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
        data = body.encode()
        self.send_response(reply.status)
        for k, v in {"Content-Type": "application/json", **reply.headers}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()
        thread.join()


def model(server: Server, **kw: Any) -> OpenAIModel:
    options: dict[str, Any] = {"model": "test-model", "backoff": 0.001, "timeout": 2.0}
    return OpenAIModel(server.base_url, "sk-test", **{**options, **kw})


def completion(
    content: str | None = None, tool_calls: list[dict[str, Any]] | None = None, **usage: int
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage or {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


def fn_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def hello() -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": "Hello"}])


# --------------------------------------------------------------------------- answers


async def test_plain_answer(server: Server) -> None:
    server.reply(Reply(body=completion("Hi there!", prompt_tokens=3, completion_tokens=2)))
    m = model(server, options={"temperature": 0})
    assert isinstance(m, Model)
    r = await m.complete(
        ModelRequest(
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hello"},
            ],
            max_tokens=50,
        )
    )
    assert r.content == "Hi there!"
    assert r.tool_calls == [] and r.memories == []
    assert r.usage == {"prompt_tokens": 3, "completion_tokens": 2}

    [sent] = server.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["Authorization"] == "Bearer sk-test"
    assert sent["json"] == {
        "model": "test-model",
        "temperature": 0,
        "max_tokens": 50,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello"},
        ],
    }


async def test_tool_calls_round_trip(server: Server) -> None:
    server.reply(
        Reply(
            body=completion(
                tool_calls=[
                    fn_call("call_a", "get_weather", '{"city": "Paris"}'),
                    fn_call("call_b", "get_time", ""),  # empty arguments are {}
                ]
            )
        )
    )
    spec = ToolSpec(
        name="get_weather",
        description="Weather for a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    request = ModelRequest(
        messages=[
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_0", "name": "get_weather", "arguments": {"city": "Oslo"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": "snow"},
            {"role": "tool", "tool_call_id": "call_1", "content": {"temp": -3}},
            {"role": "assistant", "content": "Snowing in Oslo."},
            {"role": "user", "content": "And Paris, and the time?"},
        ],
        tools=[spec, ToolSpec(name="get_time")],
    )
    r = await model(server).complete(request)
    assert r.content is None
    assert r.tool_calls == [
        ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="call_b", name="get_time", arguments={}),
    ]

    body = server.requests[0]["json"]
    assert body["messages"] == [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [fn_call("call_0", "get_weather", '{"city": "Oslo"}')],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "snow"},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": -3}'},
        {"role": "assistant", "content": "Snowing in Oslo."},
        {"role": "user", "content": "And Paris, and the time?"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        },
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]


async def test_memory_is_shown_after_the_system_prompt(server: Server) -> None:
    server.reply(Reply(body=completion("ok")), Reply(body=completion("ok")))
    request = ModelRequest(
        messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        memory={"memory:name": "Alice", "preference:units": {"temp": "C"}},
    )
    await model(server).complete(request)
    messages = server.requests[0]["json"]["messages"]
    assert [m["role"] for m in messages] == ["system", "system", "user"]
    assert "- memory:name: Alice" in messages[1]["content"]
    assert '- preference:units: {"temp": "C"}' in messages[1]["content"]

    await model(server, memory_prompt=False).complete(request)
    assert len(server.requests[1]["json"]["messages"]) == 2


# --------------------------------------------------------------------------- retries


async def test_retries_on_5xx_then_succeeds(server: Server) -> None:
    server.reply(
        Reply(status=500, body={"error": {"message": "boom"}}),
        Reply(status=502, body="bad gateway"),
        Reply(body=completion("finally")),
    )
    r = await model(server, max_retries=3).complete(hello())
    assert r.content == "finally"
    assert len(server.requests) == 3
    assert server.requests[0]["json"] == server.requests[2]["json"]


async def test_gives_up_after_max_retries(server: Server) -> None:
    server.reply(*(Reply(status=503, body={"error": {"message": "overloaded"}}) for _ in range(3)))
    with pytest.raises(ModelHTTPError) as info:
        await model(server, max_retries=2).complete(hello())
    assert len(server.requests) == 3
    err = info.value
    assert (err.code, err.status, err.details["attempts"]) == ("model_http", 503, 3)
    assert "overloaded" in err.message


async def test_429_honours_retry_after(server: Server) -> None:
    server.reply(
        Reply(status=429, headers={"Retry-After": "0.3"}, body={"error": {"message": "slow"}}),
        Reply(status=429, headers={"retry-after-ms": "100"}, body={"error": "slow"}),
        Reply(body=completion("ok")),
    )
    start = time.monotonic()
    r = await model(server, max_retries=2, backoff=0.0).complete(hello())
    elapsed = time.monotonic() - start
    assert r.content == "ok"
    assert len(server.requests) == 3
    assert 0.38 <= elapsed < 1.5


async def test_retry_after_is_capped_by_max_backoff(server: Server) -> None:
    server.reply(Reply(status=429, headers={"Retry-After": "3600"}), Reply(body=completion("ok")))
    start = time.monotonic()
    await model(server, max_backoff=0.05).complete(hello())
    assert time.monotonic() - start < 1


def test_retry_after_parsing() -> None:
    import httpx

    assert _retry_after(httpx.Headers({"Retry-After": "2"})) == 2.0
    assert _retry_after(httpx.Headers({"retry-after-ms": "250", "Retry-After": "9"})) == 0.25
    assert _retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert _retry_after(httpx.Headers({})) is None
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    seconds = _retry_after(httpx.Headers({"Retry-After": date}))
    assert seconds is not None and 25 < seconds <= 31


async def test_no_retry_on_400(server: Server) -> None:
    server.reply(
        Reply(status=400, body={"error": {"message": "messages: bad role"}}),
        Reply(body=completion("never sent")),
    )
    with pytest.raises(ModelHTTPError) as info:
        await model(server, max_retries=3).complete(hello())
    assert len(server.requests) == 1
    assert info.value.status == 400
    assert "messages: bad role" in str(info.value)


async def test_redirect_is_an_error_not_a_retry(server: Server) -> None:
    server.reply(Reply(status=307, headers={"Location": "/elsewhere"}, body=""))
    with pytest.raises(ModelHTTPError) as info:
        await model(server).complete(hello())
    assert (info.value.status, len(server.requests)) == (307, 1)


async def test_401_says_what_to_check(server: Server) -> None:
    server.reply(Reply(status=401, body={"error": {"message": "invalid key"}}))
    with pytest.raises(ModelHTTPError, match="check api_key"):
        await model(server).complete(hello())


async def test_timeout_is_not_retried(server: Server) -> None:
    server.reply(Reply(body=completion("late"), delay=2.0), Reply(body=completion("ok")))
    start = time.monotonic()
    with pytest.raises(ModelTimeoutError) as info:
        await model(server, timeout=0.2, max_retries=3).complete(hello())
    assert time.monotonic() - start < 1.5
    assert len(server.requests) == 1
    assert info.value.code == "model_timeout"


async def test_connection_refused_is_retried_then_fails() -> None:
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    m = OpenAIModel(f"http://127.0.0.1:{port}/v1", max_retries=2, backoff=0.001)
    with pytest.raises(ModelConnectionError) as info:
        await m.complete(hello())
    assert info.value.details["attempts"] == 3
    assert info.value.code == "model_connection"


# --------------------------------------------------------------------------- bad responses


async def test_malformed_arguments(server: Server) -> None:
    server.reply(Reply(body=completion(tool_calls=[fn_call("c1", "get_weather", '{"city": ')])))
    with pytest.raises(ModelBadArgumentsError) as info:
        await model(server).complete(hello())
    err = info.value
    assert err.code == "model_bad_arguments"
    assert isinstance(err, ModelBadResponseError)
    assert err.details == {
        "reason": "shape",
        "tool": "get_weather",
        "tool_call_id": "c1",
        "arguments": '{"city": ',
    }


MEMO = '"memo": "mk-93f1c0", '


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("{" + MEMO + '"amount": 1, "amount": 1000000}', "duplicate_key"),
        ("{" + MEMO + '"amount": 18446744073709551617}', "number_range"),
        ("{" + MEMO + '"amount": NaN}', "non_finite"),
        ("{" + MEMO + '"a": ' + "[" * 100 + "]" * 100 + "}", "too_large"),
        ("{" + MEMO + '"to": "\\ud800"}', "shape"),
    ],
)
async def test_arguments_are_read_exactly_or_refused(
    server: Server, arguments: str, reason: str, tmp_path: Path
) -> None:
    """The model-output door (issue 18): tool-call arguments under tether's JSON policy.
    A step on such output fails its run with the typed code; the output itself (no
    inference, no tool call) is not stored, and nothing else in the file changes."""
    server.reply(Reply(body=completion(tool_calls=[fn_call("c1", "transfer", arguments)])))
    with pytest.raises(ModelBadArgumentsError) as info:
        await model(server).complete(hello())
    assert info.value.code == "model_bad_arguments"
    assert info.value.details["reason"] == reason
    path = tmp_path / "m.db"
    store = await open_store(f"sqlite:///{path}")
    try:
        server.reply(Reply(body=completion(tool_calls=[fn_call("c1", "transfer", arguments)])))
        r = await Agent(None, model(server), store=store).step("pay", thread="t")
        assert r.status == "failed" and r.error is not None
        assert r.error.code == "model_bad_arguments"
        kinds = [n.kind for n in await store.nodes("default", "thread:t")]
        assert "inference" not in kinds and "tool_call" not in kinds, kinds
    finally:
        await store.close()
    on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("m.db*"))
    assert b"mk-93f1c0" not in on_disk


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (json.dumps(completion("a"))[:-1] + ', "choices": []}', "duplicate_key"),
        (json.dumps(completion("a"))[:-1] + ', "n": 18446744073709551617}', "number_range"),
        (json.dumps(completion("a"))[:-1] + ', "p": Infinity}', "non_finite"),
    ],
)
async def test_a_response_body_is_read_exactly_or_refused(
    server: Server, body: str, reason: str
) -> None:
    server.reply(Reply(body=body))
    with pytest.raises(ModelBadResponseError) as info:
        await model(server).complete(hello())
    assert info.value.code == "model_bad_response"
    assert info.value.details["reason"] == reason


async def test_arguments_must_be_an_object(server: Server) -> None:
    server.reply(Reply(body=completion(tool_calls=[fn_call("c1", "t", "[1, 2]")])))
    with pytest.raises(ModelBadArgumentsError):
        await model(server).complete(hello())


@pytest.mark.parametrize(
    "body",
    [
        "<html>not json</html>",
        {"choices": []},
        {"error": "?"},
        completion(tool_calls=[{"id": "x"}]),
    ],
)
async def test_bad_response(server: Server, body: Any) -> None:
    server.reply(Reply(body=body))
    with pytest.raises(ModelBadResponseError) as info:
        await model(server).complete(hello())
    assert info.value.code == "model_bad_response"


async def test_missing_call_ids_are_derived_stably(server: Server) -> None:
    call = {"type": "function", "function": {"name": "t", "arguments": "{}"}}
    server.reply(*(Reply(body=completion(tool_calls=[call])) for _ in range(2)))
    m = model(server)
    a, b = await m.complete(hello()), await m.complete(hello())
    assert a.tool_calls[0].id.startswith("call_")
    assert a.tool_calls[0].id == b.tool_calls[0].id


# --------------------------------------------------------------------------- memory tool


async def test_memory_tool_alongside_an_answer(server: Server) -> None:
    server.reply(
        Reply(
            body=completion(
                "Nice to meet you, Alice.",
                tool_calls=[
                    fn_call(
                        "m1", MEMORY_TOOL, '{"type": "memory", "key": "name", "content": "Alice"}'
                    ),
                    fn_call("c1", "get_weather", '{"city": "Paris"}'),
                ],
            )
        )
    )
    r = await model(server, memory_tool=True).complete(
        ModelRequest(
            messages=[{"role": "user", "content": "I'm Alice"}],
            tools=[ToolSpec(name="get_weather")],
        )
    )
    assert r.content == "Nice to meet you, Alice."
    assert r.memories == [MemoryWrite(type="memory", key="name", content="Alice")]
    assert r.tool_calls == [ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})]

    tools = server.requests[0]["json"]["tools"]
    assert [t["function"]["name"] for t in tools] == ["get_weather", MEMORY_TOOL]
    schema = tools[1]["function"]["parameters"]
    assert schema["required"] == ["type", "key", "content"]
    assert schema["properties"]["type"]["enum"] == ["memory", "preference", "wisdom", "artifact"]


async def test_memory_only_response_is_acknowledged_and_continued(server: Server) -> None:
    remember = fn_call(
        "m1", MEMORY_TOOL, '{"type": "preference", "key": "tea", "content": "green"}'
    )
    server.reply(
        Reply(body=completion(tool_calls=[remember], prompt_tokens=10, completion_tokens=4)),
        Reply(body=completion("Noted!", prompt_tokens=20, completion_tokens=2)),
    )
    r = await model(server, memory_tool=True, memory_types=["preference"]).complete(hello())
    assert r.content == "Noted!"
    assert r.memories == [MemoryWrite(type="preference", key="tea", content="green")]
    assert r.usage == {"prompt_tokens": 30, "completion_tokens": 6}
    first, second = (s["json"] for s in server.requests)
    assert second["messages"] == [
        *first["messages"],
        {"role": "assistant", "content": None, "tool_calls": [remember]},
        {"role": "tool", "tool_call_id": "m1", "content": "saved"},
    ]


async def test_memory_tool_without_memory_tool_flag_is_a_tool_call(server: Server) -> None:
    server.reply(Reply(body=completion(tool_calls=[fn_call("m1", MEMORY_TOOL, "{}")])))
    r = await model(server).complete(hello())
    assert r.tool_calls == [ToolCall(id="m1", name=MEMORY_TOOL, arguments={})]
    assert "tools" not in server.requests[0]["json"]


async def test_bad_memory_arguments(server: Server) -> None:
    server.reply(Reply(body=completion(tool_calls=[fn_call("m1", MEMORY_TOOL, '{"key": 3}')])))
    with pytest.raises(ModelBadArgumentsError):
        await model(server, memory_tool=True).complete(hello())


async def test_reserved_tool_name_is_refused(server: Server) -> None:
    request = ModelRequest(messages=hello().messages, tools=[ToolSpec(name=MEMORY_TOOL)])
    with pytest.raises(ModelConfigError):
        await model(server, memory_tool=True).complete(request)
    assert server.requests == []


# --------------------------------------------------------------------------- lifecycle, errors


async def test_async_with_reuses_one_pool(server: Server) -> None:
    server.reply(Reply(body=completion("a")), Reply(body=completion("b")))
    async with model(server) as m:
        assert [(await m.complete(hello())).content for _ in range(2)] == ["a", "b"]
    await m.aclose()  # idempotent


def test_repr_hides_the_key() -> None:
    m = OpenAIModel("http://localhost:1/v1/", "sk-secret")
    assert "sk-secret" not in repr(m)
    assert m.url == "http://localhost:1/v1/chat/completions"


def test_bad_options() -> None:
    with pytest.raises(ModelConfigError):
        OpenAIModel(timeout=0)


@pytest.mark.parametrize(
    "err",
    [
        ModelError("m"),
        ModelConfigError("m", where="x"),
        ModelConnectionError("m", url="u", attempts=2),
        ModelTimeoutError("m", timeout=1.0),
        ModelHTTPError("m", status=503, body="b", attempts=3),
        ModelBadResponseError("m", body="{}"),
        ModelBadArgumentsError("m", tool="t", tool_call_id="c", arguments="{"),
    ],
)
def test_errors_pickle_and_keep_code_and_details(err: ModelError) -> None:
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err)
    assert isinstance(again, TetherError)
    assert (again.code, again.message, again.details) == (err.code, err.message, err.details)
    assert type(err).code == err.code  # stable at class level too
    assert again.to_dict()["code"] == err.code
