"""The knowledge graph of the reference MCP memory server, on tether's causal graph.

``@modelcontextprotocol/server-memory`` keeps entities (a name, a type and a list of
observations) and relations (from, to, relationType) in one JSON Lines file, rewritten
whole by every write: no history, and of two clients writing at once one loses. Here
each entity and each relation is a semantic memory of one scope (``user:<id>``)::

    type "kg_entity",   key canonical JSON of the name,
                        content {"name", "entityType", "observations", "since"}
    type "kg_relation", key canonical JSON of [from, relationType, to],
                        content {"from", "to", "relationType", "since"}

``content: null`` is a deletion (a tombstone). Each call that changes the graph also
appends one ``resource`` node, resource key ``kg_log``: ``{"op", "edits": [{"key",
"node", "prev"}], "below", "undoes"}``, the versions it wrote and those they replaced, so
``undo`` reverts the latest call not yet undone (as ``AgentMemory``'s log does for its
entries). ``since`` orders entities and relations
as the reference's file does (creation order; a re-created entity goes last): the
scope's sequence when the entity was created, plus its place in the batch. Every
operation is one tether transaction: computed against the scope's head, committed
atomically, recomputed and retried when another writer moved the head, so nothing
is lost to a race; every version stays in the graph (``history``).

Each operation does what the reference's ``KnowledgeGraphManager`` does, with the
same results (checked side by side by tests/test_mcp_reference.py), with three
differences, all loud: arguments the reference's schema would strip or refuse raise
``InvalidArguments`` (nothing written); a ``create_*`` call that would create two
entities of one name (or one relation twice) raises ``InvalidArguments`` (the reference
would store both, and later calls see only the first); and text tether cannot store exactly
(a lone surrogate) raises ``InvalidArguments`` too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from ..core import scopes
from ..core.canonical import canonical_json
from ..core.errors import Conflict, InvalidRequest, NotFound
from ..core.graph import CausalNode
from ..core.vocab import NodeType, Vocabulary
from ..projections.errors import InvalidArguments, NothingToUndo
from ..store.base import Store
from ..store.txn import Transaction, transact

__all__ = [
    "ENTITY_TYPE",
    "LOG_KEY",
    "RELATION_TYPE",
    "VOCABULARY",
    "EntityNotFound",
    "InvalidArguments",
    "KnowledgeGraph",
    "load_memory_file",
]

ENTITY_TYPE: Final = "kg_entity"
RELATION_TYPE: Final = "kg_relation"
VOCABULARY: Final = Vocabulary(
    [
        NodeType(name=ENTITY_TYPE, description="An entity of an MCP memory knowledge graph."),
        NodeType(name=RELATION_TYPE, description="A relation of an MCP memory knowledge graph."),
    ]
)
_ENTITY_PREFIX: Final = f"semantic:{ENTITY_TYPE}:"
_RELATION_PREFIX: Final = f"semantic:{RELATION_TYPE}:"
_READ_ATTEMPTS: Final = 8
LOG_KEY: Final = "kg_log"
_TOP: Final[Any] = object()  # ``_log``'s default: the current top of the undo stack
_UNDOABLE: Final = frozenset(
    {
        "create_entities",
        "create_relations",
        "add_observations",
        "delete_entities",
        "delete_observations",
        "delete_relations",
        "import_memory",
    }
)


class EntityNotFound(NotFound):
    """``add_observations`` named an entity the graph does not hold. Nothing was written.
    The message is the reference server's own: ``Entity with name X not found``."""

    default_code = "entity_not_found"


Entity = dict[str, Any]  # {"name", "entityType", "observations"}, in that order
Relation = dict[str, str]  # {"from", "to", "relationType"}, in that order


def entity_key(name: str) -> str:
    return canonical_json(name).decode()


def relation_key(r: Relation) -> str:
    return canonical_json([r["from"], r["relationType"], r["to"]]).decode()


# -- argument checks (the reference's zod schemas, but unknown keys refused) ----------


