"""What a LangGraph thread no longer needs once checkpoints are deleted (issue 43).

``TetherSaver.delete_for_runs`` and ``prune("keep_latest")`` first hide checkpoints
(a ``del`` record, pointers marked deleted); ``unreachable`` then names the nodes
that nothing live reads, which ``tether.control.prune.prune_selected`` removes for
real: the hidden checkpoint nodes, the pending writes of hidden checkpoints (not of
an id no checkpoint was put under yet: it may come), and
the content (``el``, ``val``, ``seq`` nodes: channel values, messages, list trees)
that no live checkpoint and no live write references, directly or through a list
tree. The newest node of every resource key stays, as with ``tether prune``, even a
hidden one, and so does what it references. Everything else stays too: live checkpoints, their writes and everything they
reference, the ``del`` records, id pointers, ``odd`` markers, and every node that is
not the saver's (tether's own nodes in the same thread).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..core.graph import CausalNode
from ._lg_codec import ref_ids
from ._lg_keys import write_records

__all__ = ["unreachable"]

_CONTENT: Final = frozenset({"el", "val", "seq"})


def _lg(n: CausalNode) -> tuple[str | None, dict[str, Any]]:
    p = n.payload
    if not isinstance(p, dict):
        return None, {}
    lg = p.get("lg")
    return (lg if isinstance(lg, str) else None), p


def unreachable(nodes: Sequence[CausalNode]) -> Mapping[int, str]:
    """The sequences of ``nodes`` (a thread scope, all of it) nothing live reads,
    each with the reason it goes: ``deleted_checkpoint``, ``deleted_writes`` or
    ``unreferenced_value``."""
    dead: set[str] = set()
    heads: dict[str, int] = {}  # resource key -> sequence of its newest node
    for n in nodes:
        lg, p = _lg(n)
        if lg == "del":
            dead.update(x for x in p.get("nodes", ()) if isinstance(x, str))
        if n.resource_key is not None:
            heads[n.resource_key] = n.sequence
    kept_heads = set(heads.values())
    live_cps: set[tuple[str, str]] = set()  # (encoded checkpoint ns, checkpoint id)
    dead_cps: set[tuple[str, str]] = set()
    cut: dict[int, str] = {}
    newest: dict[tuple[str, str], CausalNode] = {}  # a checkpoint id's newest put
    puts: list[tuple[tuple[str, str], CausalNode]] = []
    for n in nodes:
        lg, p = _lg(n)
        if lg != "cp" or not (n.resource_key or "").startswith(("lgc:", "lgi:")):
            continue
        which = ((n.resource_key or "")[4:].split(";", 1)[0], str(p.get("id")))
        newest[which] = n  # sequence order: the last one wins
        puts.append((which, n))
    for which, n in puts:
        # A checkpoint id whose newest put is hidden is gone (its pointer says deleted,
        # and a walk stops at that put): its older puts go with it.
        if n.id in dead or newest[which].id in dead:
            dead_cps.add(which)
            if n.sequence not in kept_heads:
                cut[n.sequence] = "deleted_checkpoint"
        else:
            live_cps.add(which)
    gone = dead_cps - live_cps
    cut_cp = {n.id: n.sequence for _, n in puts if n.sequence in cut}
    for n in nodes:  # a pointer that stays keeps the checkpoint it names
        lg, p = _lg(n)
        if lg == "id" and n.sequence in kept_heads and p.get("cp") in cut_cp:
            cut.pop(cut_cp.pop(p["cp"]), None)
    roots: list[str] = []
    by_id: dict[str, CausalNode] = {}
    for n in nodes:
        lg, p = _lg(n)
        rk = n.resource_key or ""
        if lg in _CONTENT:
            by_id[n.id] = n
        elif lg == "id" and rk.startswith("lgi:") and p.get("cp") in cut_cp:
            if n.sequence not in kept_heads:  # an old pointer to a hidden checkpoint
                cut[n.sequence] = "deleted_checkpoint"
        elif lg in ("w", "ws") and rk.startswith("lgw:"):
            e, _, cid = rk[4:].partition(";")
            if (e, cid) in gone and n.sequence not in kept_heads:
                # a hidden checkpoint's writes (those of an id no checkpoint was put
                # under yet stay: it may come)
                cut[n.sequence] = "deleted_writes"
                continue
            for w in write_records([p]):
                if isinstance(w.get("value"), dict):
                    roots.extend(ref_ids(w["value"]))
        elif lg == "cp" and n.sequence not in cut:
            # live, or hidden but kept as its key's newest node: what it names stays
            for ref in (p.get("values") or {}).values():
                roots.extend(ref_ids(ref))
    reached: set[str] = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if i in reached:
            continue
        reached.add(i)
        node = by_id.get(i)
        if node is not None:
            _, p = _lg(node)
            if p.get("lg") == "seq":
                stack.extend(x for x in p.get("items", ()) if isinstance(x, str))
    for i, n in by_id.items():
        if i not in reached and n.sequence not in kept_heads:
            cut[n.sequence] = "unreferenced_value"
    return cut
