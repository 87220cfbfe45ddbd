"""The executor's spans and metrics, after OpenTelemetry's GenAI semantic conventions.

    invoke_agent {agent}       a step, resume or decision (INTERNAL)
      chat {model}             each model call (CLIENT): model, provider, token usage
      execute_tool {tool}      each tool call (INTERNAL): tool name and call id
      tether.commit            each commit (tether.store.txn)

Each helper costs one check when telemetry is off (``tether.core.telemetry``).
Message contents go on spans only with ``telemetry.configure(capture_content=True)``,
and then scrubbed of the credentials the caller supplied; nothing of a call's
context or credentials is ever an attribute.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar

import orjson

from ..core.messages import Model, ModelRequest, ModelResponse
from ..core.telemetry import NO_SPAN, AttrValue, telemetry
from ..projections.runs import StepResult
from .credentials import redact

R = TypeVar("R", StepResult, StepResult | None)
_P = ParamSpec("_P")


def invoke_agent(
    operation: str,
) -> Callable[
    [Callable[Concatenate[Any, _P], Awaitable[R]]], Callable[Concatenate[Any, _P], Awaitable[R]]
]:
    """An executor entry point in an ``invoke_agent`` span (``decide``: approve or reject)."""

    def wrap(
        fn: Callable[Concatenate[Any, _P], Awaitable[R]],
    ) -> Callable[Concatenate[Any, _P], Awaitable[R]]:
        @functools.wraps(fn)
        async def run(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> R:
            if not telemetry.enabled:
                return await fn(self, *args, **kwargs)
            op = operation
            if op == "decide":
                op = "approve" if kwargs.get("approve") else "reject"
            thread, run_id = kwargs.get("thread"), kwargs.get("run")
            with agent_span(
                self.name,
                op,
                thread if isinstance(thread, str) else None,
                run_id if isinstance(run_id, str) else None,
            ) as span:
                return ended(span, await fn(self, *args, **kwargs))

        return run

    return wrap


def agent_span(agent: str, operation: str, thread: str | None, run: str | None = None) -> Any:
    """The ``invoke_agent`` span around one entry point of the executor."""
    if not telemetry.tracing:
        return NO_SPAN
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "tether.operation": operation,
    }
    if thread is not None:
        attrs["tether.thread"] = thread
    if run is not None:
        attrs["tether.run"] = run
    return telemetry.span(f"invoke_agent {agent}", "internal", attrs)


def ended(span: Any, result: R) -> R:
    """Record what a step came to: on its span, and in the ``tether.runs`` counter."""
    if result is None:
        return result
    if span.is_recording():
        span.set_attribute("tether.run", result.run_id)
        span.set_attribute("tether.thread", result.thread)
        span.set_attribute("tether.run.status", result.status)
    telemetry.record("counter", "tether.runs", 1, {"status": result.status})
    return result


def trace_field() -> dict[str, str]:
    """``{"trace": <trace id>}`` for a goal payload while a span is recording, else {}."""
    trace = telemetry.current_trace()
    return {} if trace is None else {"trace": trace}


def describe_model(model: Model) -> tuple[str, str | None]:
    """(provider, model name) of ``model``: its ``provider`` and ``model`` attributes."""
    provider = getattr(model, "provider", None)
    name = getattr(model, "model", None)
    return (
        provider if isinstance(provider, str) else type(model).__name__,
        name if isinstance(name, str) else None,
    )


async def complete(model: Model, request: ModelRequest, secrets: Iterable[str]) -> ModelResponse:
    """``model.complete(request)`` in a ``chat`` span, with its duration as a metric."""
    if not telemetry.enabled:
        return await model.complete(request)
    provider, name = describe_model(model)
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": provider,
        "gen_ai.provider.name": provider,
    }
    if name is not None:
        attrs["gen_ai.request.model"] = name
    metric = {k: v for k, v in attrs.items() if k != "gen_ai.system"}
    start = time.perf_counter()
    with telemetry.span(f"chat {name}" if name else "chat", "client", attrs) as span:
        try:
            response = await model.complete(request)
        except Exception as e:
            metric["error.type"] = type(e).__name__
            raise
        finally:
            telemetry.record(
                "histogram", "gen_ai.client.operation.duration", time.perf_counter() - start, metric
            )
        usage = response.usage
        tokens = {
            "input": usage.get("input_tokens", usage.get("prompt_tokens")),
            "output": usage.get("output_tokens", usage.get("completion_tokens")),
        }
        for kind, count in tokens.items():
            if isinstance(count, int):
                telemetry.record(
                    "histogram",
                    "gen_ai.client.token.usage",
                    count,
                    {**metric, "gen_ai.token.type": kind},
                )
        if span.is_recording():
            for kind, count in tokens.items():
                if isinstance(count, int):
                    span.set_attribute(f"gen_ai.usage.{kind}_tokens", count)
            # The protocol has no finish reason: a response that calls tools stopped for them.
            span.set_attribute(
                "gen_ai.response.finish_reasons", ["tool_calls" if response.tool_calls else "stop"]
            )
            if telemetry.capture_content:
                out: dict[str, Any] = {"role": "assistant", "content": response.content}
                if response.tool_calls:
                    out["tool_calls"] = [
                        {"id": c.id, "name": c.name, "arguments": c.arguments}
                        for c in response.tool_calls
                    ]
                span.set_attribute("gen_ai.input.messages", _json(request.messages, secrets))
                span.set_attribute("gen_ai.output.messages", _json([out], secrets))
    return response


def tool_call(
    run: Awaitable[None], *, tool: str, call_id: str, arguments: Any, secrets: Iterable[str]
) -> Awaitable[None]:
    """``run`` (one tool call, its result committed) in an ``execute_tool`` span."""
    if not telemetry.enabled:
        return run
    return _tool_call(run, tool, call_id, arguments, list(secrets))


async def _tool_call(
    run: Awaitable[None], tool: str, call_id: str, arguments: Any, secrets: list[str]
) -> None:
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id,
    }
    if telemetry.capture_content and telemetry.tracing:
        attrs["gen_ai.tool.call.arguments"] = _json(arguments, secrets)
    start = time.perf_counter()
    with telemetry.span(f"execute_tool {tool}", "internal", attrs):
        try:
            await run
        finally:
            telemetry.record(
                "histogram",
                "tether.tool.duration",
                time.perf_counter() - start,
                {"gen_ai.tool.name": tool},
            )


def tool_failed() -> None:
    """Mark the current ``execute_tool`` span failed (the result the model sees is an error).
    No description: the error text may quote the tool's input."""
    span = telemetry.current_span()
    if span.is_recording():
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", "tool_error")
        span.set_status(Status(StatusCode.ERROR))


def _json(value: Any, secrets: Iterable[str]) -> str:
    return orjson.dumps(redact(value, secrets), default=str).decode()
