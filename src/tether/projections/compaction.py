"""Compaction: a summary node that stands for the older messages of a thread (SPEC §3, seed 002).

Compaction is non-destructive. It writes one ``semantic`` node, type ``summary``,
key ``<llm>``, content ``{"text", "through", "count", "strategy"}``: every message of
that LLM node with sequence <= ``through`` is represented by ``text`` (``count`` of
them in all). Views then read only the nodes after ``through``. The source nodes
stay until an explicit prune, and ``undo_compaction`` brings them back.

Strategies (seed 002's ``compact_state``; defaults in brackets):

``recent``   keep the latest ``max_messages`` [20] messages; compacts only when there
             are more. The dropped messages are not summarised: ``text`` carries the
             previous summary's text forward (empty when there was none).
``tokens``   keep the longest recent suffix within ``max_tokens`` [4000] tokens
             (system prompt and summary included), at least ``preserve_recent`` [6]
             messages; compacts only when the view is over ``max_tokens``. Like
             ``recent``, the dropped messages are not summarised.
``summary``  once there are more than ``max_messages`` messages, summarise all but the
             latest ``preserve_recent`` into at most ``summary_max_tokens`` [512]
             tokens, building on the previous summary. With a ``model`` the model
             writes it; without one (offline, tests) the summary is *extractive*:
             one line per message (``user: ...``, ``assistant: ...``, ``assistant
             called name({...})``, ``tool name: ...``), each cut to 300 characters,
             after the previous summary's text; when that is over the budget the
             oldest lines go first and a ``(N earlier lines omitted)`` line says so.

The cut always falls between whole units (a call stays with its results) and never
inside an unfinished run (no answer and no error yet), whose outcome decides what
the view shows; a run that is unfinished but followed by a finished run counts as
abandoned and may be compacted (its receipts are what the view shows of it).

Concurrency: the summary is computed outside any transaction (a model call can be
slow) and written with ``transact``; the write checks that neither another
compaction nor a reset happened meanwhile (else it recomputes). Turns committed in
the meantime only add nodes after ``through``: they stay in the view, and a turn
that computed its commit before the summary landed gets a ``Conflict`` from the
store and retries through ``transact``. Nothing is lost either way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

from ..core import scopes
from ..core.errors import Conflict, InvalidRequest
from ..core.graph import CausalNode
from ..core.messages import Message, Model, ModelRequest
from ..store.base import Store
from ..store.txn import Transaction, transact
from .errors import NothingToUndo
from .policies import select_recent, select_tokens, select_window, unit_tokens
from .projection import (
    SummaryContent,
    Unit,
    count_messages,
    flatten,
    project,
    summary_key,
    summary_message,
    system_key,
    text_of,
)
from .reads import read_nodes
from .tokens import TokenCounter, default_counter, messages_tokens

__all__ = [
    "STRATEGIES",
    "CompactionResult",
    "UndoResult",
    "compact",
    "extractive_summary",
    "undo_compaction",
]

Strategy = Literal["recent", "tokens", "summary"]
STRATEGIES: Final = ("recent", "tokens", "summary")
_ATTEMPTS = 5
_LINE_CHARS = 300
SUMMARY_PROMPT = (
    "You compress a conversation for an assistant that will continue it. Write a "
    "faithful summary in at most {max_tokens} tokens: facts the user stated, decisions, "
    "open questions, and results of tool calls. Start from the earlier summary if one "
    "is given. Answer with the summary only."
)


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionResult:
    """What ``compact`` did. ``compacted`` is False (with a ``reason``) when nothing was due."""

    thread: str
    llm: str
    strategy: str
    compacted: bool
    reason: str = ""
    messages_before: int = 0
    messages_after: int = 0
    covered: int = 0  # messages newly folded into the summary
    count: int = 0  # messages the summary stands for in all
    through: int | None = None
    summary_node: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactionResult:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True, kw_only=True, slots=True)
class UndoResult:
    """What ``undo_compaction`` did: ``undone`` summary node, ``restored`` one (or None)."""

    thread: str
    llm: str
    undone: str
    restored: str | None
    through: int | None
    summary_node: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UndoResult:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


class _Moved(Exception):
    """Another compaction or a reset happened since the plan was made."""


def validate(
    strategy: object,
    max_messages: object,
    max_tokens: object,
    preserve_recent: object,
    summary_max_tokens: object,
) -> None:
    """Seed 002's validation, as ``InvalidRequest`` with the offending ``field``."""
    if strategy not in STRATEGIES:
        raise InvalidRequest(
            f"unknown compaction strategy {strategy!r}; use one of {', '.join(STRATEGIES)}",
            field="strategy",
        )
    for name, value, minimum in (
        ("max_messages", max_messages, 1),
        ("max_tokens", max_tokens, 1),
        ("preserve_recent", preserve_recent, 0),
        ("summary_max_tokens", summary_max_tokens, 1),
    ):
        if type(value) is not int or value < minimum:
            raise InvalidRequest(
                f"{name} must be an integer >= {minimum}, got {value!r}", field=name
            )


