"""How every OpenAI Agents SDK session system is driven: one session object per
thread kept open, one ``add_items([user, assistant])`` per turn, ``get_items()`` for
the load. A system says how to make a session for a thread (``make``) and what to
close at the end (``shutdown``)."""

from __future__ import annotations

from typing import Any


class SessionDriver:
    """Mixin for a ``System``: sessions by thread, the turn, the load."""

    sessions: dict[str, Any]

    def make(self, thread: str) -> Any:  # pragma: no cover - each system's
        raise NotImplementedError

    def session(self, thread: str) -> Any:
        s = self.sessions.get(thread)
        if s is None:
            s = self.sessions[thread] = self.make(thread)
        return s

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        await self.session(thread).add_items(
            [
                {"role": "user", "content": user_msg},
                {"role": "assistant", "content": assistant_msg},
            ]
        )

    async def load(self, thread: str) -> list[str]:
        items = await self.session(thread).get_items()
        return [str(it["content"]) for it in items]
