"""Errors of the runtime.

    TetherError                          (tether.core.errors)
    ├── InvalidRequest
    │   ├── ApprovalError                "approval"        no such pending tool call to approve/reject
    │   └── RunSuspendedError            "run_suspended"   the thread waits for an approval first
    └── AgentError                       "agent"
        ├── SpecError                    "spec"            a spec that cannot run (bad node, edge, template)
        ├── TemplateError                "template"        a template failed while rendering
        │   └── ConditionError           "condition"       an edge condition failed (never a silent False)
        ├── ToolDefinitionError          "tool_definition" a function that cannot become a tool
        └── StepLimitError               "step_limit"      a run took more steps than the agent allows

Errors raised while a run executes (templates, conditions, step limits, model
failures) end the run with a ``protocol_error`` node and come back in
``StepResult.error``; errors in the caller's own input (a bad spec, an unknown
thread, approving what is not pending) raise and write nothing.
"""

from __future__ import annotations

from typing import ClassVar

from ..core.errors import InvalidRequest, TetherError


class AgentError(TetherError):
    """Root of the runtime's own errors."""

    default_code: ClassVar[str] = "agent"


class SpecError(AgentError):
    """The agent spec is invalid. Nothing ran; fix the spec (the message names the node)."""

    default_code = "spec"


class TemplateError(AgentError):
    """A template failed to render: an unknown name (StrictUndefined), a sandbox violation..."""

    default_code = "template"


class ConditionError(TemplateError):
    """An edge condition raised. The run fails with this error instead of taking the edge."""

    default_code = "condition"


class ToolDefinitionError(AgentError):
    """A function cannot be turned into a tool (unsupported annotation, bad name...)."""

    default_code = "tool_definition"


class StepLimitError(AgentError):
    """A run exceeded ``max_steps`` node executions or ``max_tool_rounds`` model rounds."""

    default_code = "step_limit"


class ApprovalError(InvalidRequest):
    """Approve/reject named a tool call that is not waiting for a decision."""

    default_code = "approval"


class RunSuspendedError(InvalidRequest):
    """A new step was asked for while the thread's run waits for approvals.

    ``details["pending"]`` lists the pending calls; approve or reject them first.
    """

    default_code = "run_suspended"
