"""Protolink 0.8.3's own ``AgentClient`` against a running ``tether serve``, unmodified.

    PYTHONPATH=<protolink install> python tests/protolink_driver.py URL SECRET JWT READER_JWT
    PYTHONPATH=<protolink install> python tests/protolink_driver.py signin URL SECRET JWT API_KEY

Run by tests/test_seed_protolink.py in a child process whose path holds the
protolink package installed from the package index (it brings its own pydantic,
so it stays out of tether's environment). Every call's result, or the error it
raised, is printed as one JSON object; the test asserts on it. Nothing here
checks anything: the seed's client does what its users do.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from protolink.client import AgentClient
from protolink.security.auth import APIKeyAuth, BearerTokenAuth
from protolink.transport import HTTPTransport


def client(url: str, secret: str | None = None, token: str | None = None) -> AgentClient:
    if secret is None:
        return AgentClient(transport="http", url=url)
    # The seed's own way to send a JWT: BearerTokenAuth checks it locally with the
    # shared secret, then the transport sends it as the bearer token.
    auth = BearerTokenAuth(secret=secret)
    return AgentClient(HTTPTransport(url, authenticator=auth, credentials=token))


async def outcome(call: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    try:
        result = await call()
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e)}
    return {"result": result.to_dict()}


async def main(url: str, secret: str, token: str, reader: str) -> dict[str, Any]:
    anonymous = client(url)
    c = client(url, secret, token)
    ro = client(url, secret, reader)
    out: dict[str, Any] = {}
    out["anonymous"] = await outcome(lambda: anonymous.describe_state(url))
    out["describe_all"] = await outcome(lambda: c.describe_state(url))
    out["describe_session"] = await outcome(
        lambda: c.describe_state(url, session_id="support-1", include_data=True)
    )
    out["compact_recent"] = await outcome(
        lambda: c.compact_state(url, session_id="support-1", strategy="recent", max_messages=16)
    )
    out["compact_tokens"] = await outcome(
        lambda: c.compact_state(
            url, session_id="support-1", strategy="tokens", max_tokens=200, preserve_recent=4
        )
    )
    out["compact_summary"] = await outcome(
        lambda: c.compact_state(
            url, session_id="support-1", strategy="summary", max_messages=6, preserve_recent=2
        )
    )
    out["reader_reset"] = await outcome(lambda: ro.reset_state(url, session_id="support-1"))
    out["reset_session"] = await outcome(lambda: c.reset_state(url, session_id="support-2"))
    out["after_session_reset"] = await outcome(
        lambda: c.describe_state(url, session_id="support-2")
    )
    out["reset_all"] = await outcome(lambda: c.reset_state(url))
    out["after_reset_all"] = await outcome(lambda: c.describe_state(url))
    return out


async def signin(url: str, secret: str, token: str, key: str) -> dict[str, Any]:
    """Every way the seed's client signs in: nothing (its documented construction), an
    API key (``APIKeyAuth``: ``Authorization: ApiKey`` and ``X-API-Key``), a JWT
    (``BearerTokenAuth``, the token minted by ``tether token``)."""
    anonymous = client(url)
    # APIKeyAuth checks the key against the keys it is given, then sends it.
    by_key = AgentClient(HTTPTransport(url, authenticator=APIKeyAuth({key: []}), credentials=key))
    by_jwt = client(url, secret, token)
    out: dict[str, Any] = {}
    out["anonymous_describe"] = await outcome(lambda: anonymous.describe_state(url))
    out["anonymous_reset"] = await outcome(lambda: anonymous.reset_state(url, session_id="x"))
    out["key_describe"] = await outcome(
        lambda: by_key.describe_state(url, session_id="support-1", include_data=True)
    )
    out["jwt_describe"] = await outcome(lambda: by_jwt.describe_state(url, session_id="support-1"))
    out["jwt_other_user"] = await outcome(lambda: by_jwt.describe_state(url, session_id="billing"))
    return out


if __name__ == "__main__":
    if sys.argv[1] == "signin":
        print(json.dumps(asyncio.run(signin(*sys.argv[2:6]))))
    else:
        print(json.dumps(asyncio.run(main(*sys.argv[1:5]))))
