"""Other projects' own tests, fetched as sdists from the package index.

``sdist(dist)`` downloads the sdist of the installed version of ``dist``
(``pip download --no-deps --no-binary :all: dist==X``) into
``~/.cache/tether-tests/<dist>-X`` (``TETHER_TEST_CACHE`` moves it; outside the
repository; reused by later runs) and returns the unpacked source tree. Nothing is
copied into tether's tree.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path

CACHE = Path(os.environ.get("TETHER_TEST_CACHE", Path.home() / ".cache" / "tether-tests"))


def sdist(dist: str, marker: str) -> Path:
    """The unpacked sdist of the installed ``dist``; ``marker`` is a file it must hold
    (relative to its top folder), checked to tell a complete unpack from a partial one."""
    ver = version(dist)
    root = CACHE / f"{dist}-{ver}"
    done = root / "unpacked"
    if (done / marker).exists():
        return done
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"{dist}=={ver}",
                "-d",
                tmp,
            ],
            check=True,
            timeout=300,
            capture_output=True,
        )
        (archive,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp, "x"), filter="data")
        (top,) = Path(tmp, "x").iterdir()
        with contextlib.suppress(OSError):  # another process unpacked it first
            top.rename(done)
    assert (done / marker).exists(), done
    return done


def xdist_args(workers: int) -> list[str]:
    """pytest options that spread another project's tests over ``workers`` processes.

    For suites that mostly wait (LangGraph's sleep in their own tests): their waits
    overlap instead of adding up. LangGraph runs its suite this way itself (``make
    test_parallel``: ``pytest -n auto --dist worksteal``). Every test still runs once and
    the summary line is the same; without pytest-xdist installed, the suite runs serially.
    """
    if importlib.util.find_spec("xdist") is None:
        return []
    return ["-n", str(workers), "--dist", "worksteal"]
