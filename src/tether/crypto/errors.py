"""Errors of the cipher (``tether.crypto``).

    TetherError                      (tether.core.errors)
    └── CipherError                  code "cipher"        misuse or an undecryptable payload
        ├── WrongKey                 "wrong_key"          the master key does not open this store
        ├── MissingKey               "missing_key"        the store is encrypted and no master key was given
        ├── KeyErased                "key_erased"         the payload's data key was destroyed (erasure)
        └── NotEncrypted             "not_encrypted"      plaintext met where ciphertext was expected

Details: ``namespace``, ``scope``, ``owner`` (``user:<id>`` or ``namespace``),
``key_id`` (hex) and ``master_id`` where they apply. No detail ever holds key material.
"""

from __future__ import annotations

__all__ = ["CipherError", "KeyErased", "MissingKey", "NotEncrypted", "WrongKey"]

from ..core.errors import CipherError, KeyErased, MissingKey


class WrongKey(CipherError):
    """The master key given does not open this store (or not this data key).

    Raised at open, before anything is written, when none of the given master keys
    matches the store's key-check value; and when a data key is wrapped under a
    master key this process was not given (a rotation happened: give the new key).
    """

    code = "wrong_key"
    default_code = "wrong_key"


class NotEncrypted(CipherError):
    """Plaintext where ciphertext was expected (a store that was written unencrypted)."""

    code = "not_encrypted"
    default_code = "not_encrypted"
