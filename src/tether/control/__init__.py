"""The control plane (SPEC §6): describe, reset, compact, export, import, history, fork, verify.

``runs`` lists the runs of a namespace from its run index (filtered by status:
``await control.runs(store, namespace="acme", status="suspended")``), ``task`` is
one run's metadata and status history, ``pending_approvals`` the tool calls a
thread's latest run waits on, and ``reindex`` rebuilds the run index from the
threads (``tether.control.tasks``).
``erase_user`` erases a user of an encrypted store (``tether.control.erasure``).
``prune`` removes what nothing current needs from a scope, or says what it would
(``dry_run``) (``tether.control.prune``).

The same operations serve Python, the ``tether`` CLI and HTTP; their typed
request, per-store report and result objects round-trip through JSON. See
``tether.control.ops`` for the semantics of each operation and
``tether.control.snapshot`` for streaming export, import, verify and fork.
"""

from __future__ import annotations

from .erasure import ErasureResult, erase_user
from .flow import FlowState, flow_states
from .ops import (
    OPERATIONS,
    compact,
    describe,
    execute,
    export,
    fork,
    history,
    import_,
    reset,
    verify,
)
from .prune import PruneResult, prune
from .retention import gc
from .snapshot import (
    export_chunks,
    export_snapshot,
    fork_thread,
    history_page,
    import_snapshot,
    load_snapshot,
    verify_scope,
    verify_snapshot,
)
from .stats import UsageReport, usage
from .tasks import (
    RUN_STATUSES,
    RunList,
    RunSummary,
    TaskState,
    Transition,
    pending_approvals,
    reindex,
    runs,
    task,
    task_states,
)
from .types import (
    STORES,
    STRATEGIES,
    Operation,
    ScopeCheck,
    StateOperationRequest,
    StateOperationResult,
    StateStoreReport,
    Strategy,
)

__all__ = [
    "OPERATIONS",
    "RUN_STATUSES",
    "STORES",
    "STRATEGIES",
    "ErasureResult",
    "FlowState",
    "Operation",
    "PruneResult",
    "RunList",
    "RunSummary",
    "ScopeCheck",
    "StateOperationRequest",
    "StateOperationResult",
    "StateStoreReport",
    "Strategy",
    "TaskState",
    "Transition",
    "UsageReport",
    "compact",
    "describe",
    "erase_user",
    "execute",
    "export",
    "export_chunks",
    "export_snapshot",
    "flow_states",
    "fork",
    "fork_thread",
    "gc",
    "history",
    "history_page",
    "import_",
    "import_snapshot",
    "load_snapshot",
    "pending_approvals",
    "prune",
    "reindex",
    "reset",
    "runs",
    "task",
    "task_states",
    "usage",
    "verify",
    "verify_scope",
    "verify_snapshot",
]

for _name in (
    "ErasureResult",
    "FlowState",
    "RunList",
    "RunSummary",
    "ScopeCheck",
    "StateOperationRequest",
    "StateOperationResult",
    "StateStoreReport",
    "TaskState",
    "Transition",
):
    globals()[_name].__module__ = "tether.control"
