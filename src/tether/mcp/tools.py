"""The tools ``tether mcp`` offers, as plain data (no MCP SDK here): names, titles,
descriptions, JSON Schemas and annotations, and what each does on a ``Memory``.

Two families:

- the reference memory server's nine tools (``@modelcontextprotocol/server-memory``),
  with its names, titles, descriptions, input and output schemas and annotations as it
  lists them, and its results: the same text (``JSON.stringify(result, null, 2)``) and
  structured content, so a client configured for it keeps working unchanged;
- tether's own: ``remember``, ``recall`` (by meaning), ``forget``, ``history``, ``undo``
  and ``read_thread``.

Each tool is a read or a write: over HTTP a write needs the grant ``memory.write``, a
read ``memory.read`` (``read_thread`` also ``state.history``, as reading a thread's
history over ``tether serve`` does).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..core.errors import InvalidRequest, TetherError
from ..core.graph import semantic_key
from ..projections.agent_memory import AgentMemory, MemoryVersion
from ..projections.errors import InvalidArguments, NothingToUndo
from ..store.base import Store
from .graph import Graph, KnowledgeGraph

__all__ = [
    "REFERENCE_TOOLS",
    "TETHER_TOOLS",
    "TOOLS",
    "Memory",
    "ToolDef",
    "ToolResult",
    "call_tool",
    "graph_text",
]

_DRAFT7: Final = "http://json-schema.org/draft-07/schema#"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """What a tool call returns: the text shown to the model, the structured content,
    and whether it is an error (then ``error`` is the tether error's ``to_dict()``)."""

    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False
    error: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Memory:
    """What one caller's tools work on: a store, a namespace, the user's scope, and how
    to embed text for ``recall`` (made on first use, so a missing extra fails only it)."""

    store: Store
    namespace: str
    scope: str
    embedder: Callable[[], Any] = field(repr=False)

    @property
    def graph(self) -> KnowledgeGraph:
        return KnowledgeGraph(self.store, self.namespace, scope=self.scope)

    @property
    def notes(self) -> AgentMemory:
        # the name an Agent's own memory tools use, so an agent of the same user sees
        # what a desktop client remembered
        return AgentMemory(self.store, self.namespace, scope=self.scope, name="memory")


Handler = Callable[[Memory, Mapping[str, Any]], Awaitable[ToolResult]]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDef:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    annotations: dict[str, bool]
    handler: Handler = field(repr=False)
    grants: tuple[str, ...] = ("memory.read",)

    @property
    def writes(self) -> bool:
        return "memory.write" in self.grants

    def listing(self) -> dict[str, Any]:
        """The tool as ``tools/list`` shows it (MCP's camelCase keys)."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": self.annotations,
        }


# -- the reference's schemas, as its SDK renders its zod schemas ------------------------


def _s(description: str | None = None) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {})}


def _arr(items: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "array", "items": items}
    if description:
        out["description"] = description
    return out


def _o(props: dict[str, Any], *, closed: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props, "required": list(props)}
    if closed:
        out["additionalProperties"] = False
    return out


def _root(props: dict[str, Any], *, closed: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"$schema": _DRAFT7, "type": "object", "properties": props}
    if props:
        out["required"] = list(props)
    if closed:
        out["additionalProperties"] = False
    return out


def _entity(closed: bool) -> dict[str, Any]:
    return _o(
        {
            "name": _s("The name of the entity"),
            "entityType": _s("The type of the entity"),
            "observations": _arr(
                _s(), "An array of observation contents associated with the entity"
            ),
        },
        closed=closed,
    )


def _relation(closed: bool) -> dict[str, Any]:
    return _o(
        {
            "from": _s("The name of the entity where the relation starts"),
            "to": _s("The name of the entity where the relation ends"),
            "relationType": _s("The type of the relation"),
        },
        closed=closed,
    )


_DONE: Final = _root({"success": {"type": "boolean"}, "message": _s()}, closed=True)
_GRAPH: Final = _root(
    {"entities": _arr(_entity(True)), "relations": _arr(_relation(True))}, closed=True
)


def _hints(*, read_only: bool, destructive: bool, idempotent: bool) -> dict[str, bool]:
    return {
        "readOnlyHint": read_only,
        "destructiveHint": destructive,
        "idempotentHint": idempotent,
        "openWorldHint": False,
    }


_WRITE: Final = _hints(read_only=False, destructive=False, idempotent=False)
_DELETE: Final = _hints(read_only=False, destructive=True, idempotent=True)
_READ: Final = _hints(read_only=True, destructive=False, idempotent=True)


def _text(value: Any) -> str:
    # JSON.stringify(value, null, 2): the same spacing, and only what JSON must escape
    return json.dumps(value, indent=2, ensure_ascii=False)


def _args(args: Mapping[str, Any], name: str) -> Any:
    if name not in args:
        raise InvalidArguments(f"{name}: required", field=name)
    return args[name]


def _only(args: Mapping[str, Any], *names: str) -> None:
    extra = sorted(str(k) for k in args if k not in names)
    if extra:
        known = ", ".join(names) or "none"
        raise InvalidArguments(f"unknown argument {extra[0]!r} (known: {known})", field=extra[0])


# -- the reference's tools ---------------------------------------------------------------


async def _create_entities(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "entities")
    made = await m.graph.create_entities(_args(a, "entities"))
    return ToolResult(text=_text(made), structured={"entities": made})


async def _create_relations(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "relations")
    made = await m.graph.create_relations(_args(a, "relations"))
    return ToolResult(text=_text(made), structured={"relations": made})


async def _add_observations(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "observations")
    results = await m.graph.add_observations(_args(a, "observations"))
    return ToolResult(text=_text(results), structured={"results": results})


def _done(message: str) -> ToolResult:
    return ToolResult(text=message, structured={"success": True, "message": message})


async def _delete_entities(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "entityNames")
    await m.graph.delete_entities(_args(a, "entityNames"))
    return _done("Entities deleted successfully")


async def _delete_observations(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "deletions")
    await m.graph.delete_observations(_args(a, "deletions"))
    return _done("Observations deleted successfully")


async def _delete_relations(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "relations")
    await m.graph.delete_relations(_args(a, "relations"))
    return _done("Relations deleted successfully")


def graph_text(g: Graph) -> str:
    """A graph as the reference server shows it (its tools' text, its resource)."""
    return _text(g.to_dict())


def _graph(g: Graph) -> ToolResult:
    return ToolResult(text=graph_text(g), structured=g.to_dict())


async def _refresh(m: Memory, read: Mapping[str, str]) -> None:
    """Restart the TTL of the memories a read tool returned (resource key -> the id of the
    version returned), where the namespace's retention says a read refreshes it
    (``memory_ttl_refresh_on_read``, as LangGraph's ``refresh_on_read``); never bringing
    back one forgotten meanwhile (``refresh_memories``)."""
    from ..projections.semantic import RESERVED_TYPES, refresh_memories, refresh_on_read

    mine = {
        k: v for k, v in read.items() if k.split(":", 2)[1] not in RESERVED_TYPES
    }  # the TTL forgets no reserved type
    if mine and await refresh_on_read(m.store, m.namespace):
        await refresh_memories(m.store, m.namespace, m.scope, mine)


async def _read_graph(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a)
    kg = m.graph
    g = await kg.read_graph()
    await _refresh(m, kg.versions_read(g))
    return _graph(g)


async def _search_nodes(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "query")
    kg = m.graph
    g = await kg.search_nodes(_args(a, "query"))
    await _refresh(m, kg.versions_read(g))
    return _graph(g)


async def _open_nodes(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "names")
    kg = m.graph
    g = await kg.open_nodes(_args(a, "names"))
    await _refresh(m, kg.versions_read(g))
    return _graph(g)


_W: Final = ("memory.write",)

REFERENCE_TOOLS: Final[tuple[ToolDef, ...]] = (
    ToolDef(
        name="create_entities",
        title="Create Entities",
        description="Create multiple new entities in the knowledge graph",
        input_schema=_root({"entities": _arr(_entity(False))}, closed=False),
        output_schema=_root({"entities": _arr(_entity(True))}, closed=True),
        annotations=_WRITE,
        handler=_create_entities,
        grants=_W,
    ),
    ToolDef(
        name="create_relations",
        title="Create Relations",
        description="Create multiple new relations between entities in the knowledge graph. "
        "Relations should be in active voice",
        input_schema=_root({"relations": _arr(_relation(False))}, closed=False),
        output_schema=_root({"relations": _arr(_relation(True))}, closed=True),
        annotations=_WRITE,
        handler=_create_relations,
        grants=_W,
    ),
    ToolDef(
        name="add_observations",
        title="Add Observations",
        description="Add new observations to existing entities in the knowledge graph",
        input_schema=_root(
            {
                "observations": _arr(
                    _o(
                        {
                            "entityName": _s("The name of the entity to add the observations to"),
                            "contents": _arr(_s(), "An array of observation contents to add"),
                        },
                        closed=False,
                    )
                )
            },
            closed=False,
        ),
        output_schema=_root(
            {
                "results": _arr(
                    _o({"entityName": _s(), "addedObservations": _arr(_s())}, closed=True)
                )
            },
            closed=True,
        ),
        annotations=_WRITE,
        handler=_add_observations,
        grants=_W,
    ),
    ToolDef(
        name="delete_entities",
        title="Delete Entities",
        description="Delete multiple entities and their associated relations from the "
        "knowledge graph",
        input_schema=_root(
            {"entityNames": _arr(_s(), "An array of entity names to delete")}, closed=False
        ),
        output_schema=_DONE,
        annotations=_DELETE,
        handler=_delete_entities,
        grants=_W,
    ),
    ToolDef(
        name="delete_observations",
        title="Delete Observations",
        description="Delete specific observations from entities in the knowledge graph",
        input_schema=_root(
            {
                "deletions": _arr(
                    _o(
                        {
                            "entityName": _s("The name of the entity containing the observations"),
                            "observations": _arr(_s(), "An array of observations to delete"),
                        },
                        closed=False,
                    )
                )
            },
            closed=False,
        ),
        output_schema=_DONE,
        annotations=_DELETE,
        handler=_delete_observations,
        grants=_W,
    ),
    ToolDef(
        name="delete_relations",
        title="Delete Relations",
        description="Delete multiple relations from the knowledge graph",
        input_schema=_root(
            {"relations": _arr(_relation(False), "An array of relations to delete")},
            closed=False,
        ),
        output_schema=_DONE,
        annotations=_DELETE,
        handler=_delete_relations,
        grants=_W,
    ),
    ToolDef(
        name="read_graph",
        title="Read Graph",
        description="Read the entire knowledge graph",
        input_schema=_root({}, closed=False),
        output_schema=_GRAPH,
        annotations=_READ,
        handler=_read_graph,
    ),
    ToolDef(
        name="search_nodes",
        title="Search Nodes",
        description="Search for nodes in the knowledge graph based on a query",
        input_schema=_root(
            {
                "query": _s(
                    "The search query to match against entity names, types, and observation content"
                )
            },
            closed=False,
        ),
        output_schema=_GRAPH,
        annotations=_READ,
        handler=_search_nodes,
    ),
    ToolDef(
        name="open_nodes",
        title="Open Nodes",
        description="Open specific nodes in the knowledge graph by their names",
        input_schema=_root(
            {"names": _arr(_s(), "An array of entity names to retrieve")}, closed=False
        ),
        output_schema=_GRAPH,
        annotations=_READ,
        handler=_open_nodes,
    ),
)


# -- tether's own tools -----------------------------------------------------------------


def _key(a: Mapping[str, Any], name: str = "key") -> str:
    v = _args(a, name)
    if not isinstance(v, str) or not v:
        raise InvalidArguments(f"{name}: a non-empty string", field=name)
    return v


def _int(a: Mapping[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    v = a.get(name, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise InvalidArguments(f"{name}: an integer from {lo} to {hi}", field=name)
    return v


def _result(value: dict[str, Any]) -> ToolResult:
    return ToolResult(text=_text(value), structured=value)


async def _remember(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "key", "content")
    key = _key(a)
    edit = await m.notes.store(key, _args(a, "content"))
    return _result({"key": key, "node": edit.node, "sequence": edit.sequence})


async def _forget(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "key")
    key = _key(a)
    edit = await m.notes.delete(key)
    return _result({"key": key, "forgotten": edit.changed, "node": edit.node})


async def _recall(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    from ..projections import recall

    _only(a, "query", "k")
    query = _args(a, "query")
    if not isinstance(query, str) or not query.strip():
        raise InvalidArguments("query: a non-empty text", field="query")
    k = _int(a, "k", 5, 1, 50)
    hits = await recall(m.store, m.namespace, m.scope, query, embedder=m.embedder(), k=k)
    await _refresh(m, {semantic_key(h.type, h.key): h.node for h in hits})
    return _result(
        {
            "memories": [
                {"type": h.type, "key": h.key, "content": h.content, "score": round(h.score, 4)}
                for h in hits
            ]
        }
    )


async def _history(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "key", "entity")
    if ("key" in a) == ("entity" in a):
        raise InvalidArguments(
            "give one of key (a remembered memory) or entity (a knowledge graph entity)",
            field="key",
        )
    if "entity" in a:
        entity = _args(a, "entity")
        versions = [
            {
                "content": v["entity"],
                "node": v["node"],
                "sequence": v["sequence"],
                "created_at": v["created_at"],
            }
            for v in await m.graph.history(entity)
        ]
    else:
        versions = [
            {
                "content": v.content,
                "node": v.node,
                "sequence": v.sequence,
                "created_at": v.created_at,
            }
            for v in await m.notes.history(_key(a))
            if isinstance(v, MemoryVersion)
        ]
    return _result({"versions": versions})


async def _undo(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    _only(a, "of")
    of = a.get("of", "latest")
    if of not in ("latest", "facts", "graph"):
        raise InvalidArguments("of: latest, facts or graph", field="of")
    if of == "latest":
        fact, graph = await m.notes.last_edit(), await m.graph.last_edit()
        if fact is None and graph is None:
            raise NothingToUndo(f"nothing to undo in {m.scope}", scope=m.scope)
        newer_graph = fact is None or (graph is not None and graph.sequence > (fact.sequence or 0))
        of = "graph" if newer_graph else "facts"
    if of == "graph":
        g = await m.graph.undo()
        return _result({"of": "graph", "undoes": g["undoes"], "keys": g["keys"], "node": g["node"]})
    edit = await m.notes.undo()
    return _result(
        {"of": "facts", "undoes": edit.undoes, "keys": list(edit.keys), "node": edit.node}
    )


async def _read_thread(m: Memory, a: Mapping[str, Any]) -> ToolResult:
    from ..projections.conversation import load_conversation

    _only(a, "thread", "limit")
    thread = _key(a, "thread")
    limit = _int(a, "limit", 50, 1, 1000)
    messages = await load_conversation(
        m.store, m.namespace, thread, policy={"policy": "window", "size": limit}
    )
    return _result({"thread": thread, "messages": messages})


def _props(required: tuple[str, ...], **props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(required),
        "additionalProperties": False,
    }


_VERSION: Final = _props(
    ("content", "node", "sequence", "created_at"),
    content={"description": "The value at this version; null where it was deleted"},
    node={"type": "string"},
    sequence={"type": "integer"},
    created_at={"type": "string"},
)

TETHER_TOOLS: Final[tuple[ToolDef, ...]] = (
    ToolDef(
        name="remember",
        title="Remember",
        description="Remember a fact under a short key (a new version if the key is "
        "already remembered). Every version is kept: see history and undo.",
        input_schema=_props(
            ("key", "content"),
            key={
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "A short name for the memory, e.g. favourite_colour",
            },
            content={"description": "What to remember: a text, or any JSON value but null"},
        ),
        output_schema=_props(
            ("key", "node", "sequence"),
            key={"type": "string"},
            node={"type": "string"},
            sequence={"type": "integer"},
        ),
        annotations=_WRITE,
        handler=_remember,
        grants=_W,
    ),
    ToolDef(
        name="recall",
        title="Recall by meaning",
        description="Search long-term memory by meaning: the remembered facts and the "
        "knowledge graph's entities and relations closest to the query, best first.",
        input_schema=_props(
            ("query",),
            query={"type": "string", "minLength": 1, "description": "What to look for"},
            k={
                "type": "integer",
                "minimum": 1,
                "maximum": 50,
                "default": 5,
                "description": "How many memories at most",
            },
        ),
        output_schema=_props(
            ("memories",),
            memories={
                "type": "array",
                "items": _props(
                    ("type", "key", "content", "score"),
                    type={"type": "string"},
                    key={"type": "string"},
                    content={},
                    score={"type": "number"},
                ),
            },
        ),
        annotations=_READ,
        handler=_recall,
    ),
    ToolDef(
        name="forget",
        title="Forget",
        description="Forget a remembered fact (undo brings it back; history keeps it).",
        input_schema=_props(
            ("key",), key={"type": "string", "minLength": 1, "description": "The memory's key"}
        ),
        output_schema=_props(
            ("key", "forgotten", "node"),
            key={"type": "string"},
            forgotten={"type": "boolean", "description": "false when there was nothing to forget"},
            node={"type": ["string", "null"]},
        ),
        annotations=_DELETE,
        handler=_forget,
        grants=_W,
    ),
    ToolDef(
        name="history",
        title="History of a memory",
        description="Every version of a remembered fact (key) or of a knowledge graph "
        "entity (entity), oldest first, with when each was written.",
        input_schema={
            **_props(
                (),
                key={"type": "string", "minLength": 1, "description": "A remembered fact's key"},
                entity={"type": "string", "description": "A knowledge graph entity's name"},
            ),
            "oneOf": [{"required": ["key"]}, {"required": ["entity"]}],
        },
        output_schema=_props(("versions",), versions={"type": "array", "items": _VERSION}),
        annotations=_READ,
        handler=_history,
    ),
    ToolDef(
        name="undo",
        title="Undo",
        description="Undo the latest change not yet undone: a remember or forget, or one "
        "call that changed the knowledge graph (every entity and relation it touched "
        "goes back, a deleted one comes back). Repeat to go further back.",
        input_schema=_props(
            (),
            of={
                "type": "string",
                "enum": ["latest", "facts", "graph"],
                "default": "latest",
                "description": "latest: whichever change came last; facts: remember and "
                "forget only; graph: the knowledge graph only",
            },
        ),
        output_schema=_props(
            ("of", "undoes", "keys", "node"),
            of={"type": "string", "enum": ["facts", "graph"]},
            undoes={"type": "string", "description": "The edit undone"},
            keys={
                "type": "array",
                "items": {"type": "string"},
                "description": "The facts' keys, or the entities' names and relations",
            },
            node={"type": "string"},
        ),
        annotations=_hints(read_only=False, destructive=True, idempotent=False),
        handler=_undo,
        grants=_W,
    ),
    ToolDef(
        name="read_thread",
        title="Read a thread",
        description="The latest messages of a conversation thread stored in tether "
        "(system, user, assistant with tool calls, tool results), oldest first.",
        input_schema=_props(
            ("thread",),
            thread={"type": "string", "minLength": 1, "description": "The thread's id"},
            limit={
                "type": "integer",
                "minimum": 1,
                "maximum": 1000,
                "default": 50,
                "description": "How many of the latest messages",
            },
        ),
        output_schema=_props(
            ("thread", "messages"),
            thread={"type": "string"},
            messages={"type": "array", "items": {"type": "object"}},
        ),
        annotations=_READ,
        handler=_read_thread,
        grants=("memory.read", "state.history"),
    ),
)

TOOLS: Final[dict[str, ToolDef]] = {t.name: t for t in (*REFERENCE_TOOLS, *TETHER_TOOLS)}


async def call_tool(memory: Memory, name: str, arguments: Mapping[str, Any] | None) -> ToolResult:
    """Run one tool; a tether error becomes an error result (its message as the text,
    as the reference server reports its own errors), never a half-done write."""
    tool = TOOLS.get(name)
    try:
        if tool is None:
            raise InvalidRequest(
                f"unknown tool {name!r}; the tools are {', '.join(TOOLS)}",
                code="unknown_tool",
                field="name",
            )
        if arguments is not None and not isinstance(arguments, Mapping):
            raise InvalidArguments("arguments: expected an object", field="arguments")
        return await tool.handler(memory, arguments or {})
    except TetherError as e:
        return ToolResult(text=e.message, is_error=True, error=e.to_dict())
