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
* a *reference* in a checkpoint or write: ``{"j": scalar}`` inline,
  ``{"b": value node id}`` or ``{"l": seq tree root, "n": length}`` for a list.
"""

from __future__ import annotations

import base64
from typing import Any, Protocol

from .._canonical import CanonicalError, canonical_json
from ._values import is_json_scalar, is_plain_json


class Serde(Protocol):
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes]) -> Any: ...


def pack(serde: Serde, value: Any) -> dict[str, Any]:
    """A payload-safe form of any value: JSON when exact, else the serializer's bytes."""
    if is_plain_json(value):
        return {"j": value}
    t, b = serde.dumps_typed(value)
    return {"s": t, "b": base64.b64encode(b).decode("ascii")}


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
    if "b" in ref:
        return [ref["b"]]
    if ref.get("l"):
        return [ref["l"]]
    return []


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


def _json_or_none(v: Any) -> Any:
    try:
        canonical_json(v)
    except (CanonicalError, TypeError, ValueError):
        return None
    return v


def message_fields(value: Any, llm: str) -> tuple[str, dict[str, Any]]:
    """The kind and graph-encoding fields of a list element (docs/graph-encoding.md).

    A LangChain message maps onto the conversation kinds; anything else is a
    plain ``resource``. ``run`` is null: an element is shared by every checkpoint
    (and run) that holds it, so it cannot name one.
    """
    mtype = getattr(value, "type", None)
    if not isinstance(mtype, str) or not hasattr(value, "content"):
        return "resource", {}
    text = _text(value.content)
    mid = getattr(value, "id", None)
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
