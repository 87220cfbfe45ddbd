"""ScriptedModel: a deterministic model for demos and tests. No network, no randomness.

A scripted model is an ordered list of rules. Each call looks at the latest user
message and answers with the first rule that matches::

    from tether.models import Rule, ScriptedModel, call, remember

    model = ScriptedModel([
        Rule(match=r"my name is (\\w+)",
             remember=[remember("name", "{1}")],
             answer="Nice to meet you, {1}."),
        Rule(match=r"what is my name", answer="Your name is {memory.name}."),
        Rule(match=r"what is my name", answer="I don't know your name yet."),
        Rule(match=r"weather in (\\w+)",
             tools=[call("get_weather", city="{1}")],
             then="It is {result} in {1}."),
    ])

The same model from YAML-like data (``ScriptedModel.from_config``)::

    default: "Sorry, I can't help with that."
    rules:
      - match: "my name is (\\\\w+)"
        remember: [{type: memory, key: name, content: "{1}"}]
        answer: "Nice to meet you, {1}."
      - match: "weather in (\\\\w+)"
        tools: [{name: get_weather, arguments: {city: "{1}"}}]
        then: "It is {result} in {1}."

Matching
    ``match`` is a regular expression searched (case-insensitively when given as a
    string) in the latest user message; a compiled pattern is used as is; a callable
    ``(text) -> bool`` decides itself; ``None`` matches everything. ``when`` (a
    callable on the ``Turn``, Python only) adds any other condition: history,
    memory, context. A rule that calls a tool the request does not offer is skipped
    (``offered_tools_only=False`` turns that off).

Templates
    ``answer``, ``then``, tool arguments (every string inside them) and memory
    ``type``/``key``/``content`` are ``str.format`` templates, or callables taking
    the ``Turn`` and returning the value. A template sees:

    ``{0}`` ``{1}`` ...   the regex groups (``{0}`` is the whole match), named groups by name
    ``{message}``         the latest user message
    ``{memory.name}``     the semantic memory with key ``name`` (any type);
                          ``{memory[preference:color]}`` for one type and key
    ``{result}``          the last tool result (JSON-decoded when it is JSON, so
                          ``{result[temp]}`` works); ``{results[0]}``, ``{results[get_weather]}``
    ``{context[...]}``    the caller's context for this call

    If a template refers to something that is not there (a memory not yet known, a
    tool result before any tool ran), the rule does not apply and the next one is
    tried; this is how a rule says "only when I know the name". Attribute names
    starting with ``_`` are refused.

Responses
    A rule answers (``answer``), calls tools (``tools``: several calls are parallel
    calls; ``answer`` is then sent along as content) and writes memories
    (``remember``), all in one response. When the last message is a tool result the
    model gives the follow-up: the ``then`` of the rule that made the calls (found
    again by its pattern and its tool names), by default the result itself. Tool call
    ids are ``call_`` + a hash of the conversation, the call's position, name and
    arguments: the same request always gets the same ids.

Memory
    A template's ``memory`` is ``request.memory`` (``{"<type>:<key>": content}``)
    laid over what the rules' own ``remember`` clauses would have written for the
    earlier user messages of the conversation, so "What is my name?" works from the
    durable memory and from the thread's history alike.

``model.requests`` keeps the last ``keep_requests`` requests received (8 by default,
oldest first), for tests to inspect; ``keep_requests=None`` keeps every one. A request
holds the whole message list it was sent, so keeping every request of a long thread
grows with the square of its history (a server stepping one thread 3,000 times with
the old unbounded list reached 2.4 GB). Usage figures are word counts, an
approximation in the shape of the OpenAI client's.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..core.messages import MemoryWrite, Message, ModelRequest, ModelResponse, ToolCall
from .errors import ModelConfigError

__all__ = [
    "DEFAULT_ANSWER",
    "Rule",
    "ScriptedCall",
    "ScriptedMemory",
    "ScriptedModel",
    "Turn",
    "call",
    "remember",
]

Template: TypeAlias = "str | Callable[[Turn], Any]"
Matcher: TypeAlias = "str | re.Pattern[str] | Callable[[str], bool] | None"

DEFAULT_ANSWER = "I have no scripted answer for {message!r}."
KEEP_REQUESTS = 8  # requests a ScriptedModel keeps for inspection, by default

# Names every template sees; a regex group may not take them.
_RESERVED = frozenset({"message", "memory", "result", "results", "context"})
# What a template raises when it refers to something that is not there: the rule is skipped.
_MISSING = (KeyError, IndexError, AttributeError)


# --------------------------------------------------------------------------- templates


class _Formatter(string.Formatter):
    """``str.format`` without access to ``_private`` attributes."""

    _PART = re.compile(r"\.([^.\[]+)|\[([^\]]+)\]")

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        head = re.match(r"[^.\[]*", field_name)
        assert head is not None  # the pattern matches the empty string
        first: int | str = int(head.group()) if head.group().isdigit() else head.group()
        obj = self.get_value(first, args, kwargs)
        pos = head.end()
        while pos < len(field_name):
            part = self._PART.match(field_name, pos)
            if part is None:
                raise ModelConfigError(f"bad template field {field_name!r}")
            attr, item = part.groups()
            if attr is not None:
                if attr.startswith("_"):
                    raise ModelConfigError(
                        f"template field {field_name!r} reads a private attribute; "
                        "only public names may be used in templates"
                    )
                obj = getattr(obj, attr)
            else:
                obj = obj[int(item) if item.isdigit() else item]
            pos = part.end()
        return obj, first


_FORMATTER = _Formatter()


def _check_template(value: Any, where: str) -> None:
    """Fail at construction, not mid-conversation, on a template that cannot parse."""
    if isinstance(value, str):
        try:
            for _, field_name, spec, _ in _FORMATTER.parse(value):
                if field_name and re.search(r"\.\s*_", field_name):
                    raise ModelConfigError(f"{where}: template {value!r} reads a private attribute")
                if spec:
                    _check_template(spec, where)
        except ValueError as exc:
            raise ModelConfigError(f"{where}: bad template {value!r}: {exc}") from None
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _check_template(k, where)
            _check_template(v, where)
    elif isinstance(value, list | tuple):
        for v in value:
            _check_template(v, where)


class MemoryView(Mapping[str, Any]):
    """Semantic memory as templates see it: ``memory["type:key"]``, ``memory["key"]``, ``memory.key``."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> Any:
        if key in self._items:
            return self._items[key]
        if ":" not in key:
            for full, value in self._items.items():
                if full.partition(":")[2] == key:
                    return value
        raise KeyError(key)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"MemoryView({self._items!r})"


