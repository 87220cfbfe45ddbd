"""Tools: Python callables the model (or a tool node) can call.

    @tether.tool(needs_approval=True)
    async def transfer(amount: int, to: str, *, idempotency_key: str) -> str:
        '''Move money.

        Args:
            amount: in cents
            to: the account
        '''

The JSON schema comes from the signature: ``str int float bool None``,
``list[X]``/``tuple[X, ...]``, ``dict[str, X]``, ``Literal[...]``, enums,
``X | None`` and ``Annotated[X, "description"]``; parameters with defaults are
optional. The description is the docstring's first paragraph, parameter
descriptions come from an ``Args:`` section.

Four keyword parameters are injected, never part of the schema:
``idempotency_key`` (the tool_call node's id: the same on every re-issue after a
crash, so a tool can deduplicate its side effect), ``context`` (the caller's
context, never persisted), ``state`` (the tool's own durable key-value state,
``tether.runtime.tool_state``; ``@tool(state_scope=...)`` picks thread, user or
app) and ``credentials`` (the credentials named by ``@tool(credentials=[...])``,
resolved per call and never persisted: ``tether.runtime.credentials``). Sync
functions run in a worker thread so parallel calls overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, overload

import orjson

from ..core import strict_json
from ..core.canonical import MAX_SAFE_INT, CanonicalError, canonical_json
from ..core.errors import InvalidNode
from ..core.graph import DEFAULT_LIMITS
from ..core.messages import ToolSpec
from .errors import ToolDefinitionError

__all__ = ["INJECTED", "Tool", "ToolArgumentsError", "as_tool", "json_schema", "tool"]

INJECTED: Final = frozenset({"idempotency_key", "context", "state", "credentials"})
STATE_SCOPES: Final = ("thread", "user", "app")
_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
F = TypeVar("F", bound=Callable[..., Any])


class ToolArgumentsError(ValueError):
    """Arguments that do not match the tool's schema (reported to the model, not raised)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A callable with a name, a description, a JSON schema and an approval policy."""

    name: str
    fn: Callable[..., Any] = field(repr=False, compare=False)
    description: str = ""
    parameters: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}, compare=False
    )
    needs_approval: bool = False
    injects: frozenset[str] = field(default=frozenset(), compare=False)
    # Where the tool's ``state`` lives (thread, user or app) and which credentials it needs.
    state_scope: str = "thread"
    credentials: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ToolDefinitionError(
                f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-' "
                "(what model APIs accept)"
            )
        if not callable(self.fn):
            raise ToolDefinitionError(f"tool {self.name!r}: fn is not callable")
        if self.state_scope not in STATE_SCOPES:
            raise ToolDefinitionError(
                f"tool {self.name!r}: state_scope is thread, user or app, got {self.state_scope!r}"
            )
        if isinstance(self.credentials, str) or not all(
            isinstance(c, str) and 0 < len(c) <= 128 for c in self.credentials
        ):
            raise ToolDefinitionError(
                f"tool {self.name!r}: credentials is a list of names, got {self.credentials!r}"
            )
        object.__setattr__(self, "credentials", tuple(dict.fromkeys(self.credentials)))
        if self.credentials and "credentials" not in self.injects:
            raise ToolDefinitionError(
                f"tool {self.name!r} needs credentials {list(self.credentials)} but has no "
                "`credentials` parameter to receive them; add `credentials: dict[str, str]`"
            )

    @property
    def stateful(self) -> bool:
        """Takes a ``state`` handle."""
        return "state" in self.injects

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """A decorated function stays callable as itself."""
        return self.fn(*args, **kwargs)

    def check(self, arguments: Any) -> dict[str, Any]:
        """The arguments as keyword arguments, or ToolArgumentsError saying what is wrong."""
        if not isinstance(arguments, Mapping):
            raise ToolArgumentsError(f"arguments must be a JSON object, got {arguments!r}")
        arguments = _lax(self.parameters, dict(arguments))
        problem = _validate(self.parameters, arguments, "arguments")
        if problem:
            raise ToolArgumentsError(f"{problem}; the schema is {_dumps(self.parameters)}")
        return dict(arguments)

    async def invoke(
        self,
        arguments: Any,
        *,
        idempotency_key: str,
        context: Mapping[str, Any] | None = None,
        state: Any = None,
        credentials: Mapping[str, str] | None = None,
    ) -> Any:
        """Call the tool; its return value made JSON-safe. Exceptions propagate.

        ``state`` is a ``ToolState`` (a sync tool gets its ``SyncToolState``).
        """
        kwargs = self.check(arguments)
        if "idempotency_key" in self.injects:
            kwargs["idempotency_key"] = idempotency_key
        if "context" in self.injects:
            kwargs["context"] = dict(context or {})
        if "credentials" in self.injects:
            kwargs["credentials"] = dict(credentials or {})
        is_async = inspect.iscoroutinefunction(self.fn)
        if "state" in self.injects:
            if state is None:
                raise ToolArgumentsError(f"tool {self.name!r} needs its state handle")
            kwargs["state"] = state if is_async else state.sync(asyncio.get_running_loop())
        if is_async:
            result = await self.fn(**kwargs)
        else:
            result = await asyncio.to_thread(self.fn, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        return jsonable(result)


def exact_json(value: Any, what: str = "value") -> Any:
    """``jsonable(value)`` for a value that comes in through a door (a step's input, its
    metadata): numbers and nesting that cannot be stored exactly are refused with
    their codes (number_range, non_finite, too_large), never rounded or turned into
    null; values of other types are converted as ``jsonable`` does."""
    try:
        canonical_json(value, max_depth=DEFAULT_LIMITS.max_depth)
    except CanonicalError as e:
        if e.code != "shape":
            raise InvalidNode(f"{what} rejected: {e}", code=e.code, field=what) from None
    return jsonable(value)


def jsonable(value: Any) -> Any:
    """A JSON value for ``value``: sets become lists, unknown objects their str(), keys
    that are not strings their str().

    Under the JSON policy (``tether.core.strict_json``), what cannot be stored exactly
    is refused with its code (``InvalidNode``), never changed: NaN and Infinity
    (``non_finite``, which orjson would write as null), integers beyond ±(2**53-1)
    (``number_range``), two keys that read the same once made strings
    (``duplicate_key``: ``{1: "a", "1": "b"}``), nesting orjson cannot write
    (``too_large``).
    """
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int | float):
        return _scalar(value)
    try:
        data = orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS)
    except TypeError as e:
        msg = str(e)
        code = "too_large" if "ecursion" in msg else "number_range" if "64-bit" in msg else "shape"
        raise InvalidNode(f"value rejected: {msg}", code=code) from None
    if b"null" in data:
        _check_finite(value)
    try:
        return strict_json.loads(data)
    except CanonicalError as e:
        raise InvalidNode(f"value rejected: {e}", code=e.code) from None


