"""The pure conversation projection: thread nodes -> messages of one LLM node (SPEC §3).

No I/O. ``project`` walks nodes in sequence order (see docs/graph-encoding.md) and
returns *units*: the smallest runs of messages a policy may keep or drop whole.

* a goal is a unit of one ``user`` message;
* an inference is a unit of its ``user`` input (when it has one), its ``assistant``
  message and, right after it, the ``tool`` results of its calls, in call order.

Because an assistant message travels with its results in one unit, no policy that
keeps or drops whole units can separate a tool call from its results. A call with
no result (dangling) is left out of the assistant message, and a result whose call
is not in the projected nodes is never emitted, so the view never holds one without
the other.

Runs are judged by what the graph holds: a run with an ``answer`` is complete and
shown in full; the run named ``run`` (in progress) is shown in full too. Every other
run, failed (it has a ``protocol_error``) or abandoned (no answer, no error, not the
current run), keeps only its receipts: the goal, then for each inference that made
calls whose results exist, its input, an assistant message holding only those calls
(no text), and their results. Everything else of that run is left out.

Every decision depends only on the node itself and on nodes *after* it (results,
answers and errors follow what they complete), so projecting the nodes after any
sequence ``s`` yields exactly the units of the full projection whose anchor is after
``s``. The window and tokens views rely on this to read a thread from its tail.

Erased payloads (read inside ``tether.crypto.erased_placeholders()``): an erased
goal is a unit of one ``user`` message and an erased inference one of an
``assistant`` message, both with content ``"[erased]"``, in every LLM's view
(which LLM wrote them was erased too). Erased tool results, answers and errors add
nothing: their calls and runs cannot be told, so no tool message is ever shown
without its call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..core.erased import ERASED_TEXT, is_erased
from ..core.graph import CausalNode
from ..core.messages import Message

__all__ = [
    "SUMMARY_INTRO",
    "SummaryContent",
    "Unit",
    "count_messages",
    "flatten",
    "project",
    "summary_key",
    "summary_message",
    "system_key",
]

SUMMARY_INTRO = "Summary of earlier conversation: "


def system_key(llm: str) -> str:
    """Resource key of an LLM node's system prompt."""
    return f"system:{llm}"


def summary_key(llm: str) -> str:
    """Resource key of an LLM node's compaction summary."""
    return f"semantic:summary:{llm}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Unit:
    """Messages kept or dropped together. ``anchor`` is the sequence of the goal or
    inference that opens the unit, ``last`` the highest sequence among its nodes."""

    anchor: int
    last: int
    messages: tuple[Message, ...]
    run: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class SummaryContent:
    """The content of a ``summary`` semantic node (see docs/graph-encoding.md)."""

    text: str
    through: int
    count: int
    strategy: str

    @classmethod
    def parse(cls, content: Any) -> SummaryContent | None:
        """The summary a node's content holds, or None (undone, or not a summary)."""
        if not isinstance(content, dict):
            return None
        text, through, count = content.get("text"), content.get("through"), content.get("count")
        if not isinstance(text, str) or type(through) is not int or type(count) is not int:
            return None
        strategy = content.get("strategy")
        return cls(
            text=text,
            through=through,
            count=count,
            strategy=strategy if isinstance(strategy, str) else "",
        )

    def to_content(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "through": self.through,
            "count": self.count,
            "strategy": self.strategy,
        }


def summary_message(text: str) -> Message:
    return {"role": "system", "content": SUMMARY_INTRO + text}


