"""Snapshot import as a stream (SPEC §1): limits enforced while the file is read.

``AgentState.from_json`` parses a whole snapshot before checking it, so a file
over a limit is only refused once it is all in memory, as a tree of Python
objects several times its size. ``SnapshotStream`` reads a snapshot a chunk at
a time instead and checks each node as soon as its text is complete, with the
same rules and codes (``validate.NodeChecker`` and ``strict_json``):

* the byte limit (``max_snapshot_bytes``) is checked against the file's size
  when it has one, and against the bytes read so far otherwise;
* the node count (``max_nodes``) as each node starts;
* payload size and depth on each node, duplicate keys and integers beyond
  ±(2**53-1) as each value is decoded;
* a node's text longer than ``node_text_limit(limits)`` is refused as
  ``too_large`` without reading further (JSON whitespace or ``\\u`` escapes
  could otherwise make one node of a valid payload size arbitrarily long).

What is held at any time: the text of the node being read (plus one read
chunk), the node ids seen so far (to check parents and duplicates), and the
batch of checked nodes handed to the caller. Refusing at node *i* stops there,
except for a missing parent: the rest of the file is scanned, ids only, to tell a
parent that comes later (``parent_order``) from one that is absent
(``parent_missing``), as the in-memory import does.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
from collections.abc import Iterator
from typing import IO, Any, Final, NoReturn

from . import strict_json
from .canonical import CanonicalError
from .errors import InvalidSnapshot
from .graph import PRUNED_SNAPSHOT_VERSION, SNAPSHOT_VERSION, CausalNode, Limits
from .validate import NodeChecker, Pruned
from .vocab import Vocabulary

__all__ = ["SnapshotStream", "node_text_limit"]

CHUNK: Final = 1 << 20
# A batch of checked nodes is handed over at this many payload bytes (or `batch` nodes).
BATCH_BYTES: Final = 2 << 20
_WS: Final = frozenset(" \t\n\r")


def node_text_limit(limits: Limits) -> int:
    """The longest text one node may take in a snapshot file (bytes or characters)."""
    return 4 * limits.max_payload_bytes + (1 << 20)


def _fail(code: str, message: str, index: int | None = None) -> NoReturn:
    where = "" if index is None else f" (node {index})"
    raise InvalidSnapshot(message + where, code=code, index=index)


class _Text:
    """A UTF-8 byte stream read a chunk at a time, as text, with the byte limit."""

    def __init__(self, fp: IO[bytes], limits: Limits) -> None:
        self.fp = fp
        self.limit = limits.max_snapshot_bytes
        self.node_limit = node_text_limit(limits)
        self.decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.buf = ""
        self.pos = 0
        self.read = 0
        self.eof = False
        self.digest = hashlib.sha256()
        try:
            size = os.fstat(fp.fileno()).st_size - fp.tell()
        except (AttributeError, OSError, ValueError):
            size = None
        if size is not None and size > self.limit:
            _fail("too_large", f"snapshot is {size} bytes, over {self.limit}")

    def more(self, want: int = 0) -> bool:
        """Append at least one more chunk to the buffer; False at the end of the file."""
        if self.eof:
            return False
        if self.pos:
            self.buf = self.buf[self.pos :]
            self.pos = 0
        chunk = self.fp.read(max(want, CHUNK))
        try:
            if not chunk:
                self.eof = True
                self.buf += self.decoder.decode(b"", final=True)
                return False
            first = self.read == 0
            self.read += len(chunk)
            if self.read > self.limit:
                _fail("too_large", f"snapshot is over {self.limit} bytes")
            self.digest.update(chunk)
            text = self.decoder.decode(chunk)
        except UnicodeDecodeError as e:
            _fail("shape", f"not JSON: not UTF-8 ({e.reason}) near byte {self.read}")
        if first and text.startswith("\ufeff"):
            _fail("shape", "not JSON: a snapshot must not start with a byte order mark")
        self.buf += text
        return True

    def skip_ws(self) -> None:
        while True:
            buf, pos, n = self.buf, self.pos, len(self.buf)
            while pos < n and buf[pos] in _WS:
                pos += 1
            self.pos = pos
            if pos < n or not self.more():
                return

    def peek(self) -> str:
        self.skip_ws()
        if self.pos >= len(self.buf):
            _fail("shape", "not JSON: the snapshot ends too early")
        return self.buf[self.pos]

    def expect(self, ch: str, what: str) -> None:
        if self.peek() != ch:
            _fail("shape", f"not JSON: expected {ch!r} {what}")
        self.pos += 1

    def value(self, index: int | None = None) -> Any:
        """Decode the JSON value at the cursor, reading as much as it takes."""
        self.skip_ws()
        while True:
            try:
                value, end = strict_json.decode_at(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if self._grow():
                    continue
                _fail("shape", f"not valid JSON: {e.msg}", index)
            except CanonicalError as e:
                # A number cut short by the buffer can read as another number: only
                # an error that stands with the text that follows it is the file's.
                if e.code in ("number_range", "non_finite") and self._grow():
                    continue
                _fail(e.code, str(e), index)
            if end == len(self.buf) and self._grow():
                continue  # a number at the buffer's end may go on
            self.pos = end
            return value

    def _grow(self) -> bool:
        pending = len(self.buf) - self.pos
        if self.eof:
            return False
        if pending > self.node_limit:
            _fail("too_large", f"one value of the snapshot is over {self.node_limit} characters")
        return self.more(pending)


class SnapshotStream:
    """One pass over a snapshot file: checked nodes in batches, then its frontier.

    ``batches()`` yields lists of checked ``CausalNode`` (at most ``batch``
    each, and about ``BATCH_BYTES`` of payload at most) and raises ``InvalidSnapshot`` at the first fault; once it is
    exhausted, ``count``, ``frontier`` and ``sha256`` describe the whole file.
    """

    def __init__(
        self,
        fp: IO[bytes],
        *,
        limits: Limits,
        vocabulary: Vocabulary | None = None,
        batch: int = 1000,
    ) -> None:
        self.limits = limits
        self.vocabulary = vocabulary
        self.batch = batch
        self._t = _Text(fp, limits)
        self.count = 0
        self.frontier: list[str] = []
        self.sha256 = ""
        self.pruned = Pruned()  # what a pruned snapshot (version 2) says it lacks

    def batches(self) -> Iterator[list[CausalNode]]:
        t = self._t
        checker = NodeChecker(limits=self.limits, vocabulary=self.vocabulary)
        t.expect("{", "at the start of a snapshot (an object {version, nodes, frontier})")
        keys: set[str] = set()
        frontier: Any = None
        version: Any = None
        if t.peek() == "}":
            t.pos += 1
        else:
            while True:
                key = t.value()
                if not isinstance(key, str):
                    _fail("shape", "not JSON: an object key is a string")
                t.expect(":", "after a key")
                if key in keys:
                    _fail("duplicate_key", f"the key {key[:64]!r} appears twice in one object")
                keys.add(key)
                if key == "version":
                    version = t.value()
                    self._check_version(version)
                elif key == "frontier":
                    frontier = t.value()
                elif key == "pruned" and version == PRUNED_SNAPSHOT_VERSION and "nodes" not in keys:
                    checker.pruned = Pruned.from_json(t.value(), self.limits)
                elif key == "nodes":
                    if version == PRUNED_SNAPSHOT_VERSION and "pruned" not in keys:
                        _fail(
                            "version",
                            "version 2 is a pruned snapshot, which says what it lacks "
                            "(pruned) after its version and before its nodes",
                        )
                    if t.peek() != "[":
                        _fail("shape", "nodes and frontier must be lists")
                    yield from self._nodes(checker)
                else:
                    _fail(
                        "shape",
                        "a snapshot has exactly version, nodes and frontier (and, pruned, "
                        f"version 2 and pruned before its nodes); got the key {key[:64]!r}",
                    )
                c = t.peek()
                t.pos += 1
                if c == "}":
                    break
                if c != ",":
                    _fail("shape", "not JSON: expected ',' or '}' in the snapshot object")
        t.skip_ws()
        if t.pos < len(t.buf):
            _fail("shape", "not valid JSON: extra data after the snapshot")
        self._check_version(version)
        want = {"version", "nodes", "frontier"}
        if version == PRUNED_SNAPSHOT_VERSION:
            want.add("pruned")
        if keys != want:
            _fail("shape", f"a snapshot has exactly {sorted(want)}; got {sorted(keys)}")
        if not isinstance(frontier, list):
            _fail("shape", "nodes and frontier must be lists")
        checker.check_end()
        self.frontier = checker.check_frontier(frontier)
        self.pruned = checker.pruned
        self.count = checker.count
        self.sha256 = t.digest.hexdigest()

    @staticmethod
    def _check_version(version: Any) -> None:
        if type(version) is not int or version not in (SNAPSHOT_VERSION, PRUNED_SNAPSHOT_VERSION):
            _fail(
                "version",
                f"unsupported snapshot version {version!r}; expected 1 (or 2: a pruned scope)",
            )

    def _nodes(self, checker: NodeChecker) -> Iterator[list[CausalNode]]:
        t = self._t
        t.pos += 1  # the '['
        out: list[CausalNode] = []
        mark = checker.total
        if t.peek() == "]":
            t.pos += 1
            return
        while True:
            i = checker.count
            if i >= self.limits.max_nodes:
                _fail("too_large", f"more than {self.limits.max_nodes} nodes, the limit", i)
            raw = t.value(i)
            try:
                out.append(checker.check(raw))
            except InvalidSnapshot as e:
                if e.code == "parent_missing":
                    self._parent_later(raw, checker, e)
                raise
            if len(out) >= self.batch or checker.total - mark >= BATCH_BYTES:
                yield out
                out = []
                mark = checker.total
            c = t.peek()
            t.pos += 1
            if c == "]":
                break
            if c != ",":
                _fail("shape", "not JSON: expected ',' or ']' in nodes", i)
        if out:
            yield out

    def _parent_later(self, raw: Any, checker: NodeChecker, e: InvalidSnapshot) -> None:
        """Raise parent_order if the missing parent is a node further on (reads ids only)."""
        missing = next(p for p in raw["parents"] if isinstance(p, str) and p not in checker.seen)
        later = missing == raw["id"]
        t = self._t
        while not later:
            c = t.peek()
            t.pos += 1
            if c == "]":
                break
            if c != ",":
                return  # not JSON further on: the fault found first stands
            try:
                nxt = t.value()
            except InvalidSnapshot:
                return
            later = isinstance(nxt, dict) and nxt.get("id") == missing
        if later:
            raise InvalidSnapshot(
                f"parent {missing} does not come earlier in sequence (node {e.index}, {e.node_id})",
                code="parent_order",
                index=e.index,
                node_id=e.node_id,
            )
