"""Every error tether raises, under one root.

    TetherError                      code "tether"
    ├── InvalidSnapshot              import validation; code is one of SNAPSHOT_CODES
    ├── InvalidNode                  a node rejected at write time (same codes as import)
    ├── InvalidRequest               bad parameters to an operation   "invalid_request"
    ├── NotFound                     a thread, node or namespace that is not there "not_found"
    ├── Conflict                     a commit computed against a stale head "conflict"
    ├── StoreError                   the backend failed or is misconfigured "store"
    └── (models, cipher, auth and runtime errors subclass TetherError in their modules)

Each error has a stable string ``code`` (safe to match on, over HTTP and in the
CLI's ``--json`` output) and structured ``details``. Errors pickle, so they cross
process boundaries intact.
"""

from __future__ import annotations

from typing import Any, ClassVar

# The stable codes of import validation (SPEC §1). Tests assert on these strings.
SNAPSHOT_CODES = (
    "version",
    "shape",
    "kind",
    "duplicate_id",
    "parent_missing",
    "parent_order",
    "identity_mismatch",
    "sequence",
    "created_at",
    "frontier",
    "semantic_payload",
    "semantic_type",
    "too_large",
    "non_finite",
    "number_range",
    "duplicate_key",
)


def _rebuild(
    cls: type[TetherError], message: str, code: str, details: dict[str, Any]
) -> TetherError:
    err = cls.__new__(cls)
    TetherError.__init__(err, message, code=code, **details)
    return err


class TetherError(Exception):
    """Root of every error tether raises."""

    code: str = "tether"
    default_code: ClassVar[str] = "tether"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A subclass names its code once, as ``default_code``; the class-level ``code``
        # follows it, so ``type(err).code == err.code`` for an error raised plainly.
        super().__init_subclass__(**kwargs)
        if "default_code" in cls.__dict__:
            cls.code = cls.default_code

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or type(self).default_code
        self.details = details

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.code, self.details))

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by the CLI and HTTP: ``{"error", "code", "message", "details"}``."""
        return {
            "error": type(self).__name__,
            "code": self.code,
            "message": self.message,
            "details": {k: v for k, v in self.details.items() if _jsonable(v)},
        }


def _jsonable(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool | list | dict | tuple)


class InvalidSnapshot(TetherError):
    """A snapshot failed import validation. Nothing was written.

    ``index`` is the offending node's position in ``nodes`` (None for top-level
    problems) and ``node_id`` its id when it has one.
    """

    default_code = "shape"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        index: int | None = None,
        node_id: str | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message, code=code, index=index, node_id=node_id, **details)

    @property
    def index(self) -> int | None:
        v = self.details.get("index")
        return v if isinstance(v, int) else None

    @property
    def node_id(self) -> str | None:
        v = self.details.get("node_id")
        return v if isinstance(v, str) else None


class InvalidNode(TetherError):
    """A node was rejected at write time (bad kind, NaN, oversized, unknown type...)."""

    default_code = "shape"


class InvalidRequest(TetherError, ValueError):
    """An operation was called with invalid parameters. Also a ``ValueError``, so code
    written for seed 002's ``except ValueError`` catches it as before."""

    default_code = "invalid_request"


class NotFound(TetherError):
    default_code = "not_found"


class RunPruned(NotFound):
    """The run asked for by id was pruned (``tether.control.prune``): its nodes are gone for
    good. ``details``: the thread, the run and the ``record`` (the prune record's id) that
    says so. A ``NotFound`` too (HTTP 404, code ``run_pruned``)."""

    default_code = "run_pruned"


class Conflict(TetherError):
    """Another writer moved the head (or a reset bumped the generation) since it was read.

    Nothing was written. Reload the head, recompute and retry (``tether.transact`` does).
    """

    default_code = "conflict"


class StoreError(TetherError):
    default_code = "store"


class Overloaded(StoreError):
    """A server had more requests than it serves at once (HTTP 503 with ``Retry-After``,
    code ``overloaded``). Nothing was read or written: the same request may be sent
    again after the pause (``tether.Client`` does, a few times, by itself)."""

    default_code = "overloaded"


# The cipher's root and the erasure error live here, not in tether.crypto: every view
# meets an erased payload, and views must not import the cipher.
class CipherError(TetherError):
    """A payload could not be encrypted or decrypted, or the cipher was misused."""

    code = "cipher"
    default_code: ClassVar[str] = "cipher"


class MissingKey(CipherError):
    """The store is encrypted but no master key was given, or a key source is empty.

    Here, not in tether.crypto: ``open_store`` raises it for a plaintext open of an
    encrypted store, and a plaintext open never loads the cipher."""

    code = "missing_key"
    default_code = "missing_key"


class KeyErased(CipherError):
    """The payload's data key was destroyed: its owner's data was erased.

    The node's metadata (id, kind, parents, sequence) is still there; its payload is
    gone for good. Views can ask for a placeholder instead (``erased_placeholders``).
    """

    code = "key_erased"
    default_code = "key_erased"
