"""One retrying JSON POST for the OpenAI-compatible clients (chat and embeddings).

429, 5xx, connection failures and connect timeouts are retried ``max_retries`` times,
waiting ``backoff * 2**attempt`` seconds (a little jitter, at most ``max_backoff``), or
what the server's ``Retry-After`` / ``retry-after-ms`` asks for (also capped). Other 4xx
fail at once. A response that does not arrive within ``timeout`` raises
``ModelTimeoutError`` without a retry: the server may have done the work.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from ..core import strict_json
from ..core.canonical import CanonicalError
from ..core.telemetry import telemetry
from .errors import ModelBadResponseError, ModelConnectionError, ModelHTTPError, ModelTimeoutError

log = logging.getLogger("tether.models")

BODY_EXCERPT = 2000
_HINTS = {
    401: "check api_key",
    403: "check api_key and that it may use this model",
    404: "check base_url (most servers want it to end in /v1) and the model name",
    429: "the server is rate limiting; slow down or raise max_retries",
}


@dataclass(frozen=True, slots=True)
class Retries:
    """How a client waits and retries: the settings both clients take."""

    timeout: float
    max_retries: int
    backoff: float
    max_backoff: float


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    payload: bytes,
    headers: Mapping[str, str],
    retries: Retries,
    *,
    server: str = "model server",
    timeout_hint: str = "",
) -> Any:
    """POST ``payload`` to ``url`` and return the decoded JSON answer, retrying as above.

    ``server`` names the other side in error messages ("model server", "embeddings
    server"); the caller's trace continues there (W3C ``traceparent``).
    """
    attempt = 0
    while True:
        retry_after: float | None = None
        try:
            response = await client.post(
                url,
                content=payload,
                headers=telemetry.inject_headers(dict(headers)),
                timeout=retries.timeout,
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
            if attempt >= retries.max_retries:
                error: type[ModelConnectionError | ModelTimeoutError] = (
                    ModelTimeoutError
                    if isinstance(exc, httpx.ConnectTimeout)
                    else ModelConnectionError
                )
                raise error(
                    f"cannot reach the {server} at {url} after {attempt + 1} "
                    f"attempts: {exc!r}; is it running?",
                    url=url,
                    attempts=attempt + 1,
                ) from None
            problem = repr(exc)
        except httpx.TimeoutException as exc:
            raise ModelTimeoutError(
                f"the {server} did not answer within {retries.timeout} s ({exc!r}){timeout_hint}",
                url=url,
                timeout=retries.timeout,
            ) from None
        except httpx.HTTPError as exc:
            raise ModelConnectionError(f"request to {url} failed: {exc!r}", url=url) from None
        else:
            status = response.status_code
            if 200 <= status < 300:
                try:
                    # tether's JSON policy (strict_json): the model's output is read
                    # exactly or refused (a duplicate key, a big integer, NaN), never
                    # read one way by tether and another by someone else.
                    return strict_json.loads(response.content)
                except CanonicalError as exc:
                    raise ModelBadResponseError(
                        f"the {server} answered HTTP {status} with a body that is not "
                        f"exact JSON ({exc})",
                        reason=exc.code,
                        status=status,
                        body=response.text[:BODY_EXCERPT],
                    ) from None
            if (status != 429 and status < 500) or attempt >= retries.max_retries:
                raise http_error(response, attempt + 1, server)
            problem = f"HTTP {status}"
            retry_after = _retry_after(response.headers)
        delay = retry_after
        if delay is None:
            delay = retries.backoff * 2**attempt * (1 - random.random() / 4)
        delay = min(max(delay, 0.0), retries.max_backoff)
        log.info(
            "%s call failed (%s); retry %d/%d in %.2f s",
            server,
            problem,
            attempt + 1,
            retries.max_retries,
            delay,
        )
        await asyncio.sleep(delay)
        attempt += 1


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait (``retry-after-ms``, ``Retry-After``), or None."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def http_error(
    response: httpx.Response, attempts: int, server: str = "model server"
) -> ModelHTTPError:
    status = response.status_code
    text = response.text
    detail = ""
    try:
        err = response.json().get("error")
        detail = err.get("message", "") if isinstance(err, dict) else str(err or "")
    except (ValueError, AttributeError):
        pass
    detail = detail or text[:200]
    hint = _HINTS.get(status, "")
    message = f"the {server} answered HTTP {status}" + (f": {detail}" if detail else "")
    if attempts > 1:
        message += f" (after {attempts} attempts)"
    if hint:
        message += f"; {hint}"
    return ModelHTTPError(
        message, status=status, body=text[:BODY_EXCERPT], attempts=attempts, url=str(response.url)
    )
