"""``tether serve``: a real uvicorn server over a socket, and its refusals at startup."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from _server_helpers import TOKEN, Served, env_without_tokens, filled_sqlite, serve
from tether.cli import main
from tether.runtime import Agent
from tether.server.auth import hash_token
from tether.server.cli import load_agent, server_tokens

OPS = "ops-token-" + "5" * 20


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    db = tmp_path / "served.db"
    filled_sqlite(db)
    with serve(db, tmp_path / "serve.log", "--agent", "_server_helpers:demo_agent") as s:
        yield s


def test_serve_answers_over_a_socket_and_stops_cleanly(served: Served, tmp_path: Path) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as c:
        assert c.get("/healthz").json()["ok"] is True
        assert c.get("/v1/whoami").status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        threads = c.get("/v1/ns/default/threads", headers=auth).json()["threads"]
        assert [t["thread"] for t in threads] == ["billing", "support-1", "support-2"]
        page = c.get("/", headers=auth)
        assert page.status_code == 200 and "tether inspector" in page.text
        assert c.get("/inspector/app.js").headers["content-type"].startswith("text/javascript")
        r = c.delete("/v1/ns/default/threads/support-2", headers=auth)
        assert r.json()["cleared"] == ["thread:support-2"]
        # The agent given with --agent runs steps in this process.
        step = c.post(
            "/v1/ns/default/threads/new/step", headers=auth, json={"input": "hi", "user": "z"}
        )
        assert step.json()["status"] == "completed"
    served.proc.send_signal(signal.SIGTERM)
    # uvicorn shuts down gracefully, then re-raises the signal it caught.
    assert served.proc.wait(timeout=15) in (0, -signal.SIGTERM)
    log = served.log.read_text()
    assert "Application shutdown complete" in log
    assert "token=env" in log and TOKEN not in log


def test_serve_refuses_to_start_without_tokens(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        main, ["--store", str(tmp_path / "x.db"), "serve", "--port", "0"], env=env_without_tokens()
    )
    assert result.exit_code == 2
    assert "no tokens" in result.output


def test_serve_refuses_a_bad_agent_and_a_bad_tokens_file(tmp_path: Path) -> None:
    runner = CliRunner()
    env = env_without_tokens(TETHER_TOKEN=TOKEN)
    result = runner.invoke(main, ["serve", "--agent", "no_such_module:agent"], env=env)
    assert result.exit_code == 2 and "cannot import" in result.output
    bad = tmp_path / "tokens.yaml"
    bad.write_text("tokens:\n  - {name: x, token: plain-secret, namespaces: ['*']}\n")
    result = runner.invoke(main, ["serve", "--tokens", str(bad)], env=env)
    assert result.exit_code == 2 and "never in the file" in result.output
    assert "plain-secret" not in result.output


def test_serve_takes_the_tokens_file_and_the_dev_token(tmp_path: Path) -> None:
    f = tmp_path / "tokens.yaml"
    f.write_text(f"tokens:\n  - {{name: ops, sha256: '{hash_token(OPS)}', namespaces: ['*']}}\n")
    assert server_tokens(str(f), {}).names == ("ops",)
    both = server_tokens(str(f), {"TETHER_TOKEN": TOKEN, "TETHER_TOKENS_FILE": str(f)})
    assert both.names == ("ops", "env")
    assert both.authenticate(OPS).name == "ops" and both.authenticate(TOKEN).name == "env"
    # Without --tokens, $TETHER_TOKENS_FILE and $TETHER_TOKEN are read (the file once).
    assert server_tokens(None, {"TETHER_TOKENS_FILE": str(f), "TETHER_TOKEN": TOKEN}).names == (
        "ops",
        "env",
    )


def test_load_agent() -> None:
    factory = load_agent("tether.cli.demo:agent")
    assert callable(factory) and not isinstance(factory, Agent)
    with pytest.raises(Exception, match="module:attribute"):
        load_agent("tether.cli.demo")
    with pytest.raises(Exception, match="no attribute"):
        load_agent("tether.cli.demo:nothing_here")
    with pytest.raises(Exception, match="neither"):
        load_agent("tether.cli.demo:NAMESPACE")


# --------------------------------------------------------------------------- tether token


def test_tether_token_mints_a_jwt_the_server_accepts() -> None:
    from tether.server.auth import JwtKey

    secret = "t" * 40
    runner = CliRunner()
    args = ["-n", "acme", "token", "--user", "ada", "--grant", "state.*", "--ttl", "60"]
    r = runner.invoke(main, args, env={"TETHER_JWT_SECRET": secret})
    assert r.exit_code == 0, r.output
    token = JwtKey(secret=secret).verify(r.output.strip())
    assert (token.name, token.user, token.grants, token.namespaces) == (
        "jwt.ada",
        "ada",
        frozenset({"state.*"}),
        ("acme",),
    )
    # Another secret: the server refuses it.
    with pytest.raises(Exception, match="refused"):
        JwtKey(secret="u" * 40).verify(r.output.strip())
    # A grant the server would refuse, or no secret: nothing printed, a typed error.
    r = runner.invoke(main, ["token", "--grant", "nope"], env={"TETHER_JWT_SECRET": secret})
    assert r.exit_code != 0 and "unknown grant 'nope'" in r.output and "eyJ" not in r.output
    r = runner.invoke(main, ["token", "--grant", "*"], env={"TETHER_JWT_SECRET": ""})
    assert r.exit_code != 0 and "TETHER_JWT_SECRET is not set" in r.output


def test_serve_without_any_token_names_the_anonymous_flag(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        main, ["--store", str(tmp_path / "x.db"), "serve"], env=env_without_tokens()
    )
    assert r.exit_code == 2 and "--anonymous GRANTS" in r.output
