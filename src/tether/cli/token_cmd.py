"""``tether token``: mint an HS256 JWT a server configured with the same secret accepts.

    export TETHER_JWT_SECRET=...   # the server's secret, at least 32 characters
    tether token --user ada --grant 'state.*' --grant agent.step --namespace acme

The token is printed on stdout (one line), for a client that sends a bearer token
(Protolink's ``BearerTokenAuth``, ``tether.client``, curl). Its claims are checked as
the server checks them, so a token the server would refuse is never printed.
"""

from __future__ import annotations

import importlib
import os

import click

from ..core.errors import TetherError
from . import _fail, _settings, emit, main


@main.command(name="token")
@click.option("--user", "-u", metavar="ID", help="Bind the token to this user (docs/http.md).")
@click.option(
    "--grant",
    "grants",
    multiple=True,
    required=True,
    metavar="GRANT",
    help="A grant (repeat): state.describe, state.*, agent.step, * ...",
)
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    metavar="PATTERN",
    help="A namespace pattern (repeat). Default: the command's namespace (-n).",
)
@click.option("--ttl", default=3600, show_default=True, type=click.IntRange(1), help="Seconds.")
@click.option("--subject", metavar="NAME", help="The token's name in logs (sub). Default: user.")
@click.option(
    "--secret-env",
    default="TETHER_JWT_SECRET",
    show_default=True,
    metavar="VAR",
    help="The environment variable holding the server's signing secret.",
)
@click.pass_context
def token(
    ctx: click.Context,
    user: str | None,
    grants: tuple[str, ...],
    namespaces: tuple[str, ...],
    ttl: int,
    subject: str | None,
    secret_env: str,
) -> None:
    """Mint a signed token (HS256 JWT) for a user and grants."""
    s = _settings(ctx)
    # The server's own rules (grants, namespaces, users), loaded as `serve` is: the
    # command line does not depend on the server layer, and needs tether[server] only here.
    try:
        auth = importlib.import_module("tether.server.auth")
    except ImportError:
        _fail(
            s, TetherError("tether token needs pip install 'tether[server]'", code="not_installed")
        )
    AuthConfigError, mint_jwt = auth.AuthConfigError, auth.mint_jwt
    secret = os.environ.get(secret_env)
    try:
        if not secret:
            raise AuthConfigError(
                f"${secret_env} is not set: set it to the server's JWT secret "
                "(the server reads $TETHER_JWT_SECRET)",
                field="secret",
            )
        minted = mint_jwt(
            secret,
            grants=grants,
            namespaces=namespaces or (s.namespace,),
            user=user,
            subject=subject,
            ttl=ttl,
            issuer=os.environ.get("TETHER_JWT_ISSUER") or None,
            audience=os.environ.get("TETHER_JWT_AUDIENCE") or None,
        )
    except TetherError as e:
        _fail(s, e)
    emit(s, {"token": minted}, lambda c: click.echo(minted))
