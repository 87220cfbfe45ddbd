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

Nodes outside tether's encoding (a StateWeave snapshot's, any imported graph's: a
goal, answer or error whose payload names no run, ``payload.run`` absent or not a
string, and not ``null``; a tool call or result whose payload has neither ``run`` nor
``call_id``) read as a plain conversation: each such goal opens a *foreign turn* up to
the next goal, and is a unit of one ``user`` message; each such answer a unit of one
``assistant`` message. A turn whose last answer-or-error is such a ``protocol_error``
keeps none of its messages (like a failed run); an answer after the error stands
(StateWeave's runtime writes an error after each model output that was no action,
then retries). The text is the payload's ``input`` (goal) or ``output`` (answer), else
its ``text``, ``content`` or ``message``, else the whole payload as JSON. A foreign
tool call naming a tool (``name``, else ``tool``) with a result is a unit of an
``assistant`` message holding the call (its node id as the call id, ``args`` as its
arguments) and the ``tool`` message of the result (``result``, else ``output``,
``content``, ``text``, else the payload as JSON): the result is the first whose only
parent is the call and which names the same tool or none, as StateWeave's runtime
appends them. A call without such a result, and any other result, is left out, so no
call is shown without its result. They are in every LLM's view unless the payload
names an ``llm``. Foreign inferences are left out: in StateWeave's runtime an
inference is a model output that was no action (a TOOL_CALL is the call node, a FINAL
the answer), rejected by the error after it.

Erased payloads (read inside ``tether.crypto.erased_placeholders()``): an erased
goal is a unit of one ``user`` message and an erased inference one of an
``assistant`` message, both with content ``"[erased]"``, in every LLM's view
(which LLM wrote them was erased too). Erased tool results, answers and errors add
nothing: their calls and runs cannot be told, so no tool message is ever shown
without its call.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..core.erased import ERASED_TEXT, is_erased
from ..core.graph import CausalNode
from ..core.messages import Message

