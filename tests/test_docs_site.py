"""The documentation site builds from docs/ with mkdocs-material in strict mode.

The same build as `make docs` (mkdocs.yml: any warning, a broken link or anchor, a page
missing from the nav or an API reference entry that does not resolve, fails), written to
a temporary directory so nothing is left in the tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_site_builds_strictly_with_the_api_reference(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings[python] missing")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    for page in (
        "guides/human-approval",
        "guides/erase-a-user",
        "guides/postgresql",
        "guides/langgraph-state",
    ):
        assert (site / page / "index.html").is_file(), page
    reference = (site / "reference" / "index.html").read_text(encoding="utf-8")
    # mkdocstrings rendered the docstrings themselves, not only the headings
    assert "Open a store by URL." in reference
    assert "tether.control.describe" in reference
