"""The stored form of an encrypted payload, and the associated data that binds it.

    byte 0      0xA7 magic: never the first byte of UTF-8 text, so never of a JSON payload
    byte 1      format version (1)
    bytes 2-17  data key id (16 random bytes; names the key in the key table)
    bytes 18-29 nonce (96 random bits, fresh for every payload)
    bytes 30-   AES-256-GCM ciphertext and 16-byte tag

The associated data is (namespace, scope, key id), length-prefixed so that no two
different triples encode alike: a ciphertext copied into another scope, another
namespace or relabelled with another key id fails authentication.
"""

from __future__ import annotations

import secrets
import struct
from typing import TYPE_CHECKING

from .errors import NotEncrypted

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = 0xA7
VERSION = 1
KEY_ID_BYTES = 16
NONCE_BYTES = 12
TAG_BYTES = 16
HEADER_BYTES = 2 + KEY_ID_BYTES + NONCE_BYTES
OVERHEAD = HEADER_BYTES + TAG_BYTES  # 46 bytes per payload
_PREFIX = bytes((MAGIC, VERSION))
_AAD_TAG = b"tether payload v1"


def _field(value: bytes) -> bytes:
    return struct.pack(">I", len(value)) + value


def associated_data(namespace: str, scope: str, key_id: bytes) -> bytes:
    return _AAD_TAG + _field(namespace.encode()) + _field(scope.encode()) + key_id


def seal(aead: AESGCM, key_id: bytes, namespace: str, scope: str, plaintext: bytes) -> bytes:
    nonce = secrets.token_bytes(NONCE_BYTES)
    ct = aead.encrypt(nonce, plaintext, associated_data(namespace, scope, key_id))
    return _PREFIX + key_id + nonce + ct


def is_sealed(data: bytes) -> bool:
    return len(data) >= OVERHEAD and data[0] == MAGIC


def key_id_of(data: bytes) -> bytes:
    """The data key id of a sealed payload; ``NotEncrypted`` for anything else."""
    if not is_sealed(data):
        raise NotEncrypted(
            "this payload is not encrypted (the store was written without a cipher); "
            "export it with a plain store and import it into an encrypted one"
        )
    if data[1] != VERSION:
        raise NotEncrypted(
            f"unknown encrypted payload format {data[1]}: upgrade tether to read it",
            code="cipher_version",
        )
    return bytes(data[2 : 2 + KEY_ID_BYTES])


def open_sealed(aead: AESGCM, namespace: str, scope: str, data: bytes) -> bytes:
    """Decrypt; raises cryptography's ``InvalidTag`` when the data or its binding is wrong."""
    key_id = data[2 : 2 + KEY_ID_BYTES]
    nonce = data[2 + KEY_ID_BYTES : HEADER_BYTES]
    return aead.decrypt(nonce, data[HEADER_BYTES:], associated_data(namespace, scope, key_id))
