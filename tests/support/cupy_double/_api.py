"""The real CuPy's API, as recorded by ``scripts/make_cupy_api.py`` in ``api/cupy-<major>.jsonl``.

The double resolves a name only if every recorded CuPy version has it, and binds each call's
arguments to every recorded signature of that name, so GT code that CI runs on the double cannot
lean on a NumPy function, keyword or method that a supported CuPy lacks. Names recorded without a
signature (CuPy documents none) are checked for existence only.
"""

from __future__ import annotations

import inspect
import json
from functools import cache
from pathlib import Path
from typing import Any

API_DIR = Path(__file__).resolve().parent / "api"

_P = inspect.Parameter


def _load() -> tuple[list[str], dict[str, dict[str, list[dict]]]]:
    versions: list[str] = []
    per_file: list[dict[tuple[str, str], dict]] = []
    for path in sorted(API_DIR.glob("cupy-*.jsonl")):
        lines = path.read_text().splitlines()
        versions.append(json.loads(lines[0])["cupy_version"])
        per_file.append({(s, n): rec for s, n, rec in map(json.loads, lines[1:])})
    if not per_file:
        raise RuntimeError(f"no CuPy API files in {API_DIR} (scripts/make_cupy_api.py makes them)")
    common = set(per_file[0]).intersection(*per_file[1:])
    table: dict[str, dict[str, list[dict]]] = {}
    for space, name in common:
        table.setdefault(space, {})[name] = [f[(space, name)] for f in per_file]
    return versions, table


VERSIONS, TABLE = _load()


def has(space: str, name: str) -> bool:
    """Whether every recorded CuPy has ``name`` in ``space`` (``"cupy"``, ``"cupy.ndarray"`` ...)."""
    return name in TABLE.get(space, ())


def records(space: str, name: str) -> list[dict]:
    """The records of ``space.name``, one per CuPy version (``[]`` if some version lacks it)."""
    return TABLE.get(space, {}).get(name, [])


def names(space: str) -> set[str]:
    """The names every recorded CuPy has in ``space``."""
    return set(TABLE.get(space, ()))


@cache
def signature(tokens: tuple[str, ...]) -> inspect.Signature | None:
    """An ``inspect.Signature`` from recorded tokens (``None`` if they do not make a valid one)."""
    params = []
    kind = _P.POSITIONAL_OR_KEYWORD
    slash = "/" in tokens
    if slash:
        kind = _P.POSITIONAL_ONLY
    for tok in tokens:
        if tok == "/":
            kind = _P.POSITIONAL_OR_KEYWORD
        elif tok == "*":
            kind = _P.KEYWORD_ONLY
        elif tok.startswith("**"):
            params.append(_P(tok[2:], _P.VAR_KEYWORD))
        elif tok.startswith("*"):
            params.append(_P(tok[1:], _P.VAR_POSITIONAL))
            kind = _P.KEYWORD_ONLY
        else:
            name = tok.rstrip("=")
            default = None if tok.endswith("=") else _P.empty
            params.append(_P(name, kind, default=default))
    try:
        return inspect.Signature(params)
    except ValueError:  # e.g. a docstring with a required argument after a default one
        return None


def check_call(space: str, name: str, args: tuple, kwargs: dict) -> None:
    """Raise ``TypeError`` as CuPy would if ``space.name(*args, **kwargs)`` does not bind to the
    signature of every recorded CuPy version."""
    for version, rec in zip(VERSIONS, records(space, name)):
        if rec["kind"] == "ufunc":
            _check_ufunc(name, rec, args, kwargs, version)
            continue
        tokens = rec.get("params")
        if tokens is None:
            continue
        sig = signature(tuple(tokens))
        if sig is None:
            continue
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(
                f"{space}.{name}() of CuPy {version} does not take these arguments: {exc}"
            ) from None


def _check_ufunc(name: str, rec: dict, args: tuple, kwargs: dict, version: str) -> None:
    extra = set(kwargs) - set(rec["keywords"])
    if extra:  # CuPy's own message
        raise TypeError(f"Wrong arguments {dict((k, kwargs[k]) for k in sorted(extra))}")
    if len(args) > rec["nin"] + rec["nout"]:
        raise TypeError(f"Wrong number of arguments for {name!r} (CuPy {version})")


def check_ufunc_method(ufunc_name: str, space: str, method: str, args: tuple,
                       kwargs: dict) -> None:  # fmt: skip
    """``TypeError`` unless every recorded CuPy's ``ufunc_name`` has ``method`` and it takes
    these arguments."""
    recs = records(space, ufunc_name)
    for version, rec in zip(VERSIONS, recs):
        methods = rec.get("methods", {})
        if method not in methods:
            raise AttributeError(
                f"'cupy.ufunc' object {ufunc_name!r} has no attribute {method!r} (CuPy {version})"
            )
        tokens = methods[method]
        sig = signature(tuple(tokens)) if tokens is not None else None
        if sig is not None:
            try:
                sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(
                    f"{ufunc_name}.{method}() of CuPy {version} does not take these arguments: "
                    f"{exc}"
                ) from None


def checked(space: str, name: str, f: Any) -> Any:
    """``f`` behind a check that each call binds to CuPy's ``space.name``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        check_call(space, name, args, kwargs)
        return f(*args, **kwargs)

    call.__name__ = name
    call.__doc__ = getattr(f, "__doc__", None)
    call.__wrapped__ = f  # type: ignore[attr-defined]
    return call
