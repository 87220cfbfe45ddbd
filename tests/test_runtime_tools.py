"""Tools: JSON schemas from signatures, argument checks, injection, invocation."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tether.core.errors import InvalidNode
from tether.runtime import Tool, ToolDefinitionError, tool
from tether.runtime.tools import ToolArgumentsError, as_tool, json_schema, jsonable


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


async def test_schema_from_signature_and_docstring() -> None:
    @tool(description=None)
    def search(
        query: str,
        limit: int = 10,
        ratio: float = 0.5,
        exact: bool = False,
        tags: list[str] | None = None,
        mode: Literal["fast", "deep"] = "fast",
        color: Color = Color.RED,
        extra: dict[str, int] | None = None,
        note: Annotated[str, "free text"] = "",
        *,
        idempotency_key: str,
        context: dict[str, Any],
    ) -> str:
        """Search the index.

        Longer explanation that is not the description.

        Args:
            query: what to look for,
                over several lines
            limit (int): how many
        """
        return query

    assert search.name == "search"
    assert search.description == "Search the index."
    assert search.injects == frozenset({"idempotency_key", "context"})
    p = search.parameters
    assert p["required"] == ["query"]
    assert p["additionalProperties"] is False
    props = p["properties"]
    assert props["query"] == {
        "type": "string",
        "description": "what to look for, over several lines",
    }
    assert props["limit"] == {"type": "integer", "description": "how many", "default": 10}
    assert props["ratio"]["type"] == "number" and props["exact"]["type"] == "boolean"
    assert props["tags"]["anyOf"] == [
        {"type": "array", "items": {"type": "string"}},
        {"type": "null"},
    ]
    assert props["mode"] == {"type": "string", "enum": ["fast", "deep"], "default": "fast"}
    assert props["color"]["enum"] == ["red", "blue"]
    assert props["extra"]["anyOf"][0] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }
    assert props["note"]["description"] == "free text"
    assert "idempotency_key" not in props and "context" not in props
    assert search.spec.name == "search" and search.spec.parameters is p
    # A decorated function stays callable.
    assert search("q", idempotency_key="k", context={}) == "q"


class Opaque:
    pass


def test_bad_definitions_are_rejected_clearly() -> None:
    def f(x: Opaque) -> None: ...

    with pytest.raises(ToolDefinitionError, match="'x'"):
        as_tool(f)

    def g(*args: int) -> None: ...

    with pytest.raises(ToolDefinitionError, match="keyword"):
        as_tool(g)

    def h(d: dict[int, str]) -> None: ...

    with pytest.raises(ToolDefinitionError, match="keys are strings"):
        as_tool(h)
    with pytest.raises(ToolDefinitionError, match="name"):
        Tool(name="has space", fn=print)


async def test_arguments_are_checked_and_scalar_strings_fixed() -> None:
    @tool
    def add(a: int, b: float = 1.0, flag: bool = False) -> float:
        return a + b + flag

    assert await add.invoke({"a": "2", "b": "0.5", "flag": "true"}, idempotency_key="k") == 3.5
    with pytest.raises(ToolArgumentsError, match="missing required a"):
        add.check({})
    with pytest.raises(ToolArgumentsError, match="unknown c"):
        add.check({"a": 1, "c": 2})
    with pytest.raises(ToolArgumentsError, match="must be integer"):
        add.check({"a": "two"})
    with pytest.raises(ToolArgumentsError, match="must be integer"):
        add.check({"a": True})  # a bool is not an integer
    with pytest.raises(ToolArgumentsError, match="JSON object"):
        add.check([1])


async def test_sync_and_async_tools_and_injection() -> None:
    got: dict[str, Any] = {}

    @tool
    async def a(x: int, idempotency_key: str) -> dict[str, Any]:
        got["a"] = idempotency_key
        return {"x": x, "set": {1}}

    @tool
    def b(context: dict[str, Any]) -> object:
        got["b"] = context
        return object()

    assert await a.invoke({"x": 1}, idempotency_key="key-1") == {"x": 1, "set": [1]}
    out = await b.invoke({}, idempotency_key="key-2", context={"c": 1})
    assert isinstance(out, str) and out.startswith("<object")
    assert got == {"a": "key-1", "b": {"c": 1}}


def test_jsonable() -> None:
    assert jsonable({1: (1, 2)}) == {"1": [1, 2]}
    assert jsonable("x") == "x"
    assert jsonable({"n": [2**53 - 1, -(2**53 - 1), 1.5, None]}) == {
        "n": [2**53 - 1, -(2**53 - 1), 1.5, None]
    }
    # Exact, or a typed error: nothing that cannot be stored as it is becomes something else.
    for value, code in (
        (float("nan"), "non_finite"),
        ({"x": [float("nan")]}, "non_finite"),
        ({"x": (float("-inf"),)}, "non_finite"),
        ({float("inf")}, "non_finite"),
        (2**53, "number_range"),
        ({"n": -(2**60)}, "number_range"),
        ({"n": 2**70}, "number_range"),
        ({1: "a", "1": "b"}, "duplicate_key"),
    ):
        with pytest.raises(InvalidNode) as e:
            jsonable(value)
        assert e.value.code == code, value


# -- the argument checker agrees with JSON Schema itself -------------------------------

jsonschema = pytest.importorskip("jsonschema")


def sample(
    s: str,
    i: int,
    f: float,
    b: bool,
    xs: list[int],
    m: dict[str, bool],
    opt: str | None = None,
    lit: Literal[1, 2, 3] = 1,
    pair: tuple[int, str] = (0, ""),
) -> None: ...


SCHEMA, _ = json_schema(sample)
SAMPLE = as_tool(sample)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False)
    | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)


def field(correct: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a value of the right type (or its string form), sometimes anything."""
    return st.one_of(correct, correct.map(lambda v: str(v).lower()), json_values)


arguments = st.fixed_dictionaries(
    {
        "s": field(st.text(max_size=3)),
        "i": field(st.integers(-3, 3)),
        "f": field(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-3, 3)),
        "b": field(st.booleans()),
        "xs": field(st.lists(st.integers(-3, 3), max_size=2)),
        "m": field(st.dictionaries(st.text(max_size=2), st.booleans(), max_size=2)),
    },
    optional={
        "opt": field(st.none() | st.text(max_size=2)),
        "lit": field(st.sampled_from([1, 2, 3])),
        "pair": field(st.tuples(st.integers(-3, 3), st.text(max_size=2)).map(list)),
        "zzz": json_values,
    },
)


def test_emitted_schema_is_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@settings(max_examples=300, deadline=None)
@given(arguments)
def test_checker_agrees_with_jsonschema(args: dict[str, Any]) -> None:
    # Scalar-string fixes are applied first, as invoke does; then both must agree.
    from tether.runtime.tools import _lax, _validate

    fixed = _lax(SCHEMA, args)
    ours = _validate(SCHEMA, fixed, "arguments") is None
    theirs = jsonschema.Draft202012Validator(SCHEMA).is_valid(fixed)
    assert ours == theirs, (args, fixed)
    event("valid" if ours else "invalid")
    if ours:
        assert SAMPLE.check(args) == fixed
    else:
        with pytest.raises(ToolArgumentsError):
            SAMPLE.check(args)