def _obj(value: Any, where: str, keys: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidArguments(f"{where}: expected an object with {', '.join(keys)}", field=where)
    extra = sorted(str(k) for k in value if k not in keys)
    if extra:
        raise InvalidArguments(
            f"{where}: unknown field {extra[0]!r} (expected {', '.join(keys)})", field=where
        )
    for k in keys:
        if k not in value:
            raise InvalidArguments(f"{where}.{k}: required", field=f"{where}.{k}")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidArguments(f"{where}: expected a string", field=where)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArguments(
            f"{where}: holds a lone surrogate (not Unicode text tether can store exactly)",
            field=where,
        ) from None
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidArguments(f"{where}: expected an array", field=where)
    return value


def _strings(value: Any, where: str) -> list[str]:
    return [_str(v, f"{where}[{i}]") for i, v in enumerate(_list(value, where))]


def check_entity(value: Any, where: str) -> Entity:
    e = _obj(value, where, ("name", "entityType", "observations"))
    return {
        "name": _str(e["name"], f"{where}.name"),
        "entityType": _str(e["entityType"], f"{where}.entityType"),
        "observations": _strings(e["observations"], f"{where}.observations"),
    }


def check_relation(value: Any, where: str) -> Relation:
    r = _obj(value, where, ("from", "to", "relationType"))
    return {
        "from": _str(r["from"], f"{where}.from"),
        "to": _str(r["to"], f"{where}.to"),
        "relationType": _str(r["relationType"], f"{where}.relationType"),
    }


def _live(node: CausalNode | None) -> dict[str, Any] | None:
    if node is None or not isinstance(node.payload, dict):
        return None
    content = node.payload.get("content")
    return content if isinstance(content, dict) else None


def _entity(content: Mapping[str, Any]) -> Entity:
    return {
        "name": content["name"],
        "entityType": content["entityType"],
        "observations": list(content["observations"]),
    }


def _relation(content: Mapping[str, Any]) -> Relation:
    return {"from": content["from"], "to": content["to"], "relationType": content["relationType"]}


@dataclass(frozen=True, kw_only=True, slots=True)
class Graph:
    """A knowledge graph as the reference returns it: entities and relations, in order."""

    entities: list[Entity]
    relations: list[Relation]

    def to_dict(self) -> dict[str, Any]:
        return {"entities": self.entities, "relations": self.relations}


class KnowledgeGraph:
    """The reference memory server's operations on one scope of a tether store.

    >>> kg = KnowledgeGraph(store, "acme", scope="user:alice")        # doctest: +SKIP
    >>> await kg.create_entities([{"name": "Bob", "entityType": "person",
    ...                            "observations": ["likes tea"]}])  # doctest: +SKIP
    """

    def __init__(self, store: Store, namespace: str, *, scope: str) -> None:
        scopes.parse(scope)
        self.store = store
        self.namespace = namespace
        self.scope = scope
        # What the latest read found: resource key -> id of the version read.
        self._read: dict[str, str] = {}

    async def _txn(self, fn: Any) -> Any:
        return await transact(self.store, self.namespace, fn, vocabulary=VOCABULARY)

    async def _next_since(self, t: Transaction) -> int:
        # Greater than every ``since`` written before (each was at most the sequence its
        # commit reached), and increasing within this transaction.
        return (await t.head(self.scope)).sequence + len(t.pending(self.scope)) + 1

    async def _set(
        self, t: Transaction, edits: list[dict[str, Any]], type_: str, key: str, content: Any
    ) -> None:
        """Write one version, noting it (and the version it replaces) in ``edits``."""
        prev = await t.resource_head(self.scope, f"semantic:{type_}:{key}")
        node = await t.semantic(self.scope, type_, key, content)
        edits.append(
            {"key": node.resource_key, "node": node.id, "prev": None if prev is None else prev.id}
        )

    async def _put_entity(
        self, t: Transaction, edits: list[dict[str, Any]], e: Entity, since: int
    ) -> None:
        await self._set(t, edits, ENTITY_TYPE, entity_key(e["name"]), {**e, "since": since})

    async def _log(
        self,
        t: Transaction,
        op: str,
        edits: list[dict[str, Any]],
        *,
        below: Any = _TOP,
        undoes: str | None = None,
    ) -> CausalNode | None:
        """One entry of the edit log for a call that changed something (the undo stack)."""
        if not edits:
            return None
        if below is _TOP:
            below = _top(await t.resource_head(self.scope, LOG_KEY))
        payload = {"op": op, "edits": edits, "below": below, "undoes": undoes}
        return await t.append(self.scope, "resource", payload, resource_key=LOG_KEY)

    # -- writes ------------------------------------------------------------------------

    async def create_entities(self, entities: Any) -> list[Entity]:
        """Create the entities whose names the graph does not hold; return those created."""
        checked = [
            check_entity(e, f"entities[{i}]") for i, e in enumerate(_list(entities, "entities"))
        ]

        async def run(t: Transaction) -> list[Entity]:
            created: list[Entity] = []
            made: set[str] = set()
            edits: list[dict[str, Any]] = []
            since = await self._next_since(t)
            for i, e in enumerate(checked):
                if e["name"] in made:  # the reference would store a second entity of the name
                    raise _repeated("entities", i, "name", e["name"])
                head = await t.resource_head(self.scope, _ENTITY_PREFIX + entity_key(e["name"]))
                if _live(head) is None:
                    await self._put_entity(t, edits, e, since + len(created))
                    created.append(e)
                    made.add(e["name"])
            await self._log(t, "create_entities", edits)
            return created

        result: list[Entity] = await self._txn(run)
        return result

    async def create_relations(self, relations: Any) -> list[Relation]:
        """Create the relations the graph does not hold; return those created."""
        checked = [
            check_relation(r, f"relations[{i}]")
            for i, r in enumerate(_list(relations, "relations"))
        ]

        async def run(t: Transaction) -> list[Relation]:
            created: list[Relation] = []
            made: set[str] = set()
            edits: list[dict[str, Any]] = []
            since = await self._next_since(t)
            for i, r in enumerate(checked):
                key = relation_key(r)
                if key in made:  # the reference would store the relation twice
                    raise _repeated("relations", i, "relation", key)
                if _live(await t.resource_head(self.scope, _RELATION_PREFIX + key)) is None:
                    content = {**r, "since": since + len(created)}
                    await self._set(t, edits, RELATION_TYPE, key, content)
                    created.append(r)
                    made.add(key)
            await self._log(t, "create_relations", edits)
            return created

        result: list[Relation] = await self._txn(run)
        return result

    async def add_observations(self, observations: Any) -> list[dict[str, Any]]:
        """Add each item's contents that its entity lacks; ``EntityNotFound`` (nothing
        written) if an entity is missing. Returns ``[{"entityName", "addedObservations"}]``."""
        items = []
        for i, o in enumerate(_list(observations, "observations")):
            o = _obj(o, f"observations[{i}]", ("entityName", "contents"))
            items.append(
                (
                    _str(o["entityName"], f"observations[{i}].entityName"),
                    _strings(o["contents"], f"observations[{i}].contents"),
                )
            )

        async def run(t: Transaction) -> list[dict[str, Any]]:
            changed: dict[str, tuple[Entity, int]] = {}
            dirty: set[str] = set()
            results = []
            for name, contents in items:
                if name not in changed:
                    content = _live(
                        await t.resource_head(self.scope, _ENTITY_PREFIX + entity_key(name))
                    )
                    if content is None:
                        raise EntityNotFound(f"Entity with name {name} not found", entity=name)
                    changed[name] = (_entity(content), content["since"])
                entity = changed[name][0]
                # as the reference does: checked against the entity before this item only
                new = [c for c in contents if c not in entity["observations"]]
                entity["observations"].extend(new)
                if new:
                    dirty.add(name)
                results.append({"entityName": name, "addedObservations": new})
            edits: list[dict[str, Any]] = []
            for name, (entity, since) in changed.items():
                if name in dirty:  # an entity with nothing new keeps its version
                    await self._put_entity(t, edits, entity, since)
            await self._log(t, "add_observations", edits)
            return results

        result: list[dict[str, Any]] = await self._txn(run)
        return result

    async def delete_entities(self, entity_names: Any) -> None:
        """Delete the entities and every relation from or to them (missing names: no-op)."""
        names = set(_strings(entity_names, "entityNames"))

        async def run(t: Transaction) -> None:
            await t.head(self.scope)  # the head first: what is read below is at least as new
            edits: list[dict[str, Any]] = []
            for name in sorted(names):
                key = entity_key(name)
                if _live(await t.resource_head(self.scope, _ENTITY_PREFIX + key)) is not None:
                    await self._set(t, edits, ENTITY_TYPE, key, None)
            heads = await self.store.resource_heads(self.namespace, self.scope, _RELATION_PREFIX)
            for rk, node in sorted(heads.items()):
                r = _live(node)
                if r is not None and (r["from"] in names or r["to"] in names):
                    key = rk[len(_RELATION_PREFIX) :]
                    await self._set(t, edits, RELATION_TYPE, key, None)
            await self._log(t, "delete_entities", edits)

        await self._txn(run)

    async def delete_observations(self, deletions: Any) -> None:
        """Remove the given observations from each named entity (missing entities: no-op)."""
        items = []
        for i, d in enumerate(_list(deletions, "deletions")):
            d = _obj(d, f"deletions[{i}]", ("entityName", "observations"))
            items.append(
                (
                    _str(d["entityName"], f"deletions[{i}].entityName"),
                    _strings(d["observations"], f"deletions[{i}].observations"),
                )
            )

        async def run(t: Transaction) -> None:
            changed: dict[str, tuple[Entity, int, bool]] = {}
            for name, drop in items:
                if name not in changed:
                    content = _live(
                        await t.resource_head(self.scope, _ENTITY_PREFIX + entity_key(name))
                    )
                    if content is None:
                        continue
                    changed[name] = (_entity(content), content["since"], False)
                entity, since, dirty = changed[name]
                kept = [o for o in entity["observations"] if o not in drop]
                if len(kept) != len(entity["observations"]):
                    entity["observations"] = kept
                    changed[name] = (entity, since, True)
            edits: list[dict[str, Any]] = []
            for entity, since, dirty in changed.values():
                if dirty:
                    await self._put_entity(t, edits, entity, since)
            await self._log(t, "delete_observations", edits)

        await self._txn(run)

    async def delete_relations(self, relations: Any) -> None:
        """Delete the given relations (missing ones: no-op)."""
        checked = [
            check_relation(r, f"relations[{i}]")
            for i, r in enumerate(_list(relations, "relations"))
        ]

        async def run(t: Transaction) -> None:
            edits: list[dict[str, Any]] = []
            for key in sorted({relation_key(r) for r in checked}):
                if _live(await t.resource_head(self.scope, _RELATION_PREFIX + key)) is not None:
                    await self._set(t, edits, RELATION_TYPE, key, None)
            await self._log(t, "delete_relations", edits)

        await self._txn(run)

    # -- reads -------------------------------------------------------------------------

    async def read_graph(self) -> Graph:
        """Every entity and relation, in the order they were created: both read at one
        head of the scope (read again if a write landed between the two reads)."""
        head = await self.store.head(self.namespace, self.scope)
        for _ in range(_READ_ATTEMPTS):
            ents = await self.store.resource_heads(self.namespace, self.scope, _ENTITY_PREFIX)
            rels = await self.store.resource_heads(self.namespace, self.scope, _RELATION_PREFIX)
            after = await self.store.head(self.namespace, self.scope)
            if (after.generation, after.sequence) == (head.generation, head.sequence):
                break
            head = after
        else:
            raise Conflict(
                f"{self.scope} kept changing while it was read ({_READ_ATTEMPTS} tries): "
                "read again",
                namespace=self.namespace,
                scope=self.scope,
            )
        self._read = {k: n.id for k, n in (*ents.items(), *rels.items())}
        return Graph(
            entities=_ordered(ents.values(), _entity),
            relations=_ordered(rels.values(), _relation),
        )

    def versions_read(self, g: Graph) -> dict[str, str]:
        """The memories behind ``g`` (a result of this object's latest read): resource
        key -> the id of the version read, what a TTL refresh records
        (``tether.projections.semantic.refresh_memories``)."""
        keys = [_ENTITY_PREFIX + entity_key(e["name"]) for e in g.entities]
        keys += [_RELATION_PREFIX + relation_key(r) for r in g.relations]
        return {k: self._read[k] for k in keys if k in self._read}

    async def search_nodes(self, query: Any) -> Graph:
        """Entities whose name, type or an observation contains ``query`` (case folded
        as JavaScript's ``toLowerCase``), and the relations from or to them."""
        q = _str(query, "query").lower()
        g = await self.read_graph()
        found = [
            e
            for e in g.entities
            if q in e["name"].lower()
            or q in e["entityType"].lower()
            or any(q in o.lower() for o in e["observations"])
        ]
        return _with_relations(found, g.relations)

    async def open_nodes(self, names: Any) -> Graph:
        """The named entities, and the relations from or to them."""
        wanted = set(_strings(names, "names"))
        g = await self.read_graph()
        return _with_relations([e for e in g.entities if e["name"] in wanted], g.relations)

    async def history(self, name: str) -> list[dict[str, Any]]:
        """Every version of one entity, oldest first (``entity`` None: deleted)."""
        nodes = await self.store.versions(
            self.namespace, self.scope, _ENTITY_PREFIX + entity_key(_str(name, "entity"))
        )
        return [
            {
                "entity": None if (c := _live(n)) is None else _entity(c),
                "node": n.id,
                "sequence": n.sequence,
                "created_at": n.created_at,
            }
            for n in nodes
        ]

    # -- undo --------------------------------------------------------------------------

    async def last_edit(self) -> CausalNode | None:
        """The edit ``undo`` would revert next (its log entry), or None."""
        head = await self.store.resource_head(self.namespace, self.scope, LOG_KEY)
        top = _top(head)
        if head is None or top is None:
            return None
        if top == head.id:
            return head
        return (await self.store.get_nodes(self.namespace, self.scope, [top])).get(top)

    async def undo(self) -> dict[str, Any]:
        """Revert the latest graph write not yet undone (one call of a write tool: every
        entity and relation it changed gets its version before back); repeat to go further
        back. ``NothingToUndo`` when none is left. Returns ``{"undoes", "op", "keys",
        "node"}``, ``keys`` the entities' names and the relations as ``from type to``."""

        async def run(t: Transaction) -> dict[str, Any]:
            head = await t.resource_head(self.scope, LOG_KEY)
            top_id = _top(head)
            if head is None or top_id is None:
                raise NothingToUndo(
                    f"the knowledge graph of {self.scope} has no write to undo", scope=self.scope
                )
            top = head if top_id == head.id else await self._node(top_id)
            p = top.payload
            prev_ids = [e["prev"] for e in p["edits"] if isinstance(e.get("prev"), str)]
            prevs = await self.store.get_nodes(self.namespace, self.scope, prev_ids)
            edits: list[dict[str, Any]] = []
            for e in p["edits"]:
                prev = prevs.get(e.get("prev") or "")
                content = prev.payload.get("content") if prev is not None else None
                type_, _, key = e["key"].removeprefix("semantic:").partition(":")
                await self._set(t, edits, type_, key, content)
            log = await self._log(t, "undo", edits, below=p.get("below"), undoes=top.id)
            return {
                "undoes": top.id,
                "op": p["op"],
                "keys": [_described(e["key"]) for e in p["edits"]],
                "node": None if log is None else log.id,
            }

        result: dict[str, Any] = await self._txn(run)
        return result

    async def _node(self, node_id: str) -> CausalNode:
        found = await self.store.get_nodes(self.namespace, self.scope, [node_id])
        if node_id not in found:
            raise NotFound(f"log entry {node_id} is not in {self.scope}", node=node_id)
        return found[node_id]

    # -- import ------------------------------------------------------------------------

    async def import_graph(self, graph: Graph) -> dict[str, int]:
        """Write a whole graph (a reference memory file) into an empty knowledge graph,
        in one commit, keeping its order; ``Conflict``-free, but ``InvalidRequest`` if this
        scope already holds entities or relations (nothing written)."""
        _no_repeats([e["name"] for e in graph.entities], "entities", "name")
        _no_repeats([relation_key(r) for r in graph.relations], "relations", "relation")

        async def run(t: Transaction) -> dict[str, int]:
            await t.head(self.scope)
            current = await self.read_graph()
            if current.entities or current.relations:
                raise InvalidRequest(
                    f"{self.scope} of namespace {self.namespace} already holds a knowledge "
                    f"graph ({len(current.entities)} entities, {len(current.relations)} "
                    "relations): import into an empty one (another --user, or reset it)",
                    code="not_empty",
                    scope=self.scope,
                )
            since = await self._next_since(t)
            edits: list[dict[str, Any]] = []
            for i, e in enumerate(graph.entities):
                await self._put_entity(t, edits, e, since + i)
            for i, r in enumerate(graph.relations):
                content = {**r, "since": since + len(graph.entities) + i}
                await self._set(t, edits, RELATION_TYPE, relation_key(r), content)
            await self._log(t, "import_memory", edits)
            return {"entities": len(graph.entities), "relations": len(graph.relations)}

        result: dict[str, int] = await self._txn(run)
        return result


def _top(log: CausalNode | None) -> str | None:
    """The log entry on top of the undo stack when ``log`` is the newest one."""
    if log is None or not isinstance(log.payload, dict):
        return None
    op = log.payload.get("op")
    if op in _UNDOABLE:
        return log.id
    below = log.payload.get("below")
    return below if op == "undo" and isinstance(below, str) else None


def _described(resource_key: str) -> str:
    """An edit's key as a person reads it: the entity's name, or ``from relationType to``."""
    type_, _, key = resource_key.removeprefix("semantic:").partition(":")
    value = orjson.loads(key)
    return value if type_ == ENTITY_TYPE else f"{value[0]} {value[1]} {value[2]}"


def _repeated(what: str, i: int, field: str, key: str) -> InvalidArguments:
    return InvalidArguments(
        f"{what}[{i}] repeats a {field} this call creates ({key}): give each once",
        field=f"{what}[{i}]",
    )


def _no_repeats(keys: list[str], what: str, field: str) -> None:
    seen: set[str] = set()
    for i, k in enumerate(keys):
        if k in seen:
            raise _repeated(what, i, field, k)
        seen.add(k)


def _ordered(nodes: Iterable[CausalNode], shape: Any) -> list[Any]:
    live = [(c["since"], n.resource_key or "", c) for n in nodes if (c := _live(n)) is not None]
    live.sort(key=lambda x: (x[0], x[1]))
    return [shape(c) for _, _, c in live]


def _with_relations(entities: list[Entity], relations: list[Relation]) -> Graph:
    names = {e["name"] for e in entities}
    return Graph(
        entities=entities,
        relations=[r for r in relations if r["from"] in names or r["to"] in names],
    )


def load_memory_file(data: bytes | str) -> Graph:
    """Parse the reference server's memory file (``memory.jsonl``, or the older
    ``memory.json`` it renames): JSON Lines, ``{"type": "entity", "name", "entityType",
    "observations"}`` and ``{"type": "relation", "from", "to", "relationType"}``, blank
    lines skipped. ``InvalidArguments`` names the line of the first problem; nothing is
    repaired silently."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        raise InvalidArguments(
            f"the file is not UTF-8 text (byte {e.start}): a memory file is JSON Lines",
            field="file",
        ) from None
    entities: list[Entity] = []
    relations: list[Relation] = []
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise InvalidArguments(f"{where}: not JSON: {e}", field=where) from None
        if not isinstance(item, dict) or item.get("type") not in ("entity", "relation"):
            raise InvalidArguments(
                f'{where}: expected an object with "type": "entity" or "relation"', field=where
            )
        body = {k: v for k, v in item.items() if k != "type"}
        if item["type"] == "entity":
            entities.append(check_entity(body, where))
        else:
            relations.append(check_relation(body, where))
    return Graph(entities=entities, relations=relations)
