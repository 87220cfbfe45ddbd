"""Hostile JSON, generated (issue 18): at snapshot import and at the HTTP step route,
only typed errors (InvalidSnapshot with its code; HTTP 4xx with tether's JSON error
body), never a 5xx or a raw exception, and the SQLite file byte-identical afterwards.

Every generated text holds at least one hostile piece (a duplicate key, an integer
beyond ±(2**53-1), nesting past the depth limit, a lone surrogate, NaN or Infinity, a
number that overflows a double, bytes that are not UTF-8), placed anywhere inside
ordinary JSON, so each one must be refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _server_helpers import TOKEN, demo_agent, fill
from tether.control.snapshot import import_snapshot
from tether.core.errors import InvalidSnapshot
from tether.core.graph import AgentState
from tether.server import Tokens, create_app
from tether.store import Store, open_store

AUTH = {"Authorization": f"Bearer {TOKEN}"}
CODES = {"number_range", "duplicate_key", "non_finite", "too_large", "shape"}
# HTTP reports what cannot be text at all (invalid UTF-8, a lone surrogate) as invalid_request.
HTTP_CODES = CODES | {"invalid_request"}

_MAX = 2**53 - 1
big_int = st.one_of(
    st.integers(min_value=_MAX + 1, max_value=2**200),
    st.integers(min_value=-(2**200), max_value=-_MAX - 1),
).map(lambda n: str(n).encode())
hostile_atom = st.one_of(
    big_int,
    st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999"]),
    st.sampled_from([b'"\\ud800"', b'"a\\udfff"', b'"\\udbff\\u0041"', b'{"\\udc00": 1}']),
    st.sampled_from([b'"\xff"', b'"\xc3"', b'"\xed\xa0\x80"', b'"\xf8\x88\x80\x80\x80"']),
    # Deeper than any limit: a payload's (64) and a request body's (68, the context's).
    st.integers(min_value=70, max_value=400).map(lambda n: b"[" * n + b"1" + b"]" * n),
    st.integers(min_value=70, max_value=200).map(lambda n: b'{"a":' * n + b"0" + b"}" * n),
    st.tuples(st.text(min_size=0, max_size=5).filter(lambda s: s.isprintable())).map(
        lambda t: (
            b'{"'
            + t[0].replace("\\", "").replace('"', "").encode()
            + b'":1,"'
            + t[0].replace("\\", "").replace('"', "").encode()
            + b'":2}'
        )
    ),
)
safe_atom = st.one_of(
    st.integers(min_value=-_MAX, max_value=_MAX).map(lambda n: str(n).encode()),
    st.sampled_from([b"true", b"false", b"null", b'"x"', b"1.5", b"[]", b"{}"]),
)


def _wrap(inner: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """``inner`` somewhere inside ordinary JSON: a list among safe values, or an object's value."""
    return st.one_of(
        st.tuples(st.lists(safe_atom, max_size=3), inner, st.lists(safe_atom, max_size=3)).map(
            lambda t: b"[" + b",".join([*t[0], t[1], *t[2]]) + b"]"
        ),
        st.tuples(st.sampled_from([b"k", b"text", b"n"]), inner).map(
            lambda t: b'{"' + t[0] + b'":' + t[1] + b"}"
        ),
    )


hostile = st.recursive(hostile_atom, _wrap, max_leaves=4)


def _snapshot(payload: bytes) -> bytes:
    state = AgentState()
    state.append("goal", {"v": 1})
    good = state.to_json()
    return good.replace(b'{"v":1}', payload, 1)


def _db_bytes(path: Path) -> bytes:
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[asyncio.AbstractEventLoop, Store, Path]]:
    loop = asyncio.new_event_loop()
    path = tmp_path / "hostile.db"
    store = loop.run_until_complete(open_store(f"sqlite:///{path}"))
    loop.run_until_complete(fill(store))
    try:
        yield loop, store, path
    finally:
        loop.run_until_complete(store.close())
        loop.close()


FAST = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FAST
@given(text=hostile)
def test_hostile_payloads_in_a_snapshot_are_refused(
    world: tuple[asyncio.AbstractEventLoop, Store, Path], text: bytes
) -> None:
    loop, store, path = world
    before = _db_bytes(path)
    for snapshot in (_snapshot(text), _snapshot(b'{"v":' + text + b"}")):
        with pytest.raises(InvalidSnapshot) as e:
            loop.run_until_complete(import_snapshot(store, "default", "thread:new", snapshot))
        assert e.value.code in CODES, e.value
    assert _db_bytes(path) == before


@FAST
@given(text=hostile)
def test_hostile_step_bodies_over_http_are_refused(
    world: tuple[asyncio.AbstractEventLoop, Store, Path], text: bytes
) -> None:
    loop, store, path = world
    app = create_app(store, tokens=Tokens.single(TOKEN), agent=demo_agent)
    before = _db_bytes(path)

    async def post(body: bytes) -> httpx.Response:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://tether", headers=AUTH
        ) as c:
            return await c.post(
                "/v1/ns/default/threads/support-1/step",
                content=body,
                headers={"content-type": "application/json"},
            )

    for body in (b'{"input": ' + text + b"}", b'{"input": "hi", "context": ' + text + b"}"):
        r = loop.run_until_complete(post(body))
        assert 400 <= r.status_code < 500, (body[:200], r.status_code, r.text)
        data = r.json()
        assert set(data) == {"error", "code", "message", "details"}, data
        assert data["code"] in HTTP_CODES, data
    assert _db_bytes(path) == before
