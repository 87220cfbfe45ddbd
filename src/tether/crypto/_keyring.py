"""The keyring: master keys, data keys, and the in-process cache of unwrapped keys.

Envelope encryption: each (namespace, user) has its own data key, and each
namespace has one more for its app scope and every thread not bound to a user.
Data keys are random 256-bit AES-GCM keys, stored only wrapped by a master key
(``KeyStore`` rows); unwrapped keys live in this process's memory.

Which key encrypts a scope:

    user:<id>      that user's key
    thread:<id>    the bound user's key if the thread was bound (``bind_thread``)
                   before its first write, else the namespace key
    anything else  the namespace key (``app``)

The codec is synchronous (it runs inside a backend's commit), so every store
operation first calls ``ensure`` (async: loads, unwraps or creates the keys the
scope needs); ``write_key``/``read_key`` then answer from memory. ``ensure``
revalidates against the key table at most every ``cache_ttl`` seconds (default 0:
on every operation, so an erasure made by another process is seen at once).
"""

from __future__ import annotations

import secrets
import struct
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..core.erased import (
    placeholders_mode,
)
from ..core.graph import now_iso
from ..store.base import Store, check_name
from ..store.keys import NAMESPACE_OWNER, KeyStore, WrappedKey
from ._envelope import KEY_ID_BYTES
from ._master import KEY_BYTES, MasterKeyProvider, aesgcm
from .errors import CipherError, KeyErased, MissingKey, NotEncrypted, WrongKey

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

OnErased = Literal["raise", "placeholder"]
CHECK_PLAINTEXT = b"tether key check v1 " + bytes(12)
CHECK_CONTEXT = b"tether key check v1"


class KeyNotLoaded(CipherError):
    """Internal: a payload names a data key this process has not loaded yet.

    The encrypted store catches it, loads the key and repeats the read; it never
    reaches a caller of the encrypted store.
    """

    code = "key_not_loaded"
    default_code = "key_not_loaded"

    @property
    def key_ids(self) -> list[bytes]:
        v = self.details.get("key_ids")
        return [bytes.fromhex(k) for k in v] if isinstance(v, list) else []


