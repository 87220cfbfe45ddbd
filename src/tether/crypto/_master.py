"""Master keys: the key-encryption keys that wrap every data key.

A master key never touches a payload. It wraps the per-(namespace, user) data keys
(envelope encryption), so rotating it rewraps a few small rows instead of
re-encrypting the graph. Three sources:

* ``MasterKey.from_env()``: ``TETHER_MASTER_KEY``, 32 bytes in base64;
* ``MasterKey.from_file(path)``: the same text in a file (or 32 raw bytes);
* any object implementing ``MasterKeyProvider`` (two async methods), e.g. a cloud KMS.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .errors import CipherError, MissingKey, WrongKey

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

ENV_VAR = "TETHER_MASTER_KEY"
KEY_BYTES = 32
NONCE_BYTES = 12
_WRAP_VERSION = b"\x01"


def aesgcm(key: bytes) -> AESGCM:
    """AES-256-GCM from the ``cryptography`` package (the ``crypto`` extra), imported lazily."""
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as e:  # pragma: no cover - the extra is installed in CI
        raise CipherError(
            "encryption needs the cryptography package: pip install 'tether[crypto]'",
            code="cipher_unavailable",
        ) from e
    return AESGCM(key)


def invalid_tag() -> type[Exception]:
    from cryptography.exceptions import InvalidTag

    return InvalidTag


@runtime_checkable
class MasterKeyProvider(Protocol):
    """A key-encryption key that wraps and unwraps data keys. Implement it for a KMS.

    ``key_id`` is a stable, non-secret name (stored beside each wrapped key, so a
    store knows which master opens which row). ``context`` is associated data: an
    unwrap with a different context must fail (KMS "encryption context"). ``unwrap``
    raises (anything) when the key or context is wrong; tether reports ``WrongKey``.
    """

    @property
    def key_id(self) -> str: ...

    async def wrap(self, plaintext: bytes, context: bytes) -> bytes: ...

    async def unwrap(self, wrapped: bytes, context: bytes) -> bytes: ...


class MasterKey:
    """A local 256-bit master key (AES-256-GCM key wrapping). Its repr never shows the key.

    >>> key = MasterKey.generate()
    >>> MasterKey.from_base64(key.to_base64()).key_id == key.key_id
    True
    """

    __slots__ = ("_aead", "_key", "_key_id")

    def __init__(self, key: bytes, *, key_id: str | None = None) -> None:
        if not isinstance(key, bytes | bytearray) or len(key) != KEY_BYTES:
            raise CipherError(
                f"a master key is exactly {KEY_BYTES} bytes; generate one with "
                "`python -c 'import tether.crypto as c; print(c.MasterKey.generate().to_base64())'`",
                code="invalid_key",
            )
        self._key = bytes(key)
        # A fingerprint, not the key: HMAC under the key itself reveals nothing about it.
        self._key_id = (
            key_id
            or "mk_"
            + hmac.new(self._key, b"tether master key id v1", hashlib.sha256).hexdigest()[:16]
        )
        self._aead = aesgcm(self._key)

    @classmethod
    def generate(cls) -> MasterKey:
        return cls(secrets.token_bytes(KEY_BYTES))

    @classmethod
    def from_base64(cls, text: str, *, key_id: str | None = None) -> MasterKey:
        raw = _b64(text.strip())
        if raw is None or len(raw) != KEY_BYTES:
            raise CipherError(
                f"a master key is {KEY_BYTES} bytes in base64 (44 characters); "
                "generate one with MasterKey.generate().to_base64()",
                code="invalid_key",
            )
        return cls(raw, key_id=key_id)

    @classmethod
    def from_env(cls, var: str = ENV_VAR) -> MasterKey:
        """The key in environment variable ``var`` (base64 of 32 bytes)."""
        text = os.environ.get(var, "")
        if not text.strip():
            raise MissingKey(
                f"environment variable {var} is not set: put a base64 master key in it "
                "(MasterKey.generate().to_base64())",
                var=var,
            )
        return cls.from_base64(text)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> MasterKey:
        """The key in a file: base64 text, or exactly 32 raw bytes."""
        p = Path(path)
        try:
            data = p.read_bytes()
        except FileNotFoundError as e:
            raise MissingKey(f"master key file {str(p)!r} does not exist", path=str(p)) from e
        if len(data) == KEY_BYTES:
            return cls(data)
        try:
            return cls.from_base64(data.decode("ascii"))
        except UnicodeDecodeError as e:
            raise CipherError(
                f"master key file {str(p)!r} holds neither base64 text nor {KEY_BYTES} raw bytes",
                code="invalid_key",
                path=str(p),
            ) from e

    def to_base64(self) -> str:
        return base64.b64encode(self._key).decode("ascii")

    @property
    def key_id(self) -> str:
        return self._key_id

    async def wrap(self, plaintext: bytes, context: bytes) -> bytes:
        nonce = secrets.token_bytes(NONCE_BYTES)
        return _WRAP_VERSION + nonce + self._aead.encrypt(nonce, plaintext, context)

    async def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        if len(wrapped) < 1 + NONCE_BYTES + 16 or wrapped[:1] != _WRAP_VERSION:
            raise WrongKey("a wrapped key has an unknown format", master_id=self._key_id)
        nonce = wrapped[1 : 1 + NONCE_BYTES]
        try:
            return self._aead.decrypt(nonce, wrapped[1 + NONCE_BYTES :], context)
        except invalid_tag() as e:
            raise WrongKey(
                f"master key {self._key_id} does not open this wrapped key", master_id=self._key_id
            ) from e

    def __repr__(self) -> str:
        return f"MasterKey(key_id={self._key_id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MasterKey) and hmac.compare_digest(self._key, other._key)

    def __hash__(self) -> int:
        return hash(self._key_id)

    def __reduce__(self) -> Any:
        # Refuse to pickle: a key should not travel by accident (logs, queues, caches).
        raise TypeError("MasterKey does not pickle; pass it by its source (env, file, KMS)")


def _b64(text: str) -> bytes | None:
    """Standard or URL-safe base64, padding optional; None for anything else."""
    padded = text + "=" * (-len(text) % 4)
    try:
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None
