"""Pydantic AI messages as tether nodes, and back, exactly.

A message is one node. Its JSON is Pydantic AI's own (``ModelMessagesTypeAdapter``,
the serializer Pydantic AI tells users to store), less the ``null`` fields, kept under
``msg``, beside the fields of docs/graph-encoding.md so tether's conversation views and
inspector read it:

=======================================  =============  ==========================
message                                  tether kind    graph-encoding fields
=======================================  =============  ==========================
request with one text user prompt        ``goal``       ``input`` (the prompt)
response                                 ``inference``  ``content`` (its text)
any other request (tool returns, ...)    ``resource``   ``role: "request"``
=======================================  =============  ==========================

Where the text is also the graph field, the message keeps ``null`` in its place and
``h`` names the part (stored once; put back on read). Every message written is read
back through the serializer before anything is stored (``message_payloads``): a message
the JSON cannot give back equal (a value Pydantic AI's serializer loses) raises
``InvalidMessage`` and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from ...core.errors import InvalidRequest

__all__ = ["InvalidMessage", "message_payloads", "payload_messages"]

MARK: Final = "pai"  # payload["pai"]: what a node holds ("m" a message, "e" an entry ...)


class InvalidMessage(InvalidRequest, TypeError):
    """A message tether cannot store exactly: not a Pydantic AI ``ModelMessage``, or one
    whose JSON does not read back equal. Nothing is written."""

    default_code = "invalid_message"


def _strip_none(value: Any) -> Any:
    if type(value) is dict:
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if type(value) is list:
        return [_strip_none(v) for v in value]
    return value


def _same(back: ModelMessage, original: ModelMessage, data: dict[str, Any]) -> bool:
    """Whether a message read back is the one written: equal, or (where Pydantic AI's
    serializer narrows a type, a ``BinaryContent`` of an image read back as the
    ``BinaryImage`` subclass) one whose JSON is the same JSON."""
    if back == original:
        return True
    again: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python([back], mode="json")
    return again[0] == data


def _dump(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise InvalidMessage("messages: a list of Pydantic AI ModelMessage", field="messages")
    for m in messages:
        if getattr(m, "kind", None) not in ("request", "response"):
            raise InvalidMessage(
                f"a message is a Pydantic AI ModelRequest or ModelResponse, got {type(m).__name__}",
                field="messages",
            )
    try:
        full: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(
            list(messages), mode="json"
        )
    except Exception as e:  # pydantic's PydanticSerializationError and kin
        raise InvalidMessage(f"a message has no JSON form: {e}", field="messages") from e
    lean = [_strip_none(d) for d in full]
    try:
        back = ModelMessagesTypeAdapter.validate_json(orjson.dumps(lean))
    except Exception:
        back = None
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if back is not None and _same(back[i], m, full[i]):
            out.append(lean[i])
            continue
        # A null where the field's default is not null: keep the message whole.
        (whole,) = ModelMessagesTypeAdapter.validate_python([full[i]])
        if not _same(whole, m, full[i]):
            raise InvalidMessage(
                f"message {i} does not read back equal from Pydantic AI's JSON "
                "(a value its serializer cannot keep); nothing was written",
                field="messages",
                index=i,
            )
        out.append(full[i])
    return out


def _punch(data: dict[str, Any], llm: str) -> tuple[str, dict[str, Any]]:
    """The kind and payload of one message's JSON (``data``, changed in place)."""
    parts = data.get("parts") or []
    if data.get("kind") == "response":
        texts = [i for i, p in enumerate(parts) if p.get("part_kind") == "text"]
        content = "".join(parts[i].get("content") or "" for i in texts)
        payload: dict[str, Any] = {MARK: "m", "run": None, "llm": llm, "content": content}
        if len(texts) == 1 and isinstance(parts[texts[0]].get("content"), str) and content:
            parts[texts[0]] = {**parts[texts[0]], "content": None}
            payload["h"] = texts[0]
        payload["msg"] = data
        return "inference", payload
    prompts = [i for i, p in enumerate(parts) if p.get("part_kind") == "user-prompt"]
    if len(prompts) == 1 and isinstance(parts[prompts[0]].get("content"), str):
        i = prompts[0]
        text = parts[i]["content"]
        parts[i] = {**parts[i], "content": None}
        return "goal", {MARK: "m", "run": None, "input": text, "llm": llm, "h": i, "msg": data}
    return "resource", {MARK: "m", "role": "request", "msg": data}


def message_payloads(
    messages: Sequence[ModelMessage], llm: str
) -> list[tuple[str, dict[str, Any]]]:
    """The kind and payload of each message (``InvalidMessage`` for one that cannot be
    stored exactly; then none is)."""
    return [_punch(d, llm) for d in _dump(messages)]


def message_data(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A message's JSON as ``message_payloads`` found it, the text put back."""
    data: dict[str, Any] = payload["msg"]
    h = payload.get("h")
    if h is None:
        return data
    parts = list(data["parts"])
    parts[h] = {**parts[h], "content": payload["input" if kind == "goal" else "content"]}
    return {**data, "parts": parts}


def payload_messages(rows: Sequence[tuple[str, dict[str, Any]]]) -> list[ModelMessage]:
    """The messages of ``(kind, payload)`` rows, in order (one validation for all)."""
    # validate_json of orjson's bytes: half the time of validate_python on the same dicts
    # (400 messages: 15 ms against 33)
    data = orjson.dumps([message_data(k, p) for k, p in rows])
    return list(ModelMessagesTypeAdapter.validate_json(data))
