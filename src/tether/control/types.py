"""Request, report and result types of the control plane (SPEC §6, the shapes of seed 002).

One request type serves every operation; the operation decides which fields apply.
All three types are keyword-only frozen dataclasses whose ``to_dict`` output is
plain JSON and whose ``from_dict`` rebuilds an equal object, so they cross
Python, the CLI (``--json``) and HTTP unchanged.

What differs from seed 002, on purpose:

* Targeting is explicit and precise: ``thread``, ``user``, ``app``, ``run``,
  ``variable`` or ``whole_namespace``. A reset clears exactly that, because each
  scope is its own graph; nothing is refused for being "partial".
* Every invalid parameter raises ``tether.InvalidRequest`` with a ``field``
  detail naming it (seed 002 lets ``ValueError``/``TypeError`` escape), and
  ``from_dict`` rejects unknown keys instead of ignoring them.
* ``session_id`` is another name for ``thread``, in the constructor and in
  ``from_dict`` (``StateOperationRequest(session_id="t1").thread == "t1"``); a result
  carries ``session_id`` (its thread, or None) in ``to_dict``. ``from_dict`` coerces as
  the seed's does: a string ``stores`` is a one-item tuple and a whole number given
  as a float (``20.0``) or a string (``"20"``) is an ``int``; a fraction (``2.5``),
  which the seed's ``int()`` would truncate, is refused.
* ``InvalidRequest`` is a ``ValueError`` too, as the seed's errors are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field, fields
from typing import Any, Final, Literal, cast, get_args

import orjson

from ..core.canonical import CanonicalError, canonical_json
from ..core.errors import InvalidRequest
from ..core.graph import ID_PATTERN
from ..store.base import check_name

Operation = Literal["describe", "reset", "compact", "export", "import", "history", "fork", "verify"]
Strategy = Literal["recent", "tokens", "summary"]
# The stores (projections) of a scope, seed 002's names plus tether's own: the
# conversation, tools (tool state), task (runs' metadata and status history; in app,
# the run index), flow (spec progress and run variables), variables, memory, and
# executions (seed 000's executor views of the runs).
StoreName = Literal["conversation", "tools", "task", "flow", "variables", "memory", "executions"]

OPERATIONS: Final[tuple[str, ...]] = get_args(Operation)
STRATEGIES: Final[tuple[str, ...]] = get_args(Strategy)
STORES: Final[tuple[str, ...]] = get_args(StoreName)
# A report about a whole scope's graph (counts, bytes, kinds) rather than one projection.
GRAPH: Final = "graph"
DEFAULT_NAMESPACE: Final = "default"
MAX_PAGE: Final = 10_000

# The integer fields ``from_dict`` coerces from whole floats (the seed passes them through int()).
_WHOLE: Final = (
    "max_messages",
    "max_tokens",
    "preserve_recent",
    "summary_max_tokens",
    "after",
    "before",
    "limit",
)
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
_RUN_ID = re.compile(r"^[\x21-\x7e]{1,200}$")


def _bad(field_name: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{field_name}: {message}", field=field_name)


def _ident(field_name: str, value: Any) -> str:
    # Same rule as tether.core.scopes: 1-200 printable characters.
    if (
        not isinstance(value, str)
        or not value
        or len(value) > 200
        or any(ord(c) < 32 or ord(c) == 127 for c in value)
    ):
        raise _bad(field_name, f"must be 1-200 printable characters, got {value!r}")
    return value


def _opt_ident(field_name: str, value: Any) -> str | None:
    return None if value is None else _ident(field_name, value)


def _bool(field_name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _bad(field_name, f"must be true or false, got {value!r}")
    return value


def _int(field_name: str, value: Any, *, minimum: int, maximum: int | None = None) -> int:
    # Integral strings are accepted (query strings, CLI); floats and bools are not,
    # so 2.5 never silently becomes 2.
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,18}", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(field_name, f"must be an integer, got {value!r}")
    if value < minimum:
        raise _bad(field_name, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise _bad(field_name, f"must be at most {maximum}, got {value}")
    return value


def _opt_int(field_name: str, value: Any, *, minimum: int = 0) -> int | None:
    return None if value is None else _int(field_name, value, minimum=minimum)


def _json_dict(field_name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _bad(field_name, "must be an object with string keys")
    return cast(dict[str, Any], _json_value(field_name, dict(value)))


def _json_value(field_name: str, value: Any) -> Any:
    """A deep copy that proves the value is JSON: orjson alone would turn NaN into null."""
    try:
        return orjson.loads(canonical_json(value, max_depth=64))
    except (CanonicalError, TypeError, RecursionError) as e:
        raise _bad(field_name, f"must hold only JSON values ({e})") from None


def _str_tuple(
    field_name: str, value: Any, allowed: tuple[str, ...] | None = None
) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)  # seed 002: a single store name becomes a one-element tuple
    if not isinstance(value, list | tuple):
        raise _bad(field_name, f"must be a list of strings, got {value!r}")
    out: list[str] = []
    for v in value:
        if not isinstance(v, str):
            raise _bad(field_name, f"must be a list of strings, got {v!r}")
        if allowed is not None and v not in allowed:
            raise _bad(field_name, f"unknown name {v!r}; use one of {', '.join(allowed)}")
        if v not in out:
            out.append(v)
    return tuple(out)


def _mapping(cls_name: str, data: Any) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise InvalidRequest(
            f"a {cls_name} is a JSON object, got {type(data).__name__}", field=cls_name
        )
    return dict(data)


def _known_keys(cls: type, data: dict[str, Any]) -> None:
    names = {f.name for f in fields(cls)}
    for k in data:
        if k not in names:
            raise InvalidRequest(
                f"unknown field {k!r} in a {cls.__name__}; known: {', '.join(sorted(names))}",
                field=str(k),
            )


# --------------------------------------------------------------------------- request


@dataclass(frozen=True, kw_only=True)
class StateOperationRequest:
    """What to operate on and how. Invalid values raise ``InvalidRequest`` (``field`` says which).

    Targets (at most one scope): ``thread``, ``user`` or ``app``; ``run`` (inside
    ``thread``) and ``variable`` (in the chosen scope, or the run) narrow it;
    ``whole_namespace`` names everything in ``namespace`` and nothing else may be
    given with it. An operation that needs a target says so.
    """

    namespace: str = DEFAULT_NAMESPACE
    thread: str | None = None
    user: str | None = None
    app: bool = False
    run: str | None = None
    variable: str | None = None
    whole_namespace: bool = False
    # Stores (projections) to describe or reset; empty means all of them.
    stores: tuple[str, ...] = ()
    include_data: bool = False
    # Compaction (seed 002's parameters and defaults); llm names the LLM node whose
    # conversation is meant.
    llm: str = "agent"
    strategy: Strategy = "tokens"
    max_messages: int = 20
    max_tokens: int = 4000
    preserve_recent: int = 6
    summary_max_tokens: int = 512
    # History paging: nodes with sequence > after (or < before when descending).
    after: int = 0
    before: int | None = None
    limit: int = 100
    descending: bool = False
    # Fork: the node to fork from and the new thread's id (generated when None).
    node: str | None = None
    new_thread: str | None = None
    # Import: the snapshot {"version", "nodes", "frontier"} and whether to replace
    # what the target scope holds.
    snapshot: dict[str, Any] | None = None
    replace: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    # Seed 002's name for ``thread`` (constructor only: the field is ``thread``).
    session_id: InitVar[str | None] = None

    def __post_init__(self, session_id: str | None) -> None:
        if session_id is not None:
            if self.thread is not None and self.thread != session_id:
                raise _bad("session_id", "session_id and thread name different threads")
            object.__setattr__(self, "thread", session_id)
        try:
            check_name("namespace", self.namespace)
        except InvalidRequest as e:
            raise _bad("namespace", e.message) from None
        _opt_ident("thread", self.thread)
        _opt_ident("user", self.user)
        _bool("app", self.app)
        if self.run is not None and not (isinstance(self.run, str) and _RUN_ID.fullmatch(self.run)):
            raise _bad("run", f"must be a run id (printable, no spaces), got {self.run!r}")
        if self.variable is not None and not (
            isinstance(self.variable, str) and _VAR_NAME.fullmatch(self.variable)
        ):
            raise _bad("variable", f"must be a variable name, got {self.variable!r}")
        _bool("whole_namespace", self.whole_namespace)
        object.__setattr__(self, "stores", _str_tuple("stores", self.stores, STORES))
        _bool("include_data", self.include_data)
        _ident("llm", self.llm)
        if self.strategy not in STRATEGIES:
            raise _bad("strategy", f"must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        for name, minimum in (
            ("max_messages", 1),
            ("max_tokens", 1),
            ("preserve_recent", 0),
            ("summary_max_tokens", 1),
            ("after", 0),
        ):
            object.__setattr__(self, name, _int(name, getattr(self, name), minimum=minimum))
        object.__setattr__(self, "before", _opt_int("before", self.before, minimum=1))
        object.__setattr__(self, "limit", _int("limit", self.limit, minimum=1, maximum=MAX_PAGE))
        _bool("descending", self.descending)
        if self.node is not None and not (
            isinstance(self.node, str) and ID_PATTERN.fullmatch(self.node)
        ):
            raise _bad("node", f"must be a node id (cw_ + 24 hex digits), got {self.node!r}")
        _opt_ident("new_thread", self.new_thread)
        if self.snapshot is not None and not isinstance(self.snapshot, dict):
            raise _bad("snapshot", "must be a snapshot object {version, nodes, frontier}")
        _bool("replace", self.replace)
        object.__setattr__(self, "metadata", _json_dict("metadata", self.metadata))

        chosen = [n for n in ("thread", "user") if getattr(self, n) is not None]
        if self.app:
            chosen.append("app")
        if len(chosen) > 1:
            raise _bad(chosen[1], f"name one scope: {' and '.join(chosen)} were both given")
        if self.run is not None and self.thread is None:
            raise _bad("run", "a run lives in a thread: give thread too")
        if self.whole_namespace and (chosen or self.run or self.variable):
            raise _bad("whole_namespace", "whole_namespace means everything: give no other target")

    @property
    def scope(self) -> str | None:
        """The scope named by the target (``thread:<id>``, ``user:<id>``, ``app``), if any."""
        if self.thread is not None:
            return "thread:" + self.thread
        if self.user is not None:
            return "user:" + self.user
        if self.app:
            return "app"
        return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> StateOperationRequest:
        """Rebuild a request from decoded JSON; ``None`` gives the defaults."""
        if data is None:
            return cls()
        d = _mapping("StateOperationRequest", data)
        if "session_id" in d:
            sid = d.pop("session_id")
            if sid is not None:
                if d.get("thread") not in (None, sid):
                    raise _bad("session_id", "session_id and thread name different threads")
                d["thread"] = sid
        _known_keys(cls, d)
        if "stores" in d and d["stores"] is not None:
            d["stores"] = _str_tuple("stores", d["stores"])
        if d.get("metadata") is None:
            d.pop("metadata", None)
        for k in _WHOLE:
            v = d.get(k)
            if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
                d[k] = int(v)  # the seed's int(): a whole float is that integer
        return cls(**d)


# --------------------------------------------------------------------------- reports


@dataclass(frozen=True, kw_only=True)
class StateStoreReport:
    """What one store (or a scope's whole graph, ``name="graph"``) holds or what was done to it."""

    name: str
    scope: str | None = None
    enabled: bool = True
    exists: bool = False
    item_count: int | None = None
    message_count: int | None = None
    node_count: int | None = None
    size_bytes: int | None = None
    cleared: bool = False
    compacted: bool = False
    data: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise _bad("name", f"a report names its store, got {self.name!r}")
        if self.scope is not None and not isinstance(self.scope, str):
            raise _bad("scope", f"must be a scope name, got {self.scope!r}")
        for b in ("enabled", "exists", "cleared", "compacted"):
            _bool(b, getattr(self, b))
        for n in ("item_count", "message_count", "node_count", "size_bytes"):
            object.__setattr__(self, n, _opt_int(n, getattr(self, n)))
        if (self.cleared or self.compacted) and not self.enabled:
            # Seed 002 lets a disabled store report a mutation; nothing happens to one.
            raise _bad("enabled", "a disabled store cannot be cleared or compacted")
        if self.error is not None and not isinstance(self.error, str):
            raise _bad("error", f"must be a message, got {self.error!r}")
        object.__setattr__(self, "data", _json_value("data", self.data))
        object.__setattr__(self, "metadata", _json_dict("metadata", self.metadata))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StateStoreReport:
        d = _mapping("StateStoreReport", data)
        _known_keys(cls, d)
        if d.get("metadata") is None:
            d.pop("metadata", None)
        if "name" not in d:
            raise _bad("name", "a report names its store")
        return cls(**d)


@dataclass(frozen=True, kw_only=True)
class ScopeCheck:
    """The outcome of verifying one scope: ok, or the first bad node and why.

    ``erased`` counts the nodes among ``checked`` whose payload was erased (their
    user's data key destroyed): their links, order and ids in the indexes were
    checked, their content identity could not be.
    """

    scope: str
    ok: bool
    checked: int = 0
    code: str | None = None
    message: str | None = None
    index: int | None = None
    node_id: str | None = None
    erased: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.scope, str) or not self.scope:
            raise _bad("scope", f"must be a scope name, got {self.scope!r}")
        _bool("ok", self.ok)
        object.__setattr__(self, "checked", _int("checked", self.checked, minimum=0))
        object.__setattr__(self, "index", _opt_int("index", self.index))
        object.__setattr__(self, "erased", _int("erased", self.erased, minimum=0))
        if self.erased > self.checked:
            raise _bad("erased", f"{self.erased} erased nodes of {self.checked} checked")
        for n in ("code", "message", "node_id"):
            v = getattr(self, n)
            if v is not None and not isinstance(v, str):
                raise _bad(n, f"must be a string, got {v!r}")
        if self.ok != (self.code is None):
            raise _bad("code", "a failed check has a code and a passed one has none")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScopeCheck:
        d = _mapping("ScopeCheck", data)
        _known_keys(cls, d)
        for k in ("scope", "ok"):
            if k not in d:
                raise _bad(k, "missing")
        return cls(**d)


