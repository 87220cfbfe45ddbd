"""Coercion of variable values to their declared type (SPEC §3, seed 004). Pure.

``coerce(type, value)`` returns ``(stored, ok, error)``: ``stored`` is the JSON form
written to the graph, ``ok`` says whether the value now has the declared type, and
``error`` says why not. When ``ok`` is False, ``stored`` is the value as given
(normalised to JSON: tuples become lists, numpy scalars Python numbers), so a write
keeps it and reports the error; ``Variables.set`` raises ``UnstorableValue`` only if
even that is impossible (NaN, Infinity, arbitrary objects).

=========  ==========================================  ============================
type       accepted (-> stored)                         not coercible
=========  ==========================================  ============================
string     str; bool -> "true"/"false"; numbers, lists  None, non-finite floats,
           and dicts -> JSON text; DataFrame -> CSV     other objects
integer    int; bool -> 0/1; whole floats; "1", " 42 ",  "abc", "2.5", 2.5, outside
           "1.0", "1e3"                                ±(2**53-1), None, lists
float      int, float, bool; "2.5", "1e-3", "7"         "abc", "nan", "inf", None
boolean    bool; 0/1; "true"/"false", "yes"/"no",       "maybe", 2, None, lists
           "on"/"off", "1"/"0", "y"/"n", "t"/"f"
json       any JSON value; a str is parsed as JSON      a str that is not JSON
           (``'{"a": 1}'`` -> ``{"a": 1}``); DataFrame   ("hello": quote it as
           -> records                                  '"hello"'), NaN, objects
csv        CSV text -> rows (lists of strings, header   text the csv module rejects
           row first); rows; records (list of dicts)   (unclosed quote, NUL),
           -> header + rows; DataFrame                 numbers, dicts, None
dataframe  DataFrame; records; rows with a header       ragged rows, duplicate or
           row; ``{"columns", "data"}``; a dict of      non-string column names,
           equal-length columns; CSV text (numbers     unequal columns, numbers,
           inferred per column)                        None
=========  ==========================================  ============================

A ``csv`` value is ``[[header...], [cell...], ...]`` and ``to_csv_text`` turns it back
into text; ``"a,b\\n1,2\\n"`` round-trips exactly. A ``dataframe`` is stored as
``{"columns": [...], "data": [[...], ...]}`` (pandas' ``split`` orientation without the
index, so column order survives) and read back by ``read_value`` as a pandas
DataFrame when pandas is installed, else as records (a list of dicts).
"""

from __future__ import annotations

import csv
import importlib
import io
import math
import numbers
import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from ..core.canonical import MAX_SAFE_INT, CanonicalError, canonical_json
from ..core.errors import InvalidRequest

__all__ = [
    "TYPES",
    "coerce",
    "read_value",
    "storable",
    "to_csv_text",
]

TYPES: Final = ("string", "integer", "float", "boolean", "json", "csv", "dataframe")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_TRUE = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "off", "0"})

Result = tuple[Any, bool, str | None]


class _NotJson(Exception):
    pass


def _is_frame(value: Any) -> bool:
    t = type(value)
    return t.__name__ == "DataFrame" and t.__module__.startswith("pandas")


