"""Every code block of README.md and docs/*.md runs as pasted.

Per Markdown file, its Python blocks run in order in one fresh interpreter (one
subprocess per file, tests/_docs_driver.py), top-level ``await`` allowed as in
``python -m asyncio``, in a temporary directory as the working directory. The README's
shell blocks (```sh / ```bash) run in order in one ``bash -euo pipefail``, in a temporary
directory, with this interpreter's ``tether`` first on PATH.

A YAML/JSON/TOML block whose first line is a ``# some/path.yaml`` comment, or whose fence
names it as its title (```` ```json title="some/path.json" ````), is saved to that path in
the working directory first, as a reader saving it would.

A block is skipped only when its fence says so (```python skip) or its first line is a
visible ``# needs: ...`` comment saying what a laptop lacks. ``# needs: postgres`` and
``# needs: redis`` blocks read ``DATABASE_URL`` / ``REDIS_URL``: they run when the suite's
TETHER_TEST_POSTGRES_URL / TETHER_TEST_REDIS_URL are set (then passed as those names), are
skipped otherwise, and fail when TETHER_REQUIRE_SERVERS=1 and the server is missing.
The counts of blocks run and skipped are printed in pytest's terminal summary.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import DOCS_TALLY

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).with_name("_docs_driver.py")
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PYTHON = {"python", "py"}
SHELL = {"sh", "bash", "shell"}
FILES = {"yaml", "yml", "json", "toml", "text"}
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)\s*(.*)$")
# server markers: the env var the suite names the server by, and the name the block reads
SERVERS = {
    "postgres": ("TETHER_TEST_POSTGRES_URL", "DATABASE_URL"),
    "redis": ("TETHER_TEST_REDIS_URL", "REDIS_URL"),
}


@dataclass
class Block:
    file: Path
    line: int  # the first line of code (1-based)
    lang: str
    flags: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"

    @property
    def needs(self) -> str | None:
        first = self.code.lstrip().splitlines()[0] if self.code.strip() else ""
        m = re.match(r"#\s*needs:\s*(.+)$", first)
        return m.group(1).strip() if m else None


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file (top-level fences only, as renderers see them)."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, flags = m.group(1), m.group(2).lower(), m.group(3)
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence[0] * len(fence)):
            j += 1
        out.append(Block(path, i + 2, lang, flags, "\n".join(lines[i + 1 : j]) + "\n"))
        i = j + 1
    return out


def saved_as(block: Block) -> str | None:
    """Where a file block is saved before the page's Python runs: the path its first line
    names (``# config/app.yaml``), or its title (```` ```json title="config.json" ````,
    for JSON, which has no comments; the site shows the title above the block)."""
    if block.lang not in FILES:
        return None
    first = re.match(r"#\s*([\w./-]+\.(?:ya?ml|json|toml|txt))\s*$", block.code.split("\n")[0])
    if first:
        return first.group(1)
    titled = re.search(r'\btitle="([\w./-]+\.(?:ya?ml|json|toml|txt))"', block.flags)
    return titled.group(1) if titled else None


def skip_reason(block: Block) -> str | None:
    """Why a block does not run here (None: it runs)."""
    if "skip" in block.flags.split():
        return "fenced `skip`"
    needs = block.needs
    if needs is None:
        return None
    server = SERVERS.get(needs.split()[0].lower().rstrip(",.:;"))
    if server is None:
        return f"needs: {needs}"
    if os.environ.get(server[0]):
        return None
    if os.environ.get("TETHER_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{block.where} needs {needs} but {server[0]} is not set")
    return f"needs: {needs} ({server[0]} not set)"


def env_for_blocks() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for suite_var, block_var in SERVERS.values():
        if os.environ.get(suite_var):
            env[block_var] = os.environ[suite_var]
    for var in ("TETHER_STORE", "TETHER_MASTER_KEY", "TETHER_TOKENS"):
        env.pop(var, None)  # a reader's shell has none of the suite's settings
    return env


def _tally(request: pytest.FixtureRequest, ran: int, skipped: list[str]) -> None:
    """Counted in pytest's terminal summary (tests/conftest.py), also from xdist workers."""
    request.node.user_properties.append((DOCS_TALLY, {"run": ran, "skipped": skipped}))


