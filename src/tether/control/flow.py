"""Flow state (seed 002's ``flow`` module): a spec's progress and its run-scoped variables.

Derived, never stored on its own: a run's progress is what the planner reads
(``tether.projections.runs.RunView``) from the run's nodes: the spec nodes it visited
in order, the node it stands at when unfinished, and each loop's iteration (loop
records, docs/graph-encoding.md); its variables are the ``run:<run>:var:<name>``
resources of the thread. The control plane reports it as the ``flow`` store and
resets it by deleting the run variables and ending unfinished runs (so the next
step starts the spec from its start node).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.graph import CausalNode
from ..projections.runs import run_views

__all__ = ["FlowState", "flow_states"]


@dataclass(frozen=True, kw_only=True, slots=True)
class FlowState:
    """One run's progress through its spec."""

    run: str
    status: str
    path: tuple[str, ...] = ()  # spec nodes executed, in order (loop records excluded)
    current: str | None = None  # the node an unfinished run stands at
    loops: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> iteration, done
    variables: dict[str, Any] = field(default_factory=dict)  # run-scoped variables

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "status": self.status,
            "path": list(self.path),
            "current": self.current,
            "loops": {k: dict(v) for k, v in self.loops.items()},
            "variables": dict(self.variables),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlowState:
        return cls(
            run=str(data["run"]),
            status=str(data["status"]),
            path=tuple(data.get("path") or ()),
            current=data.get("current"),
            loops={str(k): dict(v) for k, v in (data.get("loops") or {}).items()},
            variables=dict(data.get("variables") or {}),
        )


def flow_states(
    nodes: list[CausalNode], run_variables: Mapping[str, CausalNode]
) -> list[FlowState]:
    """Each run's progress, oldest first, from a thread's nodes (in sequence order) and its
    ``run:<run>:var:<name>`` resource heads. Pure."""
    views = run_views(nodes)
    variables: dict[str, dict[str, Any]] = {}
    for key, node in run_variables.items():
        run, sep, name = key[4:].partition(":var:")
        p = node.payload
        if sep and isinstance(p, dict) and not p.get("deleted"):
            variables.setdefault(run, {})[name] = p.get("value")
    out = []
    for run, view in views.items():
        last = view.visits[-1] if view.visits else None
        out.append(
            FlowState(
                run=run,
                status=view.status,
                path=tuple(v.node for v in view.visits if v.kind != "loop"),
                current=None if view.finished or last is None else last.node,
                loops={
                    name: {"iteration": v.iteration, "done": v.done}
                    for name, v in view.loops.items()
                },
                variables=variables.get(run, {}),
            )
        )
    return out
