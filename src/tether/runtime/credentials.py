"""Credentials from the call's context (seed 000's ServiceAccount), never persisted.

    @tether.tool(credentials=["github"])
    async def open_issue(title: str, credentials: dict[str, str]) -> str:
        return await gh.create(title, token=credentials["github"])

    await agent.step("file a bug", context={"credentials": {"github": token}})
    # or: Agent(..., credentials=MyVault())   (a CredentialProvider)

A tool (``@tool(credentials=[...])``) or a spec's tool node
(``ToolNode(credentials=[...])``) names the credentials it needs. For each call
they are resolved, in order, from the agent's ``CredentialProvider`` (if it
returns a value) and then from ``context["credentials"][name]``, and handed to
the tool as its ``credentials`` parameter (a dict). A credential that cannot be
resolved makes the call an error result the model sees (naming the credential,
never a value); the tool does not run.

Credentials never reach storage, logs, exports or the inspector:

* ``context["credentials"]`` is taken out of the context before anything else
  sees it: templates, conditions, the model and tools' ``context`` parameter get
  the context without it;
* a tool's arguments (stored in its ``tool_call`` node) never carry them;
* whatever the call writes (its result, its error message, its tool state) and
  what the executor logs about it are scrubbed of every resolved value
  (replaced by ``[redacted]``) in case a tool echoes one back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol, runtime_checkable

import orjson

from ..core.errors import InvalidRequest

__all__ = [
    "CONTEXT_KEY",
    "REDACTED",
    "CredentialError",
    "CredentialPersisted",
    "CredentialProvider",
    "check_not_persisted",
    "public_context",
    "redact",
    "resolve_credentials",
]

CONTEXT_KEY: Final = "credentials"
REDACTED: Final = "[redacted]"
# Shorter values are not secrets worth the name, and scrubbing them would mangle text.
_MIN_SECRET: Final = 4


class CredentialError(InvalidRequest):
    """A credential a tool needs could not be resolved (reported to the model, not raised)."""

    default_code = "credential"


class CredentialPersisted(InvalidRequest):
    """A credential's value was about to be stored (a key, an input, a record). Nothing was.

    Raised where redaction cannot apply: a tool-state key, a step's input or
    metadata, or any node of a run's commit that still holds a credential.
    """

    default_code = "credential_persisted"


@runtime_checkable
class CredentialProvider(Protocol):
    """Resolves a named credential for one call; None lets ``context["credentials"]`` decide."""

    async def resolve(self, name: str, context: Mapping[str, Any]) -> str | None: ...


def split_context(context: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the context without credentials, the credentials it carried)."""
    ctx = dict(context)
    raw = ctx.pop(CONTEXT_KEY, None)
    if raw is None:
        return ctx, {}
    if not isinstance(raw, Mapping):
        raise InvalidRequest(
            f'context["{CONTEXT_KEY}"] maps credential names to values, got {type(raw).__name__}'
        )
    return ctx, dict(raw)


def public_context(context: Mapping[str, Any]) -> dict[str, Any]:
    """The context as everything but a tool's ``credentials`` parameter sees it."""
    return {k: v for k, v in context.items() if k != CONTEXT_KEY}


async def resolve_credentials(
    names: Iterable[str],
    *,
    provider: CredentialProvider | None,
    supplied: Mapping[str, Any],
    context: Mapping[str, Any],
) -> dict[str, str]:
    """Each named credential's value: the provider's, else ``supplied[name]``.

    Raises CredentialError naming the first one that cannot be found (never a value).
    """
    out: dict[str, str] = {}
    for name in names:
        value: Any = None
        if provider is not None:
            try:
                value = await provider.resolve(name, context)
            except Exception as e:
                raise CredentialError(
                    f"the credential provider failed to resolve {name!r}: {type(e).__name__}",
                    credential=name,
                ) from None
        if value is None:
            value = supplied.get(name)
        if not isinstance(value, str) or not value:
            raise CredentialError(
                f"this call has no credential {name!r}: pass it as "
                f'context={{"{CONTEXT_KEY}": {{"{name}": ...}}}} or register a '
                "CredentialProvider with Agent(credentials=...)",
                credential=name,
            )
        out[name] = value
    return out


def _forms(secrets: Iterable[Any]) -> list[str]:
    """Each secret as it may appear in text: raw, and JSON-escaped (once and twice, with
    and without ``ensure_ascii``), longest first so a secret containing another is
    scrubbed whole."""
    out: set[str] = set()
    for s in secrets:
        if not isinstance(s, str) or len(s) < _MIN_SECRET:
            continue
        level = {s}
        for _ in range(2):
            nxt: set[str] = set()
            for x in level:
                nxt.add(json.dumps(x, ensure_ascii=False)[1:-1])
                nxt.add(json.dumps(x)[1:-1])
            out |= level
            level = nxt
        out |= level
    return sorted(out, key=lambda x: (-len(x), x))


def redact(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (a JSON value or a string) with every secret replaced by ``[redacted]``.

    A secret is also found JSON-escaped (a tool that returns ``json.dumps(...)`` of
    a text holding a secret with ``"`` or ``\\`` in it).
    """
    found = _forms(secrets)
    if not found:
        return value

    def scrub(v: Any) -> Any:
        if isinstance(v, str):
            for s in found:
                if s in v:
                    v = v.replace(s, REDACTED)
            return v
        if isinstance(v, list):
            return [scrub(x) for x in v]
        if isinstance(v, dict):
            return {scrub(k): scrub(x) for k, x in v.items()}
        return v

    return scrub(value)


def check_not_persisted(what: str, value: Any, secrets: Iterable[Any]) -> None:
    """Raise CredentialPersisted if ``value`` (a string or JSON value) holds a secret.

    ``what`` names where it would have been stored; the message never holds a value.
    """
    found = _forms(secrets)
    if not found:
        return
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    if any(s in text for s in found):
        raise CredentialPersisted(
            f"{what} holds the value of a credential, which tether never stores; "
            "use a name or a hash of it instead",
            where=what,
        )
