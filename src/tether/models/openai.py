"""OpenAIModel: a client for OpenAI-compatible chat completions (OpenAI, vLLM, Ollama ...).

    model = OpenAIModel("http://localhost:11434/v1", model="llama3.1", memory_tool=True)
    response = await model.complete(ModelRequest(messages=[{"role": "user", "content": "Hi"}]))

Conversion
    tether messages become OpenAI messages (assistant ``tool_calls`` with JSON-string
    arguments, ``tool`` messages with ``tool_call_id``), tools become
    ``{"type": "function", "function": {...}}``. In the response, tool-call arguments
    are JSON-decoded; arguments that are not a JSON object raise
    ``ModelBadArgumentsError`` (with the tool name, call id and raw text in
    ``details``). Usage is the server's ``usage`` (integer fields).

Memory
    ``request.memory`` is shown to the model as a system message after the leading
    system messages (``memory_prompt=False`` leaves that to the caller). With
    ``memory_tool=True`` the model is offered a reserved function, ``tether_remember``
    (``{type, key, content}``); its calls come back as ``ModelResponse.memories``,
    not as tool calls. If a response holds nothing but memory calls, the client
    acknowledges them and asks again (at most ``MAX_MEMORY_ROUNDS`` times), so the
    caller always gets an answer or real tool calls.

Failures
    429, 5xx, connection failures and connect timeouts are retried ``max_retries``
    times, waiting ``backoff * 2**attempt`` seconds (a little jitter, at most
    ``max_backoff``), or what the server's ``Retry-After`` / ``retry-after-ms`` asks
    for (also capped at ``max_backoff``). Other 4xx fail at once. A response that does
    not arrive within ``timeout`` raises ``ModelTimeoutError`` without a retry: the
    server may have done the work, and the caller's time is spent. ``timeout``
    applies to each network operation (connect, write, each read), as in httpx.

Connections
    ``async with OpenAIModel(...) as model:`` keeps one connection pool for the
    block; outside such a block each call opens and closes its own, so a model
    object can be used from any event loop and never leaks sockets. An
    ``httpx.AsyncClient`` passed as ``client=`` is used as is and never closed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx

from ..core import strict_json
from ..core.canonical import CanonicalError
from ..core.graph import DEFAULT_LIMITS
from ..core.messages import MemoryWrite, Message, ModelRequest, ModelResponse, ToolCall, ToolSpec
from ..core.vocab import BUILTIN_NODE_TYPES, NodeType
from ._http import BODY_EXCERPT, Retries, post_json
from .errors import (
    ModelBadArgumentsError,
    ModelBadResponseError,
    ModelConfigError,
)

__all__ = ["MAX_MEMORY_ROUNDS", "MEMORY_TOOL", "OpenAIModel"]

log = logging.getLogger("tether.models")

MEMORY_TOOL = "tether_remember"
MAX_MEMORY_ROUNDS = 3


@dataclass(frozen=True, kw_only=True, slots=True)
class _Parsed:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    memories: list[MemoryWrite] = field(default_factory=list)
    memory_calls: list[dict[str, Any]] = field(default_factory=list)  # as sent, to acknowledge
    usage: dict[str, int] = field(default_factory=dict)


class OpenAIModel:
    """A ``Model`` over an OpenAI-compatible ``/chat/completions`` endpoint."""

    provider = "openai"  # gen_ai.provider.name in traces (docs/telemetry.md)

    def __init__(
        self,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        *,
        model: str = "gpt-4o-mini",
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        memory_tool: bool = False,
        memory_types: Iterable[NodeType | str] | None = None,
        memory_prompt: bool = True,
        options: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if timeout <= 0 or max_retries < 0 or backoff < 0 or max_backoff < 0:
            raise ModelConfigError(
                "timeout must be > 0; max_retries, backoff and max_backoff >= 0",
                timeout=timeout,
                max_retries=max_retries,
                backoff=backoff,
                max_backoff=max_backoff,
            )
        url = base_url.rstrip("/")
        self.url = url if url.endswith("/chat/completions") else url + "/chat/completions"
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.memory_tool = memory_tool
        self.memory_types: tuple[NodeType, ...] = tuple(
            t if isinstance(t, NodeType) else NodeType(name=t)
            for t in (BUILTIN_NODE_TYPES if memory_types is None else memory_types)
        )
        self.memory_prompt = memory_prompt
        # Extra body fields sent with every request: temperature, seed, top_p ...
        self.options = dict(options or {})
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._headers.update(headers or {})
        self._client = client
        self._owns_client = False

    def __repr__(self) -> str:
        return f"OpenAIModel({self.url!r}, model={self.model!r})"

    async def __aenter__(self) -> OpenAIModel:
        if self._client is None:
            self._client = self._new_client()
            self._owns_client = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool opened by ``async with`` (a passed ``client`` stays open)."""
        if self._owns_client and self._client is not None:
            client, self._client, self._owns_client = self._client, None, False
            await client.aclose()

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), headers=self._headers)

    # -- the protocol

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self._client is not None:
            return await self._complete(self._client, request)
        async with self._new_client() as client:
            return await self._complete(client, request)

    async def _complete(self, client: httpx.AsyncClient, request: ModelRequest) -> ModelResponse:
        body = self.request_body(request)
        memories: list[MemoryWrite] = []
        usage: dict[str, int] = {}
        for _ in range(MAX_MEMORY_ROUNDS + 1):
            parsed = self._parse(await self._post(client, body))
            memories += parsed.memories
            for k, v in parsed.usage.items():
                usage[k] = usage.get(k, 0) + v
            if parsed.content or parsed.tool_calls or not parsed.memory_calls:
                break
            # Only memory calls: a server expects their results before it answers.
            body = {
                **body,
                "messages": [
                    *body["messages"],
                    {"role": "assistant", "content": None, "tool_calls": parsed.memory_calls},
                    *(
                        {"role": "tool", "tool_call_id": c["id"], "content": "saved"}
                        for c in parsed.memory_calls
                    ),
                ],
            }
        return ModelResponse(
            content=parsed.content,
            tool_calls=parsed.tool_calls,
            memories=memories,
            usage=usage,
        )

    # -- pure conversion (no I/O)

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of the chat-completions call for ``request``."""
        messages = [_to_openai(m) for m in request.messages]
        if self.memory_prompt and request.memory:
            at = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
            messages.insert(at, {"role": "system", "content": _memory_prompt(request.memory)})
        tools = [_tool(t) for t in request.tools]
        if self.memory_tool:
            if any(t.name == MEMORY_TOOL for t in request.tools):
                raise ModelConfigError(
                    f"the tool name {MEMORY_TOOL!r} is reserved for memory writes; rename the tool"
                )
            tools.append(self._memory_tool_spec())
        body: dict[str, Any] = {**self.options, "model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        return body

    def _parse(self, data: Any) -> _Parsed:
        """Content, tool calls, memory writes and usage of a chat-completions response."""
        try:
            message = data["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError
        except (KeyError, IndexError, TypeError):
            raise ModelBadResponseError(
                "the model server's response has no choices[0].message; "
                "is base_url an OpenAI-compatible /v1 endpoint?",
                body=_excerpt(data),
            ) from None
        content = message.get("content")
        if isinstance(content, list):  # some servers return content parts
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if content is not None and not isinstance(content, str):
            raise ModelBadResponseError("message content is not text", body=_excerpt(data))
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise ModelBadResponseError("message tool_calls is not a list", body=_excerpt(data))
        calls: list[ToolCall] = []
        memories: list[MemoryWrite] = []
        memory_calls: list[dict[str, Any]] = []
        for index, raw in enumerate(raw_calls):
            call_id, name, arguments, as_sent = _parse_call(raw, index, data)
            if self.memory_tool and name == MEMORY_TOOL:
                memories.append(_memory_write(call_id, arguments))
                memory_calls.append(as_sent)
            else:
                calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        usage = data.get("usage") if isinstance(data, dict) else None
        return _Parsed(
            content=content,
            tool_calls=calls,
            memories=memories,
            memory_calls=memory_calls,
            usage={
                k: v
                for k, v in (usage if isinstance(usage, dict) else {}).items()
                if isinstance(v, int) and not isinstance(v, bool)
            },
        )

    def _memory_tool_spec(self) -> dict[str, Any]:
        kinds = "\n".join(f"- {t.name}: {t.description}".rstrip(": ") for t in self.memory_types)
        return _tool(
            ToolSpec(
                name=MEMORY_TOOL,
                description=(
                    "Save something worth remembering in later conversations (a fact about "
                    "the user, a preference ...). Call it in the same response as your answer "
                    "or other tool calls. Saving the same type and key again replaces the "
                    f"memory. Types:\n{kinds}"
                ),
                parameters={
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": [t.name for t in self.memory_types]},
                        "key": {
                            "type": "string",
                            "description": "A short stable name, e.g. 'name' or 'favorite_color'.",
                        },
                        "content": {"type": "string", "description": "What to remember."},
                    },
                    "required": ["type", "key", "content"],
                },
            )
        )

    # -- I/O

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> Any:
        try:
            payload = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise ModelConfigError(f"the request cannot be sent as JSON: {exc}") from None
        retries = Retries(self.timeout, self.max_retries, self.backoff, self.max_backoff)
        return await post_json(
            client,
            self.url,
            payload,
            self._headers,
            retries,
            timeout_hint="; raise timeout for slow models",
        )


# --------------------------------------------------------------------------- helpers


def _to_openai(message: Message) -> dict[str, Any]:
    role = message.get("role")
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            out["tool_calls"] = [
                {
                    "id": tc["id"],
                    "type": "function",
                    "function": {
                        "name": tc["name"],
                        "arguments": json.dumps(tc.get("arguments") or {}, ensure_ascii=False),
                    },
                }
                for tc in message["tool_calls"]
            ]
        elif out["content"] is None:
            out["content"] = ""
        return out
    if role == "tool":
        content = message.get("content")
        return {
            "role": "tool",
            "tool_call_id": message.get("tool_call_id"),
            "content": content
            if isinstance(content, str)
            else json.dumps(content, ensure_ascii=False, default=str),
        }
    if role not in ("system", "user", "developer"):
        raise ModelConfigError(
            f"unknown message role {role!r}; use system, user, assistant or tool"
        )
    out = {"role": role, "content": message.get("content") or ""}
    if message.get("name"):
        out["name"] = message["name"]
    return out


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def _memory_prompt(memory: Mapping[str, Any]) -> str:
    lines = "\n".join(
        f"- {key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
        for key, value in memory.items()
    )
    return f"What you remember from earlier conversations (type:key: content):\n{lines}"


def _parse_call(raw: Any, index: int, data: Any) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    function = raw.get("function") if isinstance(raw, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(function, dict) or not isinstance(name, str) or not name:
        raise ModelBadResponseError(f"tool call #{index} has no function name", body=_excerpt(data))
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        # Some servers omit ids; derive a stable one so results can still be matched.
        digest = hashlib.sha256(json.dumps([index, raw], sort_keys=True).encode()).hexdigest()
        call_id = "call_" + digest[:24]
    text = function.get("arguments")
    if text is None or text == "":
        arguments: Any = {}
    elif isinstance(text, dict):  # some servers send an object, not a JSON string
        arguments = text
    elif isinstance(text, str):
        try:
            # tether's JSON policy (strict_json): a duplicate key, an integer beyond
            # ±(2**53-1) or NaN is refused with its code, never read one way of several.
            arguments = strict_json.loads(text, max_depth=DEFAULT_LIMITS.max_depth)
        except CanonicalError as exc:
            raise ModelBadArgumentsError(
                f"the model called {name!r} with arguments that are not exact JSON ({exc})",
                code="model_bad_arguments",
                reason=exc.code,
                tool=name,
                tool_call_id=call_id,
                arguments=text,
            ) from None
    else:
        arguments = text
    if not isinstance(arguments, dict):
        raise ModelBadArgumentsError(
            f"the model called {name!r} with arguments that are not a JSON object",
            tool=name,
            tool_call_id=call_id,
            arguments=text if isinstance(text, str) else json.dumps(text),
        )
    as_sent = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }
    return call_id, name, arguments, as_sent


def _memory_write(call_id: str, arguments: dict[str, Any]) -> MemoryWrite:
    kind, key = arguments.get("type", "memory"), arguments.get("key")
    if (
        not isinstance(kind, str)
        or not isinstance(key, str)
        or not key
        or "content" not in arguments
    ):
        raise ModelBadArgumentsError(
            f"{MEMORY_TOOL} needs string 'type' and 'key' and a 'content'",
            tool=MEMORY_TOOL,
            tool_call_id=call_id,
            arguments=json.dumps(arguments, ensure_ascii=False, default=str),
        )
    return MemoryWrite(type=kind, key=key, content=arguments["content"])


def _excerpt(data: Any) -> str:
    try:
        return json.dumps(data, ensure_ascii=False, default=str)[:BODY_EXCERPT]
    except ValueError:
        return repr(data)[:BODY_EXCERPT]