# -- summaries ------------------------------------------------------------------------


def _line(m: Message) -> str:
    role = m.get("role")
    content = m.get("content")
    if role == "tool":
        s = f"tool {m.get('name') or ''}: {text_of(content) if content is not None else ''}"
    else:
        s = f"{role}: {text_of(content)}" if content else f"{role}:"
        for c in m.get("tool_calls") or ():
            s += f" [called {c.get('name')}({text_of(c.get('arguments'))})]"
    s = " ".join(s.split())
    return s if len(s) <= _LINE_CHARS else s[: _LINE_CHARS - 1] + "…"


def extractive_summary(
    previous: str,
    messages: list[Message],
    *,
    max_tokens: int = 512,
    counter: TokenCounter | None = None,
) -> str:
    """The offline summary: the previous text, then one line per message, within ``max_tokens``."""
    c = counter or default_counter()
    lines = ([previous] if previous else []) + [_line(m) for m in messages]
    costs = [c.count(s) + 1 for s in lines]
    total = sum(costs)
    dropped = 0
    while lines and total > max_tokens:
        total -= costs.pop(0)
        lines.pop(0)
        dropped += 1
    if dropped:
        note = f"({dropped} earlier lines omitted)"
        lines.insert(0, note)
        total += c.count(note) + 1
        while len(lines) > 1 and total > max_tokens:
            total -= costs.pop(0)
            lines.pop(1)
    text = "\n".join(lines)
    # A single line can still be over a tiny budget: cut characters until it fits.
    while text and c.count(text) > max_tokens:
        text = text[: max(len(text) * 3 // 4, 1) - 1] if len(text) > 1 else ""
    return text


async def _summarize(
    previous: str,
    messages: list[Message],
    *,
    max_tokens: int,
    model: Model | None,
    counter: TokenCounter,
) -> str:
    if model is not None:
        transcript = "\n".join(_line(m) for m in messages)
        body = (f"Earlier summary:\n{previous}\n\n" if previous else "") + (
            f"Conversation:\n{transcript}"
        )
        response = await model.complete(
            ModelRequest(
                messages=[
                    {"role": "system", "content": SUMMARY_PROMPT.format(max_tokens=max_tokens)},
                    {"role": "user", "content": body},
                ],
                max_tokens=max_tokens,
            )
        )
        if response.content and response.content.strip():
            return response.content.strip()
    return extractive_summary(previous, messages, max_tokens=max_tokens, counter=counter)


# -- planning -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class _Plan:
    generation: int
    previous: CausalNode | None  # the summary node the plan builds on
    prev_content: SummaryContent | None
    units: list[Unit]
    cover: int  # units[:cover] are folded into the summary
    through: CausalNode | None  # the last node the summary stands for
    reason: str


def _open_run_start(nodes: list[CausalNode]) -> int | None:
    """Sequence of the first node of the earliest run still open (no answer, no error),
    ignoring runs followed by a finished run (abandoned)."""
    first: dict[str, int] = {}
    ended: set[str] = set()
    last_finished_start = 0
    for n in nodes:
        p = n.payload
        r = p.get("run") if isinstance(p, dict) else None
        if not isinstance(r, str):
            continue
        first.setdefault(r, n.sequence)
        if n.kind in ("answer", "protocol_error"):
            ended.add(r)
    for r in ended:
        last_finished_start = max(last_finished_start, first[r])
    open_starts = [s for r, s in first.items() if r not in ended and s > last_finished_start]
    return min(open_starts) if open_starts else None


async def _plan(
    store: Store,
    namespace: str,
    scope: str,
    *,
    llm: str,
    strategy: str,
    max_messages: int,
    max_tokens: int,
    preserve_recent: int,
    counter: TokenCounter,
) -> _Plan:
    head = await store.head(namespace, scope)
    previous = await store.resource_head(namespace, scope, summary_key(llm))
    prev_content = (
        SummaryContent.parse(previous.payload.get("content"))
        if previous is not None and isinstance(previous.payload, dict)
        else None
    )
    after = prev_content.through if prev_content else 0
    nodes = await read_nodes(store, namespace, scope, after=after, before=head.sequence + 1)
    units = project(nodes, llm=llm)
    total = count_messages(units)

    def plan(cover: int, through: CausalNode | None, reason: str) -> _Plan:
        return _Plan(
            generation=head.generation,
            previous=previous,
            prev_content=prev_content,
            units=units,
            cover=cover,
            through=through,
            reason=reason,
        )

    if strategy == "tokens":
        prefix: list[Message] = []
        system = await store.resource_head(namespace, scope, system_key(llm))
        if system is not None and isinstance(system.payload, dict):
            content = system.payload.get("content")
            if isinstance(content, str):
                prefix.append({"role": "system", "content": content})
        if prev_content is not None and prev_content.text:
            prefix.append(summary_message(prev_content.text))
        fixed = messages_tokens(prefix, counter)
        if fixed + sum(unit_tokens(u, counter) for u in units) <= max_tokens:
            return plan(0, None, f"the view is within max_tokens ({max_tokens})")
        keep_from = select_tokens(units, max_tokens - fixed, preserve_recent, counter)
    else:
        if total <= max_messages:
            return plan(0, None, f"{total} messages, not more than max_messages ({max_messages})")
        keep_from = (
            select_window(units, max_messages)
            if strategy == "recent"
            else select_recent(units, preserve_recent)
        )

    open_start = _open_run_start(nodes)
    limit = open_start if open_start is not None else head.sequence + 1
    cover = min(keep_from, sum(1 for u in units if u.anchor < limit))
    # Every covered node must lie at or before ``through`` and every kept one after it.
    prefix_last = [0]
    for u in units:
        prefix_last.append(max(prefix_last[-1], u.last))
    while cover > 0:
        bound = min(units[cover].anchor if cover < len(units) else limit, limit)
        if prefix_last[cover] < bound:
            break
        cover -= 1
    if cover == 0:
        why = (
            "the older messages belong to a run still in progress"
            if keep_from > 0
            else "every message is within the preserved recent ones"
        )
        return plan(0, None, why)
    through_seq = min(units[cover].anchor if cover < len(units) else limit, limit) - 1
    through = next(n for n in nodes if n.sequence == through_seq)
    return plan(cover, through, "")


async def compact(
    store: Store,
    namespace: str,
    thread_id: str,
    *,
    llm: str = "agent",
    strategy: Strategy | str = "tokens",
    max_messages: int = 20,
    max_tokens: int = 4000,
    preserve_recent: int = 6,
    summary_max_tokens: int = 512,
    model: Model | None = None,
    counter: TokenCounter | None = None,
) -> CompactionResult:
    """Compact the conversation of ``llm`` in a thread (see the module docstring).

    Invalid parameters raise ``InvalidRequest`` with ``field`` set, writing nothing.
    """
    from .conversation import check_llm

    validate(strategy, max_messages, max_tokens, preserve_recent, summary_max_tokens)
    check_llm(llm)
    scope = scopes.thread(thread_id)
    c = counter or default_counter()
    for _ in range(_ATTEMPTS):
        p = await _plan(
            store,
            namespace,
            scope,
            llm=llm,
            strategy=strategy,
            max_messages=max_messages,
            max_tokens=max_tokens,
            preserve_recent=preserve_recent,
            counter=c,
        )
        before = count_messages(p.units)
        if p.through is None:
            return CompactionResult(
                thread=thread_id,
                llm=llm,
                strategy=strategy,
                compacted=False,
                reason=p.reason,
                messages_before=before,
                messages_after=before,
                count=p.prev_content.count if p.prev_content else 0,
                through=p.prev_content.through if p.prev_content else None,
                summary_node=p.previous.id if p.previous and p.prev_content else None,
            )
        covered = flatten(p.units[: p.cover])
        previous_text = p.prev_content.text if p.prev_content else ""
        if strategy == "summary":
            text = await _summarize(
                previous_text, covered, max_tokens=summary_max_tokens, model=model, counter=c
            )
        else:
            text = previous_text
        content = SummaryContent(
            text=text,
            through=p.through.sequence,
            count=(p.prev_content.count if p.prev_content else 0) + len(covered),
            strategy=strategy,
        )
        through_id = p.through.id
        expected = p.previous.id if p.previous else None

        async def write(
            txn: Transaction,
            generation: int = p.generation,
            expected: str | None = expected,
            content: SummaryContent = content,
            through_id: str = through_id,
        ) -> CausalNode:
            head = await txn.head(scope)
            current = await txn.resource_head(scope, summary_key(llm))
            if head.generation != generation or (current.id if current else None) != expected:
                raise _Moved
            # Parent: the last node summarised, so the graph records what it stands for.
            return await txn.semantic(
                scope, "summary", llm, content.to_content(), parents=[through_id]
            )

        try:
            node = await transact(store, namespace, write)
        except _Moved:
            continue
        return CompactionResult(
            thread=thread_id,
            llm=llm,
            strategy=strategy,
            compacted=True,
            messages_before=before,
            messages_after=before - len(covered),
            covered=len(covered),
            count=content.count,
            through=content.through,
            summary_node=node.id,
        )
    raise Conflict(
        f"compaction of thread {thread_id!r} kept racing other compactions or resets; retry",
        thread=thread_id,
        llm=llm,
    )


def _top(node: CausalNode | None) -> str | None:
    """The summary node on top of the undo stack when ``node`` is the head."""
    if node is None or not isinstance(node.payload, dict):
        return None
    content = node.payload.get("content")
    if not isinstance(content, dict):
        return None  # undone to nothing
    restores = content.get("restores")
    return restores if isinstance(restores, str) else node.id


async def undo_compaction(
    store: Store, namespace: str, thread_id: str, *, llm: str = "agent"
) -> UndoResult:
    """Undo the latest compaction of ``llm`` in a thread; repeat to undo earlier ones.

    Writes a successor summary carrying the content of the summary before the undone
    one (with ``"undoes"`` and ``"restores"`` ids), or ``content: null`` when there
    was none. Raises ``NothingToUndo`` when no compaction is in effect.
    """
    from .conversation import check_llm

    check_llm(llm)
    scope = scopes.thread(thread_id)
    key = summary_key(llm)

    async def run(txn: Transaction) -> UndoResult:
        head = await txn.resource_head(scope, key)
        top_id = _top(head)
        if head is None or top_id is None:
            raise NothingToUndo(
                f"thread {thread_id!r} has no compaction of llm {llm!r} to undo",
                thread=thread_id,
                llm=llm,
            )
        assert head is not None
        found = await store.get_nodes(namespace, scope, [top_id])
        top = found.get(top_id) or head
        # What lay below ``top`` on the stack is the top when ``top`` was written:
        # computed from top's previous version (its parent with the same key).
        parents = await store.get_nodes(namespace, scope, list(top.parents))
        prev = next((n for n in parents.values() if n.resource_key == key), None)
        below_id = _top(prev)
        below: CausalNode | None = None
        if below_id is not None:
            below = (await store.get_nodes(namespace, scope, [below_id])).get(below_id)
        restored = SummaryContent.parse(below.payload.get("content")) if below else None
        if below is not None and restored is not None:
            content: dict[str, Any] | None = {
                **restored.to_content(),
                "undoes": top_id,
                "restores": below.id,
            }
        else:
            content = None
        node = await txn.semantic(scope, "summary", llm, content, parents=[])
        return UndoResult(
            thread=thread_id,
            llm=llm,
            undone=top_id,
            restored=below.id if below is not None and restored is not None else None,
            through=restored.through if restored is not None and below is not None else None,
            summary_node=node.id,
        )

    return await transact(store, namespace, run)
