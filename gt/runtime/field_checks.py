"""Per-field checks of typed messages, compiled into one function per kind, and the checks of
the values GT's messages carry (dtype names, shapes, error triples, ...): a leaf module.

A check is a type (the value must be exactly of it: ``True`` is not an ``int``), a function that
says whether a value is well formed, :data:`ANY`, or :func:`opt` of a check. Messages are parsed
on every hop of the hot path, so :func:`compile_checks` turns the checks of a kind into a single
expression: a call per message instead of one per field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Check = Any
#: Any value passes.
ANY = object()


class Opt:
    """``None``, or a value that passes ``check`` (made by :func:`opt`)."""

    __slots__ = ("check",)

    def __init__(self, check: Check):
        self.check = check


def opt(check: Check) -> Opt:
    """``None``, or a value that passes ``check``."""
    return Opt(check)


def _test(check: Check, value: str, env: dict) -> str:
    """Python source that is true when ``value`` passes ``check`` (names go into ``env``)."""
    if check is ANY:
        return "True"
    if isinstance(check, Opt):
        return f"({value} is None or {_test(check.check, value, env)})"
    name = f"_c{len(env)}"
    env[name] = check
    if isinstance(check, type):
        return f"type({value}) is {name}"
    return f"{name}({value})"


def compile_checks(fields: tuple[str, ...], checks: dict[str, Check]) -> Callable[[list], bool]:
    """One function that says whether a value list passes every field's check at once (on
    failure, checking the fields one by one finds which, slowly, for the error message)."""
    env: dict = {}
    expr = " and ".join(_test(checks[f], f"v[{i}]", env) for i, f in enumerate(fields)) or "True"
    exec(f"def ok(v):\n    return {expr}\n", env)  # noqa: S102 - built from the checks above
    return env["ok"]


# ----------------------------------------------------------------------------- the wire's values
#: Dtypes travel as short names; the set is closed so a peer never builds arbitrary dtypes.
DTYPES: tuple[str, ...] = (
    "float32",
    "float64",
    "float16",
    "int32",
    "int64",
    "bool",
    "uint8",
    "int8",
    "bfloat16",  # only CuPy workers that compute in it accept it (see worker/backend.py)
    "int16",
    "complex64",
    "complex128",
    "uint16",
    "uint32",
    "uint64",
)
DTYPE_SET = frozenset(DTYPES)


def is_dtype(v: Any) -> bool:
    return v in DTYPE_SET if type(v) is str else False


def is_shape(v: Any) -> bool:
    return type(v) is list and all(type(d) is int and d >= 0 for d in v)


def is_error(v: Any) -> bool:
    """A worker error: ``[message, opcode, src]``."""
    return (
        type(v) is list
        and len(v) == 3
        and type(v[0]) is str
        and type(v[1]) is int
        and type(v[2]) is int
    )


def is_errors(v: Any) -> bool:
    return type(v) is list and (not v or all(is_error(e) for e in v))


def is_str_list(v: Any) -> bool:
    return type(v) is list and all(type(s) is str for s in v)


def is_srclocs(v: Any) -> bool:
    """New source lines: ``[[id, "file.py:12"], ...]``."""
    return type(v) is list and all(
        type(e) is list and len(e) == 2 and type(e[0]) is int and type(e[1]) is str for e in v
    )


def is_signals(v: Any) -> bool:
    """New signal-table entries: ``[[id, name, backward or None, is_backward], ...]``."""
    return type(v) is list and all(
        type(e) is list
        and len(e) == 4
        and type(e[0]) is int
        and type(e[1]) is str
        and (e[2] is None or type(e[2]) is str)
        and type(e[3]) is bool
        for e in v
    )


def is_endpoints(v: Any) -> bool:
    return type(v) is dict and all(type(k) is int and type(e) is str for k, e in v.items())


def is_keys(v: Any) -> bool:
    """``{worker_id: CURVE public key}`` (z85, 40 bytes) of workers' data sockets."""
    return type(v) is dict and all(
        type(k) is int and type(e) is bytes and len(e) == 40 for k, e in v.items()
    )


def is_tenant(v: Any) -> bool:
    """A tenant's name (as the keyring allows: 1 to 32 characters)."""
    return type(v) is str and 0 < len(v) <= 32


def is_key(v: Any) -> bool:
    return type(v) is bytes and len(v) == 40


def is_count(v: Any) -> bool:
    """A count (an int, not below 0)."""
    return type(v) is int and v >= 0


__all__ = ["ANY", "DTYPES", "DTYPE_SET", "Check", "Opt", "compile_checks", "opt",
           "is_dtype", "is_shape", "is_error", "is_errors", "is_str_list", "is_srclocs", "is_signals", "is_endpoints", "is_keys", "is_tenant", "is_key", "is_count"]  # fmt: skip
