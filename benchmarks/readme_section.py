"""The README section a benchmark owns: the text between its two markers, rewritten in
place by ``--update-readme`` (one helper for every script that owns such a section)."""

from __future__ import annotations

from pathlib import Path


def replace(readme: Path, start: str, end: str, section: str) -> None:
    """Put ``section`` between ``start`` and ``end`` in ``readme``, the rest unchanged;
    a README without both markers is an error, not a section appended somewhere."""
    text = readme.read_text()
    if start not in text or end not in text:
        raise SystemExit(f"{readme.name} has no {start} ... {end} section")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(f"{head}{start}\n{section}\n{end}{tail}")
