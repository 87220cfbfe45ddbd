"""schemathesis against the published OpenAPI schema, in-process: whatever it sends, with a
valid token, the server never answers 5xx, only documented statuses, and its bodies fit the
schema. Bounded examples per operation keep this well under 30 s."""

from __future__ import annotations

import asyncio
from typing import Any

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
from tether.store.memory import MemoryStore

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


@schema.parametrize()
@settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_server_errors(case: schemathesis.Case[Any]) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS)
