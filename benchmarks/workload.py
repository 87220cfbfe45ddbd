"""The workload's messages: deterministic, unique, exactly MESSAGE_BYTES of ASCII."""

from __future__ import annotations

MESSAGE_BYTES = 200
_FILL = (
    "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor "
    "jugs. How vexingly quick daft zebras jump! Sphinx of black quartz, judge my vow. "
) * 3

THREAD_A = "thread-a"


def message(thread: str, turn: int, role: str) -> str:
    head = f"[{role} {thread} #{turn}] "
    return (head + _FILL)[:MESSAGE_BYTES]


def turn_messages(thread: str, turn: int) -> tuple[str, str]:
    return message(thread, turn, "user"), message(thread, turn, "assistant")


def expected(thread: str, turns: int) -> list[str]:
    out: list[str] = []
    for i in range(turns):
        out.extend(turn_messages(thread, i))
    return out


def thread_name(k: int) -> str:
    return f"thread-b{k:04d}"
