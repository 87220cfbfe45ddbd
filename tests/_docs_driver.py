"""Runs the Python blocks of one Markdown file, in order, in this one fresh interpreter.

Used by tests/test_docs.py: ``python _docs_driver.py BLOCKS_JSON RESULTS_JSON``. The blocks
share one namespace (as when pasted one after the other into one interpreter) and one event
loop; a block with a top-level ``await`` runs on that loop (as in ``python -m asyncio`` or a
notebook), any other block runs plainly (so ``asyncio.run`` inside it works). Each block is
compiled under the Markdown file's name, padded so a traceback names the file's own line.
Every block runs even after one fails; the result of each is written to RESULTS_JSON.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import sys
import traceback
from pathlib import Path
from typing import Any


def main() -> int:
    blocks: list[dict[str, Any]] = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    results: list[dict[str, Any]] = []
    for block in blocks:
        source = "\n" * (block["line"] - 1) + block["code"]
        try:
            code = compile(source, block["file"], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            value = eval(code, namespace)
            if inspect.iscoroutine(value):
                loop.run_until_complete(value)
        except BaseException as exc:  # a block's SystemExit is a failure too
            tb = traceback.format_exception(exc)
            results.append({"line": block["line"], "ok": False, "error": "".join(tb)})
        else:
            results.append({"line": block["line"], "ok": True})
        out.write_text(json.dumps(results))
        sys.stdout.flush()
    # what a block left open (a store, a server) closes with the interpreter, as in a REPL
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
