"""How ``TetherSaver`` turns channel values into nodes, and references back into values.

A value is stored content-addressed (``_values``): a list channel such as
``messages`` becomes its elements under a Merkle tree of ``seq`` nodes, so a put
stores its new messages plus a few tree nodes, never the whole history again;
other values become one ``val`` node, and short scalars sit inline in the
checkpoint. LangChain messages become conversation nodes (``_lg_codec``).

``ValueCodec`` holds what makes this cheap, and nothing that changes what is
stored: caches keyed by the serializer's bytes, so a value is serialized again
at every put (edits made in place are stored) and a cache hit only saves the
hashing and base64 of bytes seen before. The serializer and the conversation
name are passed on every call, not held: LangGraph's ``with_allowlist`` copies a
saver shallowly and gives the copy its own serializer.
"""

from __future__ import annotations

import base64
import hashlib
from binascii import a2b_base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Final

from langgraph.checkpoint.serde.types import _DeltaSnapshot

from ..core.errors import StoreError
from ..core.graph import CausalNode, node_id
from ..store import Store
from ._lg_codec import (
    Serde,
    array_header,
    content,
    decode_content,
    identify,
    join_array,
    message_fields,
    ref_ids,
    split_items,
    stored_form,
)
from ._values import FANOUT, LRU, ByteLRU, Planned, TreeBuilder, dedupe, is_json_scalar

List = list  # ``ValueCodec.list`` shadows the builtin inside the class body

_INLINE_STR: Final = 256  # strings up to this long sit in the checkpoint node itself
_INLINE_VALUE: Final = 1024  # other values serialized to this many bytes too (``{"i": ...}``)

Slot = tuple[str, str, str]  # (thread scope, checkpoint ns, channel)


@dataclass(slots=True)
class Plan:
    """The nodes a reference needs, in two forms.

    ``all()``: every node (elements, then the tree bottom-up), deduplicated. When
    ``base`` is set (the root of the tree this slot's list had at its previous
    encode) and the scope holds ``base``, the scope holds every node of that tree
    (a seq node's parents are its children, and a node is stored only after its
    parents), so only ``new`` can be missing, and ``stored`` (the other parents
    of ``new``, all nodes of the base tree) are stored: the saver appends O(new
    elements) nodes instead of checking every one. The caller decides which
    form applies, from what it knows is stored at the transaction's generation.

    ``base`` lists the previous reference's nodes (its tree root, if any, and its
    tail elements, ``encode``): all of them must be stored for the short form.
    """

    elements: List[Planned] = field(default_factory=list)
    levels: List[List[Planned]] = field(default_factory=list)
    base: List[str] | None = None
    new: List[Planned] = field(default_factory=list)
    stored: List[str] = field(default_factory=list)

    def all(self) -> List[Planned]:
        return dedupe(chain(self.elements, *self.levels))


@dataclass(slots=True)
class _Last:
    """What the last encode of a list in a slot produced."""

    whole: bytes  # the list as one msgpack array
    elements: List[Planned]
    levels: List[List[Planned]]  # the tree of the full chunks, leaves first; [-1] == [root]
    ref: dict[str, Any]  # the reference the encode returned


