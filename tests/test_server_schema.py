"""schemathesis against the published OpenAPI schema, in-process: whatever it sends, with a
valid token, the server never answers 5xx, only documented statuses, and its bodies fit the
schema. Bounded examples per operation keep this well under 30 s."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.schemas import OpenApiSchema

from _server_helpers import TOKEN, demo_agent, fill
from tether.server import Tokens, create_app
from tether.store.in_memory import MemoryStore

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _schema() -> OpenApiSchema:
    store = MemoryStore()
    # Filled in a loop of its own: the app later runs each call in the ASGI client's loop.
    asyncio.run(fill(store))
    app = create_app(store, tokens=Tokens.single(TOKEN), agent=demo_agent)
    return schemathesis.openapi.from_asgi("/openapi.json", app)


# schemathesis.pytest.from_fixture fails on pytest 9 (Function._nodeid), so the schema
# is loaded when the module is collected.
schema = _schema()
# The fuzzed calls may reset anything (seed 002: a reset with no session resets the
# namespace), so the calls on real data get an app and a store of their own.
real = _schema()


@schema.parametrize()
@settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_server_errors(case: schemathesis.Case[Any]) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS)


# Random ids seldom name a thread that exists: the task routes are also called on the
# filled store's real threads, so their 200 bodies are checked against their schemas.
REAL_CASES = [
    ("/v1/ns/{namespace}/runs", {}, {}),
    ("/v1/ns/{namespace}/runs", {}, {"status": "suspended", "limit": 1}),
    ("/v1/ns/{namespace}/threads/{thread}/task", {"thread": "support-1"}, {}),
    ("/v1/ns/{namespace}/threads/{thread}/task", {"thread": "billing"}, {}),
    ("/v1/ns/{namespace}/threads/{thread}/approvals", {"thread": "billing"}, {}),
]


@pytest.mark.parametrize(("path", "params", "query"), REAL_CASES)
def test_task_routes_answer_their_schemas_on_real_data(
    path: str, params: dict[str, str], query: dict[str, Any]
) -> None:
    case = real[path]["GET"].Case(path_parameters={"namespace": "default", **params}, query=query)
    r = case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS)
    assert r.status_code == 200, r.text
    body = r.json()
    if path.endswith("/approvals"):
        assert body["pending_approvals"][0]["name"] == "transfer"
    elif path.endswith("/runs"):
        assert body["runs"] and body["counts"]["suspended"] == 1
    else:
        assert body["history"][0]["status"] == "running"


def test_every_published_route_is_fuzzed() -> None:
    operations = [o.ok() for o in schema.get_all_operations()]  # type: ignore[union-attr]
    fuzzed = {(op.method.upper(), op.path) for op in operations}
    for path in ("/runs", "/threads/{thread}/task", "/threads/{thread}/approvals"):
        assert ("GET", "/v1/ns/{namespace}" + path) in fuzzed
