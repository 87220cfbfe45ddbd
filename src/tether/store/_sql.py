"""Row encoding shared by the SQL backends (SQLite, PostgreSQL). Pure: no I/O.

Rows are kept small because bytes on disk per turn is one of the figures tether
is measured on:

* a node id ``cw_`` + 24 hex digits is stored as its 12 raw bytes;
* parents (and a frontier) are those 12-byte ids concatenated;
* a kind is a small integer (``KIND_CODES``; the order is frozen: it is on disk);
* ``createdAt`` is stored as integer milliseconds when the string is exactly the
  canonical ``YYYY-MM-DDTHH:MM:SS.mmmZ`` form of that instant, and verbatim
  otherwise, so an imported timestamp always reads back byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from ..core.errors import InvalidNode

# Frozen: these integers are stored in every node row. Append new kinds at the end.
KIND_CODES: Final[tuple[str, ...]] = (
    "system",
    "goal",
    "inference",
    "semantic",
    "tool_call",
    "tool_result",
    "resource",
    "verification",
    "answer",
    "protocol_error",
)
KIND_CODE: Final[dict[str, int]] = {k: i for i, k in enumerate(KIND_CODES)}

ID_BYTES: Final = 12
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def id_bytes(node_id: str) -> bytes:
    """``cw_0123...`` -> its 12 raw bytes. The id must already be well formed."""
    return bytes.fromhex(node_id[3:])


def id_str(raw: bytes) -> str:
    return "cw_" + raw.hex()


def pack_ids(ids: Sequence[str]) -> bytes:
    if len(ids) == 1:  # one parent: the common case
        return bytes.fromhex(ids[0][3:])
    return bytes.fromhex("".join([i[3:] for i in ids]))  # one conversion, not one per id


def unpack_ids(raw: bytes | None) -> tuple[str, ...]:
    if not raw:
        return ()
    h = raw.hex()
    if len(h) == 24:  # one parent: the common case
        return ("cw_" + h,)
    return tuple("cw_" + h[i : i + 24] for i in range(0, len(h), 24))


def kind_code(kind: str) -> int:
    code = KIND_CODE.get(kind)
    if code is None:
        raise InvalidNode(f"unknown kind {kind!r}", code="kind")
    return code


def kind_name(code: int) -> str:
    return KIND_CODES[code]


_MS_PER_DAY: Final = 86_400_000
_day_of: dict[str, int] = {}  # "YYYY-MM-DD" -> days since the epoch (one entry per day seen)
_date_of: dict[int, str] = {}  # and back


def _epoch_day(date: str) -> int | None:
    day = _day_of.get(date)
    if day is None:
        try:
            d = datetime.strptime(date, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            return None
        if f"{d.year:04d}-{d.month:02d}-{d.day:02d}" != date:
            return None
        day = (d - _EPOCH).days
        if len(_day_of) > 4096:
            _day_of.clear()
        _day_of[date] = day
    return day


_last_value: tuple[str, int | str] = ("", "")
_last_text: tuple[int | str, str] = ("", "")


def created_at_value(s: str) -> int | str:
    """What goes in the ``created_at`` column: integer ms if lossless, else the text.

    Lossless means ``s`` is exactly ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (what ``now_iso``
    writes), which ``created_at_text`` rebuilds byte for byte.
    """
    global _last_value
    last = _last_value  # one read: another thread may replace it meanwhile
    if s == last[0]:  # the nodes of one commit mostly share a millisecond
        return last[1]
    v = _created_at_value(s)
    _last_value = (s, v)
    return v


def _created_at_value(s: str) -> int | str:
    if (
        len(s) != 24
        or s[10] != "T"
        or s[13] != ":"
        or s[16] != ":"
        or s[19] != "."
        or s[23] != "Z"
        or not s[11:23].isascii()
        or not s[11:13].isdigit()
        or not s[14:16].isdigit()
        or not s[17:19].isdigit()
        or not s[20:23].isdigit()
    ):
        return s
    day = _epoch_day(s[:10])
    h, m, sec = int(s[11:13]), int(s[14:16]), int(s[17:19])
    if day is None or h > 23 or m > 59 or sec > 59:
        return s
    return day * _MS_PER_DAY + ((h * 60 + m) * 60 + sec) * 1000 + int(s[20:23])


_sec_text: tuple[int, str] = (0, "1970-01-01T00:00:00")


def created_at_text(v: int | str) -> str:
    global _last_text, _sec_text
    if isinstance(v, str):
        return v
    last = _last_text  # one read: another thread may replace it meanwhile
    if v == last[0]:  # the nodes of one commit mostly share a millisecond
        return last[1]
    sec, ms = divmod(v, 1000)
    # ... and a conversation's turns mostly share a second: format it once.
    cached = _sec_text
    if cached[0] != sec:
        cached = _sec_text = (sec, _second_text(sec))
    text = f"{cached[1]}.{ms:03d}Z"
    _last_text = (v, text)
    return text


class CreatedAtTexts(dict[int | str, str]):
    """``created_at_text`` memoized for one read: ``texts[v]``. The nodes of a commit
    share a millisecond and a page of a conversation repeats few of them, so most rows
    cost a dict look-up instead of a call."""

    def __missing__(self, v: int | str) -> str:
        text = self[v] = created_at_text(v)
        return text


def _second_text(sec: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of a second since the epoch."""
    day, sec = divmod(sec, 86_400)
    date = _date_of.get(day)
    if date is None:
        d = _EPOCH + timedelta(days=day)
        date = f"{d.year:04d}-{d.month:02d}-{d.day:02d}"
        if len(_date_of) > 4096:
            _date_of.clear()
        _date_of[day] = date
    m, sec = divmod(sec, 60)
    h, m = divmod(m, 60)
    return f"{date}T{h:02d}:{m:02d}:{sec:02d}"


