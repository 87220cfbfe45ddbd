"""What the executor knows about one run it is driving: its view and the call's context."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..projections import Variables
from ..store.base import Head
from .plan import RunView


@dataclass(kw_only=True)
class RunContext:
    """One run being driven by this process: its view of the graph and the call's context."""

    thread: str
    scope: str
    context: dict[str, Any]  # without its "credentials": what templates, model and tools see
    credentials: dict[str, Any]  # context["credentials"]: only for tools that declare them
    # Every credential value this call has seen (supplied or resolved): no commit of the
    # run may hold one (executor._commit refuses it), and tool results are scrubbed of them.
    secrets: set[str] = field(default_factory=set)
    view: RunView
    generation: int
    seq: int  # the thread head sequence the view reflects
    # A head of the thread the view is at: one just read, or the one this run's own last
    # commit left. The next transaction starts from it instead of reading the head again
    # (Transaction.seed; its commit checks it, so a moved thread costs a Conflict and a
    # retry from a fresh read). None: read it. Each transaction takes it once.
    head: Head | None = None
    # (generation, sequence, id): the run's index entry (``task:<run>``) was node ``id``
    # at that head of the thread, as this run's own commit wrote or carried it.
    entry: tuple[int, int, str] | None = None
    # A goal of another run came after this run's (seen while syncing the view): this run
    # is not the thread's latest, so its finish says nothing of where the thread stands.
    superseded: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    variables: Variables | None = None  # one per call: call-scope variables live here
    # The outputs of this call's steps on call-scoped variables, by step record id: the
    # record stores none (call scope is never persisted), so only this call has them.
    held: dict[str, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.view.run_id

    @property
    def user(self) -> str | None:
        return self.view.user
