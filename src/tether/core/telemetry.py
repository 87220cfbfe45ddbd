"""OpenTelemetry traces and metrics for tether, off unless an SDK is configured.

Every layer reports through the one ``telemetry`` object here::

    with telemetry.span("tether.commit", attrs={"tether.namespace": ns}) as span:
        ...
        span.set_attribute("tether.nodes", 3)
    telemetry.record("histogram", "tether.commit.duration", 0.004)

Tracing is on when ``opentelemetry-api`` is importable and either a real tracer
provider is installed globally (``trace.set_tracer_provider(TracerProvider())``,
not the API's default proxy) or ``telemetry.configure(...)`` was called. Metrics
go to the sinks attached with ``attach_sink`` (the server's Prometheus exporter)
and, when a real meter provider is set, to OpenTelemetry's metrics API.

Off, a span is one shared no-op object and nothing of OpenTelemetry is imported:
tether never imports ``opentelemetry`` itself until someone else has (an SDK being
configured imports it first), so the check is a dictionary look-up in
``sys.modules``. Message contents are recorded only with
``configure(capture_content=True)`` (the GenAI conventions' opt-in), and callers
pass attributes already stripped of credentials.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, Literal, Protocol

__all__ = ["NO_SPAN", "AttrValue", "Attrs", "MetricSink", "Span", "Telemetry", "telemetry"]

AttrValue = str | bool | int | float | list[str] | list[int] | list[float] | list[bool]
Attrs = Mapping[str, AttrValue]
SpanKind = Literal["internal", "client", "server"]
MetricKind = Literal["counter", "histogram"]

# What each metric counts, and its unit, for the OpenTelemetry instruments.
UNITS: Final[dict[str, str]] = {
    "tether.commit.duration": "s",
    "tether.commit.nodes": "{node}",
    "tether.commit.conflicts": "{conflict}",
    "tether.transact.retries": "{retry}",
    "tether.tool.duration": "s",
    "tether.runs": "{run}",
    "gen_ai.client.operation.duration": "s",
    "gen_ai.client.token.usage": "{token}",
}


class Span(Protocol):
    """What tether calls on a span (an OpenTelemetry span, or ``NO_SPAN``)."""

    def set_attribute(self, key: str, value: Any) -> Any: ...
    def is_recording(self) -> bool: ...


class MetricSink(Protocol):
    """Receives every metric point: ``record(kind, name, value, attrs)``."""

    def record(self, kind: MetricKind, name: str, value: float, attrs: Attrs) -> None: ...


class _NoSpan:
    """The span when tracing is off: a context manager and a span that records nothing."""

    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def is_recording(self) -> bool:
        return False


NO_SPAN: Final = _NoSpan()
_UNKNOWN: Final = object()


class Telemetry:
    """tether's tracer and meter: see the module docstring. One instance, ``telemetry``."""

    def __init__(self) -> None:
        self.capture_content = False
        self.sinks: tuple[MetricSink, ...] = ()
        self._configured = False
        self._tracer_provider: Any = None  # explicit, from configure(); else the global one
        self._meter_provider: Any = None
        self._tracers: tuple[Any, Any] = (None, None)  # (provider, its tether tracer)
        self._meters: tuple[Any, Any, dict[str, Any]] = (None, None, {})

    # -- configuration

    def configure(
        self,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        *,
        capture_content: bool = False,
    ) -> None:
        """Turn telemetry on: spans go to ``tracer_provider`` (default: the global one) and
        metrics to ``meter_provider`` (default: the global one). ``capture_content``
        records message contents and tool arguments and results on spans (off by default:
        they may hold personal data). Needs ``opentelemetry-api`` (``tether[otel]``)."""
        from opentelemetry import trace  # noqa: F401  (fails early, and loudly, without it)

        self._configured = True
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self.capture_content = capture_content
        self._tracers = (None, None)
        self._meters = (None, None, {})

    def reset(self) -> None:
        """Back to the default: spans only when a real global provider is installed.
        Attached sinks stay attached."""
        sinks = self.sinks
        self.__init__()  # type: ignore[misc]
        self.sinks = sinks

    def attach_sink(self, sink: MetricSink) -> None:
        """Send every metric point to ``sink`` too (idempotent)."""
        if sink not in self.sinks:
            self.sinks = (*self.sinks, sink)

    def detach_sink(self, sink: MetricSink) -> None:
        self.sinks = tuple(s for s in self.sinks if s is not sink)

    # -- state

    def _tracer(self) -> Any:
        """The tether tracer, or None when tracing is off."""
        if self._configured:
            provider = self._tracer_provider
            if provider is None:
                from opentelemetry import trace

                provider = trace.get_tracer_provider()
        else:
            mod = sys.modules.get("opentelemetry.trace")
            if mod is None:
                return None  # nobody imported OpenTelemetry: no SDK can be configured
            # The global provider as set_tracer_provider() left it (None: not set). Read
            # directly: get_tracer_provider() consults os.environ on every call (~1 µs).
            provider = getattr(mod, "_TRACER_PROVIDER", _UNKNOWN)
            if provider is None:
                return None
            if provider is _UNKNOWN:  # an API version without the global: ask it
                provider = mod.get_tracer_provider()
        cached, tracer = self._tracers
        if provider is cached:
            return tracer
        if type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):
            tracer = None
        else:
            from .. import __version__

            tracer = provider.get_tracer("tether", __version__)
        self._tracers = (provider, tracer)
        return tracer

    def _meter(self) -> Any:
        """The tether meter, or None when no meter provider is set."""
        provider = self._meter_provider
        if provider is None:
            mod = sys.modules.get("opentelemetry.metrics._internal")
            if mod is None:
                return None
            provider = getattr(mod, "_METER_PROVIDER", _UNKNOWN)
            if provider is None:
                return None
            if provider is _UNKNOWN:
                provider = mod.get_meter_provider()
        cached, meter, _ = self._meters
        if provider is cached:
            return meter
        if type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider"):
            meter = None
        else:
            from .. import __version__

            meter = provider.get_meter("tether", __version__)
        self._meters = (provider, meter, {})
        return meter

    @property
    def tracing(self) -> bool:
        """Whether spans are recorded now."""
        return self._tracer() is not None

    @property
    def enabled(self) -> bool:
        """Whether anything (spans or metrics) is recorded now."""
        return bool(self.sinks) or self._tracer() is not None or self._meter() is not None

    # -- spans

    def span(self, name: str, kind: SpanKind = "internal", attrs: Attrs | None = None) -> Any:
        """A context manager: the span ``name``, current while inside (its children nest
        under it, across ``await`` and ``asyncio.gather`` too); ``NO_SPAN`` when off."""
        tracer = self._tracer()
        if tracer is None:
            return NO_SPAN
        return self._real_span(tracer, name, kind, attrs)

    @contextmanager
    def _real_span(
        self, tracer: Any, name: str, kind: SpanKind, attrs: Attrs | None
    ) -> Iterator[Any]:
        from opentelemetry.trace import SpanKind as Kind

        with tracer.start_as_current_span(
            name, kind=getattr(Kind, kind.upper()), attributes=dict(attrs or {})
        ) as span:
            yield span

    def current_span(self) -> Any:
        """The span current here (``NO_SPAN`` when tracing is off)."""
        if self._tracer() is None:
            return NO_SPAN
        from opentelemetry import trace

        return trace.get_current_span()

    def current_trace(self) -> str | None:
        """The current trace id (32 hex digits), or None when not in a recorded span."""
        if self._tracer() is None:
            return None
        from opentelemetry import trace

        ctx = trace.get_current_span().get_span_context()
        return format(ctx.trace_id, "032x") if ctx.is_valid else None

    def inject_headers(self, headers: dict[str, str]) -> dict[str, str]:
        """``headers`` with the current trace context (W3C ``traceparent``) added, as a new
        dict; ``headers`` itself when tracing is off."""
        if self._tracer() is None:
            return headers
        from opentelemetry import propagate

        out = dict(headers)
        propagate.inject(out)
        return out

    def continued(self, headers: Mapping[str, str]) -> Any:
        """A context manager: inside it, the trace that ``headers`` (W3C ``traceparent``,
        ``tracestate``) name is current, so the spans made there join the caller's trace.
        A no-op when tracing is off or no ``traceparent`` came."""
        if "traceparent" not in headers or self._tracer() is None:
            return NO_SPAN
        return self._continued(headers)

    @contextmanager
    def _continued(self, headers: Mapping[str, str]) -> Iterator[None]:
        from opentelemetry import context, propagate

        token = context.attach(propagate.extract(dict(headers)))
        try:
            yield
        finally:
            context.detach(token)

    # -- metrics

    def record(self, kind: MetricKind, name: str, value: float, attrs: Attrs | None = None) -> None:
        """Add ``value`` to counter ``name``, or a point to histogram ``name``."""
        a: Attrs = attrs or {}
        for sink in self.sinks:
            sink.record(kind, name, value, a)
        meter = self._meter()
        if meter is None:
            return
        instruments = self._meters[2]
        inst = instruments.get(name)
        if inst is None:
            unit = UNITS.get(name, "")
            make = meter.create_counter if kind == "counter" else meter.create_histogram
            inst = instruments[name] = make(name, unit=unit)
        if kind == "counter":
            inst.add(value, dict(a))
        else:
            inst.record(value, dict(a))


telemetry: Final = Telemetry()
