"""Two ``LogBackend`` examples: start from one to write your own (docs/storage.md).

* ``DictBackend``: every log in a dict, in one process (as Liman's
  ``InMemoryStateStorage``). A ``threading.Lock`` makes each save all or nothing.
* ``DirectoryBackend``: a JSON Lines file per scope under a directory, shared by every
  process that opens the directory (POSIX: ``fcntl.flock``). A file's first line is
  ``{"name": scope, "version": n}``, then one entry per line, so ``cat`` shows a
  scope's nodes. A save rewrites each file it touches (write a temporary file, fsync,
  rename: a crash leaves the old file or the new one); a save over several scopes
  first writes a journal that the next process to take the lock replays, so a crash
  between two renames cannot leave half a commit.

Both pass tether's conformance suite through ``tether.store.LogStore``
(tests/conformance/backend_log.py). Costs: see ``tether.store.simple``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import orjson

from ..core.errors import StoreError
from .simple import LogBackend, LogSave, ScopeLog

__all__ = ["DictBackend", "DirectoryBackend"]


class DictBackend(LogBackend):
    """Logs in a dict: ``{(namespace, scope): ScopeLog}``. One process; nothing survives it."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, str], ScopeLog] = {}
        self._lock = threading.Lock()  # never held across an await

    async def load(self, namespace: str, scope: str) -> ScopeLog:
        with self._lock:
            return self.logs.get((namespace, scope), ScopeLog())

    async def save(self, namespace: str, saves: Sequence[LogSave]) -> bool:
        with self._lock:
            old = [self.logs.get((namespace, s.scope), ScopeLog()) for s in saves]
            if any(log.version != s.version for log, s in zip(old, saves, strict=True)):
                return False
            for log, s in zip(old, saves, strict=True):
                if s.entries or s.replace:
                    entries = s.entries if s.replace else log.entries + tuple(s.entries)
                    self.logs[namespace, s.scope] = ScopeLog(s.version + 1, entries)
            return True

    async def namespaces(self) -> list[str]:
        with self._lock:
            return sorted({ns for ns, _ in self.logs})

    async def scopes(self, namespace: str) -> list[str]:
        with self._lock:
            return [sc for ns, sc in self.logs if ns == namespace]


def _file(name: str) -> str:
    # Names may hold any printable character ("/", "..", case that a file system folds):
    # the file is named by a digest, the name itself is on the file's first line.
    return hashlib.sha256(name.encode()).hexdigest()[:40]


class DirectoryBackend(LogBackend):
    """Logs as files: ``<root>/<ns digest>/<scope digest>.jsonl``; see the module docstring.

    ``durable=False`` skips the fsyncs (tests); a save then survives a crash of the
    process but not of the machine.
    """

    def __init__(self, root: str | os.PathLike[str], *, durable: bool = True) -> None:
        try:
            import fcntl  # noqa: F401 - POSIX only
        except ImportError:
            raise StoreError(
                "DirectoryBackend locks with fcntl.flock (POSIX); use DictBackend or "
                "write a LogBackend for this system",
                code="unsupported",
            ) from None
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        self._journal = self.root / "journal.jsonl"

    # -- the lock, the journal -----------------------------------------------------------

    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        import fcntl

        with open(self.root / ".lock", "a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            if not exclusive and self._journal.exists():  # a save died: finish it first
                fcntl.flock(f, fcntl.LOCK_EX)
            if self._journal.exists():
                self._replay()
            yield  # the lock goes with the file

    def _replay(self) -> None:
        lines = self._journal.read_bytes().split(b"\n")[:-1]
        if lines and lines[-1] == b'"end"':  # complete: apply it (again, harmlessly)
            for line in lines[:-1]:
                path, content = orjson.loads(line)
                self._write(self.root / path, content.encode())
        self._journal.unlink()  # incomplete: the save never happened
        self._sync_dir(self.root)

    def _write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            if self.durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        self._sync_dir(path.parent)

    def _sync_dir(self, path: Path) -> None:
        if self.durable:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    # -- one scope's file ----------------------------------------------------------------

    def _path(self, namespace: str, scope: str) -> Path:
        return self.root / _file(namespace) / f"{_file(scope)}.jsonl"

    def _read(self, namespace: str, scope: str) -> ScopeLog:
        try:
            # split on "\n" only: an entry may hold U+2028, which splitlines() splits on
            lines = self._path(namespace, scope).read_text("utf-8").split("\n")[:-1]
        except FileNotFoundError:
            return ScopeLog()
        head = orjson.loads(lines[0])
        if head.get("name") != scope:
            raise StoreError(
                f"{self._path(namespace, scope)} holds {head.get('name')!r}, not {scope!r}",
                code="corrupt_log",
            )
        return ScopeLog(head["version"], tuple(lines[1:]))

    def _content(self, scope: str, version: int, entries: Sequence[str]) -> str:
        head = orjson.dumps({"name": scope, "version": version}).decode()
        return "".join(f"{line}\n" for line in (head, *entries))

    # -- the four methods ----------------------------------------------------------------

    async def load(self, namespace: str, scope: str) -> ScopeLog:
        def run() -> ScopeLog:
            with self._locked(exclusive=False):
                return self._read(namespace, scope)

        return await asyncio.to_thread(run)

    async def save(self, namespace: str, saves: Sequence[LogSave]) -> bool:
        if any("\n" in e or "\r" in e for s in saves for e in s.entries):
            raise StoreError("a log entry holds a line break", code="backend_contract")

        def run() -> bool:
            with self._locked(exclusive=True):
                old = [self._read(namespace, s.scope) for s in saves]
                if any(log.version != s.version for log, s in zip(old, saves, strict=True)):
                    return False
                files: list[tuple[Path, str]] = []
                for log, s in zip(old, saves, strict=True):
                    if s.entries or s.replace:
                        entries = s.entries if s.replace else (*log.entries, *s.entries)
                        content = self._content(s.scope, s.version + 1, entries)
                        files.append((self._path(namespace, s.scope), content))
                if files:
                    self._name_namespace(namespace)
                if len(files) > 1:  # several renames: journal them first
                    lines = [
                        orjson.dumps([str(p.relative_to(self.root)), c]) + b"\n" for p, c in files
                    ]
                    self._write(self._journal, b"".join(lines) + b'"end"\n')
                for path, content in files:
                    self._write(path, content.encode())
                if len(files) > 1:
                    self._journal.unlink()
                    self._sync_dir(self.root)
                return True

        return await asyncio.to_thread(run)

    def _name_namespace(self, namespace: str) -> None:
        marker = self.root / _file(namespace) / "namespace.json"
        if not marker.exists():
            self._write(marker, orjson.dumps({"name": namespace}))

    async def namespaces(self) -> list[str]:
        def run() -> list[str]:
            with self._locked(exclusive=False):
                return [
                    orjson.loads(p.read_bytes())["name"]
                    for p in sorted(self.root.glob("*/namespace.json"))
                ]

        return await asyncio.to_thread(run)

    async def scopes(self, namespace: str) -> list[str]:
        def run() -> list[str]:
            with self._locked(exclusive=False):
                names = []
                for p in sorted((self.root / _file(namespace)).glob("*.jsonl")):
                    with open(p, "rb") as f:
                        names.append(orjson.loads(f.readline())["name"])
                return names

        return await asyncio.to_thread(run)
