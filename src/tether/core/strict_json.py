"""One JSON policy for every door: parse exactly, or refuse with a stable code.

Every piece of JSON that reaches tether from outside (HTTP bodies, snapshot files,
tool results, model output) is parsed here, so the same text is read the same way
everywhere and never changes on the way in:

* ``duplicate_key``: an object names a key twice. Parsers disagree on which value
  wins, so two readers could see two payloads under one content id.
* ``number_range``: an integer beyond ±(2**53-1). orjson and most parsers turn it
  into a float silently (18446744073709551617 becomes 1.8446744073709552e+19).
* ``non_finite``: NaN, Infinity or a number that overflows a double (``1e400``).
* ``too_large``: nesting deeper than the limit (the code every depth check uses).
* ``shape``: not JSON at all, invalid UTF-8, or a lone surrogate escape
  (``"\\ud800"``), which no UTF-8 store can hold.

The parser is the standard library's C scanner with hooks (about as fast as
orjson on snapshot-shaped input): integers arrive as exact Python ints and are
range-checked from their digits, objects are built from their pairs so a repeated
key is seen, and depth is bounded by the caller's limit.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from .canonical import MAX_SAFE_INT, CanonicalError
from .messages import ReadOnlyDict, ReadOnlyList

__all__ = ["check_depth", "decode_at", "loads"]

# A decimal integer of 15 digits or fewer is always within ±(2**53-1).
_SAFE_DIGITS: Final = 15
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _int(s: str) -> int:
    digits = len(s) - (s[0] == "-")
    if digits > 16:
        raise CanonicalError(
            "number_range",
            f"integer {s[:24]}{'...' if len(s) > 24 else ''} is outside "
            "±(2**53-1); send it as a string",
        )
    v = int(s)
    if digits > _SAFE_DIGITS and not -MAX_SAFE_INT <= v <= MAX_SAFE_INT:
        raise CanonicalError(
            "number_range", f"integer {s} is outside ±(2**53-1); send it as a string"
        )
    return v


def _float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise CanonicalError("non_finite", f"number {s[:24]} does not fit a double")
    return v


def _constant(s: str) -> Any:
    raise CanonicalError("non_finite", f"{s} is not JSON")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise CanonicalError(
                    "duplicate_key", f"the key {k[:64]!r} appears twice in one object"
                )
            seen.add(k)
    return d


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_int=_int, parse_float=_float, parse_constant=_constant
)


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str:
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif t is dict or t is ReadOnlyDict:
            for k, x in v.items():
                try:
                    k.encode("utf-8")
                except UnicodeEncodeError:
                    return True
                stack.append(x)
        elif t is list or t is ReadOnlyList:
            stack.extend(v)
    return False


# The containers of a JSON value: a read-only message (tether.core.messages) is one too.
_CONTAINERS: Final = (dict, list, tuple, ReadOnlyDict, ReadOnlyList)


def check_depth(value: Any, max_depth: int) -> None:
    """Raise CanonicalError ``too_large`` if containers nest deeper than ``max_depth``.

    Iterative, so a value nested far beyond Python's recursion limit is refused too.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        t = type(v)
        if t is dict or t is ReadOnlyDict:
            if d >= max_depth:
                raise CanonicalError("too_large", f"nesting deeper than {max_depth}")
            stack.extend((x, d + 1) for x in v.values() if type(x) in _CONTAINERS)
        elif t is list or t is tuple or t is ReadOnlyList:
            if d >= max_depth:
                raise CanonicalError("too_large", f"nesting deeper than {max_depth}")
            stack.extend((x, d + 1) for x in v if type(x) in _CONTAINERS)


def loads(data: bytes | bytearray | memoryview | str, *, max_depth: int | None = None) -> Any:
    """Parse JSON text under the policy above. Raises CanonicalError with its code.

    ``max_depth`` bounds container nesting (None: only Python's own recursion
    limit, still refused as ``too_large``).
    """
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CanonicalError("shape", f"not UTF-8: {e.reason} at byte {e.start}") from None
        if text.startswith("\ufeff"):
            raise CanonicalError("shape", "JSON text must not start with a byte order mark")
    elif isinstance(data, str):
        text = data
        raw = b""
    else:
        raise CanonicalError("shape", f"JSON text is bytes or str, not {type(data).__name__}")
    try:
        value, end = _DECODER.raw_decode(text, _skip_ws(text, 0))
    except CanonicalError:
        raise
    except RecursionError:
        raise CanonicalError("too_large", "JSON nested too deeply") from None
    except json.JSONDecodeError as e:
        raise CanonicalError("shape", f"not valid JSON: {e}") from None
    except ValueError as e:  # int() beyond the interpreter's digit limit, float overflow
        raise CanonicalError("number_range", f"number rejected: {e}") from None
    if _skip_ws(text, end) != len(text):
        raise CanonicalError("shape", f"not valid JSON: extra data at char {end}")
    if max_depth is not None:
        check_depth(value, max_depth)
    suspicious = _SURROGATE_ESCAPE.search(raw) if raw else _has_surrogate_text(text)
    if suspicious and _has_lone_surrogate(value):
        raise CanonicalError("shape", "a string holds a lone surrogate (invalid Unicode)")
    return value


def decode_at(text: str, pos: int) -> tuple[Any, int]:
    """Parse one JSON value of ``text`` starting at ``pos``; return it and where it ends.

    For readers that stream a document (snapshot import): the policy is the one of
    ``loads`` (CanonicalError with its code), except that text which is not JSON
    raises ``json.JSONDecodeError`` so the caller can tell a value cut short by its
    buffer (read more, try again) from a bad one. Depth is the caller's to check.
    """
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except CanonicalError:
        raise
    except RecursionError:
        raise CanonicalError("too_large", "JSON nested too deeply") from None
    except json.JSONDecodeError:
        raise
    except ValueError as e:
        raise CanonicalError("number_range", f"number rejected: {e}") from None
    if _has_surrogate_text(text[pos:end]) and _has_lone_surrogate(value):
        raise CanonicalError("shape", "a string holds a lone surrogate (invalid Unicode)")
    return value, end


def _has_surrogate_text(text: str) -> bool:
    return "\\u" in text or not text.isascii()


_WS: Final = re.compile(r"[ \t\n\r]*")


def _skip_ws(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos
