"""Encryption at rest: AES-256-GCM per payload, a data key per user, erasure by key destruction.

    store = await tether.open_store("sqlite:///agent.db", cipher=MasterKey.from_env())

Every node payload is sealed with the data key of its scope's owner (a user, or
the namespace for ``app`` and threads not bound to a user); data keys are stored
wrapped by a master key (environment variable, key file or a ``MasterKeyProvider``
for a KMS). Node metadata stays readable: see docs/encryption.md for exactly what.

* ``erase_user(store, ns, user)`` destroys a user's data key: their payloads (and
  those of threads bound to them with ``bind_thread``) become unreadable at once;
  reading one raises ``KeyErased``, or gives ``{"$erased": true}`` inside
  ``erased_placeholders()``.
* ``rotate(store, new_master)`` rewraps every data key under a new master key;
  payloads are not touched. Open with ``cipher=[new, old]`` during a rotation.
* A wrong master key raises ``WrongKey`` at open, a missing one ``MissingKey``,
  before anything is written.

Needs the ``crypto`` extra (``pip install 'tether[crypto]'``).
"""

from __future__ import annotations

from ..core.erased import erased_placeholders, is_erased
from ..store.keys import KeyStore, MemoryKeyStore, WrappedKey
from ._codec import CipherCodec
from ._envelope import OVERHEAD
from ._keyring import ErasureReport, Keyring, RotationReport
from ._master import MasterKey, MasterKeyProvider
from ._store import (
    Cipher,
    EncryptedStore,
    bind_thread,
    bound_user,
    cipher_from_env,
    encrypt_store,
    encrypted,
    erase_user,
    rotate,
)
from .errors import CipherError, KeyErased, MissingKey, NotEncrypted, WrongKey

__all__ = [
    "OVERHEAD",
    "Cipher",
    "CipherCodec",
    "CipherError",
    "EncryptedStore",
    "ErasureReport",
    "KeyErased",
    "KeyStore",
    "Keyring",
    "MasterKey",
    "MasterKeyProvider",
    "MemoryKeyStore",
    "MissingKey",
    "NotEncrypted",
    "RotationReport",
    "WrappedKey",
    "WrongKey",
    "bind_thread",
    "bound_user",
    "cipher_from_env",
    "encrypt_store",
    "encrypted",
    "erase_user",
    "erased_placeholders",
    "is_erased",
    "rotate",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = "tether.crypto"
