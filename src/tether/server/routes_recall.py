"""``GET /v1/ns/{namespace}/recall``: search a scope's long-term memory by meaning.

Needs the grant ``state.history`` (it returns memory contents, as a history page
does). The embedder is the server's: ``$TETHER_EMBEDDER`` (``wordllama`` by default,
offline; ``hashing[:dim]``; ``openai:<model>:<dim>``), built once per process.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from fastapi import APIRouter, Query
from starlette.responses import Response

from ..core.messages import Embedder
from ..projections import recall
from ._deps import NamespaceAt, need
from ._http import json_response
from .openapi import errors
from .routes_ns import ScopeQuery, _scope

__all__ = ["router"]

_embedders: dict[str, Embedder] = {}


def _embedder() -> Embedder:
    from ..models.embeddings import embedder_from_name

    name = os.environ.get("TETHER_EMBEDDER") or "wordllama"
    if name not in _embedders:
        _embedders[name] = embedder_from_name(name)
    return _embedders[name]


def router() -> APIRouter:
    r = APIRouter(prefix="/v1/ns/{namespace}", tags=["namespace"])

    @r.get(
        "/recall",
        summary="The memories of a scope closest in meaning to a query, best first",
        dependencies=[need("state.history")],
        responses={
            200: {
                "description": "`{namespace, scope, query, hits: [{scope, type, key, "
                "content, score, node}]}`"
            },
            **errors(400, 401, 403, 410, 413),
        },
    )
    async def recall_memory(
        at: NamespaceAt,
        q: Annotated[str, Query(min_length=1, max_length=2000)],
        scope: ScopeQuery,
        k: Annotated[int, Query(ge=1, le=100)] = 5,
        type: Annotated[list[str] | None, Query(max_length=48)] = None,
        key_prefix: Annotated[str | None, Query(max_length=256)] = None,
    ) -> Response:
        name = _scope(scope)
        await at.allow(name)
        hits = await recall(
            await at.store(),
            at.namespace,
            name,
            q,
            embedder=_embedder(),
            k=k,
            types=type or None,
            key_prefix=key_prefix,
        )
        body: dict[str, Any] = {
            "namespace": at.namespace,
            "scope": name,
            "query": q,
            "hits": [h.to_dict() for h in hits],
        }
        return json_response(body)

    return r
