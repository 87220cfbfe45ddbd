"""Where wrapped data keys live: a small table beside the store's own tables.

The key table holds, per namespace, one row per data key: its owner (``user:<id>``
or ``namespace``), a random 16-byte id, the id of the master key that wraps it, and
the wrapped bytes, which erasure replaces by nothing (a tombstone keeps the id, so
reading an erased payload reports ``KeyErased`` rather than an unknown key). Beside
it: the key-check values (one per master key that may open the store) and the
thread -> user bindings that make a user's threads erasable with the user.

``KeyStore`` is the contract; each backend hands out its own through the ``Store``
contract (``Store.keystore()``; implementations in ``tether.store._<backend>_keys``). All key logic (wrapping, caching,
rotation) stays in ``Keyring``; a key store only reads and writes rows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace

NAMESPACE_OWNER = "namespace"


@dataclass(frozen=True, kw_only=True, slots=True)
class WrappedKey:
    """One row of the key table. ``wrapped is None`` means the key was erased."""

    namespace: str
    owner: str
    key_id: bytes
    master_id: str
    wrapped: bytes | None
    created_at: str
    erased_at: str | None = None

    @property
    def erased(self) -> bool:
        return self.wrapped is None


class KeyStore(ABC):
    """Rows of the key table. Every method is one short transaction of its own."""

    @abstractmethod
    async def checks(self) -> dict[str, bytes]:
        """master id -> key-check value. ``{}`` when nothing was ever registered (no write)."""

    @abstractmethod
    async def add_check(self, master_id: str, value: bytes, *, only_if_empty: bool) -> bool:
        """Register a master key. With ``only_if_empty``, only if no master is registered
        (atomically: two processes opening a fresh store with different keys cannot both win).
        Returns whether the row is now there with this value's master id."""

    @abstractmethod
    async def remove_checks(self, *, keep: str) -> list[str]:
        """Forget every master but ``keep`` (after a rotation); return the ids removed."""

    @abstractmethod
    async def load(
        self, namespace: str, owner: str, *, thread: str | None = None
    ) -> tuple[str | None, list[WrappedKey]]:
        """Every row (live and erased) of ``owner``; with ``thread``, also that thread's
        bound user (returned first) and every row of that user."""

    @abstractmethod
    async def by_ids(self, namespace: str, key_ids: Sequence[bytes]) -> list[WrappedKey]:
        """The rows with these ids (missing ids are left out)."""

    @abstractmethod
    async def insert(self, key: WrappedKey) -> WrappedKey:
        """Add a live key unless the owner already has one; return the owner's live key."""

    @abstractmethod
    async def erase(self, namespace: str, owner: str, *, erased_at: str) -> list[bytes]:
        """Destroy the owner's live wrapped key(s), keeping tombstones; return their ids."""

    @abstractmethod
    async def rewrap(self, key: WrappedKey, *, wrapped: bytes, master_id: str) -> bool:
        """Replace a live key's wrapping if it is still wrapped under ``key.master_id``."""

    @abstractmethod
    def wrapped_elsewhere(self, master_id: str) -> AsyncIterator[WrappedKey]:
        """Stream every live key wrapped under a master other than ``master_id`` (rotation).

        Rows may be rewrapped while the stream runs; each row is yielded at most once.
        """

    @abstractmethod
    async def bind(self, namespace: str, thread: str, user: str) -> str:
        """Bind a thread to a user unless already bound; return the bound user."""

    @abstractmethod
    async def count_threads(self, namespace: str, user: str) -> int:
        """How many threads are bound to the user."""

    async def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release the connection."""


class MemoryKeyStore(KeyStore):
    """The key table of a ``memory://`` store (and the reference for the others)."""

    def __init__(self) -> None:
        self._checks: dict[str, bytes] = {}
        self._keys: dict[bytes, WrappedKey] = {}
        self._live: dict[tuple[str, str], bytes] = {}
        self._by_owner: dict[tuple[str, str], list[bytes]] = {}
        self._threads: dict[tuple[str, str], str] = {}

    async def checks(self) -> dict[str, bytes]:
        return dict(self._checks)

    async def add_check(self, master_id: str, value: bytes, *, only_if_empty: bool) -> bool:
        if only_if_empty and self._checks:
            return master_id in self._checks
        self._checks.setdefault(master_id, value)
        return True

    async def remove_checks(self, *, keep: str) -> list[str]:
        gone = [m for m in self._checks if m != keep]
        for m in gone:
            del self._checks[m]
        return gone

    async def load(
        self, namespace: str, owner: str, *, thread: str | None = None
    ) -> tuple[str | None, list[WrappedKey]]:
        bound = self._threads.get((namespace, thread)) if thread is not None else None
        owners = [owner] if bound is None else [owner, "user:" + bound]
        out = [self._keys[k] for o in owners for k in self._by_owner.get((namespace, o), [])]
        return bound, out

    async def by_ids(self, namespace: str, key_ids: Sequence[bytes]) -> list[WrappedKey]:
        return [
            self._keys[k]
            for k in key_ids
            if k in self._keys and self._keys[k].namespace == namespace
        ]

    async def insert(self, key: WrappedKey) -> WrappedKey:
        live = self._live.get((key.namespace, key.owner))
        if live is not None:
            return self._keys[live]
        self._keys[key.key_id] = key
        self._live[(key.namespace, key.owner)] = key.key_id
        self._by_owner.setdefault((key.namespace, key.owner), []).append(key.key_id)
        return key

    async def erase(self, namespace: str, owner: str, *, erased_at: str) -> list[bytes]:
        live = self._live.pop((namespace, owner), None)
        if live is None:
            return []
        self._keys[live] = replace(self._keys[live], wrapped=None, erased_at=erased_at)
        return [live]

    async def rewrap(self, key: WrappedKey, *, wrapped: bytes, master_id: str) -> bool:
        cur = self._keys.get(key.key_id)
        if cur is None or cur.wrapped is None or cur.master_id != key.master_id:
            return False
        self._keys[key.key_id] = replace(cur, wrapped=wrapped, master_id=master_id)
        return True

    async def wrapped_elsewhere(self, master_id: str) -> AsyncIterator[WrappedKey]:
        for k in list(self._keys.values()):
            if k.wrapped is not None and k.master_id != master_id:
                yield k

    async def bind(self, namespace: str, thread: str, user: str) -> str:
        return self._threads.setdefault((namespace, thread), user)

    async def count_threads(self, namespace: str, user: str) -> int:
        return sum(1 for (ns, _), u in self._threads.items() if ns == namespace and u == user)