__all__ = [
    "SUMMARY_INTRO",
    "Projector",
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
    p = Projector(llm, run=run)
    p.feed(nodes)
    return p.units()


_Key = tuple["str | None", str]  # (run, call id)

_FOREIGN_KINDS = frozenset({"goal", "answer", "protocol_error"})
_FOREIGN_TOOL_KINDS = frozenset({"tool_call", "tool_result"})
_GOAL_TEXT = ("input", "text", "content", "message")
_ANSWER_TEXT = ("output", "text", "content", "message")
_RESULT_TEXT = ("result", "output", "content", "text")


def is_foreign(node: CausalNode) -> bool:
    """A goal, answer or error outside tether's encoding (its payload names no run), or
    a tool call or result outside it (its payload has neither ``run`` nor ``call_id``)."""
    k = node.kind
    p = node.payload
    if k in _FOREIGN_KINDS:
        if not isinstance(p, dict):
            return True
        if is_erased(p):
            return False
        return not isinstance(p.get("run"), str) and not ("run" in p and p["run"] is None)
    if k in _FOREIGN_TOOL_KINDS:
        if not isinstance(p, dict):
            return True
        return "call_id" not in p and "run" not in p and not is_erased(p)
    return False


def _foreign_call_name(call: CausalNode) -> str | None:
    """The tool a foreign call names (``name``, else ``tool``), if it names one."""
    p = call.payload
    if not isinstance(p, dict):
        return None
    name = p.get("name", p.get("tool"))
    return name if isinstance(name, str) and name else None


def _foreign_result_text(result: CausalNode) -> str:
    p = result.payload
    if isinstance(p, dict):
        for name in _RESULT_TEXT:
            if p.get(name) is not None:
                return text_of(p[name])
    return text_of(p)


def foreign_text(node: CausalNode) -> str:
    """The message text of a foreign goal or answer (see the module docstring)."""
    p = node.payload
    if isinstance(p, dict):
        for name in _GOAL_TEXT if node.kind == "goal" else _ANSWER_TEXT:
            if p.get(name) is not None:
                return text_of(p[name])
    return text_of(p)


class Projector:
    """``project`` kept up to date: fed nodes in sequence order, a few at a time, it
    holds the units of everything fed so far, as ``project`` of all of it returns them.

    A node's unit depends on the node, on its run's status (completed, failed, or the
    run in progress: ``run``), on whether its run has any completed call (a goal's
    receipt) and on the results of its calls. Feeding a node marks stale only the units
    it can change: its own, those of its run when the run's status changes, the goals
    of its run when the run gets its first completed call, the inferences that made a
    call it is the first result of. ``units()`` rebuilds them and the output from the
    earliest stale one on, so a turn fed to a long thread costs the turn, not the
    thread (``view_cache``). The module docstring gives the rules themselves.
    """

    __slots__ = (
        "_by_run",
        "_calls",
        "_done_runs",
        "_ended",
        "_failed_turns",
        "_fcalls",
        "_fresults",
        "_goals",
        "_made",
        "_messages",
        "_mine",
        "_offsets",
        "_owners",
        "_pos",
        "_results",
        "_seen",
        "_stale",
        "_turn",
        "_turn_of",
        "_turns",
        "_units",
        "_upos",
        "llm",
        "run",
    )

    def __init__(self, llm: str, *, run: str | None = None) -> None:
        self.llm = llm
        self.run = run
        self._mine: list[CausalNode] = []  # goals and inferences of this llm (and erased ones)
        self._pos: dict[int, int] = {}  # sequence -> index in _mine
        self._by_run: dict[str | None, list[CausalNode]] = {}  # _mine (not erased) per run
        self._goals: dict[str | None, list[CausalNode]] = {}
        self._calls: dict[int, list[dict[str, Any]]] = {}  # inference sequence -> its calls
        self._owners: dict[_Key, list[CausalNode]] = {}  # (run, call id) -> inferences
        self._results: dict[_Key, CausalNode] = {}  # (run, call id) -> first result
        self._ended: dict[str, str] = {}  # run -> "completed" | "failed"
        self._done_runs: set[str | None] = set()  # runs with an inference with a result
        self._made: dict[int, Unit | None] = {}  # sequence of a _mine node -> its unit
        self._stale: dict[int, CausalNode] = {}
        # Foreign turns: the goal of the one the walk is in, each turn's shown nodes
        # (goal sequence -> nodes), the foreign node's turn, the turns that failed.
        self._seen = 0  # the highest sequence fed
        self._turn: CausalNode | None = None
        self._turns: dict[int, list[CausalNode]] = {}
        self._turn_of: dict[int, int] = {}  # a foreign node's sequence -> its turn's goal
        self._failed_turns: set[int] = set()
        # Foreign tool calls by node id, and the result paired with each.
        self._fcalls: dict[str, CausalNode] = {}
        self._fresults: dict[str, CausalNode] = {}
        # The output: units in _mine order, each's index in _mine, and the flat messages
        # with each unit's offset in them.
        self._units: list[Unit] = []
        self._upos: list[int] = []
        self._messages: list[Message] = []
        self._offsets: list[int] = []

    @property
    def size(self) -> int:
        """How many goals and inferences this projector holds (what it keeps in memory)."""
        return len(self._mine)

    def feed(self, nodes: Iterable[CausalNode]) -> None:
        """Take ``nodes``, the next ones of the thread in sequence order."""
        llm = self.llm
        for n in nodes:
            p = n.payload
            k = n.kind
            if n.sequence > self._seen:
                self._seen = n.sequence
                if k == "goal":
                    self._turn = None  # any goal ends a foreign turn
                if is_foreign(n):
                    self._foreign(n)
                    continue
            elif is_foreign(n):
                continue  # fed before
            if not isinstance(p, dict):
                continue
            if is_erased(p):
                if k == "goal" or k == "inference":
                    self._add(n)  # a placeholder message, whichever llm wrote it
                continue
            if k == "goal" or k == "inference":
                if p.get("llm") != llm or n.sequence in self._pos:
                    continue
                r = _str(p.get("run"))
                self._add(n)
                self._by_run.setdefault(r, []).append(n)
                if k == "goal":
                    self._goals.setdefault(r, []).append(n)
                    continue
                calls = _calls(p)
                self._calls[n.sequence] = calls
                for c in calls:
                    self._owners.setdefault((r, c["id"]), []).append(n)
                if any((r, c["id"]) in self._results for c in calls):
                    self._done(r)
            elif k == "tool_result":
                cid = p.get("call_id")
                if p.get("llm") != llm or not isinstance(cid, str):
                    continue
                r = _str(p.get("run"))
                key = (r, cid)
                if key in self._results:
                    continue  # the first result is the call's result
                self._results[key] = n
                owners = self._owners.get(key)
                if owners:
                    for o in owners:
                        self._stale[o.sequence] = o
                    self._done(r)
            elif k == "answer" or k == "protocol_error":
                r = _str(p.get("run"))
                # A failure is final even if an answer was also written.
                if r is None or not (k == "protocol_error" or r not in self._ended):
                    continue
                status = "completed" if k == "answer" else "failed"
                if self._ended.get(r) != status:
                    self._ended[r] = status
                    self._touch(r)

    def _foreign(self, n: CausalNode) -> None:
        p = n.payload
        k = n.kind
        if k == "goal":
            self._turn = n
            self._turns[n.sequence] = []
        turn = self._turn
        if k == "protocol_error":
            # A turn whose last word is an error failed (StateWeave's runtime writes one
            # after each rejected model output, then retries: an answer after it stands).
            if turn is not None and turn.sequence not in self._failed_turns:
                self._failed_turns.add(turn.sequence)
                self._touch_turn(turn.sequence)
            return
        if k == "tool_result":
            self._foreign_result(n)
            return
        if k == "answer" and turn is not None and turn.sequence in self._failed_turns:
            self._failed_turns.discard(turn.sequence)  # the retry answered
            self._touch_turn(turn.sequence)
        wanted = p.get("llm") if isinstance(p, dict) else None
        if isinstance(wanted, str) and wanted != self.llm:
            return
        if k == "tool_call":
            if _foreign_call_name(n) is None:
                return  # names no tool: no message can hold it
            self._fcalls[n.id] = n
        if turn is None:
            self._add(n)  # an answer or call outside any turn: a message of its own
            return
        self._turns[turn.sequence].append(n)
        self._turn_of[n.sequence] = turn.sequence
        self._add(n)

    def _foreign_result(self, n: CausalNode) -> None:
        """Pair a foreign result with its call: the result's only parent (as StateWeave's
        runtime appends it), naming the same tool if it names one; the first one wins."""
        if len(n.parents) != 1:
            return
        call = self._fcalls.get(n.parents[0])
        if call is None or call.id in self._fresults:
            return
        p = n.payload
        tool = p.get("tool", p.get("name")) if isinstance(p, dict) else None
        if isinstance(tool, str) and tool != _foreign_call_name(call):
            return
        self._fresults[call.id] = n
        self._stale[call.sequence] = call

    def _touch_turn(self, goal: int) -> None:
        for m in self._turns[goal]:
            self._stale[m.sequence] = m

    def set_run(self, run: str | None) -> None:
        """Make ``run`` the run in progress (shown in full though it has no answer yet)."""
        if run != self.run:
            old, self.run = self.run, run
            self._touch(old)
            self._touch(run)

    def units(self) -> list[Unit]:
        """The units of everything fed (a new list)."""
        self._rebuild()
        return list(self._units)

    def view(self, *, units: bool = True) -> tuple[tuple[Unit, ...], list[Message]]:
        """The units (``()`` with ``units=False``) and their messages, flattened. The
        list of messages is this projector's own, as are the messages: copy the list to
        keep it (``prefix + messages``), and read the messages, never change them (later
        views share them)."""
        self._rebuild()
        return (tuple(self._units) if units else ()), self._messages

    # -- internals

    def _add(self, n: CausalNode) -> None:
        if n.sequence in self._pos:
            return
        self._pos[n.sequence] = len(self._mine)
        self._mine.append(n)
        self._stale[n.sequence] = n

    def _done(self, r: str | None) -> None:
        if r not in self._done_runs:
            self._done_runs.add(r)
            for g in self._goals.get(r, ()):
                self._stale[g.sequence] = g

    def _touch(self, r: str | None) -> None:
        if r is not None:
            for n in self._by_run.get(r, ()):
                self._stale[n.sequence] = n

    def _full(self, r: str | None) -> bool:
        status = self._ended.get(r) if r is not None else None
        return status == "completed" or (status is None and r is not None and r == self.run)

    def _rebuild(self) -> None:
        stale = self._stale
        if not stale:
            return
        made = self._made
        for seq, n in stale.items():
            made[seq] = self._unit(n)
        first = min(self._pos[seq] for seq in stale)
        stale.clear()
        cut = bisect_left(self._upos, first)
        if cut < len(self._units):
            del self._messages[self._offsets[cut] :]
            del self._units[cut:], self._upos[cut:], self._offsets[cut:]
        mine = self._mine
        for i in range(first, len(mine)):
            u = made[mine[i].sequence]
            if u is not None:
                self._units.append(u)
                self._upos.append(i)
                self._offsets.append(len(self._messages))
                self._messages.extend(u.messages)

    def _unit(self, n: CausalNode) -> Unit | None:
        p = n.payload
        if is_foreign(n):
            if self._turn_of.get(n.sequence) in self._failed_turns:
                return None
            if n.kind == "tool_call":
                return self._foreign_call_unit(n)
            msg: Message = {
                "role": "user" if n.kind == "goal" else "assistant",
                "content": foreign_text(n),
            }
            return Unit(anchor=n.sequence, last=n.sequence, messages=(msg,), run=None)
        if is_erased(p):
            role = "user" if n.kind == "goal" else "assistant"
            erased: Message = {"role": role, "content": ERASED_TEXT}
            return Unit(anchor=n.sequence, last=n.sequence, messages=(erased,), run=None)
        r = _str(p.get("run"))
        # A message stored outside any run ("run": null, e.g. a LangGraph thread's
        # messages written by tether.adapters.langgraph) is a finished message.
        shown_full = self._full(r) or (r is None and "run" in p and p["run"] is None)
        if n.kind == "goal":
            # Shown whole, or as the goal of a run shown by its receipts.
            if p.get("input") is None or not (shown_full or r in self._done_runs):
                return None
            return Unit(
                anchor=n.sequence,
                last=n.sequence,
                messages=({"role": "user", "content": text_of(p["input"])},),
                run=r,
            )
        results = self._results
        done = [c for c in self._calls[n.sequence] if (r, c["id"]) in results]
        if not shown_full and not done:
            return None
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
        if not msgs:
            return None
        return Unit(anchor=n.sequence, last=last, messages=tuple(msgs), run=r)

    def _foreign_call_unit(self, n: CausalNode) -> Unit | None:
        """A foreign call with its result: an assistant message holding the call (its
        node id as the call id), then the tool message; without a result, nothing."""
        res = self._fresults.get(n.id)
        name = _foreign_call_name(n)
        if res is None or name is None:
            return None
        p = n.payload
        args = p.get("args", p.get("arguments")) if isinstance(p, dict) else None
        call = {"id": n.id, "name": name, "arguments": {} if args is None else args}
        messages: tuple[Message, ...] = (
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": n.id,
                "name": name,
                "content": _foreign_result_text(res),
            },
        )
        return Unit(anchor=n.sequence, last=res.sequence, messages=messages, run=None)


def flatten(units: Sequence[Unit]) -> list[Message]:
    return [m for u in units for m in u.messages]


def count_messages(units: Sequence[Unit]) -> int:
    return sum(len(u.messages) for u in units)
