"""The control plane (SPEC §6): describe, reset, compact, export, import, history, fork, verify.

The same operations serve Python, the ``tether`` CLI and HTTP; their typed
request, per-store report and result objects round-trip through JSON. See
``tether.control.ops`` for the semantics of each operation and
``tether.control.snapshot`` for streaming export, import, verify and fork.
"""

from __future__ import annotations

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
    "STORES",
    "STRATEGIES",
    "Operation",
    "ScopeCheck",
    "StateOperationRequest",
    "StateOperationResult",
    "StateStoreReport",
    "Strategy",
    "compact",
    "describe",
    "execute",
    "export",
    "export_chunks",
    "export_snapshot",
    "fork",
    "fork_thread",
    "history",
    "history_page",
    "import_",
    "import_snapshot",
    "load_snapshot",
    "reset",
    "verify",
    "verify_scope",
    "verify_snapshot",
]

for _name in ("ScopeCheck", "StateOperationRequest", "StateOperationResult", "StateStoreReport"):
    globals()[_name].__module__ = "tether.control"