def _scalar(value: int | float) -> int | float:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidNode(f"value rejected: {value} is not JSON", code="non_finite")
    elif not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
        raise InvalidNode(
            f"value rejected: integer {value} is outside ±(2**53-1)", code="number_range"
        )
    return value


def _check_finite(value: Any) -> None:
    """Raise ``non_finite`` if a float NaN or Infinity is anywhere in ``value``."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float):
            _scalar(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list | tuple | set | frozenset):
            stack.extend(v)


def _default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return str(value)


def _dumps(v: Any) -> str:
    return orjson.dumps(v).decode()


@overload
def tool(fn: F, /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool = False,
    state_scope: str | None = None,
    credentials: Sequence[str] | None = None,
) -> Callable[[F], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool = False,
    state_scope: str | None = None,
    credentials: Sequence[str] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a ``Tool``: ``@tool`` or ``@tool(needs_approval=True, description=...)``.

    ``state_scope`` (thread, user or app; default thread) is where a tool taking a
    ``state`` parameter keeps it; ``credentials`` names what it needs in its
    ``credentials`` parameter.
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return as_tool(
            f,
            name=name,
            description=description,
            needs_approval=needs_approval,
            state_scope=state_scope,
            credentials=credentials,
        )

    return wrap if fn is None else wrap(fn)


def as_tool(
    fn: Callable[..., Any] | Tool,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool | None = None,
    state_scope: str | None = None,
    credentials: Sequence[str] | None = None,
) -> Tool:
    """A Tool from a function (or a Tool with some fields replaced)."""
    if isinstance(fn, Tool):
        return Tool(
            name=name or fn.name,
            fn=fn.fn,
            description=fn.description if description is None else description,
            parameters=fn.parameters,
            needs_approval=fn.needs_approval if needs_approval is None else needs_approval,
            injects=fn.injects,
            state_scope=fn.state_scope if state_scope is None else state_scope,
            credentials=fn.credentials if credentials is None else tuple(credentials),
        )
    if not callable(fn):
        raise ToolDefinitionError(f"a tool is a callable or a Tool, got {fn!r}")
    tool_name = name or str(getattr(fn, "__name__", ""))
    doc = inspect.getdoc(fn) or ""
    summary, arg_docs = _parse_doc(doc)
    parameters, injects = json_schema(fn, arg_docs)
    if state_scope is not None and "state" not in injects:
        if "state" not in inspect.signature(fn).parameters:
            raise ToolDefinitionError(
                f"tool {tool_name!r} sets state_scope but has no `state` parameter to receive "
                "its state; add `state: tether.ToolState`"
            )
        # state_scope says what an unannotated `state` parameter is for.
        injects = injects | {"state"}
        props = {k: v for k, v in parameters["properties"].items() if k != "state"}
        req = [r for r in parameters.get("required", ()) if r != "state"]
        parameters = {**parameters, "properties": props}
        if req:
            parameters["required"] = req
        else:
            parameters.pop("required", None)
    if isinstance(credentials, str):
        raise ToolDefinitionError(f"tool {tool_name!r}: credentials is a list of names")
    return Tool(
        name=tool_name,
        fn=fn,
        description=summary if description is None else description,
        parameters=parameters,
        needs_approval=bool(needs_approval),
        injects=injects,
        state_scope=state_scope or "thread",
        credentials=tuple(credentials or ()),
    )


def json_schema(
    fn: Callable[..., Any], arg_docs: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], frozenset[str]]:
    """The JSON schema of ``fn``'s parameters and the injected names it accepts."""
    where = getattr(fn, "__qualname__", repr(fn))
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise ToolDefinitionError(f"{where}: no signature: {e}") from None
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise ToolDefinitionError(f"{where}: cannot resolve type hints: {e}") from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    injects: set[str] = set()
    extra = False
    for p in sig.parameters.values():
        if p.name in INJECTED and (p.name != "state" or _is_state_hint(hints.get(p.name))):
            injects.add(p.name)
            continue
        if p.kind is p.VAR_POSITIONAL or p.kind is p.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"{where}: parameter {p.name!r} is positional-only or *args; "
                "tools are called with keyword arguments"
            )
        if p.kind is p.VAR_KEYWORD:
            extra = True
            continue
        hint = hints.get(p.name, Any)
        try:
            schema = _schema(hint)
        except ToolDefinitionError as e:
            raise ToolDefinitionError(f"{where}: parameter {p.name!r}: {e.message}") from None
        if arg_docs and p.name in arg_docs and "description" not in schema:
            schema = {**schema, "description": arg_docs[p.name]}
        if p.default is p.empty:
            required.append(p.name)
        else:
            with contextlib.suppress(TypeError):
                schema = {**schema, "default": jsonable(p.default)}
        properties[p.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = extra
    return out, frozenset(injects)


def _is_state_hint(hint: Any) -> bool:
    """``state`` is injected only when annotated as a tool state handle: a tool may well
    take a plain argument called state (a US state, an order's state)."""
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return getattr(hint, "__name__", None) in ("ToolState", "SyncToolState") and str(
        getattr(hint, "__module__", "")
    ).startswith("tether")


_SIMPLE: Final[dict[Any, dict[str, Any]]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
    dict: {"type": "object"},
    list: {"type": "array"},
    tuple: {"type": "array"},
}


def _schema(hint: Any) -> dict[str, Any]:
    if hint is Any or hint is inspect.Parameter.empty or hint is object:
        return {}
    if hint in _SIMPLE:
        return dict(_SIMPLE[hint])
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        inner = _schema(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**inner, "description": notes[0]} if notes else inner
    if origin is typing.Union or origin is types.UnionType:
        opts = [_schema(a) for a in args]
        return {"anyOf": opts}
    if origin is typing.Literal:
        values = list(args)
        out: dict[str, Any] = {"enum": values}
        kinds = {type(v) for v in values}
        if len(kinds) == 1 and (t := next(iter(kinds))) in _SIMPLE:
            out = {**_SIMPLE[t], **out}
        return out
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    if origin in (list, Sequence, set, frozenset) or origin is typing.Sequence:
        return {"type": "array", "items": _schema(args[0])} if args else {"type": "array"}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema(args[0])}
        return {
            "type": "array",
            "prefixItems": [_schema(a) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin in (dict, Mapping):
        if args and args[0] is not str:
            raise ToolDefinitionError(f"{hint!r}: JSON object keys are strings; use dict[str, ...]")
        return (
            {"type": "object", "additionalProperties": _schema(args[1])}
            if args
            else {"type": "object"}
        )
    raise ToolDefinitionError(
        f"annotation {hint!r} has no JSON schema; use str, int, float, bool, list, dict, "
        "Literal, an Enum, or Any"
    )


_INT: Final = re.compile(r"^\s*[-+]?\d+\s*$")


def _lax(schema: Mapping[str, Any], value: Any) -> Any:
    """Lossless fixes of what models often send: "10" or 10.0 for an integer, "true"."""
    t = schema.get("type")
    if t == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        if t == "integer" and _INT.match(value):
            return int(value)
        if t == "number":
            try:
                f = float(value)
            except ValueError:
                return value
            return f if f == f and f not in (float("inf"), float("-inf")) else value
        if t == "boolean" and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        return value
    if isinstance(value, dict) and isinstance(schema.get("properties"), Mapping):
        props = schema["properties"]
        return {k: _lax(props[k], v) if k in props else v for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_lax(schema["items"], v) for v in value]
    return value


_TYPES: Final[dict[str, Callable[[Any], bool]]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, Mapping),
    "array": lambda v: isinstance(v, list | tuple),
}


def _validate(schema: Mapping[str, Any], value: Any, path: str) -> str | None:
    """The first way ``value`` breaks ``schema`` (the subset json_schema emits), else None."""
    if "anyOf" in schema:
        if all(_validate(s, value, path) for s in schema["anyOf"]):
            return f"{path} = {value!r} matches none of the allowed types"
        return None
    t = schema.get("type")
    if t is not None and not _TYPES[t](value):
        return f"{path} must be {t}, got {value!r}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} must be one of {schema['enum']!r}, got {value!r}"
    if t == "object" and isinstance(value, Mapping):
        props = schema.get("properties")
        if props is not None:
            missing = [r for r in schema.get("required", ()) if r not in value]
            if missing:
                return f"missing required {', '.join(missing)} in {path}"
            if schema.get("additionalProperties") is False:
                unknown = sorted(set(value) - set(props))
                if unknown:
                    return f"unknown {', '.join(unknown)} in {path} (allowed: {', '.join(props)})"
            for k, sub in props.items():
                if k in value and (p := _validate(sub, value[k], f"{path}.{k}")):
                    return p
        elif isinstance(schema.get("additionalProperties"), Mapping):
            for k, v in value.items():
                if p := _validate(schema["additionalProperties"], v, f"{path}.{k}"):
                    return p
    if t == "array" and isinstance(value, list | tuple):
        if "prefixItems" in schema:
            if len(value) != len(schema["prefixItems"]):
                return f"{path} must have {len(schema['prefixItems'])} items"
            for i, (s, v) in enumerate(zip(schema["prefixItems"], value, strict=True)):
                if p := _validate(s, v, f"{path}[{i}]"):
                    return p
        elif "items" in schema:
            for i, v in enumerate(value):
                if p := _validate(schema["items"], v, f"{path}[{i}]"):
                    return p
    return None


_ARGS: Final = re.compile(r"^(?:Args|Arguments|Parameters):\s*$", re.MULTILINE)


def _parse_doc(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and ``name: description`` lines of an ``Args:`` section."""
    summary = doc.split("\n\n", 1)[0].strip() if doc else ""
    if _ARGS.match(summary):
        summary = ""
    args: dict[str, str] = {}
    m = _ARGS.search(doc)
    if m:
        current: str | None = None
        base: int | None = None
        for line in doc[m.end() :].splitlines():
            if not line.strip():
                if args:
                    break
                continue
            indent = len(line) - len(line.lstrip())
            if indent == 0:
                break
            item = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?\s*:\s*(.*)$", line)
            if item and (base is None or indent == base):
                base = indent
                current = item.group(1)
                args[current] = item.group(2).strip()
            elif current is not None:
                args[current] = (args[current] + " " + line.strip()).strip()
    return summary, args


def resolve_tools(
    tools: Sequence[Tool | Callable[..., Any]] | Mapping[str, Tool | Callable[..., Any]] | None,
) -> dict[str, Tool]:
    """Tools by name from a list (or a mapping name -> tool); duplicate names are an error."""
    out: dict[str, Tool] = {}
    items: list[tuple[str | None, Tool | Callable[..., Any]]]
    if tools is None:
        items = []
    elif isinstance(tools, Mapping):
        items = list(tools.items())
    else:
        items = [(None, t) for t in tools]
    for name, t in items:
        tl = as_tool(t, name=name) if name is not None else as_tool(t)
        if tl.name in out:
            raise ToolDefinitionError(f"two tools are named {tl.name!r}; tool names are unique")
        out[tl.name] = tl
    return out
