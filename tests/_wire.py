"""A TCP proxy on loopback that counts round trips between a client and a real server.

The client connects to the proxy, the proxy to the server, and every byte is passed on
unchanged. A round trip is counted each time the client sends after the server has
spoken (or first on its connection): requests sent together without waiting for an
answer (a pipeline, PostgreSQL's Bind/Execute/Sync) are one round trip, a request that
waits for the answer to the one before is another. Nothing is parsed or mocked.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit


class RoundTrips:
    def __init__(self, url: str) -> None:
        u = urlsplit(url)
        self._url = u
        self._target = (u.hostname or "127.0.0.1", u.port or 0)
        self.count = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def url(self) -> str:
        """The server's URL with the proxy's port in place of the server's."""
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        u = self._url
        auth = u.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{port}" if auth else f"127.0.0.1:{port}"
        return urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))

    async def __aenter__(self) -> RoundTrips:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for w in self._writers:
            w.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()

    async def _serve(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            sr, sw = await asyncio.open_connection(*self._target)
            self._writers += [cw, sw]
            last = [""]

            async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, side: str) -> None:
                try:
                    while data := await src.read(1 << 16):
                        if side == "client" and last[0] != "client":
                            self.count += 1
                        last[0] = side
                        dst.write(data)
                        await dst.drain()
                finally:
                    dst.close()

            await asyncio.gather(
                pump(cr, sw, "client"), pump(sr, cw, "server"), return_exceptions=True
            )
        finally:
            self._tasks.discard(task)


async def commit_round_trips(store: object, wire: RoundTrips) -> dict[str, int]:
    """Round trips of each kind of commit on ``store`` (opened through ``wire``), after a
    first commit that lets the client prepare what it keeps (a statement, a script)."""
    from tether import Conflict
    from tether.core.graph import make_node
    from tether.store import Head, ScopeWrite, Store

    assert isinstance(store, Store)

    def write(head: Head, scope: str, n: int, *, key: str | None = None) -> ScopeWrite:
        nodes, frontier = [], list(head.frontier)
        for i in range(n):
            kind = "resource" if key and i == n - 1 else "goal"
            node = make_node(
                kind,
                {"s": scope, "i": head.sequence + i},
                frontier,
                sequence=head.sequence + i + 1,
                resource_key=key if kind == "resource" else None,
            )
            nodes.append(node)
            frontier = [node.id]
        return ScopeWrite(
            scope=scope,
            expected_generation=head.generation,
            expected_sequence=head.sequence,
            nodes=tuple(nodes),
            frontier=tuple(frontier),
        )

    scopes = ("thread:a", "user:u", "app")
    heads = {s: Head() for s in scopes}

    async def commit(*ws: ScopeWrite) -> int:
        wire.count = 0
        await store.commit("ns", list(ws))
        for w in ws:
            if w.nodes:
                heads[w.scope] = Head(
                    generation=w.expected_generation,
                    sequence=w.expected_sequence + len(w.nodes),
                    frontier=w.frontier,
                )
        return wire.count

    await commit(*(write(heads[s], s, 1) for s in scopes))  # the warm-up
    out = {
        "one scope, two nodes": await commit(write(heads["thread:a"], "thread:a", 2)),
        "three scopes with resource nodes": await commit(
            *(write(heads[s], s, 3, key="var:v") for s in scopes)
        ),
        "a head asserted, nothing written": await commit(write(heads["app"], "app", 0)),
    }
    stale = write(Head(sequence=1, frontier=heads["thread:a"].frontier[:0]), "thread:a", 1)
    wire.count = 0
    try:
        await store.commit("ns", [stale])
    except Conflict:
        out["a stale head (Conflict)"] = wire.count
    return out
