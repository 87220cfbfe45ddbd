"""JSON Schemas of the HTTP bodies, for the published OpenAPI document.

The server validates bodies with the library's own ``from_dict`` (so HTTP,
Python and the CLI refuse the same things with the same messages); these
schemas describe those shapes for clients and for schemathesis.
``tests/test_server_api.py`` checks they name exactly the dataclasses' fields.
"""

from __future__ import annotations

from typing import Any, Final

from .._errors import SNAPSHOT_CODES
from .._graph import KINDS
from ..control.types import MAX_PAGE, STORES, STRATEGIES
from .auth import GRANTS

__all__ = ["COMPONENTS", "ref"]

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(s: Schema) -> Schema:
    return {"anyOf": [s, {"type": "null"}]}


_IDENT: Final[Schema] = {"type": "string", "minLength": 1, "maxLength": 200}
_NODE_ID: Final[Schema] = {"type": "string", "pattern": "^cw_[0-9a-f]{24}$"}

ERROR: Final[Schema] = {
    "type": "object",
    "description": "Every error: the class, a stable code, what to do, and structured details.",
    "required": ["error", "code", "message", "details"],
    "properties": {
        "error": {"type": "string"},
        "code": {"type": "string", "examples": ["invalid_request", *SNAPSHOT_CODES[:3]]},
        "message": {"type": "string"},
        "details": {"type": "object"},
    },
}

REQUEST: Final[Schema] = {
    "type": "object",
    "description": (
        "StateOperationRequest (seed 002's shape): one request type for every operation; "
        "the operation decides which fields apply. Unknown fields are refused."
    ),
    "additionalProperties": False,
    "properties": {
        "namespace": {"type": "string", "minLength": 1, "maxLength": 256, "default": "default"},
        "thread": _nullable(_IDENT),
        "session_id": _nullable({**_IDENT, "description": "Seed 002's name for thread."}),
        "user": _nullable(_IDENT),
        "app": {"type": "boolean", "default": False},
        "run": _nullable({"type": "string", "pattern": "^[\\x21-\\x7e]{1,200}$"}),
        "variable": _nullable({"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_.-]{0,127}$"}),
        "whole_namespace": {"type": "boolean", "default": False},
        "stores": {
            "type": "array",
            "items": {"type": "string", "enum": list(STORES)},
            "default": [],
        },
        "include_data": {"type": "boolean", "default": False},
        "llm": {**_IDENT, "default": "agent"},
        "strategy": {"type": "string", "enum": list(STRATEGIES), "default": "tokens"},
        "max_messages": {"type": "integer", "minimum": 1, "default": 20},
        "max_tokens": {"type": "integer", "minimum": 1, "default": 4000},
        "preserve_recent": {"type": "integer", "minimum": 0, "default": 6},
        "summary_max_tokens": {"type": "integer", "minimum": 1, "default": 512},
        "after": {"type": "integer", "minimum": 0, "default": 0},
        "before": _nullable({"type": "integer", "minimum": 1}),
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 100},
        "descending": {"type": "boolean", "default": False},
        "node": _nullable(_NODE_ID),
        "new_thread": _nullable(_IDENT),
        "snapshot": _nullable(ref("Snapshot")),
        "replace": {"type": "boolean", "default": False},
        "metadata": {"type": "object", "default": {}},
    },
}

NODE: Final[Schema] = {
    "type": "object",
    "required": ["id", "kind", "parents", "payload", "createdAt", "sequence"],
    "properties": {
        "id": _NODE_ID,
        "kind": {"type": "string", "enum": sorted(KINDS)},
        "parents": {"type": "array", "items": _NODE_ID},
        "payload": {},
        "createdAt": {"type": "string"},
        "sequence": {"type": "integer", "minimum": 1},
        "resourceKey": {"type": "string"},
    },
}

SNAPSHOT: Final[Schema] = {
    "type": "object",
    "description": "SPEC §1: an AgentState. Imports are validated node by node.",
    "required": ["version", "nodes", "frontier"],
    "properties": {
        "version": {"type": "integer", "const": 1},
        "nodes": {"type": "array", "items": ref("Node")},
        "frontier": {"type": "array", "items": _NODE_ID},
    },
}

STORE_REPORT: Final[Schema] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "scope": {"type": ["string", "null"]},
        "enabled": {"type": "boolean"},
        "exists": {"type": "boolean"},
        "item_count": {"type": ["integer", "null"]},
        "message_count": {"type": ["integer", "null"]},
        "node_count": {"type": ["integer", "null"]},
        "size_bytes": {"type": ["integer", "null"]},
        "cleared": {"type": "boolean"},
        "compacted": {"type": "boolean"},
        "data": {},
        "metadata": {"type": "object"},
        "error": {"type": ["string", "null"]},
    },
}

SCOPE_CHECK: Final[Schema] = {
    "type": "object",
    "required": ["scope", "ok"],
    "properties": {
        "scope": {"type": "string"},
        "ok": {"type": "boolean"},
        "checked": {"type": "integer"},
        "code": {"type": ["string", "null"]},
        "message": {"type": ["string", "null"]},
        "index": {"type": ["integer", "null"]},
        "node_id": {"type": ["string", "null"]},
    },
}