@dataclass(frozen=True, kw_only=True, slots=True)
class ErasureReport:
    """What ``erase_user`` destroyed."""

    namespace: str
    user: str
    keys_destroyed: int
    key_ids: tuple[str, ...]
    threads: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "erasure",
            "namespace": self.namespace,
            "user": self.user,
            "keysDestroyed": self.keys_destroyed,
            "keyIds": list(self.key_ids),
            "threads": self.threads,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ErasureReport:
        return cls(
            namespace=str(d["namespace"]),
            user=str(d["user"]),
            keys_destroyed=int(d["keysDestroyed"]),
            key_ids=tuple(str(k) for k in d["keyIds"]),
            threads=int(d["threads"]),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class RotationReport:
    """What ``rotate`` did: every live data key is now wrapped under ``master_id``."""

    master_id: str
    rewrapped: int
    retired: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "rotation",
            "masterId": self.master_id,
            "rewrapped": self.rewrapped,
            "retired": list(self.retired),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RotationReport:
        return cls(
            master_id=str(d["masterId"]),
            rewrapped=int(d["rewrapped"]),
            retired=tuple(str(m) for m in d["retired"]),
        )


@dataclass(slots=True)
class _Key:
    namespace: str
    owner: str
    aead: AESGCM | None  # None: erased (or no such key: ``unknown``)
    unknown: bool = False


@dataclass(frozen=True, slots=True)
class _View:
    owner: str
    key_id: bytes | None
    aead: AESGCM | None
    loaded_at: float


def _field(value: str) -> bytes:
    b = value.encode()
    return struct.pack(">I", len(b)) + b


def wrap_context(namespace: str, owner: str, key_id: bytes) -> bytes:
    """Associated data of a wrapped data key: a row copied to another owner won't unwrap."""
    return b"tether data key v1" + _field(namespace) + _field(owner) + key_id


def scope_owner(scope: str) -> tuple[str, str | None]:
    """(owner of the scope's own key, thread id if the scope is a thread)."""
    if scope.startswith("user:") and len(scope) > 5:
        return scope, None
    if scope.startswith("thread:") and len(scope) > 7:
        return NAMESPACE_OWNER, scope[7:]
    return NAMESPACE_OWNER, None


K = TypeVar("K")
V = TypeVar("V")


class _LRU(OrderedDict[K, V]):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def put(self, key: K, value: V) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


class Keyring:
    """Master keys (the first is primary: it wraps new data keys) and the data-key cache.

    Build one with ``await Keyring.open(keystore, masters)``; it checks the masters
    against the store's key-check values before anything is written.
    """

    def __init__(
        self,
        keystore: KeyStore,
        masters: Sequence[MasterKeyProvider],
        *,
        cache_ttl: float = 0.0,
        on_erased: OnErased = "raise",
        cache_size: int = 65536,
    ) -> None:
        if not masters:
            raise MissingKey("give at least one master key (MasterKey.from_env(), a file or a KMS)")
        if on_erased not in ("raise", "placeholder"):
            raise CipherError(
                f"on_erased is 'raise' or 'placeholder', got {on_erased!r}", code="invalid_request"
            )
        if cache_ttl < 0:
            raise CipherError("cache_ttl is a number of seconds >= 0", code="invalid_request")
        self.keystore = keystore
        self._masters: dict[str, MasterKeyProvider] = {}
        for m in masters:
            if not isinstance(m, MasterKeyProvider):
                raise CipherError(
                    f"{type(m).__name__} is not a master key: use MasterKey or a MasterKeyProvider",
                    code="invalid_request",
                )
            self._masters.setdefault(m.key_id, m)
        self.primary: MasterKeyProvider = masters[0]
        self.cache_ttl = float(cache_ttl)
        self.on_erased: OnErased = on_erased
        self._keys: _LRU[bytes, _Key] = _LRU(cache_size)
        self._views: _LRU[tuple[str, str], _View] = _LRU(cache_size)
        self._bound: _LRU[tuple[str, str], str] = _LRU(cache_size)  # (namespace, thread) -> user

    # -- opening --------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        keystore: KeyStore,
        masters: Sequence[MasterKeyProvider],
        *,
        store: Store | None = None,
        cache_ttl: float = 0.0,
        on_erased: OnErased = "raise",
    ) -> Keyring:
        """Check the masters against the store, registering the primary on a fresh store.

        Raises ``WrongKey`` if no given master opens the store, and ``NotEncrypted``
        if ``store`` already holds unencrypted data; in both cases nothing is written.
        """
        ring = cls(keystore, masters, cache_ttl=cache_ttl, on_erased=on_erased)
        checks = await keystore.checks()
        if not checks:
            if store is not None and await store.list_namespaces(limit=1):
                raise NotEncrypted(
                    "this store already holds unencrypted data, so it cannot be opened with a "
                    "cipher: export it, then import the snapshot into a new encrypted store"
                )
            value = await ring.primary.wrap(CHECK_PLAINTEXT, CHECK_CONTEXT)
            if await keystore.add_check(ring.primary.key_id, value, only_if_empty=True):
                return ring
            checks = await keystore.checks()  # another process registered first: verify
        await ring._verify(checks)
        if ring.primary.key_id not in checks:
            # A new primary beside a registered one (a rotation starting): register it
            # so that data keys it wraps can be opened by it alone later.
            value = await ring.primary.wrap(CHECK_PLAINTEXT, CHECK_CONTEXT)
            await keystore.add_check(ring.primary.key_id, value, only_if_empty=False)
        return ring

    async def _verify(self, checks: dict[str, bytes]) -> None:
        matched = False
        for mid, master in self._masters.items():
            value = checks.get(mid)
            if value is None:
                continue
            try:
                ok = await master.unwrap(value, CHECK_CONTEXT) == CHECK_PLAINTEXT
            except CipherError:
                ok = False
            if not ok:
                raise WrongKey(
                    f"master key {mid} does not match the key registered under that id; "
                    "check the key's source (environment variable, file or KMS key)",
                    master_id=mid,
                )
            matched = True
        if not matched:
            raise WrongKey(
                f"none of the given master keys ({', '.join(self._masters)}) opens this store; "
                f"it is encrypted under {', '.join(sorted(checks))}. Give that key (during a "
                "rotation, give the new key first and the old one after it)",
                given=list(self._masters),
                expected=sorted(checks),
            )

    # -- keys for one scope -------------------------------------------------------------

    async def ensure(self, namespace: str, scope: str, *, create: bool) -> None:
        """Load (and with ``create``, make) the keys the scope needs, unless fresh enough."""
        view = self._views.get((namespace, scope))
        now = time.monotonic()
        if (
            view is not None
            and now - view.loaded_at <= self.cache_ttl
            and (view.key_id is not None or not create)
        ):
            return
        check_name("namespace", namespace)
        check_name("scope", scope)
        base, thread = scope_owner(scope)
        bound, rows = await self.keystore.load(namespace, base, thread=thread)
        if thread is not None and bound is not None:
            self._bound.put((namespace, thread), bound)
        owner = "user:" + bound if bound is not None else base
        live: WrappedKey | None = None
        for row in rows:
            await self._learn(row)
            if row.owner == owner and row.wrapped is not None:
                live = row
        if live is None and create:
            live = await self._create(namespace, owner)
        key = self._keys.get(live.key_id) if live is not None else None
        self._views.put(
            (namespace, scope),
            _View(
                owner=owner,
                key_id=live.key_id if live is not None else None,
                aead=key.aead if key is not None else None,
                loaded_at=now,
            ),
        )

    async def _learn(self, row: WrappedKey) -> None:
        if row.wrapped is None:
            self._keys.put(row.key_id, _Key(row.namespace, row.owner, None))
            return
        known = self._keys.get(row.key_id)
        if known is not None and known.aead is not None:
            self._keys.move_to_end(row.key_id)
            return
        self._keys.put(row.key_id, _Key(row.namespace, row.owner, await self._unwrap(row)))

    async def _unwrap(self, row: WrappedKey) -> AESGCM:
        assert row.wrapped is not None
        master = self._masters.get(row.master_id)
        if master is None:
            raise WrongKey(
                f"the data key of {row.owner} in namespace {row.namespace!r} is wrapped under "
                f"master key {row.master_id}, which this process was not given (the store's "
                "master key was rotated?): give that key",
                namespace=row.namespace,
                owner=row.owner,
                master_id=row.master_id,
            )
        raw = await master.unwrap(row.wrapped, wrap_context(row.namespace, row.owner, row.key_id))
        if len(raw) != KEY_BYTES:
            raise WrongKey(f"master key {row.master_id} unwrapped a key of the wrong size")
        return aesgcm(raw)

    async def _create(self, namespace: str, owner: str) -> WrappedKey:
        raw = secrets.token_bytes(KEY_BYTES)
        key_id = secrets.token_bytes(KEY_ID_BYTES)
        row = WrappedKey(
            namespace=namespace,
            owner=owner,
            key_id=key_id,
            master_id=self.primary.key_id,
            wrapped=await self.primary.wrap(raw, wrap_context(namespace, owner, key_id)),
            created_at=now_iso(),
        )
        won = await self.keystore.insert(row)
        if won.key_id == key_id:
            self._keys.put(key_id, _Key(namespace, owner, aesgcm(raw)))
        else:  # another writer created the owner's key first: use theirs
            await self._learn(won)
        return won

    async def fetch(self, namespace: str, key_ids: Sequence[bytes]) -> None:
        """Load keys named by payloads (``KeyNotLoaded``); unknown ids are remembered as such."""
        rows = {r.key_id: r for r in await self.keystore.by_ids(namespace, key_ids)}
        for kid in key_ids:
            row = rows.get(kid)
            if row is None:
                self._keys.put(kid, _Key(namespace, "", None, unknown=True))
            else:
                await self._learn(row)

    # -- the codec's synchronous side ----------------------------------------------------

    def write_key(self, namespace: str, scope: str) -> tuple[bytes, AESGCM]:
        view = self._views.get((namespace, scope))
        if view is None or view.key_id is None or view.aead is None:
            raise CipherError(
                f"no data key is loaded for {namespace}/{scope}: write through the store that "
                "open_store(..., cipher=...) returned, not through the backend underneath",
                code="cipher_unprepared",
                namespace=namespace,
                scope=scope,
            )
        return view.key_id, view.aead

    def read_key(self, namespace: str, scope: str, key_id: bytes) -> AESGCM | None:
        """The key to decrypt with; ``None`` means show the erased placeholder."""
        key = self._keys.get(key_id)
        if key is None:
            raise KeyNotLoaded(
                f"data key {key_id.hex()} is not loaded", key_ids=[key_id.hex()], scope=scope
            )
        if key.aead is not None and key.namespace == namespace:
            return key.aead
        if key.unknown or key.namespace != namespace:
            raise CipherError(
                f"a payload of {namespace}/{scope} names data key {key_id.hex()}, which this "
                "namespace does not hold (copied from another database?)",
                code="unknown_key",
                namespace=namespace,
                scope=scope,
                key_id=key_id.hex(),
            )
        mode = placeholders_mode()
        if mode is None:
            mode = self.on_erased == "placeholder"
        if mode:
            return None
        raise KeyErased(
            f"this payload of {namespace}/{scope} was erased: the data key of {key.owner} was "
            "destroyed. The node's id, kind and parents remain; its payload cannot be recovered",
            namespace=namespace,
            scope=scope,
            owner=key.owner,
            key_id=key_id.hex(),
        )

    # -- threads, erasure, rotation ----------------------------------------------------------

    def bound_user(self, namespace: str, thread: str) -> str | None:
        return self._bound.get((namespace, thread))

    async def binding(self, namespace: str, thread: str) -> str | None:
        bound, _ = await self.keystore.load(namespace, NAMESPACE_OWNER, thread=thread)
        if bound is not None:
            self._bound.put((namespace, thread), bound)
        return bound

    async def bind(self, namespace: str, thread: str, user: str) -> str:
        bound = await self.keystore.bind(namespace, thread, user)
        self._bound.put((namespace, thread), bound)
        self._views.pop((namespace, "thread:" + thread), None)
        return bound

    async def erase_user(self, namespace: str, user: str) -> ErasureReport:
        owner = "user:" + user
        erased = await self.keystore.erase(namespace, owner, erased_at=now_iso())
        for kid in erased:
            self._keys.put(kid, _Key(namespace, owner, None))
        # Drop every cached view that encrypted with this owner's key (user and bound threads).
        for k in [k for k, v in self._views.items() if k[0] == namespace and v.owner == owner]:
            del self._views[k]
        return ErasureReport(
            namespace=namespace,
            user=user,
            keys_destroyed=len(erased),
            key_ids=tuple(k.hex() for k in erased),
            threads=await self.keystore.count_threads(namespace, user),
        )

    async def rotate(
        self, new: MasterKeyProvider | None = None, *, old: Sequence[MasterKeyProvider] = ()
    ) -> RotationReport:
        """Rewrap every live data key under ``new`` (default: the primary); payloads untouched.

        Safe to interrupt and repeat: each row is rewrapped with a compare-and-set,
        and the old masters are forgotten only once nothing is wrapped under them.
        """
        checks = await self.keystore.checks()
        for m in old:
            self._masters.setdefault(m.key_id, m)
        if new is not None:
            self._masters = {new.key_id: new, **self._masters}
            self.primary = new
        await self._verify(checks)
        target = self.primary
        if target.key_id not in checks:
            value = await target.wrap(CHECK_PLAINTEXT, CHECK_CONTEXT)
            await self.keystore.add_check(target.key_id, value, only_if_empty=False)
        count = await self._rewrap_all(target)
        retired = await self.keystore.remove_checks(keep=target.key_id)
        # A writer that still had the old primary may have added a key meanwhile.
        count += await self._rewrap_all(target)
        return RotationReport(master_id=target.key_id, rewrapped=count, retired=tuple(retired))

    async def _rewrap_all(self, target: MasterKeyProvider) -> int:
        count = 0
        async for row in self.keystore.wrapped_elsewhere(target.key_id):
            assert row.wrapped is not None
            master = self._masters.get(row.master_id)
            if master is None:
                raise WrongKey(
                    f"cannot rotate: a data key is wrapped under master key {row.master_id}, "
                    "which was not given; pass it in old=[...]",
                    master_id=row.master_id,
                )
            ctx = wrap_context(row.namespace, row.owner, row.key_id)
            raw = await master.unwrap(row.wrapped, ctx)
            # Compare-and-set: a row erased or rewrapped meanwhile is left as it is.
            if await self.keystore.rewrap(
                row, wrapped=await target.wrap(raw, ctx), master_id=target.key_id
            ):
                count += 1
        return count

    async def close(self) -> None:
        self._keys.clear()
        self._views.clear()
        await self.keystore.close()
