"""Shared helpers of the tests that drive an agent in another process and kill it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def log_lines(log: Path) -> list[dict[str, Any]]:
    """The JSON lines a helper process appended to ``log`` (none before it exists)."""
    if not log.exists():
        return []
    return [json.loads(x) for x in log.read_text().splitlines() if x.strip()]


def run_json(script: str, *args: str, env: Mapping[str, str]) -> dict[str, Any]:
    """Run ``python script *args`` to the end; its last stdout line, parsed as JSON."""
    out = subprocess.run(
        [sys.executable, script, *args],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def kill_when(
    script: str, *args: str, env: Mapping[str, str], ready: Callable[[], bool], what: str
) -> int:
    """Start ``python script *args``, SIGKILL it once ``ready()`` holds; its return code.

    Fails with ``what`` if that takes over 30 s, or with the process's stderr if it
    exits first. The process is reaped and its pipes closed whatever happens.
    """
    proc = subprocess.Popen(
        [sys.executable, script, *args],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, what
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return proc.returncode
