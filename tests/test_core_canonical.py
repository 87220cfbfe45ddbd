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
from tether._canonical import MAX_SAFE_INT, CanonicalError, canonical_json, format_number

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
