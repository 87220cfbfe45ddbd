"""RFC 8785 canonical JSON against the RFC's own vectors and an independent implementation."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from tether import node_id
from tether.core.canonical import (
    MAX_SAFE_INT,
    CanonicalError,
    _canonical_walk,
    _simple,
    canonical_json,
    format_number,
)

VECTORS = json.loads((Path(__file__).parent / "data" / "jcs_vectors.json").read_text("utf-8"))


def _double(hex_bits: str) -> float:
    return float(struct.unpack(">d", bytes.fromhex(hex_bits))[0])


@pytest.mark.parametrize(("bits", "expected"), VECTORS["numbers"])
def test_number_vectors(bits: str, expected: str) -> None:
    assert format_number(_double(bits)) == expected
    assert canonical_json(_double(bits)) == expected.encode()


@pytest.mark.parametrize("bits", VECTORS["non_finite"])
def test_non_finite_rejected(bits: str) -> None:
    with pytest.raises(CanonicalError) as e:
        canonical_json({"x": [_double(bits)]})
    assert e.value.code == "non_finite"


@pytest.mark.parametrize("doc", VECTORS["documents"], ids=lambda d: d["comment"][:40])
def test_document_vectors(doc: dict[str, str]) -> None:
    assert canonical_json(json.loads(doc["input"])) == doc["output"].encode("utf-8")


@pytest.mark.parametrize("vec", VECTORS["identities"], ids=lambda v: v["comment"])
def test_identity_vectors(vec: dict[str, Any]) -> None:
    expected = "cw_" + hashlib.sha256(vec["body"].encode()).hexdigest()[:24]
    assert node_id(vec["kind"], vec["parents"], vec["payload"], vec.get("resourceKey")) == expected


def test_integer_range_and_types() -> None:
    assert canonical_json(MAX_SAFE_INT) == str(MAX_SAFE_INT).encode()
    for bad in (MAX_SAFE_INT + 1, -MAX_SAFE_INT - 1):
        with pytest.raises(CanonicalError) as e:
            canonical_json([bad])
        assert e.value.code == "number_range"
    with pytest.raises(CanonicalError) as e:
        canonical_json({1: "non-string key"})
    assert e.value.code == "shape"
    with pytest.raises(CanonicalError) as e:
        canonical_json({"set": {1, 2}})
    assert e.value.code == "shape"
    with pytest.raises(CanonicalError) as e:
        canonical_json("\ud800")
    assert e.value.code == "shape"


def test_depth_limit() -> None:
    value: Any = "leaf"
    for _ in range(64):
        value = [value]
    assert canonical_json(value, max_depth=64)
    with pytest.raises(CanonicalError) as e:
        canonical_json([value], max_depth=64)
    assert e.value.code == "too_large"
    deep: Any = {}
    for _ in range(100_000):  # far past the recursion limit: must stop at the bound, not crash
        deep = {"k": deep}
    with pytest.raises(CanonicalError):
        canonical_json(deep)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=30,
)


@given(json_values)
def test_matches_independent_implementation(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_round_trips(x: float) -> None:
    s = format_number(x)
    assert float(s) == x or (x == 0 and float(s) == 0)
    assert not math.isnan(float(s))


# The fast path (orjson with sorted keys) must give the RFC's bytes wherever it is
# taken: values of str, safe int, bool, None, lists and ASCII-keyed objects. The
# strategy below stays on it; text() covers every code point, controls included.
simple_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(alphabet=st.characters(max_codepoint=127)), children, max_size=5)
    ),
    max_leaves=30,
)


@given(simple_values)
def test_fast_path_matches_independent_implementation(value: Any) -> None:
    assert _simple(value, 64)
    assert canonical_json(value) == rfc8785.dumps(value) == _canonical_walk(value, 64)


@given(json_values)
def test_general_walk_matches_independent_implementation(value: Any) -> None:
    assert _canonical_walk(value, 64) == rfc8785.dumps(value)


def test_fast_path_boundaries_fall_back_to_the_checks() -> None:
    # Each of these looks simple from outside; the general walk must decide.
    assert not _simple({"a": [MAX_SAFE_INT + 1]}, 64)
    assert not _simple({"é": 1}, 64)
    assert not _simple({"a": 1.5}, 64)
    assert not _simple({1: "x"}, 64)
    assert canonical_json({"é": 1, "z": 2, "\ue000": 3, "\U0001f600": 4}) == rfc8785.dumps(
        {"é": 1, "z": 2, "\ue000": 3, "\U0001f600": 4}
    )
    assert canonical_json(("a", (1, None))) == b'["a",[1,null]]'
    for bad, code in (
        ({"a": [MAX_SAFE_INT + 1]}, "number_range"),
        ({"a": ["\ud800"]}, "shape"),
        ({"a": {"b": "ok", "c": "\udfff"}}, "shape"),
        ({"a": [float("nan")]}, "non_finite"),
    ):
        with pytest.raises(CanonicalError) as e:
            canonical_json(bad)
        assert e.value.code == code


def test_fast_path_rejects_what_the_walk_rejects() -> None:
    # orjson would write str/int/dict subclasses, enums and UUIDs; tether never hashes them.
    import enum
    import uuid

    class Color(enum.IntEnum):
        RED = 1

    class S(str):
        pass

    for bad in (
        {"c": Color.RED},
        {"u": uuid.UUID(int=1)},
        {"s": S("x")},
        [S("x")],
        {S("k"): 1},
        OrderedDictLike({"a": 1}),
    ):
        assert not _simple(bad, 64)
        with pytest.raises(CanonicalError) as e:
            canonical_json(bad)
        assert e.value.code == "shape"


class OrderedDictLike(dict):  # type: ignore[type-arg]
    pass


def _nest(shape: str, depth: int) -> Any:
    value: Any = {"list": [], "dict": {}, "mixed": "leaf", "tuple": ()}[shape]
    for i in range(depth):
        if shape == "list" or (shape == "mixed" and i % 2):
            value = [value]
        elif shape == "tuple":
            value = (value,)
        else:
            value = {"k": value}
    return value


@pytest.mark.parametrize("shape", ["list", "dict", "mixed", "tuple"])
@pytest.mark.parametrize("depth", [0, 1, 2, 63, 64, 65, 300])
def test_fast_path_depth_equals_walk_depth(shape: str, depth: int) -> None:
    # The same nesting is accepted or refused by both paths, at any max_depth.
    value = _nest(shape, depth)
    for max_depth in (0, 1, 64, 65, 129, 500):
        try:
            expected: bytes | str = _canonical_walk(value, max_depth)
        except CanonicalError as e:
            expected = e.code
        try:
            got: bytes | str = canonical_json(value, max_depth=max_depth)
        except CanonicalError as e:
            got = e.code
        assert got == expected
