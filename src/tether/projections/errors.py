"""Errors of the memory layer. All subclass ``tether``'s tree and carry stable codes.

InvalidRequest
├── UnknownVariable     "unknown_variable"   a variable that was not declared
├── UnstorableValue     "unstorable_value"   a value that is not JSON (NaN, objects)
└── InvalidArguments    "invalid_arguments"  a memory tool called with bad arguments
NotFound
└── NothingToUndo       "nothing_to_undo"    no compaction or memory edit to undo
"""

from __future__ import annotations

from ..core.errors import InvalidRequest, NotFound

__all__ = ["InvalidArguments", "NothingToUndo", "UnknownVariable", "UnstorableValue"]


class UnknownVariable(InvalidRequest):
    """A variable name that was not declared. Declare it with ``VarDecl`` first."""

    default_code = "unknown_variable"


class UnstorableValue(InvalidRequest):
    """A value that cannot be stored as JSON even as given (NaN, Infinity, objects)."""

    default_code = "unstorable_value"


class InvalidArguments(InvalidRequest):
    """A memory tool was called with arguments that do not fit its schema."""

    default_code = "invalid_arguments"


class NothingToUndo(NotFound):
    """There is no compaction or memory edit left to undo."""

    default_code = "nothing_to_undo"