def text_of(value: Any) -> str:
    """Message content as text: strings as they are, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _calls(payload: dict[str, Any]) -> list[dict[str, Any]]:
    raw = payload.get("tool_calls")
    if not isinstance(raw, list):
        return []
    out = []
    for c in raw:
        if isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("name"), str):
            args = c.get("arguments")
            out.append(
                {"id": c["id"], "name": c["name"], "arguments": args if args is not None else {}}
            )
    return out


def project(nodes: Iterable[CausalNode], *, llm: str, run: str | None = None) -> list[Unit]:
    """The units of ``llm``'s conversation held by ``nodes`` (in sequence order).

    ``run`` is the run in progress, shown in full though it has no answer yet.
    """
    mine: list[CausalNode] = []  # goals and inferences of this llm
    ended: dict[str, str] = {}  # run -> "completed" | "failed"
    results: dict[tuple[str | None, str], CausalNode] = {}  # (run, call id) -> first result
    for n in nodes:
        p = n.payload
        if not isinstance(p, dict):
            continue
        k = n.kind
        if is_erased(p):
            if k == "goal" or k == "inference":
                mine.append(n)  # a placeholder message, whichever llm wrote it
            continue
        if k == "goal" or k == "inference":
            if p.get("llm") == llm:
                mine.append(n)
        elif k == "tool_result":
            cid = p.get("call_id")
            if p.get("llm") == llm and isinstance(cid, str):
                results.setdefault((_str(p.get("run")), cid), n)
        elif k == "answer" or k == "protocol_error":
            r = _str(p.get("run"))
            # A failure is final even if an answer was also written.
            if r is not None and (k == "protocol_error" or r not in ended):
                ended[r] = "completed" if k == "answer" else "failed"

    def full(r: str | None) -> bool:
        status = ended.get(r) if r is not None else None
        return status == "completed" or (status is None and r is not None and r == run)

    def shown(node: CausalNode, r: str | None) -> bool:
        # A message stored outside any run ("run": null, e.g. a LangGraph thread's
        # messages written by tether.adapters.langgraph) is a finished message.
        return full(r) or (r is None and "run" in node.payload and node.payload["run"] is None)

    # Receipts of runs shown partially: which runs keep their goal.
    has_receipt: set[str | None] = set()
    for n in mine:
        if n.kind == "inference" and not is_erased(n.payload):
            r = _str(n.payload.get("run"))
            if not full(r) and any((r, c["id"]) in results for c in _calls(n.payload)):
                has_receipt.add(r)

    units: list[Unit] = []
    for n in mine:
        p = n.payload
        if is_erased(p):
            role = "user" if n.kind == "goal" else "assistant"
            erased: Message = {"role": role, "content": ERASED_TEXT}
            units.append(Unit(anchor=n.sequence, last=n.sequence, messages=(erased,), run=None))
            continue
        r = _str(p.get("run"))
        shown_full = shown(n, r)
        if n.kind == "goal":
            if p.get("input") is None or not (shown_full or r in has_receipt):
                continue
            units.append(
                Unit(
                    anchor=n.sequence,
                    last=n.sequence,
                    messages=({"role": "user", "content": text_of(p["input"])},),
                    run=r,
                )
            )
            continue
        done = [c for c in _calls(p) if (r, c["id"]) in results]
        if not shown_full and not done:
            continue
        msgs: list[Message] = []
        if p.get("input") is not None:
            msgs.append({"role": "user", "content": text_of(p["input"])})
        content = p.get("content") if shown_full else None
        content = None if content is None else text_of(content)
        if done or content:
            a: Message = {"role": "assistant", "content": content}
            if done:
                a["tool_calls"] = done
            msgs.append(a)
        last = n.sequence
        for c in done:
            res = results[(r, c["id"])]
            rp = res.payload
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": c["id"],
                    "name": _str(rp.get("name")) or c["name"],
                    "content": text_of(rp.get("content")),
                }
            )
            last = max(last, res.sequence)
        if msgs:
            units.append(Unit(anchor=n.sequence, last=last, messages=tuple(msgs), run=r))
    return units


def flatten(units: Sequence[Unit]) -> list[Message]:
    return [m for u in units for m in u.messages]


def count_messages(units: Sequence[Unit]) -> int:
    return sum(len(u.messages) for u in units)