def _json(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON data, or _NotJson."""
    if depth > 64:
        raise _NotJson("nested deeper than 64 levels")
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _NotJson(f"object key {k!r} is not a string")
            out[k] = _json(v, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_json(v, depth + 1) for v in value]
    if isinstance(value, numbers.Number) and hasattr(value, "item"):  # numpy scalars
        return _json(value.item(), depth)
    raise _NotJson(f"{type(value).__name__} is not a JSON value")


def storable(value: Any) -> tuple[Any, str | None]:
    """``(json_value, None)`` if ``value`` can be stored in a node, else ``(None, why)``."""
    try:
        data = _json(value)
        canonical_json(data)
    except (_NotJson, CanonicalError) as e:
        return None, str(e)
    return data, None


def _as_given(value: Any, error: str) -> Result:
    data, _ = storable(value)
    return (data if data is not None or value is None else value), False, error


def _json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return _json_text(value)


# -- per type -----------------------------------------------------------------------


def _string(v: Any) -> Result:
    if isinstance(v, str):
        return v, True, None
    if isinstance(v, bool):
        return ("true" if v else "false"), True, None
    if _is_frame(v):
        return v.to_csv(index=False, lineterminator="\n"), True, None
    data, why = storable(v)
    if v is None or why is not None:
        return _as_given(
            v,
            f"{'null' if v is None else type(v).__name__} is not a string"
            + (f" ({why})" if why else ""),
        )
    return _json_text(data), True, None


def _whole(x: float) -> Result:
    if not math.isfinite(x) or not x.is_integer():
        return None, False, f"{x!r} is not a whole number"
    return int(x), True, None


def _integer(v: Any) -> Result:
    out: Result
    if isinstance(v, bool | numbers.Integral):
        out = int(v), True, None
    elif isinstance(v, numbers.Real):
        out = _whole(float(v))
    elif isinstance(v, str):
        s = v.strip()
        if _INT.match(s):
            out = int(s), True, None
        elif _FLOAT.match(s):
            out = _whole(float(s))
        else:
            out = None, False, f"{v!r} is not an integer"
    else:
        out = None, False, f"{'null' if v is None else type(v).__name__} is not an integer"
    value, ok, err = out
    if ok and isinstance(value, int) and abs(value) > MAX_SAFE_INT:
        ok, err = False, f"{value} is outside ±(2**53-1); use a string variable"
    return (value, True, None) if ok else _as_given(v, err or "not an integer")


def _float(v: Any) -> Result:
    x: float | None = None
    if isinstance(v, numbers.Real):
        x = float(v)
    elif isinstance(v, str) and (_FLOAT.match(v.strip()) or _INT.match(v.strip())):
        x = float(v.strip())
    if x is None:
        what = repr(v) if isinstance(v, str) else ("null" if v is None else type(v).__name__)
        return _as_given(v, f"{what} is not a number")
    if not math.isfinite(x):
        return _as_given(v, f"{x!r} is not a finite number")
    return x, True, None


def _boolean(v: Any) -> Result:
    if isinstance(v, bool):
        return v, True, None
    if isinstance(v, numbers.Real) and v in (0, 1):
        return bool(v), True, None
    if isinstance(v, str):
        s = v.strip().lower()
        if s in _TRUE:
            return True, True, None
        if s in _FALSE:
            return False, True, None
    return _as_given(v, f"{v!r} is not a boolean (use true/false, yes/no, on/off, 1/0)")


def _frame_split(df: Any) -> dict[str, Any]:
    data = orjson.loads(df.to_json(orient="split", index=False, date_format="iso"))
    return {"columns": [str(c) for c in data["columns"]], "data": data["data"]}


def _json_type(v: Any) -> Result:
    if isinstance(v, str):
        try:
            return orjson.loads(v), True, None
        except orjson.JSONDecodeError as e:
            return v, False, f"not valid JSON ({e}); to store text, quote it as a JSON string"
    if _is_frame(v):
        split = _frame_split(v)
        return [dict(zip(split["columns"], row, strict=True)) for row in split["data"]], True, None
    data, why = storable(v)
    if why is not None:
        return v, False, f"not a JSON value ({why})"
    return data, True, None


def _parse_csv(text: str) -> list[list[str]]:
    return [row for row in csv.reader(io.StringIO(text, newline=""), strict=True)]


def _records_rows(records: list[Any]) -> list[list[Any]]:
    header: dict[str, None] = {}
    for r in records:
        header.update(dict.fromkeys(r))
    cols = list(header)
    return [cols] + [[r.get(c) for c in cols] for r in records]


def _csv(v: Any) -> Result:
    rows: list[list[Any]]
    if isinstance(v, str):
        try:
            return _parse_csv(v), True, None
        except csv.Error as e:
            return _as_given(v, f"not valid CSV ({e})")
    if _is_frame(v):
        split = _frame_split(v)
        rows = [split["columns"], *split["data"]]
    elif isinstance(v, list | tuple) and all(isinstance(r, Mapping) for r in v) and v:
        if not all(isinstance(k, str) for r in v for k in r):
            return _as_given(v, "record keys must be strings")
        rows = _records_rows(list(v))
    elif isinstance(v, list | tuple) and all(isinstance(r, list | tuple) for r in v):
        rows = [list(r) for r in v]
    else:
        return _as_given(
            v,
            f"{'null' if v is None else type(v).__name__} is not CSV (give text, rows or records)",
        )
    return [[_cell(c) for c in r] for r in rows], True, None


def _infer_column(values: list[str]) -> list[Any]:
    present = [s.strip() for s in values if s.strip() != ""]
    if present and all(_INT.match(s) for s in present):
        conv: Any = int
    elif present and all(_FLOAT.match(s) or _INT.match(s) for s in present):
        conv = float
    else:
        return [s if s != "" else None for s in values]
    return [conv(s.strip()) if s.strip() != "" else None for s in values]


def _frame_from(columns: list[Any], data: list[list[Any]], source: Any) -> Result:
    if not all(isinstance(c, str) for c in columns):
        return _as_given(source, "column names must be strings")
    if len(set(columns)) != len(columns):
        return _as_given(source, "column names must be unique")
    for i, row in enumerate(data):
        if len(row) != len(columns):
            return _as_given(
                source, f"row {i} has {len(row)} cells but there are {len(columns)} columns"
            )
    value, why = storable({"columns": columns, "data": data})
    if why is not None:
        return _as_given(source, f"cells are not JSON values ({why})")
    return value, True, None


def _dataframe(v: Any) -> Result:
    if _is_frame(v):
        split = _frame_split(v)
        return _frame_from(split["columns"], split["data"], split)
    if isinstance(v, str):
        try:
            rows = [r for r in _parse_csv(v) if r]  # blank lines carry no row
        except csv.Error as e:
            return _as_given(v, f"not valid CSV ({e})")
        if not rows:
            return {"columns": [], "data": []}, True, None
        header, body = rows[0], rows[1:]
        if any(len(r) != len(header) for r in body):
            return _as_given(v, "CSV rows have a different number of cells than the header")
        cols = [_infer_column([r[i] for r in body]) for i in range(len(header))]
        data = [[cols[i][j] for i in range(len(header))] for j in range(len(body))]
        return _frame_from(header, data, v)
    if isinstance(v, Mapping):
        if set(v) == {"columns", "data"} and isinstance(v["columns"], list | tuple):
            data = v["data"]
            if isinstance(data, list | tuple) and all(isinstance(r, list | tuple) for r in data):
                return _frame_from(list(v["columns"]), [list(r) for r in data], v)
            return _as_given(v, "data must be a list of rows")
        cols = list(v)
        if all(isinstance(x, list | tuple) for x in v.values()):
            lengths = {len(x) for x in v.values()}
            if len(lengths) > 1:
                return _as_given(v, "columns have different lengths")
            n = lengths.pop() if lengths else 0
            return _frame_from(cols, [[v[c][j] for c in cols] for j in range(n)], v)
        return _as_given(v, "a dict must be {column: [values]} or {'columns', 'data'}")
    if isinstance(v, list | tuple):
        if not v:
            return {"columns": [], "data": []}, True, None
        if all(isinstance(r, Mapping) for r in v):
            rows = _records_rows(list(v))
            return _frame_from(rows[0], rows[1:], v)
        if all(isinstance(r, list | tuple) for r in v):
            return _frame_from(list(v[0]), [list(r) for r in v[1:]], v)
        return _as_given(v, "a list must hold records (dicts) or rows (lists) with a header row")
    return _as_given(
        v,
        f"{'null' if v is None else type(v).__name__} is not a table (give a DataFrame, records, rows or CSV)",
    )


_BY_TYPE = {
    "string": _string,
    "integer": _integer,
    "float": _float,
    "boolean": _boolean,
    "json": _json_type,
    "csv": _csv,
    "dataframe": _dataframe,
}


def coerce(type: str, value: Any) -> Result:
    """``(stored, ok, error)`` for writing ``value`` into a variable of ``type``."""
    fn = _BY_TYPE.get(type)
    if fn is None:
        raise InvalidRequest(
            f"unknown variable type {type!r}; use one of {', '.join(TYPES)}", field="type"
        )
    return fn(value)


def to_csv_text(rows: list[list[Any]]) -> str:
    """A ``csv`` variable's rows back to CSV text (``\\n`` line ends, minimal quoting)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in rows:
        w.writerow([_cell(c) for c in r])
    return buf.getvalue()


def read_value(type: str, stored: Any) -> Any:
    """The form a program reads: a DataFrame (or records) for dataframes, else the value."""
    if type != "dataframe" or not isinstance(stored, dict):
        return stored
    columns, data = stored.get("columns", []), stored.get("data", [])
    try:
        pd = importlib.import_module("pandas")
    except ImportError:
        return [dict(zip(columns, row, strict=True)) for row in data]
    return pd.DataFrame(data, columns=columns)
