"""Streaming import (issue 18): limits enforced while a snapshot is read.

A snapshot over a limit is refused before it is all read; a valid one imports
exactly (export gives back the same bytes) whether it is held or read twice; the
codes are those of the in-memory import; a failed import writes nothing.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from tether.control import snapshot as snap
from tether.control.snapshot import (
    check_snapshot_file,
    export_snapshot,
    import_snapshot,
    verify_snapshot,
)
from tether.core import snapshot_stream
from tether.core.errors import InvalidSnapshot
from tether.core.graph import DEFAULT_LIMITS, AgentState
from tether.store import Store, open_store


class Counting(io.RawIOBase):
    """A pipe-like stream (not seekable) that counts the bytes handed out."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(b), len(self.data) - self.at)
        b[:n] = self.data[self.at : self.at + n]
        self.at += n
        return n


def chain(n: int, payload: object = None) -> AgentState:
    state = AgentState()
    for i in range(n):
        state.append("goal", {"i": i} if payload is None else payload)
    return state


def db_bytes(path: Path) -> bytes:
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[tuple[Store, Path]]:
    path = tmp_path / "s.db"
    store = await open_store(f"sqlite:///{path}")
    seed = chain(3)
    await import_snapshot(store, "default", "thread:seed", seed.to_json())
    yield store, path
    await store.close()


# --------------------------------------------------------------------------- refused early


def test_over_the_byte_limit_refused_from_the_file_size(tmp_path: Path) -> None:
    text = chain(50).to_json()
    f = tmp_path / "s.json"
    f.write_bytes(text)
    limits = dataclasses.replace(DEFAULT_LIMITS, max_snapshot_bytes=len(text) - 1)
    with pytest.raises(InvalidSnapshot) as e:
        check_snapshot_file(f, limits=limits)
    assert e.value.code == "too_large"
    assert check_snapshot_file(f).nodes == 50


def test_over_the_byte_limit_refused_before_the_end_of_a_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(snapshot_stream, "CHUNK", 4096)
    monkeypatch.setattr(snap, "_HOLD_BYTES", 4096)
    text = chain(2000).to_json()
    limits = dataclasses.replace(DEFAULT_LIMITS, max_snapshot_bytes=len(text) // 4)
    src = Counting(text)
    s = snapshot_stream.SnapshotStream(io.BufferedReader(src, 4096), limits=limits)
    with pytest.raises(InvalidSnapshot) as e:
        for _ in s.batches():
            pass
    assert e.value.code == "too_large"
    assert src.at < len(text) // 2


def test_over_the_node_count_refused_before_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_stream, "CHUNK", 4096)
    text = chain(3000).to_json()
    limits = dataclasses.replace(DEFAULT_LIMITS, max_nodes=100)
    src = Counting(text)
    s = snapshot_stream.SnapshotStream(io.BufferedReader(src, 4096), limits=limits)
    with pytest.raises(InvalidSnapshot) as e:
        for _ in s.batches():
            pass
    assert e.value.code == "too_large"
    assert e.value.index == 100
    assert src.at < len(text) // 4
    with pytest.raises(InvalidSnapshot) as e2:
        AgentState.from_json(text, limits=limits)
    assert e2.value.code == "too_large"


def test_one_node_longer_than_its_limit_refused_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_stream, "CHUNK", 4096)
    limits = dataclasses.replace(DEFAULT_LIMITS, max_payload_bytes=10_000)
    good = chain(1).to_json()
    # Whitespace is JSON, so this node's payload is small, but its text is not.
    text = good.replace(b'"payload":', b'"payload":' + b" " * 3_000_000, 1)
    src = Counting(text)
    s = snapshot_stream.SnapshotStream(io.BufferedReader(src, 4096), limits=limits)
    with pytest.raises(InvalidSnapshot) as e:
        for _ in s.batches():
            pass
    assert e.value.code == "too_large"
    assert src.at < 2_500_000
    assert snapshot_stream.node_text_limit(limits) < 2_500_000


# --------------------------------------------------------------------------- the same codes


def _mutations() -> dict[str, bytes]:
    state = chain(3)
    d = state.to_dict()
    good = state.to_json()
    n0, f0 = d["nodes"][0]["id"], d["frontier"][0]
    swapped = dict(d, nodes=[d["nodes"][1], d["nodes"][0], d["nodes"][2]])
    out = {
        "dup_nodes": good.replace(b'"frontier":', b'"nodes":[],"frontier":'),
        "dup_version": good.replace(b'"version":1', b'"version":1,"version":1'),
        "dup_kind": good.replace(b'"kind":"goal"', b'"kind":"goal","kind":"goal"', 1),
        "big_int": good.replace(b'{"i":0}', b'{"i":18446744073709551617}'),
        "nan": good.replace(b'{"i":0}', b'{"i":NaN}'),
        "deep": good.replace(b'{"i":0}', b"[" * 500 + b"]" * 500),
        "very_deep": good.replace(b'{"i":0}', b"[" * 50_000 + b"]" * 50_000),
        "surrogate": good.replace(b'{"i":0}', b'"\\udbff"'),
        "version": good.replace(b'"version":1', b'"version":2'),
        "extra_key": good.replace(b'"version":1', b'"version":1,"x":0'),
        "no_frontier": good.replace(
            b',"frontier":[' + f'"{d["frontier"][0]}"'.encode() + b"]", b""
        ),
        "order": orjson.dumps(swapped),
        "missing": good.replace(n0.encode(), b"cw_" + b"0" * 24, 1),
        "identity": good.replace(b'{"i":1}', b'{"i":7}'),
        "frontier": good.replace(b'"frontier":["', b'"frontier":["' + f0.encode() + b'","', 1),
        "truncated": good[:-5],
        "trailing": good + b" x",
        "bom": b"\xef\xbb\xbf" + good,
        "not_utf8": good.replace(b'"goal"', b'"go\xffl"', 1),
        "not_object": b"[]",
        "empty": b"",
    }
    return out


