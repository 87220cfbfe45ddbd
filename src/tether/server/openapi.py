"""The published OpenAPI document: FastAPI's, with tether's schemas and error responses.

Bodies are parsed by the library's ``from_dict`` rather than FastAPI models, so
their schemas are added here (``_schemas.COMPONENTS``); FastAPI's own 422
"validation error" entries are replaced by tether's error shape, since a bad
parameter is answered 400 with the same body as every other error.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from ._http import STATUS_CODES
from ._schemas import COMPONENTS, ref

__all__ = ["errors", "install", "ok", "request_body"]

Responses = dict[int | str, dict[str, Any]]


def ok(schema: str, description: str) -> Responses:
    """A route's 200 response: a JSON body with the component ``schema``."""
    return {200: {"description": description, "content": _json(schema)}}


def request_body(schema: str, *, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` for a route that reads its JSON body itself (``from_dict``)."""
    return {"requestBody": {"required": required, "content": _json(schema)}}


def _json(schema: str) -> dict[str, Any]:
    return {"application/json": {"schema": ref(schema)}}


def errors(*codes: int) -> Responses:
    """The documented error responses of a route (all with the Error body)."""
    return {code: {"description": STATUS_CODES[code], "content": _json("Error")} for code in codes}


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` return the completed document (computed once)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        schemas.update(COMPONENTS)
        for item in doc.get("paths", {}).values():
            for op in item.values():
                responses = op.get("responses", {})
                if "HTTPValidationError" in str(responses.get("422", "")):
                    # FastAPI's default; tether answers bad parameters 400.
                    del responses["422"]
                    responses.setdefault("400", errors(400)[400])
        app.openapi_schema = doc
        return doc

    app.openapi = build  # type: ignore[method-assign]
