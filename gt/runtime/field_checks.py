"""Per-field checks of typed messages, compiled into one function per kind (a leaf module).

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


__all__ = ["ANY", "Check", "Opt", "compile_checks", "opt"]
