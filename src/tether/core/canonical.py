"""RFC 8785 (JCS) canonical JSON, with the checks tether needs while it walks.

One pass both validates (finite numbers, integer range, depth, key and value
types, valid Unicode) and produces the canonical bytes, so validating a snapshot
costs one walk per payload.

Deviation noted: RFC 8785 sorts object keys by UTF-16 code units; the SPEC says
"code point". The two orders differ only between keys holding characters above
U+FFFF and keys holding U+E000..U+FFFF; we follow the RFC (its own test vectors
require it) and use plain code point order whenever every key is ASCII.

Fast path: most payloads hold only strings, safe integers, booleans, null, lists
and objects with ASCII keys. For those, orjson with sorted keys writes exactly the
RFC 8785 bytes (its string escaping equals ``encode_basestring`` for every code
point; ASCII keys sort alike by code point, UTF-16 unit or UTF-8 byte), so
``canonical_json`` checks the shape in one cheap walk and lets orjson write it:
about 4x faster than the general walk. Anything else (floats, non-ASCII keys, other
types, too deep) takes the general walk, which also reports the errors.
tests/test_core_canonical.py checks both paths against ``rfc8785``.
"""

from __future__ import annotations

import math
from json.encoder import encode_basestring
from typing import Any

import orjson

from .messages import ReadOnlyDict, ReadOnlyList

# I-JSON (RFC 7493) safe integer range: beyond it a number cannot round-trip
# through an IEEE double, so two different values could hash alike.
MAX_SAFE_INT = 2**53 - 1


class CanonicalError(ValueError):
    """Raised with a snapshot error code: non_finite, number_range, too_large, shape
    (or duplicate_key, from ``strict_json.loads``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _utf16_key(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def format_number(x: float) -> str:
    """ECMAScript Number.prototype.toString for a finite double (RFC 8785 §3.2.2.3)."""
    if x != x or x in (math.inf, -math.inf):
        raise CanonicalError("non_finite", "NaN and Infinity are not JSON")
    if x == 0:
        return "0"
    r = repr(x)
    sign = ""
    if r[0] == "-":
        sign, r = "-", r[1:]
    if "e" in r:
        mant, _, exp_s = r.partition("e")
        exp = int(exp_s)
    else:
        mant, exp = r, 0
    ip, _, fp = mant.partition(".")
    raw = ip + fp
    stripped = raw.lstrip("0")
    n = len(ip) - (len(raw) - len(stripped)) + exp  # value = 0.DIGITS x 10^n
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        s = (
            digits[0]
            + ("." + digits[1:] if k > 1 else "")
            + ("e+" if e >= 0 else "e-")
            + str(abs(e))
        )
    return sign + s


def _walk(value: Any, out: list[str], depth: int, max_depth: int) -> None:
    # Ordered by frequency in agent payloads: str, dict, int, list, ...
    t = type(value)
    if t is str:
        out.append(encode_basestring(value))
    elif t is dict or t is ReadOnlyDict:
        if depth >= max_depth:
            raise CanonicalError("too_large", f"nesting deeper than {max_depth}")
        if not value:
            out.append("{}")
            return
        keys = list(value)
        for k in keys:
            if type(k) is not str:
                raise CanonicalError("shape", f"object key {k!r} is not a string")
        if all(k.isascii() for k in keys):
            keys.sort()
        else:
            keys.sort(key=_utf16_key)
        sep = "{"
        for k in keys:
            out.append(sep)
            out.append(encode_basestring(k))
            out.append(":")
            _walk(value[k], out, depth + 1, max_depth)
            sep = ","
        out.append("}")
    elif t is int:
        if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            out.append(str(value))
        else:
            raise CanonicalError(
                "number_range", f"integer {value} is outside ±(2**53-1); store it as a string"
            )
    elif t is list or t is tuple or t is ReadOnlyList:
        if depth >= max_depth:
            raise CanonicalError("too_large", f"nesting deeper than {max_depth}")
        if not value:
            out.append("[]")
            return
        sep = "["
        for v in value:
            out.append(sep)
            _walk(v, out, depth + 1, max_depth)
            sep = ","
        out.append("]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif t is float:
        out.append(format_number(value))
    else:
        raise CanonicalError("shape", f"{t.__name__} is not a JSON value")


def _simple(value: Any, depth: int) -> bool:
    """True if orjson writes ``value`` in RFC 8785 form: only exact str, safe int,
    bool, None, list/tuple and dicts (read-only ones too: ``tether.core.messages``) with
    ASCII str keys, nested less than ``depth``."""
    t = type(value)
    if t is dict or t is ReadOnlyDict:
        if depth <= 0:
            return False
        for k, v in value.items():
            if type(k) is not str or not k.isascii():
                return False
            tv = type(v)
            if tv is str or v is None or v is True or v is False:
                continue
            if tv is int:
                if -MAX_SAFE_INT <= v <= MAX_SAFE_INT:
                    continue
                return False
            if not _simple(v, depth - 1):
                return False
        return True
    if t is list or t is tuple or t is ReadOnlyList:
        if depth <= 0:
            return False
        for v in value:
            tv = type(v)
            if tv is str or v is None or v is True or v is False:
                continue
            if tv is int:
                if -MAX_SAFE_INT <= v <= MAX_SAFE_INT:
                    continue
                return False
            if not _simple(v, depth - 1):
                return False
        return True
    if t is str or value is None or value is True or value is False:
        return True
    return t is int and -MAX_SAFE_INT <= value <= MAX_SAFE_INT


_dumps = orjson.dumps
_SORT_KEYS = orjson.OPT_SORT_KEYS


def canonical_json(value: Any, *, max_depth: int = 64) -> bytes:
    """The RFC 8785 canonical form of a JSON value, as UTF-8 bytes.

    Raises CanonicalError (code non_finite, number_range, too_large or shape).
    """
    if _simple(value, max_depth):
        try:
            return _dumps(value, option=_SORT_KEYS)
        except TypeError:
            pass  # a lone surrogate: the general walk raises the right error
    return _canonical_walk(value, max_depth)


def _canonical_walk(value: Any, max_depth: int) -> bytes:
    """The general path of ``canonical_json`` (every JSON value, every check)."""
    out: list[str] = []
    _walk(value, out, 0, max_depth)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError as e:
        raise CanonicalError("shape", "string holds a lone surrogate (invalid Unicode)") from e
