"""How the LangGraph saver turns values into payloads, and messages into conversation nodes.

Pure functions: no I/O, no LangGraph import (the serializer is passed in).

Three payload forms:

* ``pack``: any value, for payloads that are not deduplicated (checkpoint
  headers, metadata): ``{"j": value}`` when JSON keeps it exactly, else
  ``{"s": serde type, "b": base64 bytes}`` from LangGraph's serializer;
* ``content``: a value stored in a content-addressed node: JSON only for
  scalars whose canonical hash cannot collide (``_values.is_json_scalar``),
  everything else through the serializer, so ``1``, ``1.0`` and ``True`` (equal
  in canonical JSON) never share a node;
* a *reference* in a checkpoint or write: ``{"j": scalar}`` inline, ``{"i":
  content}`` for a small value stored inline (in ``content``'s form),
  ``{"b": value node id}`` or ``{"l": seq tree root, "n": length, "t": [element
  ids]}`` for a list (the tree holds the whole chunks of ``FANOUT`` elements, ``t``
  the elements after them; a reference without ``t``, as the saver wrote before,
  has every element under its tree);
  ``{"d": reference}`` for LangGraph's ``_DeltaSnapshot`` of the value referenced.
"""

from __future__ import annotations

import base64
from typing import Any, Protocol

import orjson

from ..core.canonical import CanonicalError, canonical_json
from ..core.graph import canonical_payload
from ._values import is_json_scalar, is_plain_json


class Serde(Protocol):
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes]) -> Any: ...


def pack(serde: Serde, value: Any) -> dict[str, Any]:
    """A payload-safe form of any value: JSON when exact, else the serializer's bytes.

    The JSON form is a copy (``_own``): a payload outlives the call in the saver's
    caches, and the caller may edit its dicts after the put.
    """
    if is_plain_json(value):
        return {"j": _own(value)}
    t, b = serde.dumps_typed(value)
    return {"s": t, "b": base64.b64encode(b).decode("ascii")}


def own(packed: dict[str, Any]) -> dict[str, Any]:
    """A ``pack``ed value that shares no object with ``packed`` (``_own``)."""
    return {"j": _own(packed["j"])} if "j" in packed else packed


def unpack(serde: Serde, packed: dict[str, Any]) -> Any:
    if "j" in packed:
        return packed["j"]
    return serde.loads_typed((packed["s"], base64.b64decode(packed["b"])))


def identify(serde: Serde, value: Any) -> tuple[str | None, bytes]:
    """(serializer type, or None for a JSON scalar; the exact bytes): cheap, no base64."""
    if is_json_scalar(value):
        return None, canonical_json(value)
    return serde.dumps_typed(value)


def stored_form(t: str | None, b: bytes, value: Any) -> dict[str, Any]:
    """The payload form of what ``identify`` returned."""
    if t is None:
        return {"j": value}
    return {"s": t, "b": base64.b64encode(b).decode("ascii")}


def content(serde: Serde, value: Any) -> tuple[dict[str, Any], bytes]:
    """The exact stored form of a deduplicated value, and the bytes that identify it."""
    t, b = identify(serde, value)
    return stored_form(t, b, value), (t or "j").encode() + b"\0" + b


def decode_content(serde: Serde, v: dict[str, Any]) -> Any:
    return unpack(serde, v)


def ref_ids(ref: dict[str, Any]) -> list[str]:
    """The node ids a reference points at (none for an inline value or an empty list)."""
    if "d" in ref:  # a DeltaChannel snapshot: the reference it wraps
        return ref_ids(ref["d"])
    if "b" in ref:
        return [ref["b"]]
    out = [ref["l"]] if ref.get("l") else []
    if "t" in ref:
        out.extend(ref["t"])
    return out


# -- LangChain messages as conversation nodes ------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    return ""


def _own(v: Any) -> Any:
    """A copy of a JSON value, equal in type and value (exact for what ``canonical_json``
    or ``is_plain_json`` accepts: exact str, int, float, bool, None, lists and dicts with
    str keys). A payload built from the caller's objects must not share them: the saver
    keeps payloads (a message's planned node, the last checkpoint) for later puts, and
    LangGraph's nodes edit the state they are given in place, so a shared dict would
    change under its node's id. A string orjson cannot write (a lone surrogate) is the
    identity rule's typed error, as an uncopied payload's was, never the serializer's
    lossy bytes."""
    try:
        return orjson.loads(orjson.dumps(v))
    except TypeError:
        canonical_payload(v)  # raises InvalidNode (code "shape") for what orjson refused
        raise


def _json_or_none(v: Any) -> Any:
    """A copy of ``v`` if it is a JSON value (``_own``), else None."""
    try:
        canonical_json(v)
    except (CanonicalError, TypeError, ValueError):
        return None
    return _own(v)


