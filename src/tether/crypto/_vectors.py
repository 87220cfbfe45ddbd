"""The recall index of an encrypted store, kept in the backend's table with every vector sealed.

``open_store(url, cipher=Cipher(masters=(key,), recall_index="encrypted"))`` (or
``TETHER_RECALL_INDEX=encrypted`` beside ``TETHER_MASTER_KEY`` for the CLI and the
server) keeps the index where a plaintext store keeps it (SQLite ``tether_recall_*``
tables, PostgreSQL tables in the store's schema, Redis hashes), so a restart or
another process finds it instead of embedding every memory again. The default,
``recall_index="process"``, keeps it out of the store (``MemoryVectorTable``).

Each row's vector is sealed like a payload: AES-256-GCM under the data key of the
scope's owner (a user, the user a thread is bound to, or the namespace), in the
payload envelope (``_envelope``: magic, version, key id, nonce, ciphertext and tag,
46 bytes over the 4 bytes a dimension). The associated data binds the namespace,
scope, embedding space, resource key and node id, so a row moved to another key,
scope, space or database, or altered by one bit, fails with ``CipherError`` code
``decrypt_failed``, never a wrong hit. Erasing a user (destroying the key) makes
every row of theirs unreadable, here and in any copy; rows met under a destroyed
key are deleted and never found.

What stays in clear is what the node table shows already: namespace, scope, resource
key (``semantic:<type>:<key>``), node id; plus the space (the embedder's name), the
mark, and how many rows and bytes a scope has. The content and its meaning (the
vector) are sealed.

Searching: the scope's rows are read and opened into a ``HeldVectors`` matrix in this
process (held while the scope's mark does not move; writes through this table move it
in place) and scanned exactly there. sqlite-vec, pgvector or a search module cannot
search ciphertext, so they are never used on these rows.
"""

from __future__ import annotations

import secrets
import struct
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..core.erased import erased_placeholders
from ..store.vectors import HeldVectors, Mark, VectorEntry, VectorHit, VectorTable
from ._envelope import _PREFIX, HEADER_BYTES, KEY_ID_BYTES, NONCE_BYTES, key_id_of
from ._keyring import KeyNotLoaded, Keyring
from ._master import invalid_tag
from .errors import CipherError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["EncryptedVectorTable"]

_AAD_TAG = b"tether recall v1"
_Part = tuple[str, str, str]


def _field(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">I", len(raw)) + raw


def associated_data(
    namespace: str, scope: str, space: str, key: str, node: str, key_id: bytes
) -> bytes:
    return (
        _AAD_TAG
        + _field(namespace)
        + _field(scope)
        + _field(space)
        + _field(key)
        + _field(node)
        + key_id
    )


def seal_vector(
    aead: AESGCM, key_id: bytes, namespace: str, scope: str, space: str, entry: VectorEntry
) -> bytes:
    nonce = secrets.token_bytes(NONCE_BYTES)
    aad = associated_data(namespace, scope, space, entry.key, entry.node, key_id)
    return _PREFIX + key_id + nonce + aead.encrypt(nonce, entry.vector, aad)


class EncryptedVectorTable(VectorTable):
    """``inner`` (the backend's table) holding sealed vectors; ``keyring`` the store's."""

    engine = "scan"  # ciphertext: no search in the database

    def __init__(self, inner: VectorTable, keyring: Keyring) -> None:
        self.inner = inner
        self.keyring = keyring
        self._invalid_tag = invalid_tag()
        # part -> (its vectors at a mark, the data key ids they were sealed with)
        self._held: OrderedDict[_Part, tuple[HeldVectors, frozenset[bytes]]] = OrderedDict()
        self._limit = 64  # parts held at once, least recently searched evicted first

    async def mark(self, namespace: str, scope: str, space: str) -> Mark | None:
        return await self.inner.mark(namespace, scope, space)

    async def apply(
        self,
        namespace: str,
        scope: str,
        space: str,
        *,
        upserts: Sequence[VectorEntry],
        deletes: Sequence[str],
        mark: Mark,
        replace: bool = False,
    ) -> None:
        sealed: list[VectorEntry] = []
        key_id = b""
        if upserts:
            await self.keyring.ensure(namespace, scope, create=True)
            key_id, aead = self.keyring.write_key(namespace, scope)
            sealed = [
                VectorEntry(
                    key=e.key,
                    node=e.node,
                    vector=seal_vector(aead, key_id, namespace, scope, space, e),
                )
                for e in upserts
            ]
        part = (namespace, scope, space)
        before = await self.inner.mark(namespace, scope, space)
        await self.inner.apply(
            namespace, scope, space, upserts=sealed, deletes=deletes, mark=mark, replace=replace
        )
        held = self._held.pop(part, None)
        if held is not None and not replace and held[0].mark == before:
            held[0].apply(upserts, deletes, mark)
            self._held[part] = (held[0], held[1] | ({key_id} if key_id else set()))

    async def _open(self, part: _Part) -> tuple[HeldVectors, frozenset[bytes]] | None:
        """Read and open the part's rows at one mark (None: no index). Rows under a
        destroyed key are deleted; any other failure is a ``CipherError``."""
        namespace, scope, space = part
        await self.keyring.ensure(namespace, scope, create=False)
        for _ in range(8):
            mark = await self.inner.mark(*part)
            if mark is None:
                return None
            rows = await self.inner.entries(*part)
            if await self.inner.mark(*part) == mark:
                break
        else:
            raise CipherError(
                f"the recall index of {namespace}/{scope} kept changing while reading; try again",
                code="key_churn",
            )
        opened: list[tuple[str, str, bytes]] = []
        erased: list[str] = []
        used: set[bytes] = set()
        for key in sorted(rows):
            e = rows[key]
            data = bytes(e.vector)
            kid = key_id_of(data)  # NotEncrypted for a plaintext row
            aead = self._read_key(namespace, scope, kid)
            if aead is None:
                erased.append(key)
                continue
            try:
                vector = aead.decrypt(
                    data[2 + KEY_ID_BYTES : HEADER_BYTES],
                    data[HEADER_BYTES:],
                    associated_data(namespace, scope, space, e.key, e.node, kid),
                )
            except self._invalid_tag as err:
                raise CipherError(
                    f"a recall vector of {namespace}/{scope} ({e.key}) failed authentication: "
                    "it was altered, or moved from another key, scope or database",
                    code="decrypt_failed",
                    namespace=namespace,
                    scope=scope,
                ) from err
            used.add(kid)
            opened.append((e.key, e.node, vector))
        if erased:  # erased memories are never found; their rows go
            await self.inner.apply(
                namespace, scope, space, upserts=[], deletes=erased, mark=mark, replace=False
            )
        return HeldVectors(mark, opened), frozenset(used)

    def _read_key(self, namespace: str, scope: str, key_id: bytes) -> AESGCM | None:
        """The key of a row, None if it was destroyed; loads keys it has not seen."""
        with erased_placeholders():
            try:
                return self.keyring.read_key(namespace, scope, key_id)
            except KeyNotLoaded:
                pass
        raise _Unloaded(key_id)

    async def _part(self, part: _Part) -> tuple[HeldVectors, frozenset[bytes]] | None:
        for _ in range(64):
            try:
                return await self._open(part)
            except _Unloaded as u:
                await self.keyring.fetch(part[0], [u.key_id])
        raise CipherError(
            f"data keys of {part[0]}/{part[1]} kept changing while reading; try again",
            code="key_churn",
        )

    def _live(self, part: _Part, key_ids: frozenset[bytes]) -> bool:
        try:
            return all(self._read_key(part[0], part[1], k) is not None for k in key_ids)
        except _Unloaded:
            return False

    async def search(
        self,
        namespace: str,
        scope: str,
        space: str,
        query: bytes,
        *,
        k: int,
        where: Callable[[str], bool] | None = None,
    ) -> list[VectorHit]:
        part = (namespace, scope, space)
        if k < 1:
            return []
        mark = await self.inner.mark(namespace, scope, space)
        if mark is None:
            self._held.pop(part, None)
            return []
        # the key table as of now (cache_ttl): an erasure by another process counts
        await self.keyring.ensure(namespace, scope, create=False)
        held = self._held.get(part)
        if held is None or held[0].mark != mark or not self._live(part, held[1]):
            self._held.pop(part, None)
            held = await self._part(part)
            if held is None:
                return []
            self._held[part] = held
            while len(self._held) > self._limit:
                self._held.popitem(last=False)
        self._held.move_to_end(part)
        return held[0].search(query, k=k, where=where)

    async def entries(self, namespace: str, scope: str, space: str) -> dict[str, VectorEntry]:
        held = await self._part((namespace, scope, space))
        return {} if held is None else held[0].entries()

    async def drop(self, namespace: str, scope: str | None = None) -> int:
        for p in [p for p in self._held if p[0] == namespace and scope in (None, p[1])]:
            del self._held[p]
        return await self.inner.drop(namespace, scope)

    async def indexed(self, namespace: str) -> list[tuple[str, str]]:
        return await self.inner.indexed(namespace)

    async def close(self) -> None:
        self._held.clear()
        await self.inner.close()


class _Unloaded(Exception):
    def __init__(self, key_id: bytes) -> None:
        super().__init__(key_id.hex())
        self.key_id = key_id
