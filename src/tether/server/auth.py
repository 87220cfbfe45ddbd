"""Bearer tokens and their grants: who may do what to which namespace over HTTP.

A token is a secret string. The server keeps only its SHA-256 digest, and an
incoming token is hashed and compared against every known digest with
``hmac.compare_digest`` (no early exit), so neither the comparison time nor the
files give a token away. Tokens are never logged, echoed in errors, or stored.

Each token names its **grants** (operations) and **namespaces**::

    {"tokens": [
        {"name": "ops", "sha256": "<hex digest of the token>",
         "grants": ["state.describe", "state.history"], "namespaces": ["acme", "beta-*"]},
        {"name": "ci", "token_env": "TETHER_CI_TOKEN", "grants": ["*"], "namespaces": ["*"]}
    ]}

(JSON or YAML). ``sha256`` is ``hashlib.sha256(token.encode()).hexdigest()``;
``token_env`` names an environment variable holding the token itself, hashed at
load. A grant is an operation name (``GRANTS``), ``state.*``, ``agent.*`` or ``*``
(``state.erase``, erasing a user of an encrypted store for good, is in ``state.*``);
a namespace pattern is a name, a prefix ending in ``*``, or ``*`` for all.
``TETHER_TOKEN`` in the environment adds a single token named ``env`` with every
grant on every namespace (for development).

    TetherError
    ├── Unauthorized    "unauthorized"   no token, or not a known one       (HTTP 401)
    ├── Forbidden       "forbidden"      a known token without the grant    (HTTP 403)
    └── AuthConfigError "auth_config"    a tokens file or variable that cannot be used
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
import yaml

from ..core.errors import TetherError

__all__ = [
    "ENV_TOKEN",
    "ENV_TOKENS_FILE",
    "GRANTS",
    "MIN_TOKEN_LENGTH",
    "AuthConfigError",
    "Forbidden",
    "Token",
    "Tokens",
    "Unauthorized",
    "hash_token",
]

GRANTS: Final[tuple[str, ...]] = (
    "state.describe",
    "state.history",
    "state.export",
    "state.import",
    "state.reset",
    "state.compact",
    "state.fork",
    "state.verify",
    "state.erase",
    "agent.step",
    "agent.approve",
)
_GRANT_PATTERNS: Final = frozenset({*GRANTS, "state.*", "agent.*", "*"})
ENV_TOKEN: Final = "TETHER_TOKEN"
ENV_TOKENS_FILE: Final = "TETHER_TOKENS_FILE"
# Short secrets can be guessed; a dev token from `secrets.token_urlsafe(32)` is 43.
MIN_TOKEN_LENGTH: Final = 16
_HEX64: Final = re.compile(r"^[0-9a-f]{64}$")
_NAME: Final = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_NS_PATTERN: Final = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")


class Unauthorized(TetherError):
    """No bearer token was sent, or it is not one the server knows. Nothing was read."""

    default_code = "unauthorized"


class Forbidden(TetherError):
    """The token is known but lacks the grant or the namespace. Nothing was read or written."""

    default_code = "forbidden"


class AuthConfigError(TetherError):
    """The tokens configuration cannot be used (the message says which entry and why)."""

    default_code = "auth_config"


def hash_token(token: str) -> str:
    """The hex SHA-256 digest of a token, as the tokens file stores it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class Token:
    """One known token: its name, digest, grants and namespace patterns (never the secret)."""

    name: str
    digest: bytes = field(repr=False)
    grants: frozenset[str]
    namespaces: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise AuthConfigError(
                f"token name {self.name!r}: use 1-64 letters, digits or _.@-", field="name"
            )
        if not isinstance(self.digest, bytes) or len(self.digest) != 32:
            raise AuthConfigError(f"token {self.name!r}: digest must be 32 bytes", field="sha256")
        for g in self.grants:
            if g not in _GRANT_PATTERNS:
                raise AuthConfigError(
                    f"token {self.name!r}: unknown grant {g!r}; use one of "
                    f"{', '.join(GRANTS)}, state.*, agent.* or *",
                    field="grants",
                )
        if not self.namespaces:
            raise AuthConfigError(
                f"token {self.name!r}: name the namespaces it may touch (or '*')",
                field="namespaces",
            )
        for ns in self.namespaces:
            if not isinstance(ns, str) or not _NS_PATTERN.match(ns):
                raise AuthConfigError(
                    f"token {self.name!r}: bad namespace pattern {ns!r}", field="namespaces"
                )

    def has_grant(self, grant: str) -> bool:
        if "*" in self.grants or grant in self.grants:
            return True
        family = grant.split(".", 1)[0]
        return f"{family}.*" in self.grants

    def allows_namespace(self, namespace: str) -> bool:
        for p in self.namespaces:
            if p == "*" or p == namespace:
                return True
            if p.endswith("*") and namespace.startswith(p[:-1]):
                return True
        return False

    def require(self, grant: str, namespace: str | None = None) -> None:
        """Raise ``Forbidden`` unless this token has ``grant`` (on ``namespace``, if given)."""
        if not self.has_grant(grant):
            raise Forbidden(
                f"token {self.name!r} lacks the grant {grant!r}; add it to the token's grants",
                grant=grant,
            )
        if namespace is not None and not self.allows_namespace(namespace):
            raise Forbidden(
                f"token {self.name!r} may not touch namespace {namespace!r}",
                grant=grant,
                namespace=namespace,
            )

    def to_dict(self) -> dict[str, Any]:
        """What a token may do (for ``GET /v1/whoami``); the digest is left out."""
        return {
            "name": self.name,
            "grants": sorted(self.grants),
            "namespaces": list(self.namespaces),
        }