class ValueCodec:
    """Channel values to planned nodes and references, and references to values."""

    def __init__(self) -> None:
        self.trees = TreeBuilder()  # the levels above the leaves
        # the element ids of a leaf -> its planned node (``leaf``)
        self.leaves: LRU[tuple[str, ...], Planned] = LRU(20_000)
        # serialized element -> its planned node (the id costs a canonical-JSON hash)
        self.elements: LRU[bytes, Planned] = LRU(50_000)
        # msgpack bytes of a list element (cut from the whole list) -> its planned node
        self.parts: LRU[bytes, Planned] = LRU(50_000)
        # the same for a pending write's draft copies (``message_fields``)
        self.draft_parts: LRU[bytes, Planned] = LRU(10_000)
        # seq tree root id -> the whole list as one msgpack array: a read of a list
        # this saver put or read decodes it in one serializer call, no node reads.
        # Bytes, never objects: every read returns fresh objects, as LangGraph's
        # savers do, since graphs mutate the state they are given.
        self.lists: ByteLRU[str] = ByteLRU(64 << 20)
        # slot -> (the list last put there, its element nodes): a list whose bytes
        # start with that list's bytes shares its first elements (msgpack objects
        # are self-delimiting), so only the tail is cut.
        # Its tree is kept too: the new list's tree shares every full chunk of the
        # shared prefix at every level, so only the right spine is rebuilt.
        self.last: LRU[Slot, _Last] = LRU(256)

    def planned_element(
        self, llm: str, value: Any, v: dict[str, Any], draft: bool = False
    ) -> Planned:
        kind, fields = message_fields(value, llm, draft=draft)
        payload = {**fields, "lg": "el", "v": v}
        try:
            nid = node_id(kind, (), payload)
        except Exception:
            # Readable fields that are not valid JSON (a NaN in tool arguments):
            # keep the element exact, drop the projection.
            kind, payload = "resource", {"lg": "el", "v": v}
            nid = node_id(kind, (), payload)
        return Planned(id=nid, kind=kind, payload=payload, parents=())

    def element(self, serde: Serde, llm: str, value: Any, draft: bool = False) -> Planned:
        """One element serialized on its own (serializers whose output cannot be cut)."""
        t, b = identify(serde, value)
        draft = draft and getattr(value, "id", None) is None  # as in ``list``
        tag = b"dr\0" if draft else b"el\0"
        digest = hashlib.sha256(
            tag + llm.encode() + b"\0" + (t or "j").encode() + b"\0" + b
        ).digest()
        planned = self.elements.get(digest)
        if planned is None:
            planned = self.planned_element(llm, value, stored_form(t, b, value), draft)
            self.elements.put(digest, planned)
        return planned

    def list(
        self,
        serde: Serde,
        llm: str,
        value: List[Any],
        slot: Slot | None = None,
        draft: bool = False,
    ) -> tuple[List[Planned], bytes | None, _Last | None]:
        """The element nodes of a list, the list as one msgpack array when it is one,
        and the slot's previous list when this one extends it.

        Every element is serialized at every put, as LangGraph's own savers do: what
        is stored is what the serializer sees now, edits made in place included.
        The whole list goes through the serializer in one call and is cut into its
        elements (``split_items``); only the node of an element whose bytes were
        seen before is reused. A list that extends the one last put in the same
        ``slot`` (byte for byte: one C comparison) reuses that list's element
        nodes and cuts only its tail, so the per-element work follows the new
        messages. ``draft``: a pending write's list (``message_fields``); never
        in a slot.
        """
        t, b = serde.dumps_typed(value)
        head = array_header(b) if t == "msgpack" else None
        if head is None or head[0] != len(value):
            return [self.element(serde, llm, x, draft) for x in value], None, None
        out: List[Planned] = []
        pos = head[1]
        last = self.last.get(slot) if slot is not None and not draft else None
        shared: _Last | None = None
        if last is not None:
            prev_head = array_header(last.whole)
            if prev_head is not None and prev_head[0] <= len(value):
                body = memoryview(last.whole)[prev_head[1] :]
                if b.startswith(body, pos):
                    out = List(last.elements)
                    pos += len(body)
                    shared = last
        parts = split_items(b, pos, len(value) - len(out))
        if parts is None:
            return [self.element(serde, llm, x, draft) for x in value], None, None
        for x, part in zip(value[len(out) :], parts, strict=True):
            # only a message without an id is a draft: with one, a draft copy is the
            # channel's node (same bytes, same kind), planned once for both
            drafted = draft and getattr(x, "id", None) is None
            cache = self.draft_parts if drafted else self.parts
            planned = cache.get(part)
            if planned is None:
                v = {"s": "msgpack", "b": base64.b64encode(part).decode("ascii")}
                planned = self.planned_element(llm, x, v, drafted)
                cache.put(part, planned)
            out.append(planned)
        return out, b, shared

    def tree(self, elements: List[Planned], prev: _Last | None) -> List[List[Planned]]:
        """The seq tree of ``elements`` (whole chunks only: levels, leaves first, the
        nodes ``TreeBuilder.build`` makes), where ``prev`` is the slot's previous list,
        whose elements start these.

        With ``prev``, every chunk that lies inside the part of the list ``prev``'s
        tree covers is ``prev``'s node, at every level: only the chunks from the
        first changed one on are built, so the work follows the new elements.
        """
        if not elements:
            return []
        prev_levels = prev.levels if prev is not None else []
        keep = len(prev_levels[0]) * FANOUT if prev_levels else 0
        levels: List[List[Planned]] = []
        below: List[Planned] = elements
        level = 0
        while True:
            old = prev_levels[level] if level < len(prev_levels) else []
            full = min(keep // FANOUT, len(old))  # chunks wholly inside the kept prefix
            nodes = old[:full]
            if full == len(old) and full * FANOUT >= len(below):
                # this level is ``prev``'s, so every level above it is too
                return [*levels, nodes, *prev_levels[level + 1 :]]
            for i in range(full * FANOUT, len(below), FANOUT):
                chunk = below[i : i + FANOUT]
                ids = tuple(p.id for p in chunk)
                nodes.append(self.leaf(chunk) if level == 0 else self.trees._node(level, ids))
            levels.append(nodes)
            if len(nodes) == 1:
                return levels
            below, keep, level = nodes, full, level + 1

    def leaf(self, chunk: List[Planned]) -> Planned:
        """The seq leaf over ``FANOUT`` elements. When every element has a msgpack form,
        the leaf carries their bytes too, concatenated, as a latin-1 string (``x``: one
        character per byte, which JSON stores near byte for byte and a read turns back
        into bytes in one call), so a cold read of a long list reads ``n / FANOUT``
        leaves and decodes no base64. A function of the elements, so of their ids."""
        ids = tuple(p.id for p in chunk)
        planned = self.leaves.get(ids)
        if planned is None:
            forms = [_form(p) for p in chunk]
            payload: dict[str, Any] = {"lg": "seq", "lvl": 0, "items": list(ids)}
            if len(chunk) == FANOUT and all(f is not None for f in forms):
                raw = b"".join(a2b_base64(f) for f in forms if f is not None)
                payload["x"] = raw.decode("latin-1")
            parents = tuple(sorted(set(ids)))
            nid = node_id("resource", parents, payload)
            planned = Planned(id=nid, kind="resource", payload=payload, parents=parents)
            self.leaves.put(ids, planned)
        return planned

    def encode(
        self,
        serde: Serde,
        llm: str,
        value: Any,
        slot: Slot | None = None,
        *,
        draft: bool = False,
    ) -> tuple[dict[str, Any], Plan]:
        """(reference stored in the checkpoint or write, the nodes the reference needs).

        ``draft``: a pending write's value on a channel whose checkpoints hold its list
        (``message_fields``)."""
        if type(value) is _DeltaSnapshot and type(value[0]) is list:
            # DeltaChannel's snapshot of a list: stored as the list (its tree shares
            # every element with the writes and the snapshots before it)
            inner, plan = self.encode(serde, llm, value[0], slot)
            return {"d": inner}, plan
        if type(value) is list:
            # The tree covers the whole chunks; the last, unfinished chunk's elements
            # are named in the reference itself (``t``), so a put that appends a few
            # elements stores them and no tree node, until a chunk fills.
            elements, whole, prev = self.list(serde, llm, value, slot, draft)
            full = len(elements) - len(elements) % FANOUT
            levels = self.tree(elements[:full], prev)
            ref: dict[str, Any] = {"l": levels[-1][0].id if levels else None, "n": len(elements)}
            if full < len(elements):
                ref["t"] = [p.id for p in elements[full:]]
            if whole is not None:
                self.lists.put(list_key(ref), whole)
                if slot is not None:
                    self.last.put(slot, _Last(whole, elements, levels, ref))
            plan = Plan(elements=elements, levels=levels)
            if prev is not None:
                plan.base = ref_ids(prev.ref)
                plan.new = _fresh(elements, levels, prev)
                ids = {p.id for p in plan.new}
                plan.stored = sorted({q for p in plan.new for q in p.parents if q not in ids})
            return ref, plan
        if is_json_scalar(value) and (type(value) is not str or len(value) <= _INLINE_STR):
            return {"j": value}, Plan()
        v, ident = content(serde, value)
        if len(ident) <= _INLINE_VALUE:
            return {"i": v}, Plan()  # small: in the checkpoint or write itself
        payload = {"lg": "val", "v": v}
        nid = node_id("resource", (), payload)
        return {"b": nid}, Plan(
            elements=[Planned(id=nid, kind="resource", payload=payload, parents=())]
        )

    async def resolve(
        self,
        serde: Serde,
        store: Store,
        namespace: str,
        scope: str,
        refs: Sequence[dict[str, Any]],
        known: dict[str, CausalNode] | None = None,
    ) -> List[Any]:
        """Values of references, fetching every tree level in one batched read.

        A list whose bytes this saver holds (it put or read it before) costs one
        serializer call and no read; ``known`` holds nodes the caller already read.
        """
        snapshot = [("d" in r) for r in refs]
        refs = [r.get("d", r) for r in refs]
        nodes: dict[str, CausalNode] = {}
        cached: dict[str, bytes] = {}
        want: set[str] = set()
        for r in refs:
            if "b" in r:
                want.add(r["b"])
            elif r.get("l") or r.get("t"):
                key = list_key(r)
                whole = self.lists.get(key)
                if whole is None:
                    want.update(ref_ids(r))
                else:
                    cached[key] = whole
        while want:
            got = {i: known[i] for i in want if i in known} if known else {}
            if len(got) < len(want):
                got.update(await store.get_nodes(namespace, scope, sorted(want - set(got))))
            missing = want - set(got)
            if missing:
                raise StoreError(
                    f"thread scope {scope!r} lacks value node {sorted(missing)[0]}; "
                    "the thread was changed outside the saver",
                    scope=scope,
                )
            nodes.update(got)
            want = {
                i
                for n in got.values()
                if n.payload.get("lg") == "seq" and "v" not in n.payload and "x" not in n.payload
                for i in n.payload["items"]
                if i not in nodes
            }

        def leaves(nid: str, into: List[Any]) -> None:
            # Per element: a base64 msgpack string (a leaf written before ``x``) or
            # a stored form; per leaf that carries its elements' bytes: (bytes, count).
            p = nodes[nid].payload
            if p["lvl"] == 0 and "x" in p:
                into.append((p["x"].encode("latin-1"), len(p["items"])))
            elif p["lvl"] == 0 and "v" in p:
                into.extend(p["v"])
            elif p["lvl"] == 0:
                into.extend(nodes[i].payload["v"] for i in p["items"])
            else:
                for child in p["items"]:
                    leaves(child, into)

        def load_list(r: dict[str, Any]) -> List[Any]:
            key = list_key(r)
            whole = cached.get(key)
            if whole is None:
                vs: List[Any] = []
                if r.get("l"):
                    leaves(r["l"], vs)
                vs.extend(nodes[i].payload["v"] for i in r.get("t", ()))
                count = sum(v[1] if type(v) is tuple else 1 for v in vs)
                if count != r.get("n", count):
                    raise StoreError(
                        f"list {key} holds {count} elements, its reference says {r['n']}",
                        scope=scope,
                    )
                parts: List[bytes] = []
                for v in vs:
                    if type(v) is tuple:
                        parts.append(v[0])
                    elif type(v) is str:
                        parts.append(a2b_base64(v))
                    elif v.get("s") == "msgpack":
                        parts.append(a2b_base64(v["b"]))
                    else:  # not one msgpack array: element by element
                        return [decode_content(serde, form) for form in _forms(vs, scope)]
                whole = join_array(parts, count)
                self.lists.put(key, whole)
            value = serde.loads_typed(("msgpack", whole))
            if type(value) is not list:
                raise StoreError(f"list {key} did not decode to a list", scope=scope)
            return value

        out: List[Any] = []
        for r, snap in zip(refs, snapshot, strict=True):
            if "j" in r:
                value = r["j"]
            elif "i" in r:
                value = decode_content(serde, r["i"])
            elif "b" in r:
                value = decode_content(serde, nodes[r["b"]].payload["v"])
            else:
                value = load_list(r) if r.get("l") or r.get("t") else []
            out.append(_DeltaSnapshot(value) if snap else value)
        return out


def _fresh(elements: List[Planned], levels: List[List[Planned]], prev: _Last) -> List[Planned]:
    """The nodes of a list's plan that are not nodes of ``prev``'s reference: the
    elements after ``prev``'s (a prefix of these), and each level's nodes that are
    not ``prev``'s (a level keeps a leading run of ``prev``'s nodes, ``tree``)."""
    out = list(elements[len(prev.elements) :])
    for level, nodes in enumerate(levels):
        old = prev.levels[level] if level < len(prev.levels) else []
        i = 0
        while i < len(nodes) and i < len(old) and nodes[i] is old[i]:
            i += 1
        out.extend(nodes[i:])
    return dedupe(out)


def list_key(ref: dict[str, Any]) -> str:
    """What names a list reference's value: its root, with its tail if it has one."""
    tail = ref.get("t")
    if not tail:
        return str(ref["l"])
    joined = "\0".join([ref.get("l") or "", *tail]).encode()
    return "t_" + hashlib.blake2b(joined, digest_size=16).hexdigest()


def _forms(vs: List[Any], scope: str) -> List[dict[str, Any]]:
    """Every element's stored form, from what ``resolve``'s ``leaves`` collected."""
    out: List[dict[str, Any]] = []
    for v in vs:
        if type(v) is tuple:
            items = split_items(v[0], 0, v[1])
            if items is None:
                raise StoreError("a list leaf's bytes do not split into its elements", scope=scope)
            out.extend({"s": "msgpack", "b": base64.b64encode(b).decode("ascii")} for b in items)
        elif type(v) is str:
            out.append({"s": "msgpack", "b": v})
        else:
            out.append(v)
    return out


def _form(p: Planned) -> str | None:
    """An element node's msgpack form (base64), which a full tree leaf carries."""
    v = p.payload.get("v") if isinstance(p.payload, dict) else None
    if isinstance(v, dict) and v.get("s") == "msgpack":
        b = v.get("b")
        return b if isinstance(b, str) else None
    return None