class ToolResults:
    """The results of the latest tool calls, by position (``[0]``) or by tool name."""

    __slots__ = ("_items",)

    def __init__(self, items: Sequence[tuple[str, Any]]) -> None:
        self._items = list(items)

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, int):
            return self._items[key][1]
        for name, value in reversed(self._items):
            if name == key:
                return value
        raise KeyError(key)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return (value for _, value in self._items)

    def __repr__(self) -> str:
        return f"ToolResults({self._items!r})"


@dataclass(frozen=True, kw_only=True, slots=True)
class Turn:
    """What a rule sees: the request, the match, the memory and the latest tool results."""

    request: ModelRequest
    message: str
    groups: tuple[str, ...] = ()
    named: Mapping[str, str] = field(default_factory=dict)
    memory: MemoryView = field(default_factory=lambda: MemoryView({}))
    results: ToolResults = field(default_factory=lambda: ToolResults(()))

    @property
    def history(self) -> list[Message]:
        return self.request.messages

    @property
    def context(self) -> dict[str, Any]:
        return self.request.context

    @property
    def result(self) -> Any:
        """The last tool result; ``KeyError`` (rule skipped) when there is none."""
        if not len(self.results):
            raise KeyError("result")
        return self.results[-1]

    def format(self, template: str) -> str:
        """Render a ``str.format`` template with this turn's names."""
        kwargs: dict[str, Any] = dict(self.named)
        kwargs.update(
            message=self.message,
            memory=self.memory,
            results=self.results,
            context=self.request.context,
        )
        if len(self.results):
            kwargs["result"] = self.results[-1]
        return _FORMATTER.vformat(template, self.groups, kwargs)

    def render(self, value: Any) -> Any:
        """Render a template value: strings are formatted, callables called, containers walked."""
        if isinstance(value, str):
            return self.format(value)
        if callable(value):
            return value(self)
        if isinstance(value, Mapping):
            return {self.render(k): self.render(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.render(v) for v in value]
        return value


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedCall:
    """A tool call a rule makes; string arguments are templates."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedMemory:
    """A semantic memory a rule writes; ``type``, ``key`` and ``content`` are templates."""

    key: Template
    content: Any
    type: Template = "memory"


def call(name: str, /, **arguments: Any) -> ScriptedCall:
    """``call("get_weather", city="{1}")``: a tool call for ``Rule(tools=[...])``."""
    return ScriptedCall(name=name, arguments=arguments)


def remember(key: Template, content: Any, *, type: Template = "memory") -> ScriptedMemory:
    """``remember("name", "{1}")``: a memory write for ``Rule(remember=[...])``."""
    return ScriptedMemory(key=key, content=content, type=type)


_RULE_KEYS = ("name", "match", "answer", "tools", "then", "remember")


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    """One scripted behaviour. See the module docstring for the template names."""

    match: Matcher = None
    answer: Template | None = None
    tools: Sequence[ScriptedCall] = ()
    then: Template | None = None
    remember: Sequence[ScriptedMemory] = ()
    when: Callable[[Turn], bool] | None = None
    name: str = ""
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"rule {self.name or self.match!r}"
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "remember", tuple(self.remember))
        if isinstance(self.match, str):
            try:
                pattern = re.compile(self.match, re.IGNORECASE)
            except re.error as exc:
                raise ModelConfigError(f"{where}: bad regex: {exc}") from None
            object.__setattr__(self, "_pattern", pattern)
        elif isinstance(self.match, re.Pattern):
            object.__setattr__(self, "_pattern", self.match)
        elif self.match is not None and not callable(self.match):
            raise ModelConfigError(f"{where}: match must be a regex, a callable or None")
        if self._pattern is not None and (clash := _RESERVED & set(self._pattern.groupindex)):
            raise ModelConfigError(f"{where}: group names {sorted(clash)} are reserved")
        if self.answer is None and not self.tools:
            raise ModelConfigError(f"{where}: needs an answer or tools")
        if self.then is not None and not self.tools:
            raise ModelConfigError(f"{where}: 'then' is the follow-up of tool calls; add tools")
        for c in self.tools:
            if not isinstance(c, ScriptedCall):
                raise ModelConfigError(f"{where}: tools must be call(...) values, got {c!r}")
            _check_template(c.arguments, where)
        for m in self.remember:
            if not isinstance(m, ScriptedMemory):
                raise ModelConfigError(f"{where}: remember must be remember(...) values, got {m!r}")
            _check_template([m.type, m.key, m.content], where)
        _check_template([self.answer, self.then], where)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rule:
        """A rule from plain data: ``{match, answer, tools, then, remember, name}``."""
        if not isinstance(data, Mapping):
            raise ModelConfigError(f"a scripted rule must be a mapping, got {data!r}")
        if unknown := set(data) - set(_RULE_KEYS):
            raise ModelConfigError(
                f"unknown scripted rule keys {sorted(unknown)}; allowed: {list(_RULE_KEYS)}"
            )
        return cls(
            name=str(data.get("name", "")),
            match=data.get("match"),
            answer=data.get("answer"),
            then=data.get("then"),
            tools=[_call_from_dict(c) for c in _as_list(data.get("tools"), "tools")],
            remember=[_memory_from_dict(m) for m in _as_list(data.get("remember"), "remember")],
        )

    def search(self, text: str) -> tuple[tuple[str, ...], dict[str, str]] | None:
        """``(groups, named groups)`` when the rule's pattern matches ``text``, else None."""
        if self._pattern is not None:
            m = self._pattern.search(text)
            if m is None:
                return None
            groups = (m.group(0), *(g or "" for g in m.groups()))
            return groups, {k: v or "" for k, v in m.groupdict().items()}
        if self.match is None or (callable(self.match) and self.match(text)):
            return (text,), {}
        return None


def _as_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, Mapping) or not isinstance(value, list | tuple):
        raise ModelConfigError(f"scripted rule {what!r} must be a list, got {value!r}")
    return list(value)


