"""The service path: sockets that answer at once, admission in arrival order, workers.

Speed itself is measured by benchmarks/http_service.py; these tests check the
mechanisms the figures rest on, at the level where each can be seen: the socket option
on an accepted connection, the order and refusals of the admission queue, and several
server processes answering for one store.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from _server_helpers import TOKEN, serve
from conftest import drop_pg_schema, server_url
from tether.server import Tokens, create_app
from tether.server._protocol import HeaderTimeoutH11, ServeConfig
from tether.server.cli import listening_socket
from tether.server.limits import Admission, Receive, Scope, Send
from tether.store import open_store

AUTH = {"Authorization": f"Bearer {TOKEN}"}


# --------------------------------------------------------------------------- TCP_NODELAY


def _nodelay(transport: asyncio.BaseTransport) -> int:
    sock = transport.get_extra_info("socket")
    return int(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


async def _accepted_nodelay(sock: socket.socket) -> int:
    """Serve one connection on ``sock`` with a bare asyncio protocol: TCP_NODELAY of the
    connection as accepted, before anyone sets it."""
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Record(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            seen.set_result(_nodelay(transport))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Record, sock=sock)
    try:
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        value = await asyncio.wait_for(seen, 10)
        writer.close()
        return value
    finally:
        server.close()
        await server.wait_closed()


async def test_tether_serves_listening_socket_gives_connections_without_nagle() -> None:
    # asyncio turns Nagle off on accepted connections only when the listening socket
    # was made as IPPROTO_TCP; with protocol 0 each kept-alive response waited ~40 ms.
    assert await _accepted_nodelay(listening_socket("127.0.0.1", 0)) == 1
    # The control: a socket made with protocol 0 (as tether serve's was) does not.
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    plain.bind(("127.0.0.1", 0))
    plain.listen(8)
    assert await _accepted_nodelay(plain) == 0


async def test_the_http_protocol_turns_nagle_off_on_any_socket() -> None:
    """A socket made elsewhere (gunicorn's, protocol 0): HeaderTimeoutH11 itself sets
    TCP_NODELAY on each connection it serves."""
    seen: list[int] = []

    class Recording(HeaderTimeoutH11):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            seen.append(_nodelay(transport))

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    plain.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    plain.bind(("127.0.0.1", 0))
    plain.listen(8)
    port = plain.getsockname()[1]
    config = ServeConfig(app, http=Recording, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[plain]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"http://127.0.0.1:{port}/")).text == "ok"
        assert seen == [1]
    finally:
        server.should_exit = True
        await task
        plain.close()


def test_serve_config_carries_the_header_timeout_to_its_connections() -> None:
    config = ServeConfig("tether.server.cli:worker_app", header_timeout=2.5, factory=True)
    assert config.header_timeout == 2.5
    # Worker processes receive the config pickled: the class must come back whole.
    import pickle

    assert pickle.loads(pickle.dumps(config)).header_timeout == 2.5


# --------------------------------------------------------------------------- admission


def _gated_app(gates: dict[str, asyncio.Event], order: list[str]) -> Any:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        name = scope["path"].rsplit("/", 1)[-1]
        order.append(name)
        await gates[name].wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": name.encode()})

    return app


@contextlib.asynccontextmanager
async def _client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as client:
        yield client


async def _until(check: Any) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_admission_serves_in_arrival_order_and_never_more_than_its_limit() -> None:
    names = [f"r{i}" for i in range(6)]
    gates = {n: asyncio.Event() for n in names}
    order: list[str] = []
    adm = Admission(_gated_app(gates, order), max_inflight=2, queue_timeout=30)
    async with _client(adm) as client:
        tasks = []
        for n in names:
            tasks.append(asyncio.create_task(client.get(f"/v1/x/{n}")))
            await _until(lambda n=n: n in order or adm.waiting >= len(tasks) - 2)
        await _until(lambda: order == ["r0", "r1"] and adm.waiting == 4)
        assert adm.inflight == 2
        # Finishing r1 hands its slot to r2 (the longest waiting), then r0's to r3.
        gates["r1"].set()
        await _until(lambda: order == ["r0", "r1", "r2"])
        gates["r0"].set()
        await _until(lambda: order == ["r0", "r1", "r2", "r3"])
        for n in names:
            gates[n].set()
        bodies = [(await t).text for t in tasks]
    assert bodies == names and order == names
    assert adm.inflight == 0 and adm.waiting == 0


async def test_admission_answers_503_with_retry_after_when_the_wait_is_too_long() -> None:
    gates = {"busy": asyncio.Event(), "late": asyncio.Event()}
    order: list[str] = []
    adm = Admission(_gated_app(gates, order), max_inflight=1, queue_timeout=0.2)
    async with _client(adm) as client:
        busy = asyncio.create_task(client.get("/v1/x/busy"))
        await _until(lambda: order == ["busy"])
        late = await client.get("/v1/x/late")
        assert late.status_code == 503
        assert late.headers["retry-after"] == "1"
        assert "connection" not in late.headers  # a response on a kept connection
        body = late.json()
        assert body["code"] == "overloaded" and body["error"] == "Overloaded"
        assert order == ["busy"]  # the refused request never reached the app
        # Liveness is answered whatever the load.
        gates["healthz"] = asyncio.Event()
        gates["healthz"].set()
        assert (await client.get("/healthz")).status_code == 200
        gates["busy"].set()
        assert (await busy).status_code == 200
    assert adm.inflight == 0 and adm.waiting == 0


async def test_admission_refuses_at_once_when_the_queue_is_full() -> None:
    gates = {"a": asyncio.Event(), "b": asyncio.Event(), "c": asyncio.Event()}
    order: list[str] = []
    adm = Admission(_gated_app(gates, order), max_inflight=1, queue_timeout=30, max_queue=1)
    async with _client(adm) as client:
        a = asyncio.create_task(client.get("/v1/x/a"))
        await _until(lambda: order == ["a"])
        b = asyncio.create_task(client.get("/v1/x/b"))
        await _until(lambda: adm.waiting == 1)
        t0 = time.monotonic()
        c = await client.get("/v1/x/c")
        assert c.status_code == 503 and time.monotonic() - t0 < 10
        gates["a"].set()
        gates["b"].set()
        assert [(await a).text, (await b).text] == ["a", "b"]
    assert order == ["a", "b"] and adm.inflight == 0


async def test_a_client_that_leaves_while_waiting_gives_its_place_up() -> None:
    gates = {n: asyncio.Event() for n in ("a", "gone", "next")}
    order: list[str] = []
    adm = Admission(_gated_app(gates, order), max_inflight=1, queue_timeout=30)
    async with _client(adm) as client:
        a = asyncio.create_task(client.get("/v1/x/a"))
        await _until(lambda: order == ["a"])
        gone = asyncio.create_task(client.get("/v1/x/gone"))
        await _until(lambda: adm.waiting == 1)
        nxt = asyncio.create_task(client.get("/v1/x/next"))
        await _until(lambda: adm.waiting == 2)
        gone.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gone
        assert adm.waiting == 1
        gates["a"].set()
        gates["next"].set()
        assert (await a).text == "a" and (await nxt).text == "next"
    assert order == ["a", "next"] and adm.inflight == 0 and adm.waiting == 0


async def test_create_app_answers_overload_with_tethers_error_shape(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'o.db'}")
    try:
        app = create_app(store, tokens=Tokens.single(TOKEN), max_inflight=1, queue_timeout=0)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            # Hold the one slot with a request whose body never finishes arriving.
            release = asyncio.Event()

            async def slow_body() -> AsyncIterator[bytes]:
                yield b'{"namespace": '
                await release.wait()
                yield b'"default"}'

            held = asyncio.create_task(
                client.post("/state/describe", headers=AUTH, content=slow_body())
            )
            await _until(lambda: app.state.tether is not None and _inflight(app) == 1)
            r = await client.get("/v1/whoami", headers=AUTH)
            assert r.status_code == 503 and r.json()["code"] == "overloaded"
            assert r.headers["retry-after"] == "1"
            assert r.headers["x-content-type-options"] == "nosniff"  # through the edge
            release.set()
            assert (await held).status_code == 200
            assert (await client.get("/v1/whoami", headers=AUTH)).status_code == 200
    finally:
        await store.close()


async def test_tethers_client_waits_out_an_overload_and_says_so_when_it_lasts(
    tmp_path: Path,
) -> None:
    import tether

    store = await open_store(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        app = create_app(store, tokens=Tokens.single(TOKEN), max_inflight=1, queue_timeout=0)
        transport = httpx.ASGITransport(app=app)
        release = asyncio.Event()

        async def slow_body() -> AsyncIterator[bytes]:
            yield b'{"namespace": '
            await release.wait()
            yield b'"default"}'

        async with httpx.AsyncClient(transport=transport, base_url="http://t") as raw:
            held = asyncio.create_task(
                raw.post("/state/describe", headers=AUTH, content=slow_body())
            )
            await _until(lambda: _inflight(app) == 1)
            # No retries: the overload comes back as its own error, with its code.
            async with tether.Client(
                "http://t", TOKEN, transport=transport, overload_retries=0
            ) as impatient:
                with pytest.raises(tether.Overloaded) as caught:
                    await impatient.whoami()
            assert caught.value.code == "overloaded"
            assert isinstance(caught.value, tether.StoreError)  # a 503, as before
            # With retries: the client waits Retry-After (1 s) and sends it again.
            async with tether.Client("http://t", TOKEN, transport=transport) as patient:
                waiting = asyncio.create_task(patient.whoami())
                await asyncio.sleep(0.3)
                assert not waiting.done()
                release.set()
                assert (await held).status_code == 200
                assert (await waiting)["name"] == "env"
    finally:
        await store.close()


def test_client_refuses_a_negative_retry_count() -> None:
    import tether

    with pytest.raises(tether.InvalidRequest):
        tether.Client("http://127.0.0.1:1", TOKEN, overload_retries=-1)


def _inflight(app: Any) -> int:
    stack = app.middleware_stack
    while stack is not None and not isinstance(stack, Admission):
        stack = getattr(stack, "app", None)
    return stack.inflight if stack is not None else -1


# --------------------------------------------------------------------------- workers


def _steps_through(url: str, threads: list[str], turns: int) -> list[int]:
    """Each thread stepped ``turns`` times, the threads at once: the statuses."""

    async def go() -> list[int]:
        async def one(thread: str) -> list[int]:
            async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=60) as c:
                out = []
                for k in range(turns):
                    r = await c.post(
                        f"/v1/ns/default/threads/{thread}/step",
                        json={"input": f"hello {k}", "user": "u"},
                    )
                    out.append(r.status_code)
                return out

        results = await asyncio.gather(*(one(t) for t in threads))
        return [s for r in results for s in r]

    return asyncio.run(go())


def _worker_pids(log: Path, want: int) -> set[str]:
    """The worker processes the log says started, once ``want`` have (or 60 s passed)."""
    deadline = time.monotonic() + 60
    while True:
        pids = set(re.findall(r"Started server process \[(\d+)\]", log.read_text()))
        if len(pids) >= want or time.monotonic() > deadline:
            return pids
        time.sleep(0.1)


def _check_workers(url: str, served_log: Path, store_url: str) -> None:
    threads = [f"w-{i}" for i in range(8)]
    statuses = _steps_through(url, threads, 3)
    assert statuses == [200] * 24
    # Two workers serve (which one accepts a connection is the kernel's choice).
    assert len(_worker_pids(served_log, 2)) == 2, served_log.read_text()

    async def turns() -> dict[str, int]:
        store = await open_store(store_url)
        try:
            out = {}
            for t in threads:
                nodes = await store.nodes("default", f"thread:{t}", limit=10_000)
                out[t] = sum(1 for n in nodes if n.kind == "goal")
            return out
        finally:
            await store.close()

    # Every acknowledged step is in the store, whichever process served it.
    assert asyncio.run(turns()) == dict.fromkeys(threads, 3)


@pytest.mark.slow
def test_serve_with_two_workers_on_one_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "workers.db"
    log = tmp_path / "serve.log"
    with serve(db, log, "--workers", "2", "--agent", "_server_helpers:demo_agent") as s:
        _check_workers(s.url, log, f"sqlite:///{db}")
        # A worker killed outright is replaced, and the server goes on answering.
        first = _worker_pids(log, 2)
        os.kill(int(min(first)), signal.SIGKILL)
        assert len(_worker_pids(log, 3)) == 3, log.read_text()
        assert _steps_through(s.url, ["after-kill"], 2) == [200, 200]
    text = log.read_text()
    assert "Started parent process" in text and "Stopping parent process" in text


@pytest.mark.slow
@pytest.mark.postgres
def test_serve_with_two_workers_on_postgresql(tmp_path: Path) -> None:
    base = server_url("TETHER_TEST_POSTGRES_URL")
    schema = "t_workers_" + uuid.uuid4().hex[:8]
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    log = tmp_path / "serve.log"
    try:
        with serve(url, log, "--workers", "2", "--agent", "_server_helpers:demo_agent") as s:
            _check_workers(s.url, log, url)
    finally:
        asyncio.run(drop_pg_schema(base, schema))


@pytest.mark.slow
def test_a_kept_alive_connection_outlives_the_clients_idle_expiry(tmp_path: Path) -> None:
    """httpx closes a connection idle for 5 s; the server keeps one 30 s, so the client
    (never the server) retires it, and a request sent after 5 s of quiet on a raw
    kept-alive connection is answered on that connection."""
    with serve(tmp_path / "k.db", tmp_path / "serve.log") as s:
        host, port = s.url.removeprefix("http://").rstrip("/").split(":")
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(request)
            assert _response(conn).startswith(b"HTTP/1.1 200")
            time.sleep(5.5)
            conn.sendall(request)
            assert _response(conn).startswith(b"HTTP/1.1 200")


def _response(conn: socket.socket) -> bytes:
    """One whole response (headers and its Content-Length of body) read off ``conn``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        assert chunk, data
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        chunk = conn.recv(4096)
        assert chunk, data
        body += chunk
    return head + b"\r\n\r\n" + body


def test_workers_refuse_a_bad_configuration_before_binding(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from _server_helpers import env_without_tokens
    from tether.cli import main

    result = CliRunner().invoke(
        main,
        ["--store", str(tmp_path / "x.db"), "serve", "--port", "0", "--workers", "2"],
        env=env_without_tokens(),
    )
    assert result.exit_code == 2 and "no tokens" in result.output
    assert os.environ.get("TETHER_SERVE_WORKER_OPTIONS") is None
