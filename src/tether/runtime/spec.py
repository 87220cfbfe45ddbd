"""Agent specs: a small graph of nodes and conditional edges, in Python or YAML.

    spec = Spec(
        nodes=[
            LLMNode(name="agent", system="You help {{ context.user_name }}.", tools=["search"]),
            VarNode(name="topic", type="string", scope="thread"),
            VarSetNode(name="remember_topic", var="topic", value="{{ nodes.agent.output }}"),
        ],
        edges=[Edge(src="agent", dst="remember_topic", condition="'topic' in output")],
        start="agent",
    )

Node kinds
    ``llm``      calls the model with the node's conversation (its memory policy), its
                 system prompt and tools, until the model answers without tool calls.
                 Output: the answer text.
    ``tool``     calls one tool with ``arguments`` (templates) or, without them, its input
                 (a mapping). Output: the tool's result.
    ``var``      declares a variable (name, type, scope, default). Output: its value.
    ``var_set``  writes ``value`` (a template, default ``{{ input }}``) to a declared
                 variable, coerced to its type. Output: the stored value.
    ``loop``     seed 004's while_loop: while ``condition`` holds (at most
                 ``max_iterations`` times) runs its body, the nodes reachable from
                 ``body``; an iteration ends when a body node has no edge to take (or
                 takes an edge back to the loop). Templates in the body see
                 ``loop_index``. Each iteration is committed before its body runs.
                 Output: the last body output (the loop's input if none ran).

Edges
    After a node runs, its outgoing edges are tried in declaration order and the first
    whose condition holds (no condition: always) is taken; the next node's input is
    this node's output. With no edge to take, the run completes and its answer is the
    output of the last node. Conditions are Jinja2 expressions (``"{{ output == 'yes' }}"``
    or bare ``"output == 'yes'"``); an error in one fails the run.

YAML
    ``Spec.from_yaml(path)`` reads one file (``{start, nodes, edges}``) or a directory
    of ``*.yaml`` / ``*.yml`` files, each one node, a list of nodes or a whole spec (as
    seed 000's ``specs_dir``)::

        # specs/chat.yaml
        kind: llm
        name: chat
        start: true
        system: "You are terse."
        memory: {policy: window, size: 10}
        tools: [get_weather]
        edges:
          - to: save_city
            when: "{{ 'Paris' in output }}"
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final, TypeAlias

import yaml

from ..core.errors import InvalidRequest
from ..projections import TYPES as VAR_TYPES
from ..projections import VAR_SCOPES, Buffer, Policy, VarDecl, policy_from_dict
from .errors import SpecError
from .templates import Condition, Template
from .tools import Tool

__all__ = [
    "VAR_SCOPES",
    "VAR_TYPES",
    "ChatHistoryNode",
    "Edge",
    "LLMNode",
    "LoopNode",
    "Node",
    "Spec",
    "ToolNode",
    "VarNode",
    "VarSetNode",
]

NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_ALIASES: Final = {
    "loop": "loop",
    "loopnode": "loop",
    "while": "loop",
    "while_loop": "loop",
    "llm": "llm",
    "llmnode": "llm",
    "tool": "tool",
    "toolnode": "tool",
    "var": "var",
    "varnode": "var",
    "variable": "var",
    "var_set": "var_set",
    "varsetnode": "var_set",
    "set": "var_set",
    "chat_history": "chat_history",
    "chathistorynode": "chat_history",
    "history": "chat_history",
}


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise SpecError(
            f"{what} {value!r} must start with a letter or '_' and hold at most 64 "
            "letters, digits, '_' or '-'"
        )
    return value


# What an LLM node's model is sent of its conversation (seed 004: thread / session / call).
MEMORY_SCOPES: Final = ("thread", "session", "run", "call")


@dataclass(frozen=True, kw_only=True, slots=True)
class LLMNode:
    """A model call loop: prompt, conversation (memory policy), tools, until an answer.

    ``tools``: tool names offered (None: every tool of the agent). ``memory``: a
    policy of ``tether.projections`` or its dict form (None: the whole buffer).
    ``input``: what this node is fed when an edge enters it (default: the previous
    node's output). ``model``: a key of ``Agent(models=...)`` (None: the agent's model).
    ``memory_scope`` (seed 004's memory node scopes): ``thread`` (default), the node's
    history across the thread's runs; ``session`` (or ``run``), this run's only;
    ``call``, only the current execution of the node (its input and its own tool loop).
    The messages are stored the same way whatever the scope: it chooses what the model
    is sent.
    """

    kind: ClassVar[str] = "llm"
    name: str = "agent"
    system: str | None = None
    memory: Any = None
    tools: Sequence[str] | None = None
    model: str | None = None
    input: str | None = None
    memory_scope: str = "thread"

    def __post_init__(self) -> None:
        if self.memory_scope not in MEMORY_SCOPES:
            raise SpecError(
                f"llm node {self.name!r}: memory_scope is one of {', '.join(MEMORY_SCOPES)}, "
                f"got {self.memory_scope!r}"
            )
        if self.tools is not None:
            if isinstance(self.tools, str):
                raise SpecError(f"llm node {self.name!r}: tools is a list of names, not a string")
            object.__setattr__(self, "tools", tuple(self.tools))


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolNode:
    """Calls one tool. ``arguments``: a mapping whose strings are templates, or one
    template producing a mapping; None passes the node's input (a mapping) as is."""

    kind: ClassVar[str] = "tool"
    name: str
    tool: str | Tool | Callable[..., Any]
    arguments: Mapping[str, Any] | str | None = None
    needs_approval: bool | None = None
    # Credentials this node's calls need, on top of the tool's own (never persisted).
    credentials: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if self.credentials is not None:
            if isinstance(self.credentials, str):
                raise SpecError(
                    f"tool node {self.name!r}: credentials is a list of names, not a string"
                )
            object.__setattr__(self, "credentials", tuple(self.credentials))

    @property
    def tool_name(self) -> str:
        if isinstance(self.tool, str):
            return self.tool
        if isinstance(self.tool, Tool):
            return self.tool.name
        return str(getattr(self.tool, "__name__", self.name))


@dataclass(frozen=True, kw_only=True, slots=True)
class VarNode:
    """Declares a variable. ``var`` defaults to the node name."""

    kind: ClassVar[str] = "var"
    name: str
    var: str | None = None
    type: str = "string"
    scope: str = "thread"
    default: Any = None

    @property
    def var_name(self) -> str:
        return self.var or self.name


@dataclass(frozen=True, kw_only=True, slots=True)
class VarSetNode:
    """Writes ``value`` (a template) to the variable ``var``."""

    kind: ClassVar[str] = "var_set"
    name: str
    var: str
    value: str = "{{ input }}"


@dataclass(frozen=True, kw_only=True, slots=True)
class LoopNode:
    """Seed 004's while_loop: runs the body (from node ``body``) while ``condition`` holds.

    ``condition`` is checked before each iteration and sees ``loop_index`` (the
    iteration about to start, from 0), ``input``/``output`` (what the iteration
    would be fed: the loop's input, then each iteration's last output), variables
    and node outputs. At most ``max_iterations`` iterations run.
    """

    kind: ClassVar[str] = "loop"
    name: str
    body: str
    condition: str = "true"
    max_iterations: int = 10

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_iterations, bool)
            or not isinstance(self.max_iterations, int)
            or not 0 <= self.max_iterations <= 100_000
        ):
            raise SpecError(
                f"loop node {self.name!r}: max_iterations is an integer from 0 to 100000, "
                f"got {self.max_iterations!r}"
            )