def message_fields(value: Any, llm: str, *, draft: bool = False) -> tuple[str, dict[str, Any]]:
    """The kind and graph-encoding fields of a list element (docs/graph-encoding.md).

    A LangChain message maps onto the conversation kinds; anything else is a
    plain ``resource``. ``run`` is null: an element is shared by every checkpoint
    (and run) that holds it, so it cannot name one.

    ``draft``: the element is a pending write's copy of a message that the channel's
    next checkpoint will hold after its reducer ran (``TetherSaver.put_writes``). A
    message without an id then gets one there (``add_messages``), which makes it
    another node: the copy without one is a ``resource`` with its role and text, so
    the conversation shows the message once. A message with an id is the same bytes
    in both places, so the same node: it keeps its conversation kind.
    """
    mtype = getattr(value, "type", None)
    if not isinstance(mtype, str) or not hasattr(value, "content"):
        return "resource", {}
    text = _text(value.content)
    mid = getattr(value, "id", None)
    if draft and mid is None and mtype in ("human", "ai", "tool"):
        return "resource", {"role": mtype, "content": text, "draft": True}
    if mtype == "human":
        return "goal", {
            "run": None,
            "input": text,
            "llm": llm,
            "metadata": {"source": "langgraph", "message_id": mid},
        }
    if mtype == "ai":
        calls = []
        for c in getattr(value, "tool_calls", None) or []:
            if isinstance(c, dict):
                calls.append(
                    {
                        "id": c.get("id"),
                        "name": c.get("name"),
                        "arguments": _json_or_none(c.get("args")) or {},
                    }
                )
        usage = _json_or_none(getattr(value, "usage_metadata", None)) or {}
        return "inference", {
            "run": None,
            "llm": llm,
            "content": text,
            "tool_calls": calls,
            "usage": usage,
        }
    if mtype == "tool":
        return "tool_result", {
            "run": None,
            "llm": llm,
            "call_id": getattr(value, "tool_call_id", None),
            "name": getattr(value, "name", None),
            "content": text,
            "is_error": getattr(value, "status", None) == "error",
        }
    return "resource", {"role": mtype, "content": text}


# -- whole lists in one serializer call -------------------------------------------
#
# LangGraph's serializer (JsonPlusSerializer) writes a list as a msgpack array, and
# msgpack is context-free: the bytes of element i inside the array are exactly the
# bytes the serializer writes for that element alone. So a put serializes the whole
# list in one C call (what LangGraph's own savers do) and cuts it into elements,
# and a read joins the stored elements under an array header and decodes them in
# one call. Serializers whose output is not plain msgpack (encrypted, pickle) take
# the per-element path instead.

# bytes that follow the type byte, for the fixed-size msgpack forms
_FIXED: dict[int, int] = {
    0xC0: 0, 0xC2: 0, 0xC3: 0,
    0xCA: 4, 0xCB: 8,
    0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8,
    0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8,
    0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,
}  # fmt: skip
# (bytes of the length field, extra bytes after it) for the variable-size forms
_SIZED: dict[int, tuple[int, int]] = {
    0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0),  # bin
    0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1),  # ext: a type byte follows the length
    0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0),  # str
}  # fmt: skip


def _skip(b: bytes, pos: int) -> int:
    """The offset just past the msgpack object at ``pos`` (ValueError if malformed)."""
    pending = 1
    n = len(b)
    while pending:
        if pos >= n:
            raise ValueError("truncated msgpack")
        pending -= 1
        c = b[pos]
        if c <= 0x7F or c >= 0xE0:  # fixint
            pos += 1
        elif c <= 0x8F:  # fixmap
            pending += 2 * (c & 0x0F)
            pos += 1
        elif c <= 0x9F:  # fixarray
            pending += c & 0x0F
            pos += 1
        elif c <= 0xBF:  # fixstr
            pos += 1 + (c & 0x1F)
        elif c in _FIXED:
            pos += 1 + _FIXED[c]
        elif c in _SIZED:
            w, extra = _SIZED[c]
            pos += 1 + w + extra + int.from_bytes(b[pos + 1 : pos + 1 + w], "big")
        elif c in (0xDC, 0xDD):  # array16/32
            w = 2 if c == 0xDC else 4
            pending += int.from_bytes(b[pos + 1 : pos + 1 + w], "big")
            pos += 1 + w
        elif c in (0xDE, 0xDF):  # map16/32
            w = 2 if c == 0xDE else 4
            pending += 2 * int.from_bytes(b[pos + 1 : pos + 1 + w], "big")
            pos += 1 + w
        else:
            raise ValueError(f"bad msgpack byte {c:#x}")
    if pos > n:
        raise ValueError("truncated msgpack")
    return pos


def array_header(b: bytes) -> tuple[int, int] | None:
    """(element count, header length) of a msgpack array, or None if ``b`` is not one."""
    if not b:
        return None
    c = b[0]
    if 0x90 <= c <= 0x9F:
        return c & 0x0F, 1
    if c == 0xDC and len(b) >= 3:
        return int.from_bytes(b[1:3], "big"), 3
    if c == 0xDD and len(b) >= 5:
        return int.from_bytes(b[1:5], "big"), 5
    return None


def split_items(b: bytes, pos: int, count: int) -> list[bytes] | None:
    """The ``count`` encoded objects that fill ``b`` from ``pos`` to its end, or None."""
    out: list[bytes] = []
    try:
        for _ in range(count):
            end = _skip(b, pos)
            out.append(b[pos:end])
            pos = end
    except (ValueError, IndexError):
        return None
    return out if pos == len(b) else None


def join_array(parts: list[bytes], n: int | None = None) -> bytes:
    """A msgpack array of already-encoded elements (the inverse of ``split_items``);
    ``n``: how many elements ``parts`` holds, when a part holds several."""
    if n is None:
        n = len(parts)
    if n < 16:
        head = bytes([0x90 | n])
    elif n < 1 << 16:
        head = b"\xdc" + n.to_bytes(2, "big")
    else:
        head = b"\xdd" + n.to_bytes(4, "big")
    return b"".join([head, *parts])  # one copy of the parts, not two
