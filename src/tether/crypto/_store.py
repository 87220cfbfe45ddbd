"""The encrypted store: any backend, its payloads sealed by ``CipherCodec``.

``EncryptedStore`` wraps a backend and implements the same ``Store`` contract.
Before each operation that encodes or decodes payloads it lets the keyring load
(or create) the keys of the scope involved, because the codec itself is
synchronous and cannot reach the key table; everything else passes straight
through. Node ids, kinds, parents, sequences, timestamps and resource keys are
the backend's business as before (see docs/encryption.md for what that reveals).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from ..core import scopes
from ..core.errors import StoreError
from ..core.graph import CausalNode
from ..store import set_cipher_hook
from ..store.base import (
    Head,
    ScopeInfo,
    ScopeStats,
    ScopeWrite,
    Store,
    check_name,
)
from ..store.keys import KeyStore
from ..store.vectors import VectorTable
from ._codec import CipherCodec
from ._envelope import key_id_of
from ._keyring import ErasureReport, KeyNotLoaded, Keyring, OnErased, RotationReport
from ._master import ENV_VAR, MasterKey, MasterKeyProvider
from .errors import CipherError

T = TypeVar("T")

OLD_ENV_VAR = "TETHER_MASTER_KEY_OLD"
RECALL_ENV_VAR = "TETHER_RECALL_INDEX"
RecallIndex = Literal["process", "encrypted"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Cipher:
    """How to encrypt a store: the master keys (primary first) and two options.

    ``cache_ttl``: seconds an unwrapped key is trusted before the key table is read
    again (0: every operation, so erasures by other processes apply at once).
    ``on_erased``: ``"raise"`` (``KeyErased``) or ``"placeholder"`` (``{"$erased": true}``).
    ``recall_index``: where the recall index lives (docs/encryption.md says what each
    reveals): ``"process"`` (the default) out of the store, rebuilt by each process;
    ``"encrypted"`` in the backend's table, every vector sealed under its scope's
    data key (``tether.crypto._vectors``).
    """

    masters: tuple[MasterKeyProvider, ...]
    cache_ttl: float = 0.0
    on_erased: OnErased = "raise"
    recall_index: RecallIndex = "process"

    @classmethod
    def of(cls, value: Cipher | MasterKeyProvider | Sequence[MasterKeyProvider]) -> Cipher:
        """Accept what ``open_store(cipher=...)`` accepts: a key, keys, or a Cipher."""
        if isinstance(value, Cipher):
            return value
        if isinstance(value, MasterKeyProvider):
            return cls(masters=(value,))
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            return cls(masters=tuple(value))
        raise CipherError(
            f"cipher= takes a MasterKey, a MasterKeyProvider, a list of them or a Cipher, "
            f"got {type(value).__name__}",
            code="invalid_request",
        )


def cipher_from_env(environ: Mapping[str, str] | None = None) -> Cipher | None:
    """The cipher the environment asks for, or None when no master key is configured.

    ``TETHER_MASTER_KEY`` (base64) or ``TETHER_MASTER_KEY_FILE`` (a path) is the
    primary; ``TETHER_MASTER_KEY_OLD`` / ``TETHER_MASTER_KEY_OLD_FILE``, if set, is
    the previous key, still accepted for reading during a rotation.
    ``TETHER_RECALL_INDEX`` (``process`` or ``encrypted``) is ``Cipher.recall_index``.
    For the CLI and the HTTP server, which take their configuration from the environment.
    """
    env = os.environ if environ is None else environ
    masters: list[MasterKeyProvider] = []
    for var in (ENV_VAR, OLD_ENV_VAR):
        if env.get(var, "").strip():
            masters.append(MasterKey.from_base64(env[var]))
        elif env.get(var + "_FILE", "").strip():
            masters.append(MasterKey.from_file(env[var + "_FILE"].strip()))
        elif var == ENV_VAR:
            return None
    recall_index = env.get(RECALL_ENV_VAR, "").strip() or "process"
    if recall_index not in ("process", "encrypted"):
        raise CipherError(
            f"{RECALL_ENV_VAR} is 'process' or 'encrypted', got {recall_index!r}",
            code="invalid_request",
        )
    return Cipher(masters=tuple(masters), recall_index=recall_index)  # type: ignore[arg-type]


class EncryptedStore(Store):
    """A backend whose payloads are encrypted; the ``Store`` contract is unchanged."""

    def __init__(
        self, inner: Store, keyring: Keyring, *, recall_index: RecallIndex = "process"
    ) -> None:
        self.recall_index = recall_index
        self._vectors: VectorTable | None = None
        codec = CipherCodec(keyring, inner.codec)
        super().__init__(codec=codec)
        inner.codec = codec
        self.inner = inner
        self.keyring = keyring
        self.url = inner.url
        self._closed = False
        self._declined: dict[tuple[str, str, str], None] = {}  # bounded, insertion-ordered

    def _decline(self, namespace: str, thread_id: str, user_id: str) -> None:
        if len(self._declined) >= 65536:
            self._declined.pop(next(iter(self._declined)))
        self._declined[(namespace, thread_id, user_id)] = None

    def _open(self) -> None:
        if self._closed:
            raise StoreError("this store is closed; open a new one with tether.open_store")

    def __getattr__(self, name: str) -> Any:
        # Backend extras (paths, pools, durability settings) stay reachable.
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def _read(self, namespace: str, scope: str, call: Callable[[], Awaitable[T]]) -> T:
        self._open()
        await self.keyring.ensure(namespace, scope, create=False)
        for _ in range(64):  # one data key per round; a scope holds very few
            try:
                return await call()
            except KeyNotLoaded as e:  # a payload under a key we have not seen: load, repeat
                await self.keyring.fetch(namespace, e.key_ids)
        raise CipherError(
            f"data keys of {namespace}/{scope} kept changing while reading; try again",
            code="key_churn",
        )

    async def keystore(self) -> KeyStore | None:
        return await self.inner.keystore()

    async def holds_keys(self) -> bool:
        return await self.inner.holds_keys()

    def vector_table(self) -> VectorTable | None:
        """With ``recall_index="encrypted"``, the backend's table with every vector sealed
        (``EncryptedVectorTable``); else None: the index stays out of the store."""
        if self.recall_index != "encrypted":
            return None
        if self._vectors is None:
            inner = self.inner.vector_table()
            if inner is None:  # a backend without a table (memory): in the process
                return None
            from ._vectors import EncryptedVectorTable

            self._vectors = EncryptedVectorTable(inner, self.keyring)
        return self._vectors

    # -- the Store contract -------------------------------------------------------------

    # The checks ran in Store.commit (before any data key is made: bad input writes
    # nothing); the inner backend's hooks skip them the second time.
    async def _do_commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        self._open()
        for scope in dict.fromkeys(w.scope for w in writes if w.nodes):
            await self.keyring.ensure(namespace, scope, create=True)
        await self.inner._do_commit(namespace, writes)

    async def _do_reset_scope(self, namespace: str, scope: str) -> Head:
        self._open()
        return await self.inner._do_reset_scope(namespace, scope)

    async def _do_delete_namespace(self, namespace: str) -> int:
        self._open()
        return await self.inner._do_delete_namespace(namespace)

    async def _do_reset_if(self, namespace: str, scope: str, expected: Head) -> Head:
        self._open()
        return await self.inner._do_reset_if(namespace, scope, expected)

    async def _do_prune(
        self, namespace: str, scope: str, expected: Head, cut: tuple[int, ...], write: ScopeWrite
    ) -> Head:
        # The record is sealed like any node (the inner backend's codec is the cipher).
        self._open()
        await self.keyring.ensure(namespace, scope, create=True)
        return await self.inner._do_prune(namespace, scope, expected, cut, write)

    async def head(self, namespace: str, scope: str) -> Head:
        self._open()
        return await self.inner.head(namespace, scope)

    async def nodes(
        self,
        namespace: str,
        scope: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> list[CausalNode]:
        return await self._read(
            namespace,
            scope,
            lambda: self.inner.nodes(
                namespace, scope, after=after, before=before, limit=limit, descending=descending
            ),
        )

    async def get_nodes(
        self, namespace: str, scope: str, ids: Sequence[str]
    ) -> dict[str, CausalNode]:
        return await self._read(
            namespace, scope, lambda: self.inner.get_nodes(namespace, scope, ids)
        )

    async def resource_head(self, namespace: str, scope: str, key: str) -> CausalNode | None:
        return await self._read(
            namespace, scope, lambda: self.inner.resource_head(namespace, scope, key)
        )

    async def resource_heads(
        self, namespace: str, scope: str, prefix: str = ""
    ) -> dict[str, CausalNode]:
        return await self._read(
            namespace, scope, lambda: self.inner.resource_heads(namespace, scope, prefix)
        )

    async def versions(
        self, namespace: str, scope: str, key: str, *, limit: int = 1000
    ) -> list[CausalNode]:
        return await self._read(
            namespace, scope, lambda: self.inner.versions(namespace, scope, key, limit=limit)
        )

    async def resource_heads_across(
        self,
        namespace: str,
        key_prefix: str,
        *,
        scope_prefix: str = "thread:",
        after: tuple[str, str] | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, str, CausalNode]]:
        # One query in the backend (payloads still sealed), then the state of every data
        # key those payloads name, read now in one lookup per 500 keys (an erasure by
        # another process counts at once, as with cache_ttl=0 elsewhere), then each
        # payload opened with its own scope's key: an erased one is KeyErased or the
        # placeholder, never plaintext. A backend without the one query: scope by scope.
        self._open()
        check_name("namespace", namespace)
        if limit <= 0:
            return []
        raw = await self.inner._raw_heads_across(namespace, key_prefix, scope_prefix, after, limit)
        if raw is None:
            return await self._heads_across_by_scope(
                namespace, key_prefix, scope_prefix, after, limit
            )
        ids = list(dict.fromkeys(key_id_of(bytes(r[8])) for r in raw))
        for i in range(0, len(ids), 500):
            await self.keyring.fetch(namespace, ids[i : i + 500])
        return self.decode_across(namespace, raw)

    async def list_namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        self._open()
        return await self.inner.list_namespaces(after=after, limit=limit)

    async def list_scopes(
        self, namespace: str, *, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[ScopeInfo]:
        self._open()
        return await self.inner.list_scopes(namespace, prefix=prefix, after=after, limit=limit)

    async def stats(self, namespace: str, scope: str) -> ScopeStats:
        self._open()
        return await self.inner.stats(namespace, scope)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self.inner.close()
        finally:
            # The backend object forgets the cipher (a memory store can be encrypted again).
            if isinstance(self.inner.codec, CipherCodec):
                self.inner.codec = self.inner.codec.inner
            await self.keyring.close()

    # -- what encryption adds ----------------------------------------------------------

    async def bind_thread(
        self, namespace: str, thread_id: str, user_id: str, *, strict: bool = True
    ) -> bool:
        """Encrypt the thread with the user's key, so erasing the user erases it too.

        Call it before the thread's first write (when the thread is created for a
        user; the runtime does when ``agent.step`` gets ``user=``). Binding again
        to the same user is free; to another user, or binding a thread that already
        holds nodes under the namespace key, raises ``CipherError`` (codes
        ``thread_bound``, ``thread_not_empty``), or with ``strict=False`` returns
        False and leaves the thread as it is. Returns True when the thread is bound
        to ``user_id``.
        """
        self._open()
        check_name("namespace", namespace)
        scope = scopes.thread(thread_id)
        scopes.user(user_id)
        if self.keyring.bound_user(namespace, thread_id) == user_id:
            return True
        if not strict and (namespace, thread_id, user_id) in self._declined:
            return False  # decided before: no query on every step of such a thread
        bound = await self.keyring.binding(namespace, thread_id)
        if bound is None:
            head = await self.inner.head(namespace, scope)
            if head.sequence:
                if not strict:
                    self._decline(namespace, thread_id, user_id)
                    return False
                raise CipherError(
                    f"thread {thread_id!r} already holds {head.sequence} nodes encrypted with the "
                    "namespace key; bind a thread to its user before its first write",
                    code="thread_not_empty",
                    namespace=namespace,
                    thread=thread_id,
                )
            bound = await self.keyring.bind(namespace, thread_id, user_id)
        if bound != user_id:
            if not strict:
                self._decline(namespace, thread_id, user_id)
                return False
            raise CipherError(
                f"thread {thread_id!r} is bound to another user; a thread has one owner",
                code="thread_bound",
                namespace=namespace,
                thread=thread_id,
            )
        return True

    async def erase_user(self, namespace: str, user_id: str) -> ErasureReport:
        """Destroy the user's data key: every payload of the user (and of the threads
        bound to the user) becomes unreadable at once. Nodes and ids stay."""
        self._open()
        check_name("namespace", namespace)
        scopes.user(user_id)
        return await self.keyring.erase_user(namespace, user_id)

    async def rotate(
        self, new: MasterKeyProvider | None = None, *, old: Sequence[MasterKeyProvider] = ()
    ) -> RotationReport:
        """Rewrap every data key under ``new`` (payloads are not re-encrypted)."""
        self._open()
        return await self.keyring.rotate(new, old=old)


# -- opening -------------------------------------------------------------------------


async def encrypt_store(
    store: Store,
    cipher: Cipher | MasterKeyProvider | Sequence[MasterKeyProvider],
    *,
    keystore: KeyStore | None = None,
) -> EncryptedStore:
    """Encrypt an open store. Raises ``WrongKey`` / ``NotEncrypted`` before writing anything."""
    if isinstance(store, EncryptedStore) or isinstance(store.codec, CipherCodec):
        raise CipherError("this store is already encrypted", code="invalid_request")
    c = Cipher.of(cipher)
    if c.recall_index not in ("process", "encrypted"):
        raise CipherError(
            f"recall_index is 'process' or 'encrypted', got {c.recall_index!r}",
            code="invalid_request",
        )
    ks = keystore or await store.keystore()
    if ks is None:
        raise CipherError(
            f"{type(store).__name__} keeps no key table (its keystore() hook returns None): "
            "pass keystore= to encrypt_store",
            code="cipher_unsupported",
        )
    try:
        ring = await Keyring.open(
            ks, c.masters, store=store, cache_ttl=c.cache_ttl, on_erased=c.on_erased
        )
    except BaseException:
        if keystore is None:
            await ks.close()
        raise
    return EncryptedStore(store, ring, recall_index=c.recall_index)


async def _secure(store: Store, cipher: Any) -> Store:
    """``open_store(url, cipher=...)``'s hook (registered below): encrypt with ``cipher``."""
    return await encrypt_store(store, cipher)


set_cipher_hook(_secure)


def encrypted(store: Store) -> EncryptedStore | None:
    return store if isinstance(store, EncryptedStore) else None


def _require(store: Store) -> EncryptedStore:
    if not isinstance(store, EncryptedStore):
        raise CipherError(
            "this store is not encrypted: open it with open_store(url, cipher=...)",
            code="not_encrypted",
        )
    return store


async def erase_user(store: Store, namespace: str, user_id: str) -> ErasureReport:
    """Erase a user by destroying their data key (for the CLI and the control plane)."""
    return await _require(store).erase_user(namespace, user_id)


async def rotate(
    store: Store,
    new: MasterKeyProvider | None = None,
    *,
    old: Sequence[MasterKeyProvider] = (),
) -> RotationReport:
    """Rewrap every data key of the store under ``new``; ``old`` keys help read during it."""
    return await _require(store).rotate(new, old=old)


async def bound_user(store: Store, namespace: str, thread_id: str) -> str | None:
    """The user a thread is bound to (erased with), or None (unbound, or not encrypted)."""
    enc = encrypted(store)
    if enc is None:
        return None
    enc._open()
    check_name("namespace", namespace)
    scopes.thread(thread_id)
    return await enc.keyring.binding(namespace, thread_id)


async def bind_thread(
    store: Store, namespace: str, thread_id: str, user_id: str, *, strict: bool = True
) -> bool:
    """Tie a thread to its user, so erasing the user erases the thread (see
    ``EncryptedStore.bind_thread``). Whether the thread is now bound to the user.

    A no-op returning False for an unencrypted store, so the runtime can call it on
    every step that has a user (``strict=False``: a thread that already belongs to
    someone else, or was written before any binding, is left as it is).
    """
    enc = encrypted(store)
    if enc is None:
        return False
    return await enc.bind_thread(namespace, thread_id, user_id, strict=strict)