def _call_from_dict(data: Any) -> ScriptedCall:
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise ModelConfigError(f"a scripted tool call is {{name, arguments}}, got {data!r}")
    if unknown := set(data) - {"name", "arguments"}:
        raise ModelConfigError(
            f"unknown tool call keys {sorted(unknown)}; allowed: name, arguments"
        )
    arguments = data.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        raise ModelConfigError(f"tool call arguments must be a mapping, got {arguments!r}")
    return ScriptedCall(name=data["name"], arguments=dict(arguments))


def _memory_from_dict(data: Any) -> ScriptedMemory:
    if not isinstance(data, Mapping) or "key" not in data or "content" not in data:
        raise ModelConfigError(f"a scripted memory is {{type, key, content}}, got {data!r}")
    if unknown := set(data) - {"type", "key", "content"}:
        raise ModelConfigError(
            f"unknown memory keys {sorted(unknown)}; allowed: type, key, content"
        )
    return ScriptedMemory(
        type=data.get("type", "memory"), key=str(data["key"]), content=data["content"]
    )


# --------------------------------------------------------------------------- the model


class ScriptedModel:
    """A deterministic ``Model``: ordered rules, first match wins, else ``default``."""

    provider = "tether.scripted"  # gen_ai.provider.name in traces
    model = "scripted"  # gen_ai.request.model

    def __init__(
        self,
        rules: Iterable[Rule | Mapping[str, Any]] = (),
        *,
        default: Template = DEFAULT_ANSWER,
        offered_tools_only: bool = True,
        keep_requests: int | None = KEEP_REQUESTS,
    ) -> None:
        if keep_requests is not None and (type(keep_requests) is not int or keep_requests < 0):
            raise ModelConfigError(
                f"keep_requests is an integer >= 0 or None (keep all), got {keep_requests!r}"
            )
        self.rules: tuple[Rule, ...] = tuple(
            r if isinstance(r, Rule) else Rule.from_dict(r) for r in rules
        )
        _check_template(default, "default answer")
        self.default = default
        self.offered_tools_only = offered_tools_only
        # The latest requests, oldest first (a bounded deque unless keep_requests=None).
        self.requests: deque[ModelRequest] = deque(maxlen=keep_requests)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> ScriptedModel:
        """From plain data: a list of rule dicts, or ``{rules, default, offered_tools_only}``."""
        if isinstance(config, Mapping):
            allowed = {"kind", "rules", "default", "offered_tools_only"}
            if unknown := set(config) - allowed:
                raise ModelConfigError(
                    f"unknown scripted model keys {sorted(unknown)}; allowed: {sorted(allowed)}"
                )
            if config.get("kind", "scripted") != "scripted":
                raise ModelConfigError(f"not a scripted model: kind={config['kind']!r}")
            return cls(
                [Rule.from_dict(r) for r in _as_list(config.get("rules"), "rules")],
                default=config.get("default", DEFAULT_ANSWER),
                offered_tools_only=bool(config.get("offered_tools_only", True)),
            )
        return cls([Rule.from_dict(r) for r in _as_list(config, "rules")])

    @classmethod
    def demo(cls) -> ScriptedModel:
        """A small ready-made script: names, preferences and a ``get_weather`` tool."""
        return cls(
            [
                Rule(
                    name="name",
                    match=r"\bmy name is (\w+)",
                    remember=[remember("name", "{1}")],
                    answer="Nice to meet you, {1}. I'll remember your name.",
                ),
                Rule(match=r"\bwhat(?:'s| is) my name\b", answer="Your name is {memory.name}."),
                Rule(match=r"\bwhat(?:'s| is) my name\b", answer="I don't know your name yet."),
                Rule(
                    name="preference",
                    match=r"\bi (?:like|love|prefer) ([^.!?]+)",
                    remember=[remember("likes", "{1}", type="preference")],
                    answer="Noted: you like {1}.",
                ),
                Rule(match=r"\bwhat do i like\b", answer="You like {memory[preference:likes]}."),
                Rule(match=r"\bwhat do i like\b", answer="You haven't told me yet."),
                Rule(
                    name="weather",
                    match=r"\bweather in (\w+)",
                    tools=[call("get_weather", city="{1}")],
                    then="The weather in {1}: {result}.",
                ),
                Rule(match=r"^\s*(?:hi|hello|hey)\b", answer="Hello! How can I help?"),
            ]
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return self.respond(request)

    def respond(self, request: ModelRequest) -> ModelResponse:
        """The response to ``request`` (synchronous; ``complete`` awaits nothing else)."""
        self.requests.append(request)
        messages = request.messages
        user_at = _last_index(messages, lambda m: m.get("role") == "user")
        text = _text(messages[user_at]) if user_at is not None else ""
        memory = MemoryView({**self._replay_memory(messages[:user_at]), **request.memory})
        results = _latest_results(messages)

        if messages and messages[-1].get("role") == "tool":
            content = self._follow_up(request, text, memory, results)
            return ModelResponse(content=content, usage=_usage(messages, content))

        offered = {t.name for t in request.tools}
        for rule in self.rules:
            if self.offered_tools_only and any(c.name not in offered for c in rule.tools):
                continue
            turn = self._turn(rule, request, text, memory, results)
            if turn is None or (rule.when is not None and not rule.when(turn)):
                continue
            try:
                response = self._response(rule, turn)
            except _MISSING:
                continue
            return response

        try:
            content = _as_text(
                Turn(request=request, message=text, memory=memory).render(self.default)
            )
        except _MISSING as exc:
            raise ModelConfigError(
                f"the default answer {self.default!r} refers to {exc}, which a default "
                "answer cannot rely on; use {message}, {memory} or a callable"
            ) from None
        return ModelResponse(content=content, usage=_usage(messages, content))

    # -- internals

    @staticmethod
    def _turn(
        rule: Rule, request: ModelRequest, text: str, memory: MemoryView, results: ToolResults
    ) -> Turn | None:
        found = rule.search(text)
        if found is None:
            return None
        groups, named = found
        return Turn(
            request=request,
            message=text,
            groups=groups,
            named=named,
            memory=memory,
            results=results,
        )

    def _response(self, rule: Rule, turn: Turn) -> ModelResponse:
        content = None if rule.answer is None else _as_text(turn.render(rule.answer))
        calls = []
        for k, c in enumerate(rule.tools):
            arguments = turn.render(dict(c.arguments))
            calls.append(
                ToolCall(
                    id=_call_id(turn.request.messages, k, c.name, arguments),
                    name=c.name,
                    arguments=arguments,
                )
            )
        memories = [
            MemoryWrite(
                type=_as_text(turn.render(m.type)),
                key=_as_text(turn.render(m.key)),
                content=turn.render(m.content),
            )
            for m in rule.remember
        ]
        return ModelResponse(
            content=content,
            tool_calls=calls,
            memories=memories,
            usage=_usage(turn.request.messages, content, len(calls)),
        )

    def _follow_up(
        self, request: ModelRequest, text: str, memory: MemoryView, results: ToolResults
    ) -> str:
        """The answer after tool results: the ``then`` of the rule that made the calls."""
        messages = request.messages
        at = _last_index(messages, _has_tool_calls)
        calls = messages[at]["tool_calls"] if at is not None else []
        pending = sorted(str(tc.get("name")) for tc in calls)
        for rule in self.rules:
            if not rule.tools or sorted(c.name for c in rule.tools) != pending:
                continue
            turn = self._turn(rule, request, text, memory, results)
            if turn is None or (rule.when is not None and not rule.when(turn)):
                continue
            try:
                return _as_text(turn.render("{result}" if rule.then is None else rule.then))
            except _MISSING:
                continue
        return "\n".join(_as_text(r) for r in results)

    def _replay_memory(self, messages: Sequence[Message]) -> dict[str, Any]:
        """What the rules' ``remember`` clauses wrote for these (earlier) user messages.

        Best effort and pure: the first rule whose pattern matches a message is taken
        to be the one that answered it (``when`` and offered tools are not re-checked).
        """
        if not any(r.remember for r in self.rules):
            return {}
        request = ModelRequest(messages=list(messages))
        found: dict[str, Any] = {}
        for message in messages:
            if message.get("role") != "user":
                continue
            text = _text(message)
            for rule in self.rules:
                turn = self._turn(rule, request, text, MemoryView(found), ToolResults(()))
                if turn is None:
                    continue
                for m in rule.remember:
                    try:
                        key = f"{_as_text(turn.render(m.type))}:{_as_text(turn.render(m.key))}"
                        found[key] = turn.render(m.content)
                    except _MISSING:
                        pass
                break
        return found


# --------------------------------------------------------------------------- helpers


def _last_index(messages: Sequence[Message], pred: Callable[[Message], bool]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if pred(messages[i]):
            return i
    return None


def _has_tool_calls(message: Message) -> bool:
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


def _text(message: Message) -> str:
    """A message's text; content given as a list of parts keeps the text parts."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content
        )
    return str(content)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _decode(content: Any) -> Any:
    """A tool result as templates see it: JSON decoded when it is JSON text."""
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def _latest_results(messages: Sequence[Message]) -> ToolResults:
    """The tool results that follow the latest assistant message with tool calls."""
    at = _last_index(messages, _has_tool_calls)
    if at is None:
        return ToolResults(())
    names = {tc.get("id"): tc.get("name") for tc in messages[at]["tool_calls"]}
    items = [
        (str(m.get("name") or names.get(m.get("tool_call_id")) or ""), _decode(m.get("content")))
        for m in messages[at + 1 :]
        if m.get("role") == "tool"
    ]
    return ToolResults(items)


def _call_id(messages: Sequence[Message], index: int, name: str, arguments: Any) -> str:
    body = json.dumps(
        [messages, index, name, arguments],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return "call_" + hashlib.sha256(body.encode()).hexdigest()[:24]


def _usage(messages: Sequence[Message], content: str | None, calls: int = 0) -> dict[str, int]:
    prompt = sum(len(_text(m).split()) for m in messages)
    completion = len((content or "").split()) + 8 * calls
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
