"""Compile tether's bytecode before a benchmark starts its worker processes.

tether runs from its source tree (an editable install). With PYTHONDONTWRITEBYTECODE
set, every fresh worker would compile each tether module it imports, inside the timed
open for modules imported on first use, while the peers load the .pyc files pip wrote
when it installed them. Compiling ahead puts tether on the footing of an installed
package. The .pyc files go to __pycache__ (ignored by git).
"""

from __future__ import annotations

import compileall
import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def compile_tether() -> str:
    """Compile tether and the benchmark's own modules; returns what was done (for meta)."""
    spec = importlib.util.find_spec("tether")
    if spec is None or not spec.submodule_search_locations:
        return "tether not found"
    pkg = Path(next(iter(spec.submodule_search_locations)))
    ok = compileall.compile_dir(pkg, quiet=1)
    ok = compileall.compile_dir(BENCH / "systems", maxlevels=0, quiet=1) and ok
    ok = compileall.compile_file(BENCH / "workload.py", quiet=1) and ok
    return "tether's bytecode compiled ahead, as pip does" if ok else "compileall failed"
