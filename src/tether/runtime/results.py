"""What ``Agent.step`` (and resume, approve, reject) return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["STATUSES", "PendingApproval", "RunError", "RunStatus", "StepResult"]

RunStatus = Literal["completed", "suspended", "failed"]
STATUSES: tuple[RunStatus, ...] = ("completed", "suspended", "failed")


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingApproval:
    """A tool call waiting for a human: approve or reject it by ``call_id`` or ``node_id``."""

    call_id: str
    node_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "node_id": self.node_id,
            "name": self.name,
            "arguments": self.arguments,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingApproval:
        return cls(
            call_id=str(data["call_id"]),
            node_id=str(data["node_id"]),
            name=str(data["name"]),
            arguments=dict(data.get("arguments") or {}),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunError:
    """Why a run failed: the ``code`` and ``message`` of its ``protocol_error`` node."""

    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunError:
        return cls(code=str(data["code"]), message=str(data["message"]))


@dataclass(frozen=True, kw_only=True, slots=True)
class StepResult:
    """The outcome of a turn, as the graph records it.

    ``status``: ``completed`` (``answer`` holds the output), ``suspended``
    (``pending_approvals`` lists the tool calls to approve or reject) or ``failed``
    (``error`` says why).
    """

    run_id: str
    thread: str
    status: RunStatus
    answer: Any = None
    pending_approvals: tuple[PendingApproval, ...] = ()
    error: RunError | None = None

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def suspended(self) -> bool:
        return self.status == "suspended"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread": self.thread,
            "status": self.status,
            "answer": self.answer,
            "pending_approvals": [p.to_dict() for p in self.pending_approvals],
            "error": None if self.error is None else self.error.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepResult:
        status = data["status"]
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        err = data.get("error")
        return cls(
            run_id=str(data["run_id"]),
            thread=str(data["thread"]),
            status=status,
            answer=data.get("answer"),
            pending_approvals=tuple(
                PendingApproval.from_dict(p) for p in data.get("pending_approvals") or ()
            ),
            error=None if err is None else RunError.from_dict(err),
        )