def _str_list(entry: str, key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AuthConfigError(f"token {entry}: {key} must be a list of strings", field=key)
    return list(value)


class Tokens:
    """The set of known tokens. ``authenticate`` maps a presented secret to its ``Token``."""

    def __init__(self, tokens: Iterable[Token]) -> None:
        self._tokens = tuple(tokens)
        names = [t.name for t in self._tokens]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise AuthConfigError(f"token names must be unique: {', '.join(dupes)}", field="name")
        digests = [t.digest for t in self._tokens]
        if len(set(digests)) != len(digests):
            raise AuthConfigError(
                "two entries hold the same token; give each client its own", field="sha256"
            )

    def __len__(self) -> int:
        return len(self._tokens)

    def __repr__(self) -> str:
        return f"Tokens({[t.name for t in self._tokens]!r})"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self._tokens)

    def authenticate(self, presented: str | None) -> Token:
        """The token whose digest matches ``presented``; raises ``Unauthorized`` otherwise.

        Every known digest is compared, whatever matched first, so the time taken
        does not depend on which token (if any) matched.
        """
        if not presented:
            raise Unauthorized("send a bearer token: Authorization: Bearer <token>")
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found: Token | None = None
        for t in self._tokens:
            if hmac.compare_digest(digest, t.digest) and found is None:
                found = t
        if found is None:
            raise Unauthorized("the bearer token is not one this server knows")
        return found

    # -- loading

    @classmethod
    def from_dict(cls, data: Any, *, env: Mapping[str, str] | None = None) -> Tokens:
        """Tokens from decoded JSON/YAML ``{"tokens": [...]}`` (see the module docstring)."""
        env = os.environ if env is None else env
        if not isinstance(data, Mapping) or not isinstance(data.get("tokens"), list):
            raise AuthConfigError('a tokens file holds {"tokens": [ {...}, ... ]}', field="tokens")
        extra = set(data) - {"tokens"}
        if extra:
            raise AuthConfigError(
                f"unknown keys in the tokens file: {', '.join(sorted(map(str, extra)))}",
                field="tokens",
            )
        out = []
        for i, raw in enumerate(data["tokens"]):
            out.append(_entry(i, raw, env))
        return cls(out)

    @classmethod
    def from_file(cls, path: str | Path, *, env: Mapping[str, str] | None = None) -> Tokens:
        """Tokens from a JSON or YAML file."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise AuthConfigError(
                f"cannot read tokens file {p}: {e.strerror}", path=str(p)
            ) from None
        try:
            data = orjson.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
        except (orjson.JSONDecodeError, yaml.YAMLError) as e:
            raise AuthConfigError(
                f"tokens file {p} is not valid JSON/YAML: {e}", path=str(p)
            ) from None
        return cls.from_dict(data, env=env)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Tokens:
        """``$TETHER_TOKENS_FILE`` (if set) plus ``$TETHER_TOKEN`` (one all-grants token)."""
        env = os.environ if env is None else env
        tokens: list[Token] = []
        path = env.get(ENV_TOKENS_FILE)
        if path:
            tokens.extend(cls.from_file(path, env=env)._tokens)
        secret = env.get(ENV_TOKEN)
        if secret:
            tokens.append(dev_token(secret))
        return cls(tokens)

    @classmethod
    def single(
        cls,
        secret: str,
        *,
        name: str = "env",
        grants: Iterable[str] = ("*",),
        namespaces: Iterable[str] = ("*",),
    ) -> Tokens:
        """One token, for tests and scripts."""
        return cls([dev_token(secret, name=name, grants=grants, namespaces=namespaces)])

    def merged(self, other: Tokens) -> Tokens:
        return Tokens([*self._tokens, *other._tokens])


def _check_secret(what: str, secret: str) -> None:
    if len(secret) < MIN_TOKEN_LENGTH:
        raise AuthConfigError(
            f"{what} is shorter than {MIN_TOKEN_LENGTH} characters; make one with "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'",
            field="token",
        )


def dev_token(
    secret: str,
    *,
    name: str = "env",
    grants: Iterable[str] = ("*",),
    namespaces: Iterable[str] = ("*",),
) -> Token:
    _check_secret(f"the token {name!r}", secret)
    return Token(
        name=name,
        digest=hashlib.sha256(secret.encode("utf-8")).digest(),
        grants=frozenset(grants),
        namespaces=tuple(namespaces),
    )


def _entry(i: int, raw: Any, env: Mapping[str, str]) -> Token:
    where = f"#{i}"
    if not isinstance(raw, Mapping):
        raise AuthConfigError(f"token {where} must be an object", field="tokens")
    known = {"name", "sha256", "token_env", "grants", "namespaces"}
    extra = set(raw) - known
    if extra:
        raise AuthConfigError(
            f"token {where}: unknown keys {', '.join(sorted(map(str, extra)))} "
            f"(known: {', '.join(sorted(known))}); secrets go in token_env, never in the file",
            field="tokens",
        )
    name = raw.get("name")
    if isinstance(name, str):
        where = repr(name)
    has_hash, has_env = "sha256" in raw, "token_env" in raw
    if has_hash == has_env:
        raise AuthConfigError(
            f"token {where}: give exactly one of sha256 (hex digest) or token_env", field="sha256"
        )
    if has_hash:
        hexd = raw["sha256"]
        if not isinstance(hexd, str) or not _HEX64.match(hexd.lower()):
            raise AuthConfigError(
                f"token {where}: sha256 must be 64 hex digits (hashlib.sha256(token).hexdigest())",
                field="sha256",
            )
        digest = bytes.fromhex(hexd)
    else:
        var = raw["token_env"]
        if not isinstance(var, str) or not _ENV_NAME.fullmatch(var):
            raise AuthConfigError(
                f"token {where}: token_env names an environment variable", field="token_env"
            )
        secret = env.get(var)
        if not secret:
            raise AuthConfigError(
                f"token {where}: environment variable {var} is not set", field="token_env"
            )
        _check_secret(f"token {where} (from ${var})", secret)
        digest = hashlib.sha256(secret.encode("utf-8")).digest()
    return Token(
        name=name if isinstance(name, str) else "",
        digest=digest,
        grants=frozenset(_str_list(where, "grants", raw.get("grants", []))),
        namespaces=tuple(_str_list(where, "namespaces", raw.get("namespaces", []))),
    )
