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

(JSON or YAML). An entry with ``"user": "<id>"`` is **bound to that user**: it reads
and writes only ``user:<id>`` and the threads that user owns (a thread's owner is the
user of its first run, ``metadata.user`` of its first goal), whatever its grants and
namespaces allow otherwise; a listing (threads, runs) shows only those; anything else
(``app``, another user, a namespace-wide operation, an import into a thread, metrics)
is a 403. A token without ``user`` (an admin's, a service's) sees every user.
``sha256`` is ``hashlib.sha256(token.encode()).hexdigest()``;
``token_env`` names an environment variable holding the token itself, hashed at
load. A grant is an operation name (``GRANTS``), ``state.*``, ``agent.*``, ``memory.*``
or ``*`` (``state.erase``, erasing a user of an encrypted store for good, is in ``state.*``;
``metrics``, reading ``GET /metrics``, needs namespaces ``*`` too, since metrics sum
every namespace; ``memory.read`` and ``memory.write`` are the read and write tools of
``tether mcp --http``); a namespace pattern is a name, a prefix ending in ``*``, or ``*``
for all.
``TETHER_TOKEN`` in the environment adds a single token named ``env`` with every
grant on every namespace (for development).

**JWTs.** With a signing secret configured (``$TETHER_JWT_SECRET``, at least 32
characters; ``JwtKey`` from Python), an HS256 JSON Web Token is accepted as well, so
clients that sign their own bearer tokens (Protolink's ``BearerTokenAuth``) work
unmodified. Its claims say what it may do::

    {"sub": "support-bot", "exp": 1767225600,
     "grants": ["state.describe", "state.reset"], "namespaces": ["acme"]}

``exp`` is required; a ``user`` claim binds the token to that user (as above); ``grants`` and ``namespaces`` (or ``namespace``) are a string or
a list, with the same patterns as a tokens-file entry; ``iss`` and ``aud`` are checked
when ``$TETHER_JWT_ISSUER`` / ``$TETHER_JWT_AUDIENCE`` are set. A token that fails any
check is a 401, whatever the reason.

**How a token is sent.** ``Authorization: Bearer <token>``, ``Authorization: ApiKey
<token>`` or ``X-API-Key: <token>`` (Protolink's ``APIKeyAuth`` sends the last two);
a named token or a JWT either way. ``mint_jwt`` (``tether token``) signs a JWT for a
user and grants with the server's secret.

**Anonymous clients.** A server started with ``--anonymous GRANTS`` (``Tokens.anonymous``)
serves a request that sends no credentials at all as the token ``anonymous`` with those
grants on every namespace, for clients that cannot send one (Protolink's
``AgentClient(transport="http", url=...)``), and only from a loopback address unless
``--anonymous-remote`` says otherwise. A request that sends a credential the server
does not know is a 401 all the same.

    TetherError
    ├── Unauthorized    "unauthorized"   no token, or not a known one       (HTTP 401)
    ├── Forbidden       "forbidden"      a known token without the grant    (HTTP 403)
    └── AuthConfigError "auth_config"    a tokens file or variable that cannot be used
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
import yaml

from ..core.errors import InvalidRequest, TetherError
from ..store.base import check_name

__all__ = [
    "ENV_JWT_AUDIENCE",
    "ENV_JWT_ISSUER",
    "ENV_JWT_SECRET",
    "ENV_TOKEN",
    "ENV_TOKENS_FILE",
    "GRANTS",
    "MIN_TOKEN_LENGTH",
    "AuthConfigError",
    "Forbidden",
    "JwtKey",
    "Token",
    "Tokens",
    "Unauthorized",
    "hash_token",
    "mint_jwt",
    "presented_credential",
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
    "state.prune",
    "state.gc",
    "agent.step",
    "agent.approve",
    "metrics",
    "memory.read",
    "memory.write",
)
_GRANT_PATTERNS: Final = frozenset({*GRANTS, "state.*", "agent.*", "memory.*", "*"})
ENV_TOKEN: Final = "TETHER_TOKEN"
ENV_TOKENS_FILE: Final = "TETHER_TOKENS_FILE"
ENV_JWT_SECRET: Final = "TETHER_JWT_SECRET"
ENV_JWT_ISSUER: Final = "TETHER_JWT_ISSUER"
ENV_JWT_AUDIENCE: Final = "TETHER_JWT_AUDIENCE"
# RFC 7518 §3.2: an HS256 key is at least as long as the hash output (256 bits).
MIN_JWT_SECRET: Final = 32
_JWT_SHAPE: Final = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
_NAME_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.@-]+")
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
    user: str | None = None  # bound to one user: only their scope and threads

    def __post_init__(self) -> None:
        if self.user is not None and (
            not isinstance(self.user, str)
            or not 1 <= len(self.user) <= 200
            or any(ord(c) < 32 or ord(c) == 127 for c in self.user)
        ):
            raise AuthConfigError(
                f"token {self.name!r}: user must be a user id (1-200 printable characters)",
                field="user",
            )
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
                    f"{', '.join(GRANTS)}, state.*, agent.*, memory.* or *",
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

    @property
    def only_namespace(self) -> str | None:
        """The one namespace this token may touch, when it names exactly one (no pattern)."""
        if len(self.namespaces) == 1 and not self.namespaces[0].endswith("*"):
            return self.namespaces[0]
        return None

    def to_dict(self) -> dict[str, Any]:
        """What a token may do (for ``GET /v1/whoami``); the digest is left out."""
        out: dict[str, Any] = {
            "name": self.name,
            "grants": sorted(self.grants),
            "namespaces": list(self.namespaces),
        }
        if self.user is not None:
            out["user"] = self.user
        return out


def _str_list(entry: str, key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AuthConfigError(f"token {entry}: {key} must be a list of strings", field=key)
    return list(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class JwtKey:
    """How HS256 JWT bearer tokens are verified: the shared secret, and the ``iss`` and
    ``aud`` a token must carry when given. ``leeway`` (seconds) allows for clock skew."""

    secret: str = field(repr=False)
    issuer: str | None = None
    audience: str | None = None
    leeway: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.secret, str) or len(self.secret) < MIN_JWT_SECRET:
            raise AuthConfigError(
                f"the JWT secret is shorter than {MIN_JWT_SECRET} characters (HS256 needs "
                "256 bits); make one with python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'",
                field="jwt_secret",
            )
        if isinstance(self.leeway, bool) or not isinstance(self.leeway, int) or self.leeway < 0:
            raise AuthConfigError("the JWT leeway is a number of seconds >= 0", field="leeway")
        try:
            import jwt  # noqa: F401  (the server extra installs PyJWT)
        except ImportError:
            raise AuthConfigError(
                "JWT bearer tokens need PyJWT: pip install 'tether[server]'", field="jwt_secret"
            ) from None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JwtKey | None:
        """``$TETHER_JWT_SECRET`` (and ``_ISSUER``, ``_AUDIENCE``), or None when unset."""
        secret = env.get(ENV_JWT_SECRET)
        if not secret:
            return None
        return cls(
            secret=secret,
            issuer=env.get(ENV_JWT_ISSUER) or None,
            audience=env.get(ENV_JWT_AUDIENCE) or None,
        )

    def verify(self, presented: str) -> Token:
        """The token a valid JWT stands for; ``Unauthorized`` for any failed check."""
        import jwt

        try:
            claims = jwt.decode(
                presented,
                self.secret,
                algorithms=["HS256"],  # one algorithm: never "none", never a public key
                issuer=self.issuer,
                audience=self.audience,
                leeway=self.leeway,
                options={
                    "require": ["exp"],
                    "verify_aud": self.audience is not None,
                    "verify_iss": self.issuer is not None,
                },
            )
        except jwt.PyJWTError as e:
            raise Unauthorized(f"the bearer JWT was refused: {e}") from None
        namespaces = claims.get("namespaces", claims.get("namespace"))
        sub = claims.get("sub")
        name = "jwt"
        if isinstance(sub, str) and sub:
            name = ("jwt." + _NAME_UNSAFE.sub("_", sub))[:64]
        try:
            return Token(
                name=name,
                digest=hashlib.sha256(presented.encode("utf-8")).digest(),
                grants=frozenset(_str_list(name, "grants", claims.get("grants", []))),
                namespaces=tuple(_str_list(name, "namespaces", namespaces or [])),
                user=claims.get("user"),
            )
        except AuthConfigError as e:
            # The signature is good but the claims cannot be used: still nothing is allowed.
            raise Unauthorized(f"the bearer JWT's claims were refused: {e.message}") from None


def _anonymous_namespace(namespace: str) -> str:
    """``--anonymous-namespace``: one namespace by name (no pattern: requests act in it)."""
    try:
        check_name("namespace", namespace)
    except InvalidRequest as e:
        raise AuthConfigError(
            f"--anonymous-namespace takes one namespace name: {e.message}",
            field="anonymous_namespace",
        ) from None
    if namespace.endswith("*"):
        raise AuthConfigError(
            f"--anonymous-namespace takes one namespace name, not a pattern: {namespace!r}",
            field="anonymous_namespace",
        )
    return namespace


class Tokens:
    """The set of known tokens. ``authenticate`` maps a presented secret to its ``Token``.

    ``jwt``: a ``JwtKey`` to accept HS256 JWTs as well (their claims carry the grants).
    """

    def __init__(
        self,
        tokens: Iterable[Token],
        *,
        jwt: JwtKey | None = None,
        anonymous: Token | None = None,
        anonymous_remote: bool = False,
    ) -> None:
        self._tokens = tuple(tokens)
        self.jwt = jwt
        self.anonymous = anonymous
        self.anonymous_remote = anonymous_remote
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
        jwt = ", jwt=HS256" if self.jwt is not None else ""
        return f"Tokens({[t.name for t in self._tokens]!r}{jwt})"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self._tokens)

    @property
    def configured(self) -> bool:
        """Whether any client can be served (a named token, a JWT key, anonymous grants)."""
        return bool(self._tokens) or self.jwt is not None or self.anonymous is not None

    def with_anonymous(
        self, grants: str | Iterable[str], *, remote: bool = False, namespace: str | None = None
    ) -> Tokens:
        """These tokens, plus anonymous clients served with ``grants`` (comma-separated or a
        list) on every namespace, or only on ``namespace`` (where a request naming none,
        as Protolink's, then acts); from loopback addresses only unless ``remote``."""
        names = grants.split(",") if isinstance(grants, str) else list(grants)
        names = [g.strip() for g in names if g.strip()]
        if not names:
            raise AuthConfigError(
                "--anonymous takes the grants anonymous clients get, e.g. state.describe,state.history",
                field="anonymous",
            )
        token = Token(
            name="anonymous",
            digest=hashlib.sha256(b"anonymous").digest(),
            grants=frozenset(names),
            namespaces=("*",) if namespace is None else (_anonymous_namespace(namespace),),
        )
        return Tokens(self._tokens, jwt=self.jwt, anonymous=token, anonymous_remote=remote)

    def authenticate(self, presented: str | None, *, client: str | None = None) -> Token:
        """The token whose digest matches ``presented``; raises ``Unauthorized`` otherwise.

        Every known digest is compared, whatever matched first, so the time taken
        does not depend on which token (if any) matched. ``presented`` None (nothing
        sent) is the anonymous token when the server serves anonymous clients and
        ``client`` (the peer's address) is loopback, or any address when allowed.
        """
        if presented is None and self.anonymous is not None:
            if self.anonymous_remote or _loopback(client):
                return self.anonymous
            raise Unauthorized(
                "anonymous clients are served from this machine only (start the server "
                "with --anonymous-remote to serve them from anywhere); send a token: "
                "Authorization: Bearer <token>"
            )
        if not presented:
            raise Unauthorized(
                "send a token (Authorization: Bearer <token>, Authorization: ApiKey <token> "
                "or X-API-Key), or start the server with --anonymous GRANTS to serve "
                "clients that send none"
            )
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found: Token | None = None
        for t in self._tokens:
            if hmac.compare_digest(digest, t.digest) and found is None:
                found = t
        if found is None and self.jwt is not None and _JWT_SHAPE.match(presented):
            return self.jwt.verify(presented)
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
        """``$TETHER_TOKENS_FILE`` (if set) plus ``$TETHER_TOKEN`` (one all-grants token),
        and JWTs when ``$TETHER_JWT_SECRET`` is set."""
        env = os.environ if env is None else env
        tokens: list[Token] = []
        path = env.get(ENV_TOKENS_FILE)
        if path:
            tokens.extend(cls.from_file(path, env=env)._tokens)
        secret = env.get(ENV_TOKEN)
        if secret:
            tokens.append(dev_token(secret))
        return cls(tokens, jwt=JwtKey.from_env(env))

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
        return Tokens(
            [*self._tokens, *other._tokens],
            jwt=other.jwt or self.jwt,
            anonymous=other.anonymous or self.anonymous,
            anonymous_remote=other.anonymous_remote or self.anonymous_remote,
        )


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def presented_credential(headers: Mapping[str, str]) -> str | None:
    """The credential a request sends: ``Authorization: Bearer``/``ApiKey`` or
    ``X-API-Key``; None when it sends none. An ``Authorization`` of another scheme
    (Basic ...) is a credential tether cannot read: ``""``, refused, never anonymous."""
    auth = headers.get("authorization")
    if auth is not None:
        scheme, _, value = auth.strip().partition(" ")
        if scheme.lower() in ("bearer", "apikey") and value.strip():
            return value.strip()
        return ""
    key = headers.get("x-api-key")
    if key is not None:
        return key.strip()
    return None


def mint_jwt(
    secret: str,
    *,
    grants: Iterable[str],
    namespaces: Iterable[str],
    user: str | None = None,
    subject: str | None = None,
    ttl: int = 3600,
    issuer: str | None = None,
    audience: str | None = None,
    now: float | None = None,
) -> str:
    """An HS256 JWT the server configured with ``secret`` accepts (``tether token``).

    The claims are checked as the server will check them, so a token that would be
    refused is never printed: ``AuthConfigError`` instead.
    """
    import time

    key = JwtKey(secret=secret, issuer=issuer, audience=audience)
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1:
        raise AuthConfigError("the token's lifetime is a number of seconds >= 1", field="ttl")
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "iat": issued,
        "exp": issued + ttl,
        "grants": list(grants),
        "namespaces": list(namespaces),
    }
    if subject or user:
        claims["sub"] = subject or user
    if user is not None:
        claims["user"] = user
    if issuer is not None:
        claims["iss"] = issuer
    if audience is not None:
        claims["aud"] = audience
    # The checks of Token: known grants, namespaces, a valid user.
    Token(
        name="jwt",
        digest=bytes(32),
        grants=frozenset(claims["grants"]),
        namespaces=tuple(claims["namespaces"]),
        user=user,
    )
    import jwt

    return jwt.encode(claims, key.secret, algorithm="HS256")


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
    user: str | None = None,
) -> Token:
    _check_secret(f"the token {name!r}", secret)
    return Token(
        name=name,
        digest=hashlib.sha256(secret.encode("utf-8")).digest(),
        grants=frozenset(grants),
        namespaces=tuple(namespaces),
        user=user,
    )


def _entry(i: int, raw: Any, env: Mapping[str, str]) -> Token:
    where = f"#{i}"
    if not isinstance(raw, Mapping):
        raise AuthConfigError(f"token {where} must be an object", field="tokens")
    known = {"name", "sha256", "token_env", "grants", "namespaces", "user"}
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
        user=raw.get("user"),
    )
