"""Paged reads shared by the views (the store answers at most ``limit`` nodes a call)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.graph import CausalNode
from ..store.base import Store
from .projection import Projector

PAGE = 1000


async def read_nodes(
    store: Store, namespace: str, scope: str, *, after: int, before: int
) -> list[CausalNode]:
    """Every node with after < sequence < before, oldest first, in pages."""
    out: list[CausalNode] = []
    cursor = after
    while cursor < before - 1:
        batch = await store.nodes(namespace, scope, after=cursor, before=before, limit=PAGE)
        if not batch:
            break
        out.extend(batch)
        cursor = batch[-1].sequence
        if len(batch) < PAGE:
            break
    return out


async def read_payloads(
    store: Store, namespace: str, scope: str, *, after: int, before: int
) -> list[tuple[int, str, Any]]:
    """``(sequence, kind, payload)`` of every node with after < sequence < before, oldest
    first, in pages (``Store.payloads``: no ids, parents or timestamps built)."""
    out: list[tuple[int, str, Any]] = []
    cursor = after
    while cursor < before - 1:
        batch = await store.payloads(namespace, scope, after=cursor, before=before, limit=PAGE)
        if not batch:
            break
        out.extend(batch)
        cursor = batch[-1][0]
        if len(batch) < PAGE:
            break
    return out


async def feed_projector(
    store: Store, namespace: str, scope: str, projector: Projector, *, after: int, before: int
) -> int:
    """Feed ``projector`` every node with after < sequence < before: their rows
    (``Store.payloads``, a page at a time, each page fed as it is read), and from the
    first foreign tool call or result on (paired by node ids and parents: an imported
    StateWeave thread's) the nodes themselves. Returns the sequence of the last node
    read (``after`` when none).

    Page by page, not the whole thread's rows first: the projector keeps only what its
    messages are made of, so each page's decoded payloads are freed as the next is read
    (a long thread's cold view then holds one page of payloads, not all of them, and the
    garbage collector does not walk them again and again as the view is built)."""
    cursor = after
    while cursor < before - 1:
        batch = await store.payloads(namespace, scope, after=cursor, before=before, limit=PAGE)
        if not batch:
            break
        stop = projector.feed_rows(batch)
        if stop is not None:
            del batch
            nodes = await read_nodes(store, namespace, scope, after=stop - 1, before=before)
            projector.feed(nodes)
            return nodes[-1].sequence if nodes else stop - 1
        cursor = batch[-1][0]
        if len(batch) < PAGE:
            break
    return cursor


async def read_tail(
    store: Store,
    namespace: str,
    scope: str,
    *,
    after: int,
    before: int,
    enough: Callable[[list[CausalNode]], bool],
    first_page: int = 64,
) -> list[CausalNode]:
    """Nodes read newest first in growing pages until ``enough(nodes_oldest_first)``.

    Returns the nodes read, oldest first: a suffix of (after, before).
    """
    newest_first: list[CausalNode] = []
    upper = before
    page = first_page
    while True:
        batch = await store.nodes(
            namespace, scope, after=after, before=upper, limit=page, descending=True
        )
        newest_first.extend(batch)
        nodes = newest_first[::-1]
        # ``enough`` runs on the last page too, so a caller may keep what it computed.
        if enough(nodes) or len(batch) < page:
            return nodes
        upper = batch[-1].sequence
        # Doubling pages keeps the number of round trips logarithmic and the
        # re-projection of what was read linear overall.
        page = min(page * 2, PAGE)
