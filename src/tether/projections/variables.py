"""Typed, scoped variables (SPEC §2-3, seed 004).

A variable is declared (``VarDecl``: name, type, scope, default) and lives in the
graph of its scope as ``resource`` nodes with resource key ``var:<name>``; the
newest node is the value, older ones its history. Scopes:

=======  ================================================================
app      the namespace's ``app`` graph
user     the ``user:<id>`` graph (``Variables(user=...)``)
thread   the ``thread:<id>`` graph (``Variables(thread=...)``); a run with no
         thread behind it uses its run id as the thread (seed 004)
run      the thread graph under ``run:<run>:var:<name>``: each run sees only
         its own value, later runs start from the default
call     kept in the ``Variables`` object only, never persisted (SPEC §2)
=======  ================================================================

Seed 004's three scopes are thread / session / call, where a session is one run of
the graph (one message): ``scope="session"`` is accepted as another name for
``run`` (``VarDecl.scope`` reads ``"run"``; a spec keeps the name it was given).

A write coerces the value to the declared type (``coercion``); a value that cannot
be coerced is stored as given and ``WriteResult.error`` says why.

An erased value (``tether.crypto.erase_user``) raises ``KeyErased``; read inside
``erased_placeholders()`` it is ``{"$erased": true}`` (``is_erased``), never the
default, and its ``VarVersion`` has ``erased=True``. ``Variables(...,
erased_as_default=True)`` (the runtime's) reads an erased value as the default
instead, as if deleted: a user who comes back after an erasure starts afresh. Writes commit on
their own, or are staged into a ``Transaction`` passed as ``txn=`` (the runtime
commits them in its step commit; one transaction may touch several scopes and
commits atomically).
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..core import scopes
from ..core.erased import erased_placeholders, is_erased, placeholder
from ..core.errors import InvalidRequest
from ..core.graph import CausalNode, now_iso
from ..store.base import Store
from ..store.txn import Transaction, transact
from .coercion import TYPES, coerce, read_value, storable
from .errors import UnknownVariable, UnstorableValue

__all__ = ["VAR_SCOPES", "VarDecl", "VarVersion", "Variables", "WriteResult"]

VAR_SCOPES: Final = ("app", "user", "thread", "run", "call")
# Seed 004's name for a scope -> tether's.
SCOPE_ALIASES: Final = {"session": "run"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class VarDecl:
    """A declared variable. ``default`` is coerced to ``type`` when declared."""

    name: str
    type: str
    scope: str = "thread"
    default: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise InvalidRequest(
                f"variable name {self.name!r} must match {_NAME.pattern}", field="name"
            )
        if self.type not in TYPES:
            raise InvalidRequest(
                f"variable {self.name!r}: unknown type {self.type!r}; use one of {', '.join(TYPES)}",
                field="type",
            )
        if isinstance(self.scope, str) and self.scope in SCOPE_ALIASES:
            object.__setattr__(self, "scope", SCOPE_ALIASES[self.scope])
        if self.scope not in VAR_SCOPES:
            raise InvalidRequest(
                f"variable {self.name!r}: unknown scope {self.scope!r}; use one of "
                f"{', '.join(VAR_SCOPES)} (or session, seed 004's name for run)",
                field="scope",
            )
        if self.default is not None:
            value, ok, error = coerce(self.type, self.default)
            if not ok:
                raise InvalidRequest(
                    f"variable {self.name!r}: default {self.default!r} is not a {self.type}: {error}",
                    field="default",
                )
            object.__setattr__(self, "default", value)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "scope": self.scope, "default": self.default}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VarDecl:
        extra = sorted(set(data) - {"name", "type", "scope", "default"})
        if extra:
            raise InvalidRequest(f"unknown variable field(s): {', '.join(extra)}", field=extra[0])
        return cls(**dict(data))


@dataclass(frozen=True, kw_only=True, slots=True)
class WriteResult:
    """The outcome of a write: the value as read back, whether it has the declared type
    (``coerced``), and the reason when it does not (``error``)."""

    value: Any
    coerced: bool
    error: str | None = None
    node: str | None = None  # the resource node written (None for call scope)


@dataclass(frozen=True, kw_only=True, slots=True)
class VarVersion:
    """One version of a variable, oldest first in ``Variables.history``."""

    value: Any  # as read: a DataFrame (or records) for dataframes
    coerced: bool
    error: str | None
    deleted: bool
    sequence: int
    created_at: str
    node: str | None
    stored: Any = None  # the JSON form in the node
    erased: bool = False  # the payload's data key was destroyed (value: the placeholder)

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.stored,
            "coerced": self.coerced,
            "error": self.error,
            "deleted": self.deleted,
            "sequence": self.sequence,
            "created_at": self.created_at,
            "node": self.node,
            "erased": self.erased,
        }


@dataclass
class _CallVar:
    versions: list[VarVersion] = field(default_factory=list)


class Variables:
    """Read and write declared variables for one thread / user / run.

    >>> v = Variables(store, "acme", [VarDecl(name="n", type="integer")], thread="t1")  # doctest: +SKIP
    >>> (await v.set("n", "1")).value                                                  # doctest: +SKIP
    1
    """

    def __init__(
        self,
        store: Store,
        namespace: str,
        decls: Iterable[VarDecl],
        *,
        thread: str | None = None,
        user: str | None = None,
        run: str | None = None,
        erased_as_default: bool = False,
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.erased_as_default = erased_as_default
        self._decls: dict[str, VarDecl] = {}
        for d in decls:
            if not isinstance(d, VarDecl):
                raise InvalidRequest(f"declarations must be VarDecl, got {d!r}", field="decls")
            if d.name in self._decls:
                raise InvalidRequest(f"variable {d.name!r} is declared twice", field="name")
            self._decls[d.name] = d
        self.user = user
        self.run = run
        self.thread = thread if thread is not None else run
        self._call: dict[str, _CallVar] = {}

    @property
    def declarations(self) -> tuple[VarDecl, ...]:
        return tuple(self._decls.values())

    def decl(self, name: str) -> VarDecl:
        d = self._decls.get(name)
        if d is None:
            raise UnknownVariable(
                f"variable {name!r} is not declared; declared: {', '.join(self._decls) or 'none'}",
                field="name",
                name=name,
            )
        return d

    def location(self, name: str) -> tuple[str, str] | None:
        """``(scope, resource key)`` of a variable; None for call scope."""
        d = self.decl(name)
        if d.scope == "call":
            return None
        if d.scope == "app":
            return scopes.APP, f"var:{name}"
        if d.scope == "user":
            if self.user is None:
                raise InvalidRequest(
                    f"variable {name!r} has scope user: pass user= to Variables", field="user"
                )
            return scopes.user(self.user), f"var:{name}"
        if self.thread is None:
            raise InvalidRequest(
                f"variable {name!r} has scope {d.scope}: pass thread= (or run=) to Variables",
                field="thread",
            )
        if d.scope == "thread":
            return scopes.thread(self.thread), f"var:{name}"
        if self.run is None:
            raise InvalidRequest(
                f"variable {name!r} has scope run: pass run= to Variables", field="run"
            )
        return scopes.thread(self.thread), f"run:{self.run}:var:{name}"

    # -- reading -------------------------------------------------------------------

    def _default(self, d: VarDecl) -> Any:
        return read_value(d.type, copy.deepcopy(d.default))

    def _from_node(self, d: VarDecl, node: CausalNode | None) -> Any:
        p = node.payload if node is not None else None
        if is_erased(p):
            # Not the default unless asked: the variable was set, and is gone.
            return self._default(d) if self.erased_as_default else placeholder()
        if not isinstance(p, dict) or p.get("deleted") or "value" not in p:
            return self._default(d)
        if p.get("coerced"):
            return read_value(str(p.get("type", d.type)), p["value"])
        return p["value"]

    async def get(self, name: str, *, txn: Transaction | None = None) -> Any:
        """The current value (the default when never written or deleted)."""
        d = self.decl(name)
        loc = self.location(name)
        if loc is None:
            versions = self._call.get(name, _CallVar()).versions
            if not versions or versions[-1].deleted:
                return self._default(d)
            return copy.deepcopy(versions[-1].value)
        scope, key = loc
        with erased_placeholders() if self.erased_as_default else _AS_STORE:
            if txn is not None:
                return self._from_node(d, await txn.resource_head(scope, key))
            node = await self.store.resource_head(self.namespace, scope, key)
        return self._from_node(d, node)

    async def all(self, *, txn: Transaction | None = None) -> dict[str, Any]:
        """Every declared variable's current value, one indexed read per scope."""
        out: dict[str, Any] = {}
        by_scope: dict[str, dict[str, str]] = {}
        for name in self._decls:
            loc = self.location(name)
            if loc is None or txn is not None:
                out[name] = await self.get(name, txn=txn)
            else:
                by_scope.setdefault(loc[0], {})[loc[1]] = name
        for scope, keys in by_scope.items():
            heads: dict[str, CausalNode] = {}
            for prefix in {
                f"run:{self.run}:var:" if k.startswith("run:") else "var:" for k in keys
            }:
                with erased_placeholders() if self.erased_as_default else _AS_STORE:
                    heads.update(await self.store.resource_heads(self.namespace, scope, prefix))
            for key, name in keys.items():
                out[name] = self._from_node(self._decls[name], heads.get(key))
        return {name: out[name] for name in self._decls}

    async def history(self, name: str) -> list[VarVersion]:
        """Every version of a variable, oldest first (writes and deletes)."""
        d = self.decl(name)
        loc = self.location(name)
        if loc is None:
            return list(self._call.get(name, _CallVar()).versions)
        nodes = await self.store.versions(self.namespace, loc[0], loc[1])
        out = []
        for n in nodes:
            p = n.payload if isinstance(n.payload, dict) else {}
            if is_erased(p):
                out.append(
                    VarVersion(
                        value=placeholder(),
                        coerced=False,
                        error=None,
                        deleted=False,
                        sequence=n.sequence,
                        created_at=n.created_at,
                        node=n.id,
                        stored=placeholder(),
                        erased=True,
                    )
                )
                continue
            deleted = bool(p.get("deleted"))
            out.append(
                VarVersion(
                    value=None if deleted else self._from_node(d, n),
                    coerced=bool(p.get("coerced")) and not deleted,
                    error=p.get("error") if isinstance(p.get("error"), str) else None,
                    deleted=deleted,
                    sequence=n.sequence,
                    created_at=n.created_at,
                    node=n.id,
                    stored=None if deleted else p.get("value"),
                )
            )
        return out

    # -- writing -------------------------------------------------------------------

    def _payload(self, d: VarDecl, value: Any) -> tuple[dict[str, Any], bool, str | None]:
        stored, ok, error = coerce(d.type, value)
        if not ok:
            data, why = storable(stored)
            if why is not None:
                raise UnstorableValue(
                    f"variable {d.name!r}: {value!r} is not a {d.type} ({error}) and cannot be "
                    f"stored as given: {why}",
                    field="value",
                    name=d.name,
                )
            stored = data
        return (
            {"name": d.name, "type": d.type, "value": stored, "coerced": ok, "error": error},
            ok,
            error,
        )

    async def _stage(
        self, txn: Transaction, name: str, payload: dict[str, Any]
    ) -> CausalNode | None:
        loc = self.location(name)
        if loc is None:
            return None
        return await txn.append(loc[0], "resource", payload, resource_key=loc[1])

    def _call_write(self, d: VarDecl, payload: dict[str, Any]) -> None:
        deleted = bool(payload.get("deleted"))
        self._call.setdefault(d.name, _CallVar()).versions.append(
            VarVersion(
                value=None if deleted else self._from_node(d, _fake(copy.deepcopy(payload))),
                coerced=bool(payload.get("coerced")),
                error=payload.get("error"),
                deleted=deleted,
                sequence=len(self._call.get(d.name, _CallVar()).versions) + 1,
                created_at=now_iso(),
                node=None,
                stored=None if deleted else copy.deepcopy(payload.get("value")),
            )
        )

    async def set(self, name: str, value: Any, *, txn: Transaction | None = None) -> WriteResult:
        """Write a value, coerced to the declared type; uncoercible values are kept as given."""
        return (await self.update({name: value}, txn=txn))[name]

    async def update(
        self, values: Mapping[str, Any], *, txn: Transaction | None = None
    ) -> dict[str, WriteResult]:
        """Write several variables (of any scopes) in one atomic commit."""
        staged = [(self.decl(n), *self._payload(self.decl(n), v)) for n, v in values.items()]
        nodes: dict[str, CausalNode | None] = {}

        async def write(t: Transaction) -> None:
            for d, payload, _, _ in staged:
                nodes[d.name] = await self._stage(t, d.name, payload)

        if txn is not None:
            await write(txn)
        else:
            await transact(self.store, self.namespace, write)
        out = {}
        for d, payload, ok, error in staged:
            if self.location(d.name) is None:
                self._call_write(d, payload)
            node = nodes.get(d.name)
            out[d.name] = WriteResult(
                value=self._from_node(d, _fake(copy.deepcopy(payload))),
                coerced=ok,
                error=error,
                node=node.id if node is not None else None,
            )
        return out

    async def delete(self, name: str, *, txn: Transaction | None = None) -> None:
        """Delete a variable: reads return its default; the history keeps every version."""
        d = self.decl(name)
        payload = {"name": name, "type": d.type, "deleted": True}
        if self.location(name) is None:
            self._call_write(d, payload)
            return
        if txn is not None:
            await self._stage(txn, name, payload)
        else:
            await transact(self.store, self.namespace, lambda t: self._stage(t, name, payload))


# Reads follow the store's (or the caller's) choice for erased payloads.
_AS_STORE: Final = contextlib.nullcontext()


def _fake(payload: dict[str, Any]) -> CausalNode:
    """A stand-in node so staged payloads decode like stored ones."""
    return CausalNode(
        id="", kind="resource", parents=(), payload=payload, created_at="", sequence=0
    )