# What a chat_history node reads of a conversation: the thread's, or this run's.
HISTORY_SCOPES: Final = ("thread", "session", "run")


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatHistoryNode:
    """Seed 004's ``chat_history`` node: outputs an LLM node's conversation as data.

    Its output is the list of messages (``{"role", "content", ...}``, the shape a model
    is sent) that the LLM node ``llm`` has in this thread: ``scope="thread"`` (default)
    every run's, ``"session"`` (or ``"run"``) this run's only; ``last`` keeps the last N.
    Templates read it as ``{{ nodes.<name>.output }}``, so a prompt, a tool argument or a
    condition can use the history without the LLM node's own memory. Like every node
    its output is recorded in the run (a step record), so a resumed run reads the same
    history it had. System messages (the prompt, a summary) are not part of it.
    """

    kind: ClassVar[str] = "chat_history"
    name: str
    llm: str = "agent"
    scope: str = "thread"
    last: int | None = None

    def __post_init__(self) -> None:
        if self.scope not in HISTORY_SCOPES:
            raise SpecError(
                f"chat_history node {self.name!r}: scope is one of {', '.join(HISTORY_SCOPES)}, "
                f"got {self.scope!r}"
            )
        if self.last is not None and (
            isinstance(self.last, bool) or not isinstance(self.last, int) or self.last < 0
        ):
            raise SpecError(
                f"chat_history node {self.name!r}: last is a whole number >= 0 or None, "
                f"got {self.last!r}"
            )


Node: TypeAlias = LLMNode | ToolNode | VarNode | VarSetNode | LoopNode | ChatHistoryNode


@dataclass(frozen=True, kw_only=True, slots=True)
class Edge:
    """``src`` -> ``dst`` when ``condition`` (a Jinja2 expression) holds; None: always."""

    src: str
    dst: str
    condition: str | None = None


class Spec:
    """The agent's graph. Validated at construction: a bad spec raises SpecError.

    ``start`` may be left out when the spec has one node. ``template_variables``: what
    ``{{ variables }}`` holds in templates: ``"all"`` (the default) every declared
    variable, each read from its scope; ``"session"`` seed 004's namespace, the run
    (session) variables and ``loop_index`` only, others read through their var node's
    output (``{{ nodes.<var node>.output }}``).
    """

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    start: str
    template_variables: str
    _by_name: dict[str, Node]
    _templates: dict[tuple[str, str], Any]
    _policies: dict[str, Policy]
    _decls: tuple[VarDecl, ...]
    _out: dict[str, list[tuple[Edge, Condition | None]]]
    _loop_of: dict[str, str]

    def __init__(
        self,
        *,
        nodes: Iterable[Node],
        edges: Iterable[Edge] = (),
        start: str = "",
        template_variables: str = "all",
    ) -> None:
        self.nodes = tuple(nodes)
        self.edges = tuple(edges)
        self.start = start
        if template_variables not in TEMPLATE_VARIABLES:
            raise SpecError(
                f"template_variables is 'all' (every declared variable) or 'session' (seed "
                f"004's: run variables and loop_index only), got {template_variables!r}"
            )
        self.template_variables = template_variables
        self._build()

    def __repr__(self) -> str:
        more = (
            f", template_variables={self.template_variables!r}"
            if self.template_variables != "all"
            else ""
        )
        return (
            f"Spec(nodes={list(self.nodes)!r}, edges={list(self.edges)!r}, "
            f"start={self.start!r}{more})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and (
            self.nodes,
            self.edges,
            self.start,
            self.template_variables,
        ) == (other.nodes, other.edges, other.start, other.template_variables)

    __hash__ = None  # type: ignore[assignment]

    def _build(self) -> None:
        if not self.nodes:
            raise SpecError("a spec needs at least one node")
        by_name: dict[str, Node] = {}
        for n in self.nodes:
            if not isinstance(
                n, LLMNode | ToolNode | VarNode | VarSetNode | LoopNode | ChatHistoryNode
            ):
                raise SpecError(
                    f"unknown node {n!r}: use LLMNode, ToolNode, VarNode, VarSetNode, "
                    "LoopNode, ChatHistoryNode"
                )
            _name(n.name, f"{n.kind} node name")
            if n.name in by_name:
                raise SpecError(f"two nodes are named {n.name!r}; node names are unique")
            by_name[n.name] = n
        start = self.start or (self.nodes[0].name if len(self.nodes) == 1 else "")
        if not start:
            raise SpecError(f"name the start node: start= one of {', '.join(by_name)}")
        if start not in by_name:
            raise SpecError(
                f"start node {start!r} is not a node of the spec ({', '.join(by_name)})"
            )
        self.start = start
        self._by_name = by_name

        declared: dict[str, VarNode] = {}
        decls: list[VarDecl] = []
        for n in self.nodes:
            if isinstance(n, VarNode):
                _name(n.var_name, f"var node {n.name!r}: variable name")
                if n.var_name in declared:
                    raise SpecError(f"variable {n.var_name!r} is declared twice")
                try:
                    decls.append(
                        VarDecl(name=n.var_name, type=n.type, scope=n.scope, default=n.default)
                    )
                except InvalidRequest as e:
                    raise SpecError(f"var node {n.name!r}: {e.message}") from None
                declared[n.var_name] = n
        self._decls = tuple(decls)

        policies: dict[str, Policy] = {}
        for n in self.nodes:
            if isinstance(n, LLMNode):
                try:
                    policies[n.name] = (
                        Buffer()
                        if n.memory is None
                        else n.memory
                        if isinstance(n.memory, Policy)
                        else policy_from_dict(n.memory)
                    )
                except InvalidRequest as e:
                    raise SpecError(f"llm node {n.name!r}: memory: {e.message}") from None
        self._policies = policies

        templates: dict[tuple[str, str], Any] = {}
        for n in self.nodes:
            where = f"{n.kind} node {n.name!r}"
            if isinstance(n, LLMNode):
                if n.system is not None:
                    templates[(n.name, "system")] = Template(n.system, where=f"{where} system")
                if n.input is not None:
                    templates[(n.name, "input")] = Template(n.input, where=f"{where} input")
                for t in n.tools or ():
                    _name(t, f"{where}: tool name")
            elif isinstance(n, ToolNode):
                if not isinstance(n.tool, str | Tool) and not callable(n.tool):
                    raise SpecError(f"{where}: tool is a tool name, a Tool or a callable")
                if n.arguments is not None:
                    templates[(n.name, "arguments")] = _compile_tree(
                        n.arguments, f"{where} arguments"
                    )
            elif isinstance(n, VarSetNode):
                if n.var not in declared:
                    raise SpecError(
                        f"{where} writes variable {n.var!r}, which no var node declares; "
                        f"declared: {', '.join(declared) or 'none'}"
                    )
                templates[(n.name, "value")] = Template(n.value, where=f"{where} value")
            elif isinstance(n, LoopNode):
                templates[(n.name, "condition")] = Condition(
                    n.condition, where=f"{where} condition"
                )
            elif isinstance(n, ChatHistoryNode) and not isinstance(by_name.get(n.llm), LLMNode):
                llms = [m.name for m in self.nodes if isinstance(m, LLMNode)]
                raise SpecError(
                    f"{where} reads the conversation of {n.llm!r}, which is not an llm "
                    f"node of the spec; llm nodes: {', '.join(llms) or 'none'}"
                )
        self._templates = templates

        out: dict[str, list[tuple[Edge, Condition | None]]] = {n: [] for n in by_name}
        for edge in self.edges:
            if not isinstance(edge, Edge):
                raise SpecError(f"edges are Edge values, got {edge!r}")
            for end in (edge.src, edge.dst):
                if end not in by_name:
                    raise SpecError(
                        f"edge {edge.src!r} -> {edge.dst!r}: no node {end!r} ({', '.join(by_name)})"
                    )
            cond = (
                None
                if edge.condition is None
                else Condition(edge.condition, where=f"edge {edge.src!r} -> {edge.dst!r}")
            )
            out[edge.src].append((edge, cond))
        self._out = out
        self._loop_of = self._loop_bodies()

    def _loop_bodies(self) -> dict[str, str]:
        """Body node -> its loop: the nodes reachable from a loop's ``body`` by edges,
        not through the loop itself. A body is entered only from its loop."""
        owner: dict[str, str] = {}
        for n in self.nodes:
            if not isinstance(n, LoopNode):
                continue
            where = f"loop node {n.name!r}"
            if n.body not in self._by_name:
                raise SpecError(
                    f"{where}: body {n.body!r} is not a node ({', '.join(self._by_name)})"
                )
            if n.body == n.name:
                raise SpecError(f"{where}: a loop cannot be its own body")
            seen = {n.body}
            stack = [n.body]
            while stack:
                cur = stack.pop()
                for edge, _ in self._out[cur]:
                    if edge.dst != n.name and edge.dst not in seen:
                        seen.add(edge.dst)
                        stack.append(edge.dst)
            for b in seen:
                if b in owner:
                    raise SpecError(
                        f"node {b!r} is in the bodies of loops {owner[b]!r} and {n.name!r}; "
                        "a node belongs to one loop body (nest a loop node instead)"
                    )
                owner[b] = n.name
        for name, loop in owner.items():
            if name == self.start:
                raise SpecError(
                    f"the start node {name!r} is in the body of loop {loop!r}; "
                    "start at the loop node instead"
                )
        for edge in self.edges:
            dst_loop = owner.get(edge.dst)
            if edge.dst == owner.get(edge.src):
                continue  # back to its own loop: ends the iteration
            if dst_loop is not None and owner.get(edge.src) != dst_loop:
                raise SpecError(
                    f"edge {edge.src!r} -> {edge.dst!r} enters the body of loop {dst_loop!r} "
                    "from outside; a loop body is entered only through its loop node"
                )
        return owner

    # -- reading

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise SpecError(f"no node {name!r} in the spec") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def template(self, node: str, what: str) -> Any:
        """The compiled template of a node's field (a Template, or a tree of them), or None."""
        return self._templates.get((node, what))

    def outgoing(self, node: str) -> list[tuple[Edge, Condition | None]]:
        return list(self._out.get(node, ()))

    @property
    def variables(self) -> tuple[VarNode, ...]:
        return tuple(n for n in self.nodes if isinstance(n, VarNode))

    @property
    def var_decls(self) -> tuple[VarDecl, ...]:
        """The variables the var nodes declare, as ``tether.projections.VarDecl``."""
        return self._decls

    def loop_of(self, node: str) -> str | None:
        """The loop whose body holds ``node`` (None outside every loop body)."""
        return self._loop_of.get(node)

    def loops_around(self, node: str) -> list[str]:
        """The loops enclosing ``node``, innermost first."""
        out: list[str] = []
        cur = self._loop_of.get(node)
        while cur is not None and cur not in out:
            out.append(cur)
            cur = self._loop_of.get(cur)
        return out

    def policy(self, llm: str) -> Policy:
        """The memory policy of an LLM node (``Buffer()`` unless configured)."""
        return self._policies[llm]

    @property
    def llm_nodes(self) -> tuple[LLMNode, ...]:
        return tuple(n for n in self.nodes if isinstance(n, LLMNode))

    # -- constructors

    @classmethod
    def single(
        cls,
        *,
        name: str = "agent",
        system: str | None = None,
        memory: Any = None,
        tools: Iterable[str] | None = None,
    ) -> Spec:
        """One LLM node: the common chat agent."""
        return cls(
            nodes=(
                LLMNode(
                    name=name,
                    system=system,
                    memory=memory,
                    tools=None if tools is None else tuple(tools),
                ),
            ),
            start=name,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data (tools by name), the shape ``from_dict`` and YAML files use."""
        nodes: list[dict[str, Any]] = []
        for n in self.nodes:
            d: dict[str, Any] = {"kind": n.kind, "name": n.name}
            if isinstance(n, LLMNode):
                for k in ("system", "model", "input"):
                    if getattr(n, k) is not None:
                        d[k] = getattr(n, k)
                if n.tools is not None:
                    d["tools"] = list(n.tools)
                if n.memory is not None:
                    m = n.memory
                    d["memory"] = m if isinstance(m, Mapping) else m.to_dict()
                if n.memory_scope != "thread":
                    d["memory_scope"] = n.memory_scope
            elif isinstance(n, ToolNode):
                d["tool"] = n.tool_name
                if n.arguments is not None:
                    d["arguments"] = n.arguments
                if n.needs_approval is not None:
                    d["needs_approval"] = n.needs_approval
                if n.credentials is not None:
                    d["credentials"] = list(n.credentials)
            elif isinstance(n, LoopNode):
                d.update(body=n.body, condition=n.condition, max_iterations=n.max_iterations)
            elif isinstance(n, VarNode):
                if n.var is not None:
                    d["var"] = n.var
                d.update(type=n.type, scope=n.scope, default=n.default)
            elif isinstance(n, ChatHistoryNode):
                d.update(llm=n.llm, scope=n.scope)
                if n.last is not None:
                    d["last"] = n.last
            else:
                d.update(var=n.var, value=n.value)
            nodes.append(d)
        edges = [
            {"from": e.src, "to": e.dst, **({"when": e.condition} if e.condition else {})}
            for e in self.edges
        ]
        out: dict[str, Any] = {"start": self.start, "nodes": nodes, "edges": edges}
        if self.template_variables != "all":
            out["template_variables"] = self.template_variables
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Spec:
        """From ``{start, nodes: [...], edges: [{from, to, when}]}``; nodes may carry edges."""
        return _Builder().add_doc(data, "spec").build(None)

    @classmethod
    def from_yaml(cls, path: str | Path, *, start: str | None = None) -> Spec:
        """From a YAML file or a directory of YAML files (see the module docstring)."""
        p = Path(path)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.suffix in (".yaml", ".yml") and f.is_file())
            if not files:
                raise SpecError(f"{p}: no *.yaml or *.yml files in this directory")
        elif p.is_file():
            files = [p]
        else:
            raise SpecError(f"{p}: no such file or directory")
        b = _Builder()
        for f in files:
            try:
                docs = list(yaml.safe_load_all(f.read_text(encoding="utf-8")))
            except yaml.YAMLError as e:
                raise SpecError(f"{f}: invalid YAML: {e}") from None
            for doc in docs:
                if doc is not None:
                    b.add_doc(doc, str(f))
        return b.build(start)


def _compile_tree(value: Any, where: str) -> Any:
    """Templates for every string inside a mapping/list (a lone string is one template)."""
    if isinstance(value, str):
        return Template(value, where=where)
    if isinstance(value, Mapping):
        return {str(k): _compile_tree(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_compile_tree(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


# What ``{{ variables }}`` holds: every declared variable, or seed 004's namespace.
TEMPLATE_VARIABLES: Final = ("all", "session")

_NODE_KEYS: Final = {
    "llm": {"system", "memory", "tools", "model", "input", "memory_scope"},
    "tool": {"tool", "arguments", "needs_approval", "credentials"},
    "loop": {"body", "condition", "max_iterations"},
    "var": {"var", "type", "scope", "default"},
    "var_set": {"var", "value"},
    "chat_history": {"llm", "scope", "last"},
}
_COMMON: Final = {"kind", "name", "edges", "next", "start"}


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        self.starts: list[str] = []
        self.template_variables: list[Any] = []

    def add_doc(self, doc: Any, where: str) -> _Builder:
        if isinstance(doc, list):
            for i, item in enumerate(doc):
                self.add_node(item, f"{where}[{i}]")
        elif isinstance(doc, Mapping) and "kind" not in doc:
            if unknown := set(doc) - {"start", "nodes", "edges", "template_variables"}:
                raise SpecError(
                    f"{where}: unknown keys {sorted(unknown)}; use start, nodes, edges, "
                    "template_variables"
                )
            if doc.get("template_variables") is not None:
                self.template_variables.append(doc["template_variables"])
            if doc.get("start") is not None:
                self.starts.append(_name(doc["start"], f"{where}: start"))
            nodes = doc.get("nodes") or []
            if not isinstance(nodes, list):
                raise SpecError(f"{where}: nodes is a list")
            for i, item in enumerate(nodes):
                self.add_node(item, f"{where}: nodes[{i}]")
            edges = doc.get("edges") or []
            if not isinstance(edges, list):
                raise SpecError(f"{where}: edges is a list")
            for i, e in enumerate(edges):
                self.add_edge(None, e, f"{where}: edges[{i}]")
        elif isinstance(doc, Mapping):
            self.add_node(doc, where)
        else:
            raise SpecError(f"{where}: expected a node, a list of nodes or a spec, got {doc!r}")
        return self

    def add_node(self, d: Any, where: str) -> None:
        if not isinstance(d, Mapping):
            raise SpecError(f"{where}: a node is a mapping, got {d!r}")
        raw_kind = d.get("kind")
        if raw_kind is None:
            raise SpecError(
                f"{where}: a node needs kind: llm, tool, var, var_set, loop or chat_history"
            )
        kind = _ALIASES.get(str(raw_kind).lower().replace("-", "_"))
        if kind is None:
            raise SpecError(
                f"{where}: unknown kind {raw_kind!r}; use llm, tool, var, var_set, loop or chat_history"
            )
        allowed = _NODE_KEYS[kind] | _COMMON
        if unknown := set(d) - allowed:
            raise SpecError(
                f"{where}: unknown keys {sorted(unknown)} for a {kind} node; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
        fields = {k: d[k] for k in _NODE_KEYS[kind] if k in d}
        name = d.get("name", "agent" if kind == "llm" else None)
        if name is None:
            raise SpecError(f"{where}: a {kind} node needs a name")
        fields["name"] = _name(name, f"{where}: name")
        node: Node
        try:
            if kind == "llm":
                tools = fields.get("tools")
                if tools is not None and not isinstance(tools, list):
                    raise SpecError(f"{where}: tools is a list of tool names")
                node = LLMNode(**{**fields, "tools": None if tools is None else tuple(tools)})
            elif kind == "tool":
                if "tool" not in fields:
                    fields["tool"] = fields["name"]
                node = ToolNode(**fields)
            elif kind == "var":
                node = VarNode(**fields)
            elif kind == "chat_history":
                node = ChatHistoryNode(**fields)
            elif kind == "loop":
                if "body" not in fields:
                    raise SpecError(f"{where}: a loop node names its body (body: <node>)")
                if "condition" in fields and not isinstance(fields["condition"], str):
                    c = fields["condition"]
                    fields["condition"] = str(c).lower() if isinstance(c, bool) else str(c)
                node = LoopNode(**fields)
            else:
                if "var" not in fields:
                    raise SpecError(f"{where}: a var_set node names the variable it writes (var:)")
                node = VarSetNode(**fields)
        except TypeError as e:
            raise SpecError(f"{where}: {e}") from None
        self.nodes.append(node)
        if d.get("start"):
            self.starts.append(node.name)
        if d.get("next") is not None:
            self.edges.append(Edge(src=node.name, dst=_name(d["next"], f"{where}: next")))
        edges = d.get("edges") or []
        if not isinstance(edges, list):
            raise SpecError(f"{where}: edges is a list of {{to, when}}")
        for i, item in enumerate(edges):
            self.add_edge(node.name, item, f"{where}: edges[{i}]")

    def add_edge(self, src: str | None, e: Any, where: str) -> None:
        if isinstance(e, str) and src is not None:
            self.edges.append(Edge(src=src, dst=e))
            return
        if not isinstance(e, Mapping):
            raise SpecError(f"{where}: an edge is {{to, when}}, got {e!r}")
        allowed = {"to", "when", "condition"} | ({"from"} if src is None else set())
        if unknown := set(e) - allowed:
            raise SpecError(
                f"{where}: unknown edge keys {sorted(unknown)}; allowed: {sorted(allowed)}"
            )
        s = src if src is not None else e.get("from")
        if not isinstance(s, str) or not isinstance(e.get("to"), str):
            raise SpecError(f"{where}: an edge needs from and to node names")
        cond = e.get("when", e.get("condition"))
        if cond is not None and not isinstance(cond, str):
            cond = str(cond).lower() if isinstance(cond, bool) else str(cond)
        self.edges.append(Edge(src=s, dst=e["to"], condition=cond))

    def build(self, start: str | None) -> Spec:
        chosen = start
        if chosen is None:
            unique = list(dict.fromkeys(self.starts))
            if len(unique) > 1:
                raise SpecError(f"several start nodes: {', '.join(unique)}; mark exactly one")
            chosen = unique[0] if unique else ""
        modes = list(dict.fromkeys(self.template_variables))
        if len(modes) > 1:
            raise SpecError(f"template_variables is set twice, differently: {modes}")
        return Spec(
            nodes=tuple(self.nodes),
            edges=tuple(self.edges),
            start=chosen,
            template_variables=modes[0] if modes else "all",
        )


def check_tools(spec: Spec, tools: Collection[str]) -> None:
    """Every tool a spec names exists (SpecError naming the node otherwise)."""
    for n in spec.nodes:
        if isinstance(n, LLMNode):
            for t in n.tools or ():
                if t not in tools:
                    raise SpecError(
                        f"llm node {n.name!r} offers tool {t!r}, which the agent does not have; "
                        f"tools: {', '.join(tools) or 'none'}"
                    )
        elif isinstance(n, ToolNode) and n.tool_name not in tools:
            raise SpecError(
                f"tool node {n.name!r} calls {n.tool!r}, which the agent does not have; "
                f"tools: {', '.join(tools) or 'none'}"
            )
