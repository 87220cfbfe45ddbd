"""``CipherCodec``: the ``PayloadCodec`` that encrypts every payload a backend stores.

A backend calls ``encode``/``decode`` around its own serialisation-free byte
storage; the inner codec (JSON by default) turns the payload into bytes, which are
then sealed with the scope's data key (see ``_envelope`` for the format).
"""

from __future__ import annotations

from typing import Any

from ..core.erased import ERASED_PLACEHOLDER_KEY
from ..store.base import JsonCodec, PayloadCodec
from ._envelope import is_sealed, key_id_of, open_sealed, seal
from ._keyring import Keyring
from ._master import invalid_tag
from .errors import CipherError


class CipherCodec:
    """AES-256-GCM over the inner codec's bytes, keyed per scope by a ``Keyring``."""

    def __init__(self, keyring: Keyring, inner: PayloadCodec | None = None) -> None:
        if isinstance(inner, CipherCodec):
            raise CipherError("this store is already encrypted", code="invalid_request")
        self.keyring = keyring
        self.inner: PayloadCodec = inner or JsonCodec()
        self._invalid_tag = invalid_tag()

    def encode(self, namespace: str, scope: str, payload: Any) -> bytes:
        key_id, aead = self.keyring.write_key(namespace, scope)
        return seal(aead, key_id, namespace, scope, self.inner.encode(namespace, scope, payload))

    def decode(self, namespace: str, scope: str, data: bytes) -> Any:
        data = bytes(data)  # backends may hand over memoryview / bytearray
        aead = self.keyring.read_key(namespace, scope, key_id_of(data))
        if aead is None:
            return {ERASED_PLACEHOLDER_KEY: True}
        try:
            plaintext = open_sealed(aead, namespace, scope, data)
        except self._invalid_tag as e:
            raise CipherError(
                f"a payload of {namespace}/{scope} failed authentication: it was altered, or "
                "moved from another scope or database",
                code="decrypt_failed",
                namespace=namespace,
                scope=scope,
            ) from e
        return self.inner.decode(namespace, scope, plaintext)

    @staticmethod
    def is_encrypted(data: bytes) -> bool:
        return is_sealed(bytes(data))