RESULT: Final[Schema] = {
    "type": "object",
    "description": "StateOperationResult: what one operation did or found, per store and overall.",
    "required": ["operation", "namespace", "ok", "stores"],
    "properties": {
        "operation": {"type": "string"},
        "namespace": {"type": "string"},
        "scope": {"type": ["string", "null"]},
        "ok": {"type": "boolean"},
        "stores": {"type": "array", "items": ref("StateStoreReport")},
        "cleared": {"type": "array", "items": {"type": "string"}},
        "compacted": {"type": "array", "items": {"type": "string"}},
        "missing": {"type": "array", "items": {"type": "string"}},
        "errors": {"type": "array", "items": {"type": "object"}},
        "nodes": {"type": "array", "items": ref("Node")},
        "next_after": {"type": ["integer", "null"]},
        "snapshot": {"anyOf": [ref("Snapshot"), {"type": "null"}]},
        "checks": {"type": "array", "items": ref("ScopeCheck")},
        "created": {"type": ["string", "null"]},
        "metadata": {"type": "object"},
    },
}

THREADS: Final[Schema] = {
    "type": "object",
    "required": ["namespace", "threads", "next_after"],
    "properties": {
        "namespace": {"type": "string"},
        "threads": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "thread": {"type": "string"},
                    "scope": {"type": "string"},
                    "nodes": {"type": "integer"},
                    "generation": {"type": "integer"},
                    "size_bytes": {"type": "integer"},
                    "runs": {"type": "integer"},
                },
            },
        },
        "next_after": {"type": ["string", "null"]},
    },
}

RESOURCES: Final[Schema] = {
    "type": "object",
    "description": "The current node of each resource key (variables, memory) of a scope.",
    "required": ["namespace", "scope", "resources"],
    "properties": {
        "namespace": {"type": "string"},
        "scope": {"type": "string"},
        "prefix": {"type": "string"},
        "resources": {"type": "object", "additionalProperties": ref("Node")},
    },
}

VERSIONS: Final[Schema] = {
    "type": "object",
    "description": "Every version of one resource key, oldest first.",
    "required": ["namespace", "scope", "key", "versions"],
    "properties": {
        "namespace": {"type": "string"},
        "scope": {"type": "string"},
        "key": {"type": "string"},
        "versions": {"type": "array", "items": ref("Node")},
    },
}

WHOAMI: Final[Schema] = {
    "type": "object",
    "required": ["name", "grants", "namespaces", "agent"],
    "properties": {
        "name": {"type": "string"},
        "grants": {"type": "array", "items": {"type": "string", "enum": [*GRANTS, "*"]}},
        "namespaces": {"type": "array", "items": {"type": "string"}},
        "agent": {"type": "boolean", "description": "Whether this server runs agent steps."},
        "version": {"type": "string"},
    },
}

EXECUTION: Final[Schema] = {
    "type": "object",
    "description": "Seed 000's ExecutorState of one run, with its tree of child executors.",
    "required": ["execution_id", "status", "children"],
    "properties": {
        "execution_id": {"type": "string"},
        "node_actor_id": {"type": "string"},
        "status": {
            "type": "string",
            "enum": ["idle", "running", "suspended", "completed", "failed"],
        },
        "child_executor_ids": {"type": "array", "items": {"type": "string"}},
        "children": {"type": "array", "items": {"type": "object"}},
        "actor": {"type": ["object", "null"]},
        "run": {"type": "string"},
        "kind": {"type": "string"},
    },
}

FORK: Final[Schema] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["node"],
    "properties": {"node": _NODE_ID, "new_thread": _nullable(_IDENT)},
}

STEP_REQUEST: Final[Schema] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["input"],
    "properties": {
        "input": {"description": "The user's input for this turn (any JSON)."},
        "user": _nullable(_IDENT),
        "context": {"type": "object", "description": "Reaches the run; never stored."},
        "metadata": {"type": "object"},
    },
}

DECISION_REQUEST: Final[Schema] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["call"],
    "properties": {
        "call": {"type": "string", "minLength": 1, "description": "call_id or tool_call node id"},
        "reason": _nullable({"type": "string"}),
        "context": {"type": "object"},
        "resume": {"type": "boolean", "default": True},
    },
}

RESUME_REQUEST: Final[Schema] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"context": {"type": "object"}},
}

STEP_RESULT: Final[Schema] = {
    "type": "object",
    "required": ["thread", "status"],
    "properties": {
        "run_id": {"type": "string"},
        "call": {"type": "string"},
        "decision": {"type": "string", "enum": ["approved", "rejected"]},
        "thread": {"type": "string"},
        "status": {"type": "string", "enum": ["completed", "suspended", "failed", "decided"]},
        "answer": {},
        "pending_approvals": {"type": "array", "items": {"type": "object"}},
        "error": {"type": ["object", "null"]},
    },
}

ERASURE_RESULT: Final[Schema] = {
    "type": "object",
    "description": "ErasureResult: the data keys destroyed (ids only) and what followed.",
    "required": ["operation", "namespace", "user", "keys_destroyed", "key_ids", "threads"],
    "properties": {
        "operation": {"type": "string", "enum": ["erase"]},
        "namespace": {"type": "string"},
        "user": {"type": "string"},
        "keys_destroyed": {"type": "integer", "minimum": 0},
        "key_ids": {"type": "array", "items": {"type": "string"}},
        "threads": {"type": "integer", "minimum": 0},
        "unindexed_runs": {"type": "integer", "minimum": 0},
    },
}

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
    "StepResult": STEP_RESULT,
    "ErasureResult": ERASURE_RESULT,
}
