"""The HTTP edge's error mapping and JSON helpers: the one place a TetherError gets a status.

Every error response has the body ``err.to_dict()``:
``{"error": <class>, "code": <stable code>, "message": <what to do>, "details": {...}}``.
"""

from __future__ import annotations

from typing import Any, Final

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ..core import strict_json
from ..core.canonical import CanonicalError
from ..core.errors import (
    Conflict,
    InvalidNode,
    InvalidRequest,
    InvalidSnapshot,
    NotFound,
    StoreError,
    TetherError,
)
from ..core.graph import DEFAULT_LIMITS
from ..crypto.errors import CipherError, KeyErased, MissingKey, WrongKey
from ..models.errors import ModelError
from .auth import Forbidden, Unauthorized
from .limits import Overloaded, TooLarge

__all__ = ["STATUS_CODES", "error_response", "json_response", "read_json", "status_for"]

# What each documented status means; app.py documents them per route in OpenAPI.
STATUS_CODES: Final[dict[int, str]] = {
    400: "The request is invalid (InvalidRequest): the message names the field.",
    401: "No bearer token, or an unknown one.",
    403: "The token lacks the grant or the namespace.",
    404: "No such thread, node or run (or route).",
    409: "Conflict: the state moved, the target is not empty, or the run awaits approval.",
    410: "Gone: the data was erased (KeyErased, code key_erased); what remains is readable "
    "through describe and history, where it shows as erased.",
    413: "The request body (or a snapshot in it) is too large.",
    422: "The snapshot failed import validation (InvalidSnapshot): code and node named.",
    503: "The server is overloaded (code overloaded; send again after Retry-After seconds), "
    "or cannot use its store.",
}


# Requests that the store's encryption state refuses: erasing on an unencrypted store,
# binding a thread that already has an owner or content.
_CIPHER_CONFLICTS: Final = frozenset({"not_encrypted", "thread_bound", "thread_not_empty"})


def status_for(err: TetherError) -> int:
    """The HTTP status of a library error. Bad input is always a 4xx."""
    if isinstance(err, Unauthorized):
        return 401
    if isinstance(err, Forbidden):
        return 403
    if isinstance(err, TooLarge):
        return 413
    if isinstance(err, Overloaded):
        return 503
    if isinstance(err, InvalidSnapshot | InvalidNode):
        return 413 if err.code == "too_large" else 422
    if isinstance(err, NotFound):
        return 404
    if isinstance(err, Conflict):
        return 409
    if isinstance(err, InvalidRequest):
        # A new step while the run waits for a human conflicts with the thread's state.
        return 409 if err.code == "run_suspended" else 400
    if isinstance(err, ModelError):
        return 502
    if isinstance(err, StoreError | WrongKey | MissingKey):
        return 503  # the server cannot use its store (a master key it lacks, or the wrong one)
    if isinstance(err, KeyErased):
        return 410
    if isinstance(err, CipherError) and err.code in _CIPHER_CONFLICTS:
        return 409
    return 500


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(data), status_code=status, media_type="application/json", headers=headers
    )


def error_response(err: TetherError) -> Response:
    status = status_for(err)
    headers = {"WWW-Authenticate": 'Bearer realm="tether"'} if status == 401 else None
    return json_response(err.to_dict(), status, headers)


# A body wraps a payload (max_depth deep) in a few levels: {"input": ...}, a snapshot's
# {"nodes": [{"payload": ...}]}. Each payload's own depth is checked again when written.
_BODY_DEPTH: Final = DEFAULT_LIMITS.max_depth + 4


async def read_json(request: Request, *, required: bool = True, snapshot: bool = False) -> Any:
    """The body as JSON under tether's one JSON policy (``tether.core.strict_json``):
    no duplicate keys, integers within ±(2**53-1), no NaN, bounded nesting.
    Empty is None unless required. A ``snapshot`` body's refusals are InvalidSnapshot
    with the codes of ``tether import`` (``shape`` too: not JSON, invalid UTF-8, a lone
    surrogate), answered as import validation answers; others InvalidRequest (400,
    ``invalid_request`` for what is not JSON at all)."""
    raw = await request.body()
    if not raw.strip():
        if required:
            raise InvalidRequest("the request needs a JSON body", field="body")
        return None
    try:
        return strict_json.loads(raw, max_depth=_BODY_DEPTH)
    except CanonicalError as e:
        if e.code == "shape" and not snapshot:
            raise InvalidRequest(f"the body is not valid JSON: {e}", field="body") from None
        # The JSON policy's refusals keep their codes (number_range, duplicate_key,
        # non_finite, too_large): the body cannot be read exactly, so it is refused whole.
        if snapshot:
            raise InvalidSnapshot(f"the snapshot was refused: {e}", code=e.code) from None
        raise InvalidRequest(f"the body was refused: {e}", code=e.code, field="body") from None


def json_object(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidRequest(f"{what} is a JSON object, got {type(data).__name__}", field="body")
    return data