def prefix_upper(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix``.

    For ``key >= prefix AND key < upper`` range scans under binary (code point,
    = UTF-8 byte) order. ``None`` means no upper bound (empty prefix, or a prefix
    of only U+10FFFF characters).
    """
    chars = list(prefix)
    while chars:
        c = ord(chars.pop())
        if c < 0x10FFFF:
            nxt = c + 1
            if 0xD800 <= nxt <= 0xDFFF:  # surrogates cannot be stored: skip them
                nxt = 0xE000
            return "".join(chars) + chr(nxt)
    return None


def across_sql(
    base: str,
    mark: str,
    namespace: str,
    key_prefix: str,
    scope_prefix: str,
    after: tuple[str, str] | None,
) -> tuple[str, list[object]]:
    """``base`` (a query over scopes ``s`` and resource heads ``r``, filtering
    ``s.ns = <first parameter>``) narrowed to ``resource_heads_across``'s ranges: scope
    and key prefixes, and the (scope, key) cursor. ``mark`` is the placeholder: ``?``
    (SQLite) or ``$`` (PostgreSQL, numbered from 2)."""
    params: list[object] = [namespace]
    sql = base

    def arg(value: object) -> str:
        params.append(value)
        return "?" if mark == "?" else f"${len(params)}"

    for column, prefix in (("s.scope", scope_prefix), ("r.key", key_prefix)):
        if prefix:
            sql += f" AND {column} >= {arg(prefix)}"
        upper = prefix_upper(prefix)
        if upper is not None:
            sql += f" AND {column} < {arg(upper)}"
    if after is not None:
        # ``s.scope >= a`` on its own gives the planner a range start on the scope index, so
        # a page seeks to the cursor instead of walking the namespace from its first scope.
        lower = arg(after[0])
        sql += f" AND s.scope >= {lower} AND (s.scope > {arg(after[0])} OR r.key > {arg(after[1])})"
    return sql, params
