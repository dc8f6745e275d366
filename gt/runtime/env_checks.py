"""The ``GT_*`` variables that the processes of a local cluster read, checked in the program before
any of them starts (pure).

A worker that cannot start with its environment (``GT_BACKEND=tpu``, a RAM cap too small for the
worker itself) dies, is started again and dies again, and the program would wait for it; checked
here first, a bad value is one error naming the variable. The processes check again for
themselves (a worker started by hand reads its own environment).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gt.runtime import memory_settings as MS

#: What ``GT_BACKEND`` may say (:func:`gt.runtime.worker.backend.make_backend` obeys it).
BACKENDS = ("auto", "numpy", "cupy")
#: What ``GT_TRACE`` may say (``gt.trace.emit.LEVELS``: that layer may not import this one).
TRACE_LEVELS = ("off", "summary", "full")
#: The smallest ``GT_RAM_CAP`` size: a worker needs about 150 MB of its own to start (its
#: threads' stacks, NumPy, ZeroMQ), and below this its first allocations fail, not a program's.
MIN_RAM_CAP = 256 << 20


def seconds(value: str, name: str) -> float:
    """A positive number of seconds from variable ``name``.

    Raises:
        SettingError: not a number, or not above 0.
    """
    try:
        s = float(value)
    except ValueError:
        s = float("nan")
    if not s > 0:
        raise MS.SettingError(f"${name} must be a number of seconds such as 300, not {value!r}")
    return s


def ram_cap_size(value: str) -> int | float | None:
    """``GT_RAM_CAP`` parsed: bytes, a fraction, or ``None`` (``off``).

    Raises:
        SettingError: not a size, or a size below :data:`MIN_RAM_CAP`.
    """
    size = MS.parse_size(value, "$GT_RAM_CAP")
    if isinstance(size, int) and size < MIN_RAM_CAP:
        raise MS.SettingError(
            f"$GT_RAM_CAP={value.strip()} is below what a worker needs to start "
            f"({MIN_RAM_CAP >> 20} MiB at least)"
        )
    return size


def check(environ: Mapping[str, str] | None = None) -> None:
    """Refuse a ``GT_BACKEND``, ``GT_TRACE``, ``GT_RAM_CAP`` or ``GT_TIMEOUT`` that does not parse.

    Raises:
        SettingError: the first such variable, named, with what it may be.
    """
    env = os.environ if environ is None else environ
    backend, level = env.get("GT_BACKEND", "").strip(), env.get("GT_TRACE", "").strip()
    if backend and backend not in BACKENDS:
        raise MS.SettingError(f"$GT_BACKEND must be auto, numpy or cupy, not {backend!r}")
    if level and level.lower() not in TRACE_LEVELS:
        raise MS.SettingError(f"$GT_TRACE must be off, summary or full, not {level!r}")
    if env.get("GT_RAM_CAP", "").strip():
        ram_cap_size(env["GT_RAM_CAP"])
    if env.get("GT_TIMEOUT", "").strip():
        seconds(env["GT_TIMEOUT"], "GT_TIMEOUT")


__all__ = ["BACKENDS", "MIN_RAM_CAP", "TRACE_LEVELS", "check", "ram_cap_size", "seconds"]