# --------------------------------------------------------------------------- result


@dataclass(frozen=True, kw_only=True)
class StateOperationResult:
    """Everything one operation did or found, per store and overall.

    ``cleared``/``compacted``/``missing`` name what was (or was not there to be)
    touched: scopes (``thread:t1``), variables (``thread:t1/var:x``), runs
    (``thread:t1/run:r1``) or store names. ``errors`` are structured failures that
    did not stop the operation: ``{"code", "message", ...}``. ``nodes`` and
    ``next_after`` are a history page (``next_after`` is None on the last page),
    ``snapshot`` an export, ``checks`` what verify found, ``created`` the scope a
    fork or an import wrote.
    """

    operation: Operation
    namespace: str = DEFAULT_NAMESPACE
    scope: str | None = None
    stores: tuple[StateStoreReport, ...] = ()
    cleared: tuple[str, ...] = ()
    compacted: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    errors: tuple[dict[str, Any], ...] = ()
    nodes: tuple[dict[str, Any], ...] = ()
    next_after: int | None = None
    snapshot: dict[str, Any] | None = None
    checks: tuple[ScopeCheck, ...] = ()
    created: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise _bad(
                "operation", f"must be one of {', '.join(OPERATIONS)}, got {self.operation!r}"
            )
        check_name("namespace", self.namespace)
        if self.scope is not None and not isinstance(self.scope, str):
            raise _bad("scope", f"must be a scope name, got {self.scope!r}")
        reports = tuple(self.stores) if isinstance(self.stores, list | tuple) else None
        if reports is None or not all(isinstance(r, StateStoreReport) for r in reports):
            raise _bad("stores", "must be a list of StateStoreReport")
        object.__setattr__(self, "stores", reports)
        for n in ("cleared", "compacted", "missing"):
            object.__setattr__(self, n, _str_tuple(n, getattr(self, n)))
        for n in ("errors", "nodes"):
            v = getattr(self, n)
            if not isinstance(v, list | tuple) or not all(isinstance(x, Mapping) for x in v):
                raise _bad(n, "must be a list of objects")
        object.__setattr__(self, "errors", tuple(_json_dict("errors", e) for e in self.errors))
        # Nodes and snapshots are stored data, already JSON and possibly large and
        # deep: they are taken as they are, not re-walked.
        object.__setattr__(self, "nodes", tuple(dict(x) for x in self.nodes))
        for e in self.errors:
            if not isinstance(e.get("code"), str) or not isinstance(e.get("message"), str):
                raise _bad("errors", 'each error has a "code" and a "message" string')
        object.__setattr__(self, "next_after", _opt_int("next_after", self.next_after))
        if self.snapshot is not None and not isinstance(self.snapshot, dict):
            raise _bad("snapshot", "must be a snapshot object {version, nodes, frontier}")
        checks = tuple(self.checks) if isinstance(self.checks, list | tuple) else None
        if checks is None or not all(isinstance(c, ScopeCheck) for c in checks):
            raise _bad("checks", "must be a list of ScopeCheck")
        object.__setattr__(self, "checks", checks)
        if self.created is not None and not isinstance(self.created, str):
            raise _bad("created", f"must be a scope name, got {self.created!r}")
        object.__setattr__(self, "metadata", _json_dict("metadata", self.metadata))

    @property
    def ok(self) -> bool:
        """No errors and every verified scope passed."""
        return not self.errors and all(c.ok for c in self.checks)

    @property
    def session_id(self) -> str | None:
        """The thread operated on (seed 002's session), or None."""
        if self.scope is not None and self.scope.startswith("thread:"):
            return self.scope[len("thread:") :]
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "namespace": self.namespace,
            "scope": self.scope,
            "session_id": self.session_id,
            "ok": self.ok,
            "stores": [r.to_dict() for r in self.stores],
            "cleared": list(self.cleared),
            "compacted": list(self.compacted),
            "missing": list(self.missing),
            "errors": [dict(e) for e in self.errors],
            "nodes": [dict(n) for n in self.nodes],
            "next_after": self.next_after,
            "snapshot": self.snapshot,
            "checks": [c.to_dict() for c in self.checks],
            "created": self.created,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StateOperationResult:
        d = _mapping("StateOperationResult", data)
        d.pop("ok", None)  # derived, written by to_dict for readers' convenience
        d.pop("session_id", None)  # derived from scope, as ok
        _known_keys(cls, d)
        if "operation" not in d:
            raise _bad("operation", "missing")
        if d.get("metadata") is None:
            d.pop("metadata", None)
        stores = d.get("stores", ())
        if not isinstance(stores, list | tuple):
            raise _bad("stores", "must be a list of reports")
        d["stores"] = tuple(StateStoreReport.from_dict(r) for r in stores)
        checks = d.get("checks", ())
        if not isinstance(checks, list | tuple):
            raise _bad("checks", "must be a list of checks")
        d["checks"] = tuple(ScopeCheck.from_dict(c) for c in checks)
        for n in ("errors", "nodes"):
            if n in d and isinstance(d[n], list):
                d[n] = tuple(d[n])
        return cls(**d)
