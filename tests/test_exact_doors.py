"""Exact in, exact out (issue 18): one JSON policy at every door.

Each hostile value is tried at each door it reaches (snapshot import from bytes, the
HTTP step and import routes, ``agent.step`` from Python) and must be refused with its
typed code, while the SQLite file stays byte-identical.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from _server_helpers import TOKEN, demo_agent, fill
from tether.control.snapshot import export_snapshot, import_snapshot
from tether.core import strict_json
from tether.core.canonical import CanonicalError
from tether.core.errors import InvalidNode, InvalidSnapshot, TetherError
from tether.core.graph import AgentState
from tether.server import Tokens, create_app
from tether.store import Store, open_store

AUTH = {"Authorization": f"Bearer {TOKEN}"}
BIG = b"18446744073709551617"  # 2**64 + 1: orjson reads it as a float


def deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


def deep_value(n: int) -> Any:
    v: Any = []
    for _ in range(n - 1):
        v = [v]
    return v


# --------------------------------------------------------------------------- the parser


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (BIG, "number_range"),
        (b"-" + BIG, "number_range"),
        (b"9007199254740992", "number_range"),
        (b"1" * 5000, "number_range"),
        (b'{"a": 1, "a": 2}', "duplicate_key"),
        (b'[{"x": {"k": 1, "k": 1}}]', "duplicate_key"),
        (b"NaN", "non_finite"),
        (b"[Infinity]", "non_finite"),
        (b"1e400", "non_finite"),
        (deep(100_000), "too_large"),
        (b'"\\ud800"', "shape"),
        (b'{"\\udc00": 1}', "shape"),
        (b"\xff", "shape"),
        (b"[1] x", "shape"),
    ],
)
def test_policy_codes(text: bytes, code: str) -> None:
    with pytest.raises(CanonicalError) as e:
        strict_json.loads(text)
    assert e.value.code == code


def test_policy_keeps_exact_values() -> None:
    assert strict_json.loads(b"9007199254740991") == 2**53 - 1
    assert strict_json.loads(b"-9007199254740991") == -(2**53 - 1)
    assert strict_json.loads(b'"\\ud83d\\ude00"') == "\U0001f600"
    assert strict_json.loads(b" [1.5, {}] \n") == [1.5, {}]
    assert strict_json.loads(deep(64), max_depth=64) == deep_value(64)
    with pytest.raises(CanonicalError) as e:
        strict_json.loads(deep(65), max_depth=64)
    assert e.value.code == "too_large"


# --------------------------------------------------------------------------- fixtures


def db_bytes(path: Path) -> bytes:
    """The SQLite file and its write-ahead log, as they are on disk."""
    out = path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    return out + (wal.read_bytes() if wal.exists() else b"")


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[tuple[Store, Path]]:
    path = tmp_path / "exact.db"
    store = await open_store(f"sqlite:///{path}")
    await fill(store)
    yield store, path
    await store.close()


def snapshot_with(payload_text: bytes) -> bytes:
    """A one-node snapshot whose payload is ``payload_text`` (the id is for {"v": 1})."""
    state = AgentState()
    state.append("goal", {"v": 1})
    good = state.to_json()
    assert b'{"v":1}' in good
    return good.replace(b'{"v":1}', payload_text, 1)


HOSTILE_SNAPSHOTS = {
    "big_int": (snapshot_with(b'{"v":' + BIG + b"}"), "number_range"),
    "dup_payload_key": (snapshot_with(b'{"v":1,"v":1}'), "duplicate_key"),
    "nan": (snapshot_with(b'{"v":NaN}'), "non_finite"),
    "deep": (snapshot_with(b'{"v":' + deep(500) + b"}"), "too_large"),
    "very_deep": (snapshot_with(b'{"v":' + deep(50_000) + b"}"), "too_large"),
    "lone_surrogate": (snapshot_with(b'{"v":"\\udbff"}'), "shape"),
}


def test_duplicate_node_and_top_level_keys() -> None:
    good = snapshot_with(b'{"v":1}')
    for text in (
        good.replace(b'"kind":"goal"', b'"kind":"goal","kind":"goal"'),
        good.replace(b'"frontier":', b'"nodes":[],"frontier":'),
    ):
        with pytest.raises(InvalidSnapshot) as e:
            AgentState.from_json(text)
        assert e.value.code == "duplicate_key"


# --------------------------------------------------------------------------- the doors


@pytest.mark.parametrize("case", sorted(HOSTILE_SNAPSHOTS))
async def test_import_refuses_and_writes_nothing(sqlite: tuple[Store, Path], case: str) -> None:
    store, path = sqlite
    text, code = HOSTILE_SNAPSHOTS[case]
    before = db_bytes(path)
    with pytest.raises(InvalidSnapshot) as e:
        await import_snapshot(store, "default", "thread:imported", text)
    assert e.value.code == code
    assert db_bytes(path) == before


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b'{"input": {"n": ' + BIG + b"}}", 400, "number_range"),
        (b'{"input": "pay 1", "input": "pay 1000000"}', 400, "duplicate_key"),
        (b'{"input": ' + deep(500) + b"}", 400, "too_large"),
        (b'{"input": ' + deep(100_000) + b"}", 400, "too_large"),
        (b'{"input": NaN}', 400, "non_finite"),
        (b'{"input": "\\ud800"}', 400, "invalid_request"),
    ],
)
async def test_http_step_refuses_and_writes_nothing(
    sqlite: tuple[Store, Path], body: bytes, status: int, code: str
) -> None:
    store, path = sqlite
    app = create_app(store, tokens=Tokens.single(TOKEN), agent=demo_agent)
    before = db_bytes(path)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether", headers=AUTH
    ) as c:
        r = await c.post(
            "/v1/ns/default/threads/support-1/step",
            content=body,
            headers={"content-type": "application/json"},
        )
    assert r.status_code == status, r.text
    assert r.json()["code"] == code
    assert set(r.json()) == {"error", "code", "message", "details"}
    assert db_bytes(path) == before


@pytest.mark.parametrize("case", sorted(HOSTILE_SNAPSHOTS))
async def test_http_import_refuses_and_writes_nothing(
    sqlite: tuple[Store, Path], case: str
) -> None:
    store, path = sqlite
    text, code = HOSTILE_SNAPSHOTS[case]
    app = create_app(store, tokens=Tokens.single(TOKEN))
    before = db_bytes(path)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tether", headers=AUTH
    ) as c:
        r = await c.post("/v1/ns/default/threads/new/import", content=text)
    assert 400 <= r.status_code < 500, r.text
    assert r.json()["code"] == code
    assert db_bytes(path) == before


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ({"n": 2**64 + 1}, "number_range"),
        ({"n": -(2**53)}, "number_range"),
        (deep_value(500), "too_large"),
        (deep_value(100), "too_large"),
        ({"x": float("nan")}, "non_finite"),
        ("\ud800", "shape"),
    ],
)
async def test_agent_step_refuses_and_writes_nothing(
    sqlite: tuple[Store, Path], value: Any, code: str
) -> None:
    store, path = sqlite
    agent = demo_agent(store)
    before = db_bytes(path)
    exported = await export_snapshot(store, "default", "thread:support-1")
    with pytest.raises(TetherError) as e:
        await agent.step(value, thread="support-1")
    assert isinstance(e.value, InvalidNode), e.value
    assert e.value.code == code
    assert db_bytes(path) == before
    assert await export_snapshot(store, "default", "thread:support-1") == exported


async def test_exact_big_but_safe_values_round_trip(sqlite: tuple[Store, Path]) -> None:
    store, _ = sqlite
    text = snapshot_with(b'{"v":1}')
    state = await import_snapshot(store, "default", "thread:ok", text)
    assert len(state) == 1
    assert await export_snapshot(store, "default", "thread:ok") == text
    assert orjson.loads(text)["nodes"][0]["payload"] == {"v": 1}


# --------------------------------------------------------------------------- tool results


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ({"x": float("nan"), "memo": "mk-tool-5e2"}, "non_finite"),
        ([float("inf"), "mk-tool-5e2"], "non_finite"),
        ({"n": 2**60, "memo": "mk-tool-5e2"}, "number_range"),
        ({"n": 2**70, "memo": "mk-tool-5e2"}, "number_range"),
        ({1: "mk-tool-5e2", "1": "b"}, "duplicate_key"),
    ],
)
async def test_a_tool_result_that_cannot_be_stored_exactly_is_an_error_result(
    tmp_path: Path, value: Any, code: str
) -> None:
    """The tool-result door: the call gets an error result naming the code (the model is
    told, the run goes on); the value itself reaches no byte of the file."""
    from tether.models import Rule, ScriptedModel, call
    from tether.runtime import Agent, tool

    @tool
    def probe() -> object:
        """Return the hostile value."""
        return value

    path = tmp_path / "tool.db"
    store = await open_store(f"sqlite:///{path}")
    try:
        model = ScriptedModel([Rule(match="go", tools=[call("probe")], then="ok")])
        r = await Agent(None, model, store=store, tools=[probe]).step("go", thread="t")
        assert r.status == "completed", r
        results = [n.payload for n in await store.nodes("default", "thread:t")]
        results = [p for p in results if "is_error" in p]
        assert len(results) == 1 and results[0]["is_error"] is True
        assert f"[{code}]" in results[0]["content"]
    finally:
        await store.close()
    assert b"mk-tool-5e2" not in b"".join(p.read_bytes() for p in tmp_path.glob("tool.db*"))
