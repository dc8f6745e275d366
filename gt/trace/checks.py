"""Type checks for what a ``.gtrace`` file holds: header, index, keyframes, model snapshots.

A record's checksum says it was written whole, not that it holds what it should: a file from
another version, a buggy tool or a hostile hand can carry any msgpack value with a valid checksum.
Every reader therefore checks a record's structure and types before it trusts it, here, in one
place; each check raises :class:`TraceFormatError` with a one-line reason that quotes at most a
short excerpt of the offending value. Event batches are checked by
:func:`gt.trace.events.unpack_batch`; event *fields* stay free-form and every consumer reads them
tolerantly (see :mod:`gt.trace.records`).

Pure: no files.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Mapping
from typing import Any

#: Times and counts in a trace are 64-bit integers (the record head's ``q``).
I64 = (-(1 << 63), 1 << 63)
#: The largest ``wall_time`` a header may hold (year 5138): what ``time.localtime`` can show.
WALL_MAX = 1e11

_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxdict, _repr.maxlist, _repr.maxstring, _repr.maxother = 2, 4, 4, 40, 40


class TraceFormatError(ValueError):
    """A file is not a readable ``.gtrace`` trace (foreign, corrupt, or cut inside its header)."""


def short(value: Any, limit: int = 60) -> str:
    """A value for a message: a bounded ``repr`` cut to ``limit`` characters (never fails)."""
    try:
        text = _repr.repr(value)
    except Exception:  # a repr that fails (recursion, an odd object) still names the type
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- predicates ---------------------------------------------------------------------------------
Check = Callable[[Any], bool]


def is_int(v: Any) -> bool:
    """A 64-bit integer (not a bool)."""
    return type(v) is int and I64[0] <= v < I64[1]


def is_count(v: Any) -> bool:
    """A non-negative 64-bit integer."""
    return type(v) is int and 0 <= v < I64[1]


def is_num(v: Any) -> bool:
    """A finite number (not a bool)."""
    return (type(v) is int and I64[0] <= v < I64[1]) or (type(v) is float and math.isfinite(v))


def is_key(v: Any) -> bool:
    """An opcode, id or name: an integer, a string or ``None`` (hashable and printable)."""
    return v is None or type(v) is str or is_int(v)


def all_ints(vs: list | tuple) -> bool:
    """Every item a 64-bit integer (not a bool): the common, well-formed column, checked at C
    speed (one pass for the types, one each for the bounds) instead of one call per item."""
    if not vs:
        return True
    types = set(map(type, vs))
    return types == {int} and min(vs) >= I64[0] and max(vs) < I64[1]


def all_keys(vs: list | tuple) -> bool:
    """Every item passes :func:`is_key`."""
    return all_ints(vs) or all(is_key(v) for v in vs)


def all_durations(vs: list | tuple) -> bool:
    """Every item a finite number >= 0 (not a bool)."""
    if not vs:
        return True
    if not set(map(type, vs)) <= {int, float}:
        return False
    # A NaN or an infinity makes the sum one too; the bounds then hold for every item.
    return min(vs) >= 0 and math.isfinite(sum(vs)) and max(vs) < I64[1]


def _str(v: Any) -> bool:
    return type(v) is str


def _bool(v: Any) -> bool:
    return type(v) is bool


def _dict(v: Any) -> bool:
    return type(v) is dict


def _any(v: Any) -> bool:
    return True


def _call(check: Check, v: Any) -> bool:
    return check(v)


def opt(check: Check) -> Check:
    """``None`` or what ``check`` accepts."""
    return lambda v: v is None or check(v)


def list_of(check: Check) -> Check:
    """A list (or tuple) whose every item ``check`` accepts."""
    return lambda v: type(v) in (list, tuple) and all(check(x) for x in v)


def row(*checks: Check) -> Check:
    """A list (or tuple: msgpack turns tuples into lists) of exactly these items."""
    n = len(checks)
    return lambda v: type(v) in (list, tuple) and len(v) == n and all(map(_call, checks, v))


def map_of(key: Check, value: Check) -> Check:
    """A dict whose keys and values these accept."""
    return lambda v: type(v) is dict and all(key(k) and value(x) for k, x in v.items())


def check_fields(d: Any, spec: Mapping[str, Check], where: str, required: tuple = ()) -> dict:
    """Check a dict against ``spec`` (key -> predicate); keys outside it pass unchecked.

    Raises:
        TraceFormatError: ``d`` is not a dict, misses a required key, or holds a wrong value.
    """
    if type(d) is not dict:
        raise TraceFormatError(f"{where} is {short(d)}, not a map")
    for key in required:
        if key not in d:
            raise TraceFormatError(f"{where} has no {key!r}")
    for key, check in spec.items():
        if key in d and not check(d[key]):
            raise TraceFormatError(f"{where}.{key} is {short(d[key])}")
    return d


# -- records ------------------------------------------------------------------------------------
_HEADER = {
    "schema": opt(is_int), "run_id": opt(_str), "start_ns": opt(is_int),
    "wall_time": opt(lambda v: is_num(v) and abs(v) < WALL_MAX),
    "workers": opt(list_of(lambda w: type(w) is dict and is_int(w.get("id")))),
    "config": opt(_dict), "op_names": opt(list_of(_str)), "meta": opt(_dict),
}  # fmt: skip


def check_header(header: Any, version: int) -> dict:
    """The header record, checked: ``None`` fields become empty ones.

    Raises:
        TraceFormatError: not a header, another format version, or a field of the wrong type.
    """
    if type(header) is not dict or "format" not in header:
        raise TraceFormatError("corrupt header record (not a header)")
    if type(header["format"]) is not int or header["format"] != version:
        raise TraceFormatError(f"unsupported .gtrace format version {short(header['format'])}")
    try:
        check_fields(header, _HEADER, "header")
    except TraceFormatError as exc:
        raise TraceFormatError(f"corrupt header record ({exc})") from None
    out = dict(header)
    for key, empty in (("workers", []), ("config", {}), ("op_names", []), ("meta", {})):
        if out.get(key) is None:
            out[key] = empty
    return out


_SUMMARY = {
    "events": is_count, "batches": is_count, "t_first": opt(is_int), "t_last": opt(is_int),
    "counts": map_of(_str, is_count), "drops": map_of(_str, is_count), "dropped": is_count,
    "workers": list_of(lambda w: type(w) is dict and is_int(w.get("id"))),
}  # fmt: skip


def check_index(index: Any) -> tuple[list, list, dict]:
    """``(chunks, keyframes, summary)`` of an index record, their types checked.

    The offsets are checked against the file by the reader.

    Raises:
        TraceFormatError: a part is missing or of the wrong type.
    """
    check_fields(index, {}, "index", ("chunks", "keyframes", "summary"))
    chunks, keyframes = index["chunks"], index["keyframes"]
    if not list_of(row(is_count, is_int, is_int))(chunks):
        raise TraceFormatError(f"index.chunks is {short(chunks)}")
    if not list_of(row(is_int, is_count))(keyframes):
        raise TraceFormatError(f"index.keyframes is {short(keyframes)}")
    summary = check_fields(index["summary"], _SUMMARY, "index.summary", tuple(_SUMMARY))
    return [tuple(c) for c in chunks], [tuple(k) for k in keyframes], summary


_KEYFRAME = {"t_ns": is_int, "seq": map_of(_str, is_int), "source": opt(_str)}


def check_keyframe(kf: Any) -> dict:
    """A keyframe record ``{t_ns, seq, source, state}``, checked (``state`` is free-form).

    Raises:
        TraceFormatError: not a keyframe.
    """
    return check_fields(kf, _KEYFRAME, "keyframe", ("t_ns", "state"))


# -- model snapshots (gt.trace.keyframes) -------------------------------------------------------
_INT, _OINT, _OSTR = is_int, opt(is_int), opt(_str)
_PAIRS = list_of(row(is_key, is_num))
_EXEC = row(is_int, is_int, is_int, is_key, list_of(is_key), list_of(is_num))
_XFER = row(is_int, is_int, _OINT, is_int, _OSTR)
_PENDING = list_of(row(is_int, is_int, lambda p: p in ("comm", "wait")))
_TOTALS = map_of(lambda k: k in ("compute", "comm", "wait"), is_int)
#: A memory sample: used, reserved, limit, spilled, tensors, then (newer models) a map of more
#: counters and per-client rows.
_MEMORY_MORE = map_of(_str, lambda v: is_int(v) or list_of(row(is_int, is_int, is_int))(v))
_MEMORY = row(*[opt(is_int)] * 5)


def _memory(v: Any) -> bool:
    if type(v) not in (list, tuple):
        return False
    return _MEMORY(v[:5]) and all(_MEMORY_MORE(x) for x in v[5:])


_MODEL_WORKER = {
    "wid": _INT, "device": _OSTR, "backend": _OSTR, "host": _OSTR, "pid": _OINT,
    "alive": _bool, "reason": _OSTR, "last_ops": opt(list_of(is_key)),
    "last_srcs": opt(list_of(is_key)), "last_client": _OINT, "queue": _OINT,
    "instructions": _INT, "batches": _INT, "errors": _INT, "hot": _INT,
    "memory": opt(_memory), "device_stats": opt(_dict), "in_flight": _OINT,
    "n_xfers": _INT, "sent": _INT, "received": _INT, "counts": _PAIRS, "times": _PAIRS,
    "mem_hist": list_of(_INT), "snaps": list_of(row(_INT, _INT)), "last_exec": opt(_EXEC),
    "last_xfer": opt(_XFER), "time": opt(row(_TOTALS, _OINT, _OINT, _OINT, _PENDING)),
    "base": row(_INT, _INT),
}  # fmt: skip
_MODEL_CLIENT = {
    "cno": _INT, "host": _OSTR, "pid": _OINT, "argv": opt(list_of(_str)), "home": _OINT,
    "alive": _bool, "reason": _OSTR, "queued": _INT, "last_batch": _OINT, "done_batch": _OINT,
    "errors": _INT, "snap_in_flight": _OINT,
}  # fmt: skip
_MODEL = {
    "events": _INT, "instructions": _INT, "batches": _INT, "transfer_bytes": _INT,
    "errors": _INT, "bad_events": _INT, "t_first": _OINT, "t_last": _OINT, "snapshots": _INT,
    "workers": list_of(_dict), "clients": list_of(_dict),
    "srclocs": list_of(row(is_key, _INT, _str)), "next_seq": map_of(_str, _INT),
    "drops": map_of(_str, _INT), "marks": list_of(row(_INT, _str, _OINT)),
    "configs": list_of(row(_INT, _any, _any, _OSTR)), "log": list_of(row(_INT, _str, _str, _str)),
    "counters": map_of(_str, _dict), "base": opt(map_of(_str, _INT)),
    "uptime": opt(row(is_num, _INT)),
    "hot": opt(list_of(row(_INT, _INT, _str, _INT, _str, _INT, _OINT, _OINT))),
}  # fmt: skip


def check_model_snapshot(snap: Any) -> dict:
    """A :func:`gt.trace.keyframes.snapshot_model` snapshot, every field's type checked.

    Raises:
        TraceFormatError: a field is missing or of the wrong type.
    """
    check_fields(snap, _MODEL, "model",
                 tuple(k for k in _MODEL if k not in ("base", "uptime", "hot")))  # fmt: skip
    for i, w in enumerate(snap["workers"]):
        check_fields(w, _MODEL_WORKER, f"model.workers[{i}]", ("wid", "counts", "times",
                                                               "mem_hist", "snaps"))  # fmt: skip
    for i, c in enumerate(snap["clients"]):
        check_fields(c, _MODEL_CLIENT, f"model.clients[{i}]", ("cno",))
    return snap
