"""Erasing a user from the control plane ("delete my data"), the same from Python, CLI and HTTP.

    result = await control.erase_user(store, "acme", "alice")
    result.keys_destroyed, result.threads, result.to_dict()

On an encrypted store (``open_store(url, cipher=...)``) it destroys the user's data
key (``tether.crypto.erase_user``): every payload of ``user:<id>`` and of the
threads bound to the user becomes unreadable at once, in this database and in
every copy of it, without rewriting the log. The run index entries of those
threads live in the threads, under the same key, so they go with them; then it
takes out what is still readable of the user's runs (``tasks.unindex_user``:
entries in threads not bound to the user, and entries of the layout before, which
kept copies in the ``app`` scope). On an unencrypted store nothing can be
erased this way: it raises ``CipherError`` (code ``not_encrypted``) and changes
nothing; ``reset`` with ``user=`` deletes a user's scope instead.

Erasing again is harmless (``keys_destroyed`` is then 0). docs/encryption.md says
what erasure reaches and what it does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..core import scopes
from ..core.errors import InvalidRequest
from ..crypto import erase_user as _erase_key
from ..projections.recall_index import drop_erased
from ..store.base import Store, check_name
from . import tasks

__all__ = ["ErasureResult", "erase_user"]

_FIELDS: Final = frozenset(
    {"operation", "namespace", "user", "keys_destroyed", "key_ids", "threads", "unindexed_runs"}
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ErasureResult:
    """What ``erase_user`` did: the data keys destroyed (their ids, never key material),
    how many threads were bound to the user (erased with it), and how many entries of
    the run index it removed."""

    namespace: str
    user: str
    keys_destroyed: int
    key_ids: tuple[str, ...] = ()
    threads: int = 0
    unindexed_runs: int = 0
    operation: str = field(default="erase", init=False)

    @property
    def erased(self) -> bool:
        """Whether a key was destroyed now (False: nothing left to erase)."""
        return self.keys_destroyed > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "namespace": self.namespace,
            "user": self.user,
            "keys_destroyed": self.keys_destroyed,
            "key_ids": list(self.key_ids),
            "threads": self.threads,
            "unindexed_runs": self.unindexed_runs,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ErasureResult:
        if not isinstance(data, Mapping):
            raise InvalidRequest("an ErasureResult is a JSON object", field="ErasureResult")
        unknown = sorted(set(data) - _FIELDS)
        if unknown:
            raise InvalidRequest(
                f"unknown field {unknown[0]!r} in an ErasureResult", field=unknown[0]
            )
        if data.get("operation", "erase") != "erase":
            raise InvalidRequest("an ErasureResult has operation 'erase'", field="operation")
        try:
            return cls(
                namespace=str(data["namespace"]),
                user=str(data["user"]),
                keys_destroyed=_count(data["keys_destroyed"], "keys_destroyed"),
                key_ids=tuple(str(k) for k in data.get("key_ids") or ()),
                threads=_count(data.get("threads", 0), "threads"),
                unindexed_runs=_count(data.get("unindexed_runs", 0), "unindexed_runs"),
            )
        except KeyError as e:
            raise InvalidRequest(f"an ErasureResult needs {e.args[0]!r}", field=e.args[0]) from None


async def _runs_of(store: Store, namespace: str, user: str) -> set[tuple[str, str]]:
    return {(r.thread, r.run) for r in await tasks.list_index(store, namespace) if r.user == user}


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRequest(f"{name}: a count (an integer >= 0), got {value!r}", field=name)
    return value


async def erase_user(store: Store, namespace: str, user: str) -> ErasureResult:
    """Erase ``user`` of ``namespace``: destroy their data key, then unindex their runs.

    Raises ``InvalidRequest`` for a bad namespace or user id and ``CipherError``
    (``not_encrypted``) on an unencrypted store, in both cases before changing anything.
    """
    check_name("namespace", namespace)
    scopes.user(user)
    # The user's runs in the index before: those in threads bound to the user leave it
    # with the key (their entries are sealed with it); the rest are taken out after.
    before = await _runs_of(store, namespace, user)
    report = await _erase_key(store, namespace, user)
    await tasks.unindex_user(store, namespace, user)
    unindexed = len(before - await _runs_of(store, namespace, user))
    await drop_erased(store, namespace, user)  # vectors carry meaning: they go too
    return ErasureResult(
        namespace=namespace,
        user=user,
        keys_destroyed=report.keys_destroyed,
        key_ids=report.key_ids,
        threads=report.threads,
        unindexed_runs=unindexed,
    )