@pytest.mark.parametrize("case", sorted(_mutations()))
def test_streamed_codes_match_the_in_memory_import(case: str) -> None:
    text = _mutations()[case]
    with pytest.raises(InvalidSnapshot) as whole:
        AgentState.from_json(text)
    with pytest.raises(InvalidSnapshot) as streamed:
        check_snapshot_file(text)
    assert streamed.value.code == whole.value.code, (whole.value, streamed.value)
    if whole.value.index is not None:  # a parse error: the stream also knows the node
        assert streamed.value.index == whole.value.index


@pytest.mark.parametrize("case", sorted(_mutations()))
async def test_refused_import_writes_nothing(sqlite: tuple[Store, Path], case: str) -> None:
    store, path = sqlite
    text = _mutations()[case]
    f = path.with_name("in.json")
    f.write_bytes(text)
    before = db_bytes(path)
    for source in (text, f, io.BufferedReader(Counting(text))):
        with pytest.raises(InvalidSnapshot):
            await import_snapshot(store, "default", "thread:new", source)
        assert db_bytes(path) == before
    assert not verify_snapshot(f).ok


# --------------------------------------------------------------------------- exact round trips


@pytest.mark.parametrize("chunk", [1, 7, 4096])
async def test_import_is_exact_at_any_chunk_size(
    sqlite: tuple[Store, Path], monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    store, _ = sqlite
    monkeypatch.setattr(snapshot_stream, "CHUNK", chunk)
    state = AgentState()
    state.append("goal", {"big": 2**53 - 1, "neg": -(2**53 - 1), "f": 1.5e300, "s": 'a"\\é😀'})
    state.append("goal", {"f": 9007199254740993.5})
    text = state.to_json()
    # The same float written with more digits than needed: a 16-digit run that is
    # out of range as an integer must not be refused when a buffer ends inside it.
    raw = text.replace(b"9007199254740994.0", b"9007199254740993.5")
    assert raw != text
    await import_snapshot(store, "default", "thread:exact", raw)
    assert await export_snapshot(store, "default", "thread:exact") == text


async def test_a_big_import_read_twice_is_exact(
    sqlite: tuple[Store, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store, _ = sqlite
    monkeypatch.setattr(snap, "_HOLD_BYTES", 0)  # always the two-pass path
    monkeypatch.setattr(snapshot_stream, "CHUNK", 1000)
    state = AgentState()
    ids = [state.append("goal", {"i": i}).id for i in range(2500)]
    state.append("goal", {"join": True}, parents=sorted(ids[-3:]))
    text = state.to_json()
    f = tmp_path / "big.json"
    f.write_bytes(text)
    done = await import_snapshot(store, "default", "thread:big", f)
    assert len(done) == 2501
    assert await export_snapshot(store, "default", "thread:big") == text
    assert (await snap.verify_scope(store, "default", "thread:big")).ok
    # A pipe is spooled, then read twice the same way.
    await import_snapshot(store, "default", "thread:pipe", io.BufferedReader(Counting(text)))
    assert await export_snapshot(store, "default", "thread:pipe") == text


async def test_a_file_changed_between_the_passes_writes_nothing(
    sqlite: tuple[Store, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path = sqlite
    monkeypatch.setattr(snap, "_HOLD_BYTES", 0)
    first, second = chain(1500).to_json(), chain(1500, {"other": 1}).to_json()

    class Swapping(Counting):
        """Seekable; the second read finds other bytes (a file rewritten meanwhile)."""

        def seekable(self) -> bool:
            return True

        def tell(self) -> int:
            return self.at

        def seek(self, pos: int, whence: int = 0) -> int:
            self.data, self.at = second, pos
            return pos

    before = db_bytes(path)
    with pytest.raises(InvalidSnapshot) as e:
        await import_snapshot(store, "default", "thread:swap", Swapping(first))
    assert e.value.code in ("changed", "identity_mismatch", "parent_missing")
    assert db_bytes(path) == before


async def test_memory_store_imports_from_a_stream(tmp_path: Path) -> None:
    store = await open_store("memory://")
    text = chain(30).to_json()
    f = tmp_path / "m.json"
    f.write_bytes(text)
    await import_snapshot(store, "default", "thread:m", f)
    assert await export_snapshot(store, "default", "thread:m") == text


def test_the_import_memory_benchmark_runs(tmp_path: Path) -> None:
    """benchmarks/import_memory.py (the README's figures), at a size that runs in seconds."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "import_memory.py"
    args = ["--nodes", "300", "--mb", "1", "--node-kb", "100", "--dir", str(tmp_path)]
    out = subprocess.run(
        [sys.executable, str(script), *args], check=True, capture_output=True, text=True
    ).stdout
    rows = [r.split("|")[1:-1] for r in out.splitlines()[2:]]
    assert [(r[0].strip(), r[4].strip()) for r in rows] == [
        ("300 tiny nodes", "import"),
        ("300 tiny nodes", "check"),
        ("1 MB", "import"),
        ("1 MB", "check"),
    ]
    assert [int(r[2].replace(",", "")) for r in rows] == [300, 300, 9, 9]
    assert all(0 < float(r[5]) < 500 for r in rows)  # peak RSS MiB, measured
    assert list(tmp_path.iterdir()) == []  # the files it wrote are gone