def _split(blocks: list[Block]) -> tuple[list[Block], list[str]]:
    run, skipped = [], []
    for b in blocks:
        reason = skip_reason(b)
        if reason is None:
            run.append(b)
        else:
            skipped.append(f"{b.where} ({reason})")
    return run, skipped


def _python_files() -> list[Path]:
    return [p for p in DOC_FILES if any(b.lang in PYTHON for b in blocks_of(p))]


@pytest.mark.slow
@pytest.mark.parametrize("path", _python_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run_as_pasted(
    path: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    run, skipped = _split([b for b in blocks_of(path) if b.lang in PYTHON])
    _tally(request, len(run), skipped)
    if not run:
        pytest.skip(f"every Python block of {path.name} is skipped: {skipped}")
    work = tmp_path / "cwd"
    work.mkdir()
    for b in blocks_of(path):  # files the page shows, saved where the block names them
        name = saved_as(b)
        if name is not None and skip_reason(b) is None:
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(b.code)
    blocks_file, results_file = tmp_path / "blocks.json", tmp_path / "results.json"
    blocks_file.write_text(
        json.dumps([{"file": str(b.file), "line": b.line, "code": b.code} for b in run])
    )
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(blocks_file), str(results_file)],
        cwd=work,
        env=env_for_blocks(),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    results = json.loads(results_file.read_text()) if results_file.exists() else []
    failed = [r for r in results if not r["ok"]]
    detail = "\n".join(f"--- {path.name}:{r['line']}\n{r['error']}" for r in failed)
    if proc.returncode != 0 or len(results) != len(run) or failed:
        pytest.fail(
            f"{len(failed)} of {len(run)} blocks failed (exit {proc.returncode}, "
            f"{len(results)} ran)\n{detail}\nstderr:\n{proc.stderr[-3000:]}",
            pytrace=False,
        )


@pytest.mark.slow
def test_readme_shell_blocks_run_in_order(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    run, skipped = _split([b for b in blocks_of(ROOT / "README.md") if b.lang in SHELL])
    _tally(request, len(run), skipped)
    assert run, "the README shows no shell sequence to run"
    parts = ["set -euo pipefail"]
    for b in run:
        parts.append(f"echo '>>> block {b.where}' >&2")
        parts.append(b.code)
    proc = subprocess.run(
        ["bash", "-c", "\n".join(parts)],
        cwd=tmp_path,
        env=env_for_blocks(),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\n"
            f"stderr:\n{proc.stderr[-3000:]}",
            pytrace=False,
        )


def test_block_parser_sees_fences_flags_and_markers(tmp_path: Path) -> None:
    md = tmp_path / "x.md"
    md.write_text(
        "text\n```python\nx = 1\n```\n\n```python skip\n# a remote thing\n```\n"
        "````sh\n```\necho nested\n````\n```python\n# needs: postgres\nurl = 1\n```\n"
    )
    got = [(b.line, b.lang, b.flags, b.code) for b in blocks_of(md)]
    assert got == [
        (3, "python", "", "x = 1\n"),
        (7, "python", "skip", "# a remote thing\n"),
        (10, "sh", "", "```\necho nested\n"),
        (14, "python", "", "# needs: postgres\nurl = 1\n"),
    ]
    assert skip_reason(blocks_of(md)[1]) == "fenced `skip`"
    assert blocks_of(md)[3].needs == "postgres"
    md.write_text('```json title="cfg/app.json"\n{}\n```\n```yaml\n# a.yaml\nx: 1\n```\n')
    assert [saved_as(b) for b in blocks_of(md)] == ["cfg/app.json", "a.yaml"]


def test_user_docs_never_speak_in_internal_names() -> None:
    """ "seed 002" or "SPEC §1" mean nothing to a reader: the projects by name, or nothing."""
    inspector = ROOT / "src" / "tether" / "server" / "inspector"
    pages = [*DOC_FILES, *(p for p in inspector.rglob("*") if p.is_file())]
    internal = re.compile(r"\bseeds? 00\d|\bSPEC\s*(§|section)", re.IGNORECASE)
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in pages
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if internal.search(line)
    ]
    assert len(pages) > 20 and not found, "\n".join(found)
