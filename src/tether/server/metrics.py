"""tether's metrics for Prometheus: a sink of ``tether.core.telemetry`` over a registry.

``tether serve`` attaches one sink per process and serves it at ``GET /metrics``
(grant ``metrics``). Each OpenTelemetry-style metric becomes a Prometheus one:
dots become underscores, a duration in seconds gets ``_seconds``, a counter
``_total`` (prometheus_client's rule), and attributes become labels::

    tether.commit.duration            tether_commit_duration_seconds{outcome}
    tether.commit.nodes               tether_commit_nodes
    tether.commit.conflicts           tether_commit_conflicts_total
    tether.transact.retries           tether_transact_retries_total
    tether.tool.duration              tether_tool_duration_seconds{gen_ai_tool_name}
    tether.runs                       tether_runs_total{status}
    gen_ai.client.operation.duration  gen_ai_client_operation_duration_seconds{...}
    gen_ai.client.token.usage         gen_ai_client_token_usage{..., gen_ai_token_type}

No label names a namespace, a thread or a user: the metrics of every namespace are
summed, so reading them reveals no tenant's names.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..core.telemetry import UNITS, Attrs, MetricKind, telemetry

__all__ = ["CONTENT_TYPE", "PrometheusSink", "process_sink"]

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST

_MODEL_LABELS: Final = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")
# The labels of each metric tether records (a Prometheus metric's labels are fixed).
LABELS: Final[Mapping[str, tuple[str, ...]]] = {
    "tether.commit.duration": ("outcome",),
    "tether.commit.nodes": (),
    "tether.commit.conflicts": (),
    "tether.transact.retries": (),
    "tether.tool.duration": ("gen_ai.tool.name",),
    "tether.runs": ("status",),
    "gen_ai.client.operation.duration": (*_MODEL_LABELS, "error.type"),
    "gen_ai.client.token.usage": (*_MODEL_LABELS, "gen_ai.token.type"),
}
# Counters; every other metric of LABELS is a histogram.
_COUNTERS: Final = frozenset({"tether.commit.conflicts", "tether.transact.retries", "tether.runs"})
_BUCKETS: Final[Mapping[str, tuple[float, ...]]] = {
    "tether.commit.nodes": (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024),
    "gen_ai.client.token.usage": (16, 64, 256, 1024, 4096, 16384, 65536, 262144),
}
_UNSAFE: Final = re.compile(r"[^a-zA-Z0-9_]")


def _name(name: str) -> str:
    out = _UNSAFE.sub("_", name)
    return out + "_seconds" if UNITS.get(name) == "s" else out


class PrometheusSink:
    """Counters and histograms in a ``CollectorRegistry``, fed by ``telemetry.record``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._metrics: dict[str, tuple[Any, tuple[str, ...]]] = {}
        self._lock = threading.Lock()
        # Every metric tether records is declared at once, so a scrape before the first
        # commit lists them all (zero where unlabelled) rather than an empty page.
        for name in LABELS:
            self._create("counter" if name in _COUNTERS else "histogram", name, {})

    def record(self, kind: MetricKind, name: str, value: float, attrs: Attrs) -> None:
        entry = self._metrics.get(name)
        if entry is None:
            entry = self._create(kind, name, attrs)
        metric, labels = entry
        if labels:
            metric = metric.labels(*(str(attrs.get(k, "")) for k in labels))
        if kind == "counter":
            metric.inc(value)
        else:
            metric.observe(value)

    def _create(self, kind: MetricKind, name: str, attrs: Attrs) -> tuple[Any, tuple[str, ...]]:
        with self._lock:
            if name in self._metrics:
                return self._metrics[name]
            labels = LABELS.get(name, tuple(sorted(attrs)))
            doc = f"tether: {name} (docs/telemetry.md)"
            names = [_UNSAFE.sub("_", k) for k in labels]
            metric: Any
            if kind == "counter":
                metric = Counter(_name(name), doc, names, registry=self.registry)
            elif name in _BUCKETS:
                metric = Histogram(
                    _name(name), doc, names, registry=self.registry, buckets=_BUCKETS[name]
                )
            else:
                metric = Histogram(_name(name), doc, names, registry=self.registry)
            self._metrics[name] = (metric, labels)
            return metric, labels

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)


_SINK: PrometheusSink | None = None


def process_sink() -> PrometheusSink:
    """This process's sink, attached to ``telemetry`` on first use."""
    global _SINK
    if _SINK is None:
        _SINK = PrometheusSink()
        telemetry.attach_sink(_SINK)
    return _SINK
