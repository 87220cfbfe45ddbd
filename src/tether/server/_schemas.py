"""JSON Schemas of the HTTP bodies, for the published OpenAPI document.

The server validates bodies with the library's own ``from_dict`` (so HTTP,
Python and the CLI refuse the same things with the same messages); these
schemas describe those shapes for clients and for schemathesis.
``tests/test_server_api.py`` checks they name exactly the dataclasses' fields.
Each is ``_object(properties, required=...)``: the shape, not JSON Schema's boilerplate.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from ..control.tasks import RUN_STATUSES
from ..control.types import MAX_PAGE, STORES, STRATEGIES
from ..core.errors import SNAPSHOT_CODES
from ..core.graph import KINDS
from .auth import GRANTS

__all__ = ["COMPONENTS", "ref"]

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(
    properties: Schema,
    *,
    required: Iterable[str] = (),
    description: str | None = None,
    closed: bool = False,
) -> Schema:
    """An object schema; ``closed``: unknown fields are refused (request bodies)."""
    out: Schema = {"type": "object"}
    if description is not None:
        out["description"] = description
    if closed:
        out["additionalProperties"] = False
    if required:
        out["required"] = list(required)
    out["properties"] = properties
    return out


def _nullable(s: Schema) -> Schema:
    return {"anyOf": [s, {"type": "null"}]}


def _or_null(type_: str) -> Schema:
    return {"type": [type_, "null"]}


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


_STR: Final[Schema] = {"type": "string"}
_INT: Final[Schema] = {"type": "integer"}
_BOOL: Final[Schema] = {"type": "boolean"}
_OBJ: Final[Schema] = {"type": "object"}
_ANY: Final[Schema] = {}
_COUNT: Final[Schema] = {"type": "integer", "minimum": 0}
_IDENT: Final[Schema] = {"type": "string", "minLength": 1, "maxLength": 200}
_NODE_ID: Final[Schema] = {"type": "string", "pattern": "^cw_[0-9a-f]{24}$"}
_RUN_STATUS: Final[Schema] = {"type": "string", "enum": list(RUN_STATUSES)}

ERROR: Final = _object(
    {
        "error": _STR,
        "code": {"type": "string", "examples": ["invalid_request", *SNAPSHOT_CODES[:3]]},
        "message": _STR,
        "details": _OBJ,
    },
    required=("error", "code", "message", "details"),
    description="Every error: the class, a stable code, what to do, and structured details.",
)

REQUEST: Final = _object(
    {
        "namespace": {"type": "string", "minLength": 1, "maxLength": 256, "default": "default"},
        "thread": _nullable(_IDENT),
        "session_id": _nullable({**_IDENT, "description": "Seed 002's name for thread."}),
        "user": _nullable(_IDENT),
        "app": {**_BOOL, "default": False},
        "run": _nullable({"type": "string", "pattern": "^[\\x21-\\x7e]{1,200}$"}),
        "variable": _nullable({"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_.-]{0,127}$"}),
        "whole_namespace": {**_BOOL, "default": False},
        "stores": {**_array({"type": "string", "enum": list(STORES)}), "default": []},
        "include_data": {**_BOOL, "default": False},
        "llm": {**_IDENT, "default": "agent"},
        "strategy": {"type": "string", "enum": list(STRATEGIES), "default": "tokens"},
        "max_messages": {"type": "integer", "minimum": 1, "default": 20},
        "max_tokens": {"type": "integer", "minimum": 1, "default": 4000},
        "preserve_recent": {"type": "integer", "minimum": 0, "default": 6},
        "summary_max_tokens": {"type": "integer", "minimum": 1, "default": 512},
        "after": {"type": "integer", "minimum": 0, "default": 0},
        "before": _nullable({"type": "integer", "minimum": 1}),
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 100},
        "descending": {**_BOOL, "default": False},
        "node": _nullable(_NODE_ID),
        "new_thread": _nullable(_IDENT),
        "snapshot": _nullable(ref("Snapshot")),
        "replace": {**_BOOL, "default": False},
        "metadata": {**_OBJ, "default": {}},
    },
    description=(
        "StateOperationRequest (seed 002's shape): one request type for every operation; "
        "the operation decides which fields apply. On /state/* it is read as seed 002 "
        "reads it: unknown fields are ignored (named in metadata.ignored_fields), null is "
        "the default and a whole number such as 20.0 is an integer."
    ),
)

NODE: Final = _object(
    {
        "id": _NODE_ID,
        "kind": {"type": "string", "enum": sorted(KINDS)},
        "parents": _array(_NODE_ID),
        "payload": _ANY,
        "createdAt": _STR,
        "sequence": {"type": "integer", "minimum": 1},
        "resourceKey": _STR,
    },
    required=("id", "kind", "parents", "payload", "createdAt", "sequence"),
)

SNAPSHOT: Final = _object(
    {
        "version": {"type": "integer", "const": 1},
        "nodes": _array(ref("Node")),
        "frontier": _array(_NODE_ID),
    },
    required=("version", "nodes", "frontier"),
    description="SPEC §1: an AgentState. Imports are validated node by node.",
)

STORE_REPORT: Final = _object(
    {
        "name": _STR,
        "scope": _or_null("string"),
        "enabled": _BOOL,
        "exists": _BOOL,
        "item_count": _or_null("integer"),
        "message_count": _or_null("integer"),
        "node_count": _or_null("integer"),
        "size_bytes": _or_null("integer"),
        "cleared": _BOOL,
        "compacted": _BOOL,
        "data": _ANY,
        "metadata": _OBJ,
        "error": _or_null("string"),
    },
    required=("name",),
)

SCOPE_CHECK: Final = _object(
    {
        "scope": _STR,
        "ok": _BOOL,
        "checked": _INT,
        "code": _or_null("string"),
        "message": _or_null("string"),
        "index": _or_null("integer"),
        "node_id": _or_null("string"),
        "erased": _INT,
    },
    required=("scope", "ok"),
)

RESULT: Final = _object(
    {
        "operation": _STR,
        "namespace": _STR,
        "scope": _or_null("string"),
        "session_id": _or_null("string"),
        "ok": _BOOL,
        "stores": _array(ref("StateStoreReport")),
        "cleared": _array(_STR),
        "compacted": _array(_STR),
        "missing": _array(_STR),
        "errors": _array(_OBJ),
        "nodes": _array(ref("Node")),
        "next_after": _or_null("integer"),
        "snapshot": _nullable(ref("Snapshot")),
        "checks": _array(ref("ScopeCheck")),
        "created": _or_null("string"),
        "metadata": _OBJ,
    },
    required=("operation", "namespace", "ok", "stores"),
    description="StateOperationResult: what one operation did or found, per store and overall.",
)

THREADS: Final = _object(
    {
        "namespace": _STR,
        "threads": _array(
            _object(
                {
                    "thread": _STR,
                    "scope": _STR,
                    "nodes": _INT,
                    "sequence": _INT,
                    "generation": _INT,
                    "size_bytes": _INT,
                    "runs": _INT,
                    "last_activity": _or_null("string"),
                }
            )
        ),
        "next_after": _or_null("string"),
    },
    required=("namespace", "threads", "next_after"),
)

RESOURCES: Final = _object(
    {
        "namespace": _STR,
        "scope": _STR,
        "prefix": _STR,
        "resources": {**_OBJ, "additionalProperties": ref("Node")},
    },
    required=("namespace", "scope", "resources"),
    description="The current node of each resource key (variables, memory) of a scope.",
)

VERSIONS: Final = _object(
    {"namespace": _STR, "scope": _STR, "key": _STR, "versions": _array(ref("Node"))},
    required=("namespace", "scope", "key", "versions"),
    description="Every version of one resource key, oldest first.",
)

WHOAMI: Final = _object(
    {
        "name": _STR,
        "grants": _array({"type": "string", "enum": [*GRANTS, "*"]}),
        "namespaces": _array(_STR),
        "agent": {**_BOOL, "description": "Whether this server runs agent steps."},
        "version": _STR,
        "trace_url": {
            **_nullable(_STR),
            "description": "Where a run's trace is shown: {trace_id} is its trace id.",
        },
    },
    required=("name", "grants", "namespaces", "agent"),
)

EXECUTION: Final = _object(
    {
        "execution_id": _STR,
        "node_actor_id": _STR,
        "status": {
            "type": "string",
            "enum": ["idle", "running", "suspended", "completed", "failed"],
        },
        "child_executor_ids": _array(_STR),
        "children": _array(_OBJ),
        "actor": _or_null("object"),
        "run": _STR,
        "kind": _STR,
        "trace_id": {
            **_STR,
            "description": "The OpenTelemetry trace the run was started in, if it was traced.",
        },
    },
    required=("execution_id", "status", "children"),
    description="Seed 000's ExecutorState of one run, with its tree of child executors.",
)

FORK: Final = _object(
    {"node": _NODE_ID, "new_thread": _nullable(_IDENT)}, required=("node",), closed=True
)

STEP_REQUEST: Final = _object(
    {
        "input": {"description": "The user's input for this turn (any JSON)."},
        "user": _nullable(_IDENT),
        "context": {**_OBJ, "description": "Reaches the run; never stored."},
        "metadata": _OBJ,
    },
    required=("input",),
    closed=True,
)

DECISION_REQUEST: Final = _object(
    {
        "call": {"type": "string", "minLength": 1, "description": "call_id or tool_call node id"},
        "reason": _nullable(_STR),
        "context": _OBJ,
        "resume": {**_BOOL, "default": True},
    },
    required=("call",),
    closed=True,
)

RESUME_REQUEST: Final = _object({"context": _OBJ}, closed=True)

PENDING_APPROVAL: Final = _object(
    {"call_id": _STR, "node_id": _NODE_ID, "name": _STR, "arguments": _OBJ},
    required=("call_id", "node_id", "name", "arguments"),
    description="A tool call waiting for a person: approve or reject it by call_id.",
)

STEP_RESULT: Final = _object(
    {
        "run_id": _STR,
        "call": _STR,
        "decision": {"type": "string", "enum": ["approved", "rejected"]},
        "thread": _STR,
        "status": {"type": "string", "enum": ["completed", "suspended", "failed", "decided"]},
        "answer": _ANY,
        "pending_approvals": _array(ref("PendingApproval")),
        "error": _or_null("object"),
    },
    required=("thread", "status"),
)

ERASURE_RESULT: Final = _object(
    {
        "operation": {"type": "string", "enum": ["erase"]},
        "namespace": _STR,
        "user": _STR,
        "keys_destroyed": _COUNT,
        "key_ids": _array(_STR),
        "threads": _COUNT,
        "unindexed_runs": _COUNT,
    },
    required=("operation", "namespace", "user", "keys_destroyed", "key_ids", "threads"),
    description="ErasureResult: the data keys destroyed (ids only) and what followed.",
)

PRUNE_REQUEST: Final = _object(
    {
        "keep_versions": {**_nullable({"type": "integer", "minimum": 1})},
        "finished_before": {**_nullable(_STR), "description": "An ISO 8601 time."},
        "compacted": {"type": "boolean", "default": True},
        "forget_runs": {
            "type": "boolean",
            "default": False,
            "description": "Forget every pruned run id so far: the record keeps no run tags;"
            " those runs are then plainly not found (not run_pruned) and leave the listing.",
        },
        "dry_run": {"type": "boolean", "default": False},
    },
    required=(),
    closed=True,
)

PRUNE_RESULT: Final = _object(
    {
        "operation": {"type": "string", "enum": ["prune"]},
        "namespace": _STR,
        "scope": _STR,
        "dry_run": {"type": "boolean"},
        "nodes": _COUNT,
        "payload_bytes": _COUNT,
        "reasons": {"type": "object", "additionalProperties": _COUNT},
        "digest": _STR,
        "runs": {
            **_COUNT,
            "description": "Runs whose goal it cut: asked for by id, each is RunPruned.",
        },
        "record": _nullable(_NODE_ID),
        "generation": _COUNT,
        "forget_runs": {"type": "boolean"},
        "forgotten_runs": {
            **_COUNT,
            "description": "forget_runs: the pruned run ids no record holds any more.",
        },
    },
    required=("operation", "namespace", "scope", "dry_run", "nodes", "payload_bytes"),
    description="PruneResult: the nodes and payload bytes removed (or, dry_run, that would be).",
)

TRANSITION: Final = _object(
    {"status": _RUN_STATUS, "at": _STR, "node": _NODE_ID},
    required=("status", "at", "node"),
    description="One status change of a run: the status it entered, when, and the node.",
)

# What TaskState and RunSummary (a run, and its entry in the run index) share.
_RUN: Final[Schema] = {
    "thread": _STR,
    "run": _STR,
    "status": _RUN_STATUS,
    "started_at": _STR,
    "updated_at": _STR,
    "metadata": _OBJ,
}

TASK_STATE: Final = _object(
    {**_RUN, "input": _ANY, "history": _array(ref("Transition"))},
    required=(*_RUN, "history"),
    description="TaskState: a run's metadata and its status history (seed 002's task module).",
)

RUN_SUMMARY: Final = _object(
    {**_RUN, "pending": _array(_object({"call_id": _STR, "name": _STR})), "seq": _INT},
    required=(*_RUN, "pending", "seq"),
    description=(
        "RunSummary: one entry of the run index (pending: what a suspended run awaits; seq: "
        "the run's first node's sequence in its thread, which orders runs started in one "
        "millisecond)."
    ),
)

RUN_LIST: Final = _object(
    {
        "namespace": _STR,
        "runs": _array(ref("RunSummary")),
        "next_after": _or_null("string"),
        "counts": {**_OBJ, "additionalProperties": _COUNT},
    },
    required=("namespace", "runs", "next_after", "counts"),
    description="RunList: a page of the run index, oldest first; counts per status.",
)

PENDING_APPROVALS: Final = _object(
    {"namespace": _STR, "thread": _STR, "pending_approvals": _array(ref("PendingApproval"))},
    required=("namespace", "thread", "pending_approvals"),
    description="The tool calls of the thread's latest run that wait for a decision.",
)

_DAYS: Final[Schema] = _nullable({"type": "number", "exclusiveMinimum": 0, "maximum": 1e6})

RETENTION_POLICY: Final = _object(
    {
        "idle_thread_days": {**_DAYS, "description": "Threads idle longer are deleted by gc."},
        "memory_ttl_days": {
            **_DAYS,
            "description": "Memories not written (or, refreshed on read, read) for longer "
            "are forgotten.",
        },
        "memory_ttl_refresh_on_read": {"type": "boolean", "default": False},
        "export_idle_threads": {"type": "boolean", "default": False},
    },
    required=(),
    closed=True,
    description="RetentionPolicy: null (or absent) keeps forever.",
)

RETENTION: Final = _object(
    {"namespace": _STR, "policy": _nullable(ref("RetentionPolicy"))},
    required=("namespace", "policy"),
    description="A namespace's retention policy (null: none, everything is kept).",
)

GC_REQUEST: Final = _object(
    {
        "dry_run": {"type": "boolean", "default": False},
        "now": {**_nullable(_STR), "description": "Judge idleness at this ISO 8601 time."},
    },
    required=(),
    closed=True,
)

GC_RESULT: Final = _object(
    {
        "operation": {"type": "string", "enum": ["gc"]},
        "namespace": _STR,
        "now": _STR,
        "policy": ref("RetentionPolicy"),
        "deleted": _array(_STR),
        "moved": _array(_STR),
        "forgotten": _array(_STR),
        "exported": _array(_STR),
        "erased": _array(_STR),
        "dry_run": _BOOL,
    },
    required=("operation", "namespace", "now", "policy", "deleted", "moved", "forgotten"),
    description=(
        "GcResult: the idle threads deleted (or, dry_run, that would be), those written "
        "meanwhile and kept (moved), the memories past their TTL forgotten; exporting, the "
        "snapshots written and the threads skipped as erased (nothing left to export)."
    ),
)

SCOPE_USAGE: Final = _object(
    {
        "scope": _STR,
        "nodes": _COUNT,
        "payload_bytes": _COUNT,
        "generation": _COUNT,
        "last_activity": _or_null("string"),
    },
    required=("scope", "nodes", "payload_bytes", "generation", "last_activity"),
    description="ScopeUsage: the nodes a scope holds, their stored payload bytes, its newest "
    "node's createdAt.",
)

NAMESPACE_USAGE: Final = _object(
    {
        "namespace": _STR,
        "scopes": _COUNT,
        "nodes": _COUNT,
        "payload_bytes": _COUNT,
        "last_activity": _or_null("string"),
    },
    required=("namespace", "scopes", "nodes", "payload_bytes", "last_activity"),
    description="NamespaceUsage: the sums over the namespace's scopes.",
)

SCOPE_USAGE_PAGE: Final = _object(
    {
        "namespace": _STR,
        "scopes": _array(ref("ScopeUsage")),
        "next_after": _or_null("string"),
    },
    required=("namespace", "scopes", "next_after"),
    description="A page of the namespace's scopes with their usage, by scope name.",
)

COMPONENTS: Final[dict[str, Schema]] = {
    "Error": ERROR,
    "StateOperationRequest": REQUEST,
    "StateOperationResult": RESULT,
    "StateStoreReport": STORE_REPORT,
    "ScopeCheck": SCOPE_CHECK,
    "Node": NODE,
    "Snapshot": SNAPSHOT,
    "Threads": THREADS,
    "Resources": RESOURCES,
    "Versions": VERSIONS,
    "WhoAmI": WHOAMI,
    "Execution": EXECUTION,
    "ForkRequest": FORK,
    "StepRequest": STEP_REQUEST,
    "DecisionRequest": DECISION_REQUEST,
    "ResumeRequest": RESUME_REQUEST,
    "PendingApproval": PENDING_APPROVAL,
    "PendingApprovals": PENDING_APPROVALS,
    "StepResult": STEP_RESULT,
    "ErasureResult": ERASURE_RESULT,
    "PruneRequest": PRUNE_REQUEST,
    "PruneResult": PRUNE_RESULT,
    "RetentionPolicy": RETENTION_POLICY,
    "Retention": RETENTION,
    "GcRequest": GC_REQUEST,
    "GcResult": GC_RESULT,
    "ScopeUsage": SCOPE_USAGE,
    "NamespaceUsage": NAMESPACE_USAGE,
    "ScopeUsagePage": SCOPE_USAGE_PAGE,
    "Transition": TRANSITION,
    "TaskState": TASK_STATE,
    "RunSummary": RUN_SUMMARY,
    "RunList": RUN_LIST,
}
