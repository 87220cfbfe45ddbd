"""pydantic-ai-harness's ``MemoryStore`` (the ``Memory`` capability's notebook) on tether.

The notebook lives in one scope (``app`` unless told otherwise; ``user:<id>`` keeps it
per user), as tether's own long-term memory does: a file is the semantic memory of type
``memory`` whose key is its path (``content`` its text; ``null`` once deleted), so
tether's recall, history, inspector and export read it like any memory.

* a file's **version** is the id of the node that wrote it: content-addressed with its
  parents, so it never repeats, even for the same text written again after a delete;
  a write or delete names the version it expects and is checked in the transaction that
  appends it (``MemoryConflict`` otherwise, and nothing written);
* an operation's **receipt** is the resource ``pai:op:<operation id>`` (its fingerprint,
  version and whether the file existed), committed with the write: a replay returns it,
  a reused id with another fingerprint raises ``MemoryOperationConflict``. Which
  operation (and metadata, harness >= 0.60's ``write_with_metadata``) wrote the current
  version is the resource ``pai:mw:<path>``, appended only by writes that carry one;
* ``search`` is the harness's own bounded lexical search over the scope's files, or,
  with ``embedder=``, tether's recall by meaning (``tether.recall``);
* ``history(path)`` lists every version (``Store.versions``), and ``undo(path)`` writes
  the one before the current back, as a new version (nothing is rewritten).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from pydantic_ai_harness.memory import (
    MemoryConflictError,
    MemoryFile,
    MemoryMutation,
    MemoryOperation,
    MemoryOperationConflictError,
    MemorySearchMatch,
    MemorySearchResult,
)
from pydantic_ai_harness.memory import _store as harness_store

from ...core import scopes
from ...core.errors import Conflict, InvalidRequest
from ...core.graph import CausalNode, semantic_key
from ...core.messages import Embedder
from ...store import Store
from ...store.txn import Transaction, transact

__all__ = [
    "InvalidMemoryPath",
    "MemoryConflict",
    "MemoryOperationConflict",
    "MemoryVersion",
    "TetherMemoryStore",
]

_TYPE: Final = "memory"
_OP: Final = "pai:op:"
_WROTE: Final = "pai:mw:"
_HAS_METADATA: Final = "metadata" in {f.name for f in fields(MemoryFile)}


class MemoryConflict(Conflict, MemoryConflictError):
    """The file's version is not the one the write or delete expected. Nothing was
    written. The harness's ``MemoryConflictError`` and a tether ``Conflict``."""

    default_code = "memory_conflict"


class MemoryOperationConflict(Conflict, MemoryOperationConflictError):
    """An operation id was reused with another fingerprint. Nothing was written."""

    default_code = "memory_operation_conflict"


class InvalidMemoryPath(InvalidRequest, ValueError):
    """A path or prefix the harness's path rules refuse (``..``, an empty segment, a
    character outside ``[A-Za-z0-9_.-]``...), or a bound that is not positive. A
    ``ValueError``, as the harness's stores raise. Nothing was written."""

    default_code = "invalid_memory_path"


@dataclass(frozen=True, kw_only=True)
class MemoryVersion:
    """One version of a notebook file: ``content`` None is a delete."""

    version: str
    content: str | None
    created_at: str
    sequence: int


def _check_path(path: Any) -> str:
    try:
        harness_store.validate_store_path(path)
    except (ValueError, TypeError, AttributeError) as e:
        raise InvalidMemoryPath(f"invalid memory path: {path!r}", field="path") from e
    return str(path)


def _check_prefix(prefix: Any) -> str:
    try:
        harness_store.validate_store_prefix(prefix)
    except (ValueError, TypeError, AttributeError) as e:
        raise InvalidMemoryPath(f"invalid memory prefix: {prefix!r}", field="prefix") from e
    return str(prefix)


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidMemoryPath(f"{name} must be positive", field=name)


