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

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import orjson

from ..core.erased import ERASED_PLACEHOLDER_KEY, ERASED_TEXT, is_erased
from ..core.graph import CausalNode
from ..core.messages import Message, ReadOnlyDict, ReadOnlyList, freeze

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

# Every message a projection makes is read-only, its tool calls and their arguments too
# (``freeze``): made once and shared by every later view and model request of the
# thread a process keeps (``view_cache``), so none of them can change another's.
_RO = ReadOnlyDict
_ROL = ReadOnlyList


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
    return _RO(role="system", content=SUMMARY_INTRO + text)


def text_of(value: Any) -> str:
    """Message content as text: strings as they are, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _calls(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A payload's well-formed tool calls, read-only (``freeze``: made once, shared)."""
    raw = payload.get("tool_calls")
    if not isinstance(raw, list):
        return []
    out: list[dict[str, Any]] = []
    for c in raw:
        if isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("name"), str):
            args = c.get("arguments")
            out.append(
                _RO(id=c["id"], name=c["name"], arguments=_RO() if args is None else freeze(args))
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
# The kinds a conversation is made of: every other node is passed over.
_PROJECTED = frozenset({"goal", "inference", "tool_result", "answer", "protocol_error"})
_GOAL_TEXT = ("input", "text", "content", "message")
_ANSWER_TEXT = ("output", "text", "content", "message")
_RESULT_TEXT = ("result", "output", "content", "text")


def is_foreign(node: CausalNode) -> bool:
    """A goal, answer or error outside tether's encoding (its payload names no run), or
    a tool call or result outside it (its payload has neither ``run`` nor ``call_id``)."""
    return _is_foreign(node.kind, node.payload)


def _is_foreign(k: str, p: Any) -> bool:
    if k in _FOREIGN_KINDS:
        if not isinstance(p, dict):
            return True
        if is_erased(p):
            return False
        return not isinstance(p.get("run"), str) and not ("run" in p and p["run"] is None)
    if k in _FOREIGN_TOOL_KINDS:
        return _is_foreign_tool(p)
    return False


def _is_foreign_tool(p: Any) -> bool:
    """Whether a tool call's or result's payload is outside tether's encoding."""
    if not isinstance(p, dict):
        return True
    return "call_id" not in p and "run" not in p and not is_erased(p)


def _foreign_call_name(call: CausalNode) -> str | None:
    """The tool a foreign call names (``name``, else ``tool``), if it names one."""
    return _call_name(call.payload)


def _call_name(p: Any) -> str | None:
    if not isinstance(p, dict):
        return None
    name = p.get("name", p.get("tool"))
    return name if isinstance(name, str) and name else None


def _result_text(p: Any) -> str:
    """A foreign result's text (see the module docstring)."""
    if isinstance(p, dict):
        for name in _RESULT_TEXT:
            if p.get(name) is not None:
                return text_of(p[name])
    return text_of(p)


def foreign_text(node: CausalNode) -> str:
    """The message text of a foreign goal or answer (see the module docstring)."""
    return _foreign_text(node.kind, node.payload)


def _foreign_text(kind: str, p: Any) -> str:
    if isinstance(p, dict):
        for name in _GOAL_TEXT if kind == "goal" else _ANSWER_TEXT:
            if p.get(name) is not None:
                return text_of(p[name])
    return text_of(p)


class _Run:
    """What a projector keeps of one run: its goals and inferences of this llm, its status
    ("completed" | "failed" | None) and whether an inference of it has a result."""

    __slots__ = ("done", "id", "items", "status")

    def __init__(self, id: str | None) -> None:
        self.id = id
        self.items: list[_Item] = []
        self.status: str | None = None
        self.done = False


_PLAIN, _ERASED, _FOREIGN = 0, 1, 2


class _Item:
    """A goal or inference a projector holds: only what its unit is made of (the texts
    the messages share, the calls), not the node (no id, parents or other payload
    fields), so what a long thread's kept view holds is close to its messages.
    ``tag``: tether's own node, an erased placeholder, or a foreign goal or answer
    (``content`` its text)."""

    __slots__ = ("calls", "content", "input", "kind", "run", "sequence", "tag", "unit", "unrun")

    def __init__(
        self,
        sequence: int,
        kind: str,
        tag: int,
        run: _Run | None = None,
        input: str | None = None,
        content: str | None = None,
        calls: tuple[dict[str, Any], ...] = (),
        unrun: bool = False,
    ) -> None:
        self.sequence = sequence
        self.kind = kind
        self.tag = tag
        self.run = run
        self.input = input
        self.content = content
        self.calls = calls
        self.unrun = unrun  # the payload's "run" is null: a message outside any run
        self.unit: Unit | None = None


class _ForeignCall(_Item):
    """A foreign tool call naming a tool: ``calls`` its one call (its node id as the
    call id, ``args`` as its arguments); once a result is paired with it, ``content``
    is the result's text and ``last`` its sequence."""

    __slots__ = ("last",)

    def __init__(self, sequence: int, id: str, name: str, p: dict[str, Any]) -> None:
        args = p.get("args", p.get("arguments"))
        call = _RO(id=id, name=name, arguments=_RO() if args is None else freeze(args))
        super().__init__(sequence, "tool_call", _FOREIGN, calls=(call,))
        self.last: int | None = None


def _slot_setter(name: str) -> Callable[[Unit, Any], None]:
    setter: Callable[[Unit, Any], None] = getattr(Unit, name).__set__
    return setter


_new = object.__new__
_set_anchor = _slot_setter("anchor")
_set_last = _slot_setter("last")
_set_messages = _slot_setter("messages")
_set_run = _slot_setter("run")


def _new_unit(anchor: int, last: int, messages: tuple[Message, ...], run: str | None) -> Unit:
    """``Unit(...)`` without the frozen dataclass's ``__init__`` (one ``object.__setattr__``
    a field, about 1 us a unit; a cold view of a long thread makes one a message)."""
    u: Unit = _new(Unit)
    _set_anchor(u, anchor)
    _set_last(u, last)
    _set_messages(u, messages)
    _set_run(u, run)
    return u


def _text_or_none(value: Any) -> str | None:
    return None if value is None else text_of(value)


_sequence = attrgetter("sequence")


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

    It keeps no node: of a goal or inference, the texts and calls its unit is made of
    (shared with the unit's messages); of a tool result, its sequence, name and text;
    of a run, its status; of a foreign tool call, its call and its result's text. A
    node fed again (its sequence not after the latest fed) is skipped.
    """

    __slots__ = (
        "_changed",
        "_failed_turns",
        "_fcalls",
        "_messages",
        "_mine",
        "_offsets",
        "_owners",
        "_results",
        "_runs",
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
        self._mine: list[_Item] = []  # goals and inferences of this llm (and erased ones)
        self._runs: dict[str | None, _Run] = {}
        self._owners: dict[_Key, list[_Item]] = {}  # (run, call id) -> inferences
        # (run, call id) -> the first result: (sequence, name, content text)
        self._results: dict[_Key, tuple[int, str | None, str]] = {}
        self._stale: dict[int, _Item] = {}
        # Foreign turns: the goal of the one the walk is in, each turn's shown items
        # (goal sequence -> items), the foreign item's turn, the turns that failed.
        self._seen = 0  # the highest sequence fed
        self._turn: int | None = None
        self._turns: dict[int, list[_Item]] = {}
        self._turn_of: dict[int, int] = {}  # a foreign item's sequence -> its turn's goal
        self._failed_turns: set[int] = set()
        # Foreign tool calls naming a tool, by node id (a result pairs with its parent).
        self._fcalls: dict[str, _ForeignCall] = {}
        # The output: units in _mine order, each's index in _mine, and the flat messages
        # with each unit's offset in them (machine integers: no int object per unit).
        self._units: list[Unit] = []
        self._upos = array("q")
        self._messages: list[Message] = []
        self._offsets = array("q")
        self._changed = 0  # the messages from this offset on changed since ``changes()``

    @property
    def size(self) -> int:
        """How many goals and inferences this projector holds (what it keeps in memory)."""
        return len(self._mine)

    def _run(self, r: str | None) -> _Run:
        run = self._runs.get(r)
        if run is None:
            run = self._runs[r] = _Run(r)
        return run

    def feed(self, nodes: Iterable[CausalNode]) -> None:
        """Take ``nodes``, the next ones of the thread in sequence order."""
        nodes = nodes if isinstance(nodes, list | tuple) else list(nodes)
        # Foreign tool calls and results are paired by node ids and parents.
        tools = {n.sequence: n for n in nodes if n.kind in _FOREIGN_TOOL_KINDS}
        self._feed(((n.sequence, n.kind, n.payload) for n in nodes), tools)

    def feed_rows(self, rows: Iterable[tuple[int, str, Any]]) -> int | None:
        """``feed`` of the nodes' ``(sequence, kind, payload)`` (``Store.payloads``): all
        a projection reads of a node, but of a foreign tool call or result (paired by
        node ids and parents, see the module docstring). At the first of those it stops
        and returns its sequence: feed the nodes from that one on (``feed``). None when
        it took every row."""
        return self._feed(rows, None)

    def _feed(
        self, rows: Iterable[tuple[int, str, Any]], tools: dict[int, CausalNode] | None
    ) -> int | None:
        llm = self.llm
        runs = self._runs
        seen = self._seen
        try:
            for seq, k, p in rows:
                if seq <= seen:
                    continue  # fed before
                if (k == "tool_call" or k == "tool_result") and (
                    not isinstance(p, dict)  # (_is_foreign_tool, inlined)
                    or ("call_id" not in p and "run" not in p and not is_erased(p))
                ):
                    node = tools.get(seq) if tools is not None else None
                    if node is None:
                        return seq  # its id and parents are needed: not taken
                    seen = seq
                    self._foreign(seq, k, p, node)
                    continue
                seen = seq
                if k not in _PROJECTED:
                    continue  # resources, tether's tool calls, ...: not a message
                if k == "goal":
                    self._turn = None  # any goal ends a foreign turn
                if not isinstance(p, dict):
                    if k in _FOREIGN_KINDS:
                        self._foreign(seq, k, p)  # (_is_foreign, inlined: the hot loop)
                    continue
                rv = p.get("run")
                if p.get(ERASED_PLACEHOLDER_KEY) is True:  # (is_erased)
                    if k == "goal" or k == "inference":
                        self._add(_Item(seq, k, _ERASED))  # a placeholder, whoever wrote it
                    continue
                unrun = rv is None and "run" in p
                if k in _FOREIGN_KINDS and not isinstance(rv, str) and not unrun:
                    self._foreign(seq, k, p)
                    continue
                r = rv if isinstance(rv, str) else None
                if k == "goal" or k == "inference":
                    if p.get("llm") != llm:
                        continue
                    run = runs.get(r)
                    if run is None:
                        run = runs[r] = _Run(r)
                    text = p.get("input")
                    if text is not None and type(text) is not str:
                        text = text_of(text)
                    if k == "goal":
                        item = _Item(seq, k, _PLAIN, run, text, None, (), unrun)
                    else:
                        content = p.get("content")
                        if content is not None and type(content) is not str:
                            content = text_of(content)
                        calls = tuple(_calls(p)) if p.get("tool_calls") else ()
                        item = _Item(seq, k, _PLAIN, run, text, content, calls, unrun)
                    self._mine.append(item)
                    self._stale[seq] = item
                    run.items.append(item)
                    if k == "inference" and calls:
                        for c in calls:
                            self._owners.setdefault((r, c["id"]), []).append(item)
                        if any((r, c["id"]) in self._results for c in calls):
                            self._done(run)
                elif k == "tool_result":
                    cid = p.get("call_id")
                    if p.get("llm") != llm or not isinstance(cid, str):
                        continue
                    run = self._run(r)
                    key = (run.id, cid)
                    if key in self._results:
                        continue  # the first result is the call's result
                    self._results[key] = (seq, _str(p.get("name")), text_of(p.get("content")))
                    owners = self._owners.get(key)
                    if owners:
                        for o in owners:
                            self._stale[o.sequence] = o
                        self._done(run)
                elif r is not None:  # an answer or a protocol_error
                    run = self._run(r)
                    # A failure is final even if an answer was also written.
                    if k == "answer" and run.status is not None:
                        continue
                    status = "completed" if k == "answer" else "failed"
                    if run.status != status:
                        run.status = status
                        self._touch(run)
        finally:
            self._seen = seen
        return None

    def _foreign(self, seq: int, k: str, p: Any, node: CausalNode | None = None) -> None:
        """A foreign node (``node``: a tool call's or result's, for its id and parents)."""
        if k == "goal":
            self._turn = seq
            self._turns[seq] = []
        turn = self._turn
        if k == "protocol_error":
            # A turn whose last word is an error failed (StateWeave's runtime writes one
            # after each rejected model output, then retries: an answer after it stands).
            if turn is not None and turn not in self._failed_turns:
                self._failed_turns.add(turn)
                self._touch_turn(turn)
            return
        if k == "tool_result":
            assert node is not None
            self._foreign_result(seq, p, node.parents)
            return
        if k == "answer" and turn is not None and turn in self._failed_turns:
            self._failed_turns.discard(turn)  # the retry answered
            self._touch_turn(turn)
        wanted = p.get("llm") if isinstance(p, dict) else None
        if isinstance(wanted, str) and wanted != self.llm:
            return
        item: _Item
        if k == "tool_call":
            assert node is not None
            name = _call_name(p)
            if name is None:
                return  # names no tool: no message can hold it
            item = self._fcalls[node.id] = _ForeignCall(seq, node.id, name, p)
        else:
            item = _Item(seq, k, _FOREIGN, content=_foreign_text(k, p))
        if turn is None:
            self._add(item)  # an answer or call outside any turn: a message of its own
            return
        self._turns[turn].append(item)
        self._turn_of[seq] = turn
        self._add(item)

    def _foreign_result(self, seq: int, p: Any, parents: Sequence[str]) -> None:
        """Pair a foreign result with its call: the result's only parent (as StateWeave's
        runtime appends it), naming the same tool if it names one; the first one wins."""
        if len(parents) != 1:
            return
        call = self._fcalls.get(parents[0])
        if call is None or call.last is not None:
            return
        tool = p.get("tool", p.get("name")) if isinstance(p, dict) else None
        if isinstance(tool, str) and tool != call.calls[0]["name"]:
            return
        call.content = _result_text(p)
        call.last = seq
        self._stale[call.sequence] = call

    def _touch_turn(self, goal: int) -> None:
        for m in self._turns[goal]:
            self._stale[m.sequence] = m

    def set_run(self, run: str | None) -> None:
        """Make ``run`` the run in progress (shown in full though it has no answer yet)."""
        if run != self.run:
            old, self.run = self.run, run
            for r in (old, run):
                if r is not None and (rec := self._runs.get(r)) is not None:
                    self._touch(rec)

    def units(self) -> list[Unit]:
        """The units of everything fed (a new list)."""
        self._rebuild()
        return list(self._units)

    def view(self, *, units: bool = True) -> tuple[tuple[Unit, ...], list[Message]]:
        """The units (``()`` with ``units=False``) and their messages, flattened. The
        list of messages is this projector's own, as are the messages: copy the list to
        keep it (``prefix + messages``); the messages are read-only (``ReadOnlyDict``: later
        views share them)."""
        self._rebuild()
        return (tuple(self._units) if units else ()), self._messages

    def changes(self) -> int:
        """The offset in the messages from which they changed since the last call (all
        of them the first time; their length when none did). Call it after ``view``."""
        changed, self._changed = self._changed, len(self._messages)
        return changed

    # -- internals

    def _add(self, item: _Item) -> None:
        self._mine.append(item)
        self._stale[item.sequence] = item

    def _done(self, run: _Run) -> None:
        if not run.done:
            run.done = True
            for g in run.items:
                if g.kind == "goal":
                    self._stale[g.sequence] = g

    def _touch(self, run: _Run) -> None:
        if run.id is not None:
            for item in run.items:
                self._stale[item.sequence] = item

    def _full(self, run: _Run) -> bool:
        r = run.id
        status = run.status if r is not None else None
        return status == "completed" or (status is None and r is not None and r == self.run)

    def _rebuild(self) -> None:
        stale = self._stale
        if not stale:
            return
        for item in stale.values():
            item.unit = self._unit(item)
        mine = self._mine
        # _mine is in sequence order (fed so, each item once).
        first = bisect_left(mine, min(stale), key=_sequence)
        stale.clear()
        cut = bisect_left(self._upos, first)
        units, upos, messages, offsets = self._units, self._upos, self._messages, self._offsets
        if cut < len(units):
            self._changed = min(self._changed, offsets[cut])
            del messages[offsets[cut] :]
            del units[cut:], upos[cut:], offsets[cut:]
        else:
            self._changed = min(self._changed, len(messages))
        for i in range(first, len(mine)):
            u = mine[i].unit
            if u is not None:
                units.append(u)
                upos.append(i)
                offsets.append(len(messages))
                messages.extend(u.messages)

    def _unit(self, item: _Item) -> Unit | None:
        seq = item.sequence
        if item.tag == _FOREIGN:
            if self._turn_of.get(seq) in self._failed_turns:
                return None
            if isinstance(item, _ForeignCall):
                return self._foreign_call_unit(item)
            msg = _RO(role="user" if item.kind == "goal" else "assistant", content=item.content)
            return _new_unit(seq, seq, (msg,), None)
        if item.tag == _ERASED:
            role = "user" if item.kind == "goal" else "assistant"
            erased = _RO(role=role, content=ERASED_TEXT)
            return _new_unit(seq, seq, (erased,), None)
        run = item.run
        assert run is not None
        r = run.id
        # A message stored outside any run ("run": null, e.g. a LangGraph thread's
        # messages written by tether.adapters.langgraph) is a finished message.
        shown_full = self._full(run) or (r is None and item.unrun)
        if item.kind == "goal":
            # Shown whole, or as the goal of a run shown by its receipts.
            if item.input is None or not (shown_full or run.done):
                return None
            return _new_unit(seq, seq, (_RO(role="user", content=item.input),), r)
        results = self._results
        done = [c for c in item.calls if (r, c["id"]) in results]
        if not shown_full and not done:
            return None
        msgs: list[Message] = []
        if item.input is not None:
            msgs.append(_RO(role="user", content=item.input))
        content = item.content if shown_full else None
        if done:
            msgs.append(_RO(role="assistant", content=content, tool_calls=_ROL(done)))
        elif content:
            msgs.append(_RO(role="assistant", content=content))
        last = seq
        for c in done:
            res_seq, name, text = results[(r, c["id"])]
            msgs.append(
                _RO(role="tool", tool_call_id=c["id"], name=name or c["name"], content=text)
            )
            last = max(last, res_seq)
        if not msgs:
            return None
        return _new_unit(seq, last, tuple(msgs), r)

    def _foreign_call_unit(self, item: _ForeignCall) -> Unit | None:
        """A foreign call with its result: an assistant message holding the call (its
        node id as the call id), then the tool message; without a result, nothing."""
        if item.last is None:
            return None
        call = item.calls[0]
        messages: tuple[Message, ...] = (
            _RO(role="assistant", content=None, tool_calls=_ROL((call,))),
            _RO(role="tool", tool_call_id=call["id"], name=call["name"], content=item.content),
        )
        return _new_unit(item.sequence, item.last, messages, None)


def flatten(units: Sequence[Unit]) -> list[Message]:
    return [m for u in units for m in u.messages]


def count_messages(units: Sequence[Unit]) -> int:
    return sum(len(u.messages) for u in units)
