"""The HTTP control plane and the web inspector (SPEC §6): ``tether serve``.

``create_app(store, tokens=..., agent=...)`` is a FastAPI app serving every
control-plane operation over HTTP behind bearer tokens with grants, and the
inspector at ``/``. docs/http.md describes the routes, the tokens file and the
status codes. Needs the ``server`` extra (FastAPI, uvicorn).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .auth import (
    GRANTS,
    AuthConfigError,
    Forbidden,
    JwtKey,
    Token,
    Tokens,
    Unauthorized,
    hash_token,
)
from .limits import DEFAULT_MAX_BODY, TooLarge

if TYPE_CHECKING:
    from .app import create_app

__all__ = [
    "DEFAULT_MAX_BODY",
    "GRANTS",
    "AuthConfigError",
    "Forbidden",
    "JwtKey",
    "Token",
    "Tokens",
    "TooLarge",
    "Unauthorized",
    "create_app",
    "hash_token",
]

for _name in (
    "AuthConfigError",
    "Forbidden",
    "JwtKey",
    "Token",
    "Tokens",
    "TooLarge",
    "Unauthorized",
):
    globals()[_name].__module__ = "tether.server"


def __getattr__(name: str) -> Any:
    # The app (FastAPI, uvicorn, the routes) is imported on first use, as ``tether``'s
    # own lazy names are: every `tether` command imports this package for `tether
    # serve`'s options, and the app alone took 0.6 s of a CLI start.
    if name != "create_app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .app import create_app

    globals()[name] = create_app
    return create_app


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