def _metadata(metadata: Mapping[str, str] | None) -> str | None:
    encode = getattr(harness_store, "encode_metadata", None)
    if encode is not None:
        try:
            out: str | None = encode(metadata)
        except (TypeError, ValueError) as e:
            raise InvalidRequest(str(e), field="metadata") from e
        return out
    if not metadata:
        return None
    return json.dumps(dict(metadata), ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _receipt(node: CausalNode | None, operation: MemoryOperation) -> MemoryMutation | None:
    if node is None:
        return None
    p = node.payload
    if p["fp"] != operation.fingerprint:
        raise MemoryOperationConflict(
            f"operation id {operation.id!r} was reused with different arguments",
            field="operation",
        )
    return MemoryMutation(version=p["v"], replayed=True, existed=p["existed"])


class TetherMemoryStore:
    """The harness's ``MemoryStore`` and ``SearchableMemoryStore`` (and, with harness
    >= 0.60, ``MetadataMemoryStore``) over one scope of a tether store."""

    def __init__(
        self,
        store: Store,
        *,
        namespace: str = "default",
        scope: str = scopes.APP,
        embedder: Embedder | None = None,
    ) -> None:
        scopes.parse(scope)
        self.store = store
        self.namespace = namespace
        self.scope = scope
        self.embedder = embedder

    @staticmethod
    def _key(path: str) -> str:
        return semantic_key(_TYPE, path)

    # -- reading ---------------------------------------------------------------------

    async def read(self, path: str, *, max_chars: int) -> MemoryFile | None:
        path = _check_path(path)
        _positive("max_chars", max_chars)
        node = await self.store.resource_head(self.namespace, self.scope, self._key(path))
        if node is None or node.payload["content"] is None:
            return None
        content: str = node.payload["content"]
        wrote = await self.store.resource_head(self.namespace, self.scope, _WROTE + path)
        w = wrote.payload if wrote is not None and wrote.payload["v"] == node.id else None
        extra: dict[str, Any] = {}
        if _HAS_METADATA:
            meta = w.get("meta") if w else None
            extra["metadata"] = json.loads(meta) if meta else None
        return MemoryFile(
            content=content[:max_chars],
            version=node.id,
            operation_id=w.get("op") if w else None,
            truncated=len(content) > max_chars,
            **extra,
        )

    async def get_operation(self, operation: MemoryOperation) -> MemoryMutation | None:
        node = await self.store.resource_head(self.namespace, self.scope, _OP + operation.id)
        return _receipt(node, operation)

    async def list_paths(self, prefix: str = "", *, limit: int) -> list[str]:
        prefix = _check_prefix(prefix)
        _positive("limit", limit)
        return (await self._files(prefix))[:limit]

    async def _files(self, prefix: str) -> list[str]:
        heads = await self.store.resource_heads(self.namespace, self.scope, self._key(prefix))
        return sorted(
            n.payload["key"] for n in heads.values() if n.payload.get("content") is not None
        )

    # -- writing ---------------------------------------------------------------------

    async def _mutate(
        self,
        path: str,
        content: str | None,
        expected_version: str | None,
        operation: MemoryOperation | None,
        metadata: str | None,
    ) -> MemoryMutation:
        key = self._key(path)
        scope = self.scope

        async def fn(txn: Transaction) -> MemoryMutation:
            if operation is not None:
                done = _receipt(await txn.resource_head(scope, _OP + operation.id), operation)
                if done is not None:
                    return done
            head = await txn.resource_head(scope, key)
            current = head.id if head is not None and head.payload["content"] is not None else None
            if current != expected_version:
                what = "written" if content is not None else "deleted"
                raise MemoryConflict(
                    f"memory path {path!r} changed before it could be {what}", field="path"
                )
            version: str | None = None
            if content is not None or current is not None:
                node = await txn.semantic(scope, _TYPE, path, content)
                version = node.id if content is not None else None
                if version is not None and (operation is not None or metadata is not None):
                    op = operation.id if operation is not None else None
                    await txn.append(
                        scope,
                        "resource",
                        {"v": version, "op": op, "meta": metadata},
                        resource_key=_WROTE + path,
                    )
            mutation = MemoryMutation(version=version, replayed=False, existed=current is not None)
            if operation is not None:
                await txn.append(
                    scope,
                    "resource",
                    {"fp": operation.fingerprint, "v": version, "existed": mutation.existed},
                    resource_key=_OP + operation.id,
                )
            return mutation

        return await transact(self.store, self.namespace, fn)

    async def write(
        self,
        path: str,
        content: str,
        *,
        expected_version: str | None,
        operation: MemoryOperation | None = None,
    ) -> MemoryMutation:
        path = _check_path(path)
        if not isinstance(content, str):
            raise InvalidRequest("a memory file's content is a string", field="content")
        return await self._mutate(path, content, expected_version, operation, None)

    async def write_with_metadata(
        self,
        path: str,
        content: str,
        *,
        expected_version: str | None,
        metadata: Mapping[str, str] | None,
        operation: MemoryOperation | None = None,
    ) -> MemoryMutation:
        path = _check_path(path)
        if not isinstance(content, str):
            raise InvalidRequest("a memory file's content is a string", field="content")
        return await self._mutate(path, content, expected_version, operation, _metadata(metadata))

    async def delete(
        self,
        path: str,
        *,
        expected_version: str | None,
        operation: MemoryOperation | None = None,
    ) -> MemoryMutation:
        path = _check_path(path)
        return await self._mutate(path, None, expected_version, operation, None)

    # -- search ------------------------------------------------------------------------

    async def search(
        self,
        prefix: str,
        query: str,
        *,
        limit: int,
        max_files: int,
        max_chars: int,
        max_file_chars: int,
    ) -> MemorySearchResult:
        prefix = _check_prefix(prefix)
        if (
            not query.split()
            or limit <= 0
            or max_files <= 0
            or max_chars <= 0
            or max_file_chars <= 0
        ):
            return MemorySearchResult(matches=[], scanned=0, truncated=False)
        if self.embedder is not None:
            return await self._recall(prefix, query, limit=limit, max_chars=max_chars)
        paths = await self._files(prefix)
        selected = paths[: max_files + 1]
        scanned = selected[:max_files]
        heads = await self.store.resource_heads(self.namespace, self.scope, self._key(prefix))
        texts = {n.payload["key"]: n.payload["content"] for n in heads.values()}
        files = [(p, texts[p][:max_file_chars]) for p in scanned]
        found = harness_store.lexical_search(
            files, query, limit=limit, max_files=max_files, max_chars=max_chars, score_prefix=prefix
        )
        if inspect.isawaitable(found):  # harness >= 0.60: a coroutine
            found = await found
        return MemorySearchResult(
            matches=found.matches,
            scanned=found.scanned,
            truncated=found.truncated
            or any(len(texts[p]) > max_file_chars for p in scanned)
            or len(selected) > max_files,
        )

    async def _recall(
        self, prefix: str, query: str, *, limit: int, max_chars: int
    ) -> MemorySearchResult:
        from ...projections.recall_index import recall

        assert self.embedder is not None
        hits = await recall(
            self.store,
            self.namespace,
            self.scope,
            query,
            embedder=self.embedder,
            k=min(limit, 1000),
            types=_TYPE,
            key_prefix=prefix or None,
        )
        matches: list[MemorySearchMatch] = []
        left = max_chars
        truncated = False
        for h in hits:
            if not isinstance(h.content, str):
                continue
            room = left - len(h.key)
            if room <= 0:
                truncated = True
                break
            snippet = h.content[:room]
            matches.append(MemorySearchMatch(path=h.key, snippet=snippet, score=h.score))
            left -= len(h.key) + len(snippet)
        return MemorySearchResult(matches=matches, scanned=len(hits), truncated=truncated)

    # -- tether's history ----------------------------------------------------------------

    async def history(self, path: str, *, limit: int = 1000) -> list[MemoryVersion]:
        """Every version of ``path``, oldest first (deletes included, ``content`` None)."""
        path = _check_path(path)
        nodes = await self.store.versions(self.namespace, self.scope, self._key(path), limit=limit)
        return [
            MemoryVersion(
                version=n.id,
                content=n.payload["content"],
                created_at=n.created_at,
                sequence=n.sequence,
            )
            for n in nodes
        ]

    async def undo(self, path: str, *, expected_version: str | None) -> MemoryMutation:
        """Put back the version before the current one (a delete, if the file was new),
        as a new version: the undone one stays in the history. Checked like a write."""
        path = _check_path(path)
        versions = await self.history(path)
        if len(versions) < 1:
            raise InvalidRequest(f"memory path {path!r} has no history to undo", field="path")
        before = versions[-2].content if len(versions) >= 2 else None
        return await self._mutate(path, before, expected_version, None, None)
