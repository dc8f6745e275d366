"""Memory settings of the workers' pools (pure): sizes as users write them, and their defaults.

A size is bytes (``1073741824``), a number with a unit (``"8GB"`` = 8·10⁹ bytes, ``"8GiB"`` = 8·2³⁰,
``"512MB"``, ``"1.5G"``), or a fraction of the device's capacity (``0.8``: 80 % of the GPU's memory
on a CuPy worker, of the machine's RAM on a NumPy worker). Decimal and binary units follow Dask's
and the SI's convention: ``k``/``KB`` = 1000, ``KiB`` = 1024.

The settings, and where they come from (the first that says wins):

========================  ===========================  =====================  ================
setting                   ``gt worker`` flag            environment            default
========================  ===========================  =====================  ================
``memory_limit``          ``--memory-limit``           ``GT_MEMORY_LIMIT``    none (no limit)
``client_memory_limit``   ``--client-memory-limit``    ``GT_CLIENT_MEMORY_
                                                       LIMIT``                none
``spill_threshold``       ``--spill-threshold``        ``GT_SPILL_THRESHOLD`` 0.8
``prefetch``              ``--prefetch``               ``GT_PREFETCH``        1GB (0: off)
========================  ===========================  =====================  ================

``gt dispatcher`` takes the same flags and hands them to every worker that registers (a worker's
own flag wins); ``gt.config.set(memory_limit=...)`` changes them on every worker while programs run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

#: The settings' names, in the order they are shown.
KEYS = ("memory_limit", "client_memory_limit", "spill_threshold", "prefetch")
DEFAULTS: dict[str, Any] = {
    "memory_limit": None,
    "client_memory_limit": None,
    "spill_threshold": 0.8,
    "prefetch": 1_000_000_000,
}
ENV = {
    "memory_limit": "GT_MEMORY_LIMIT",
    "client_memory_limit": "GT_CLIENT_MEMORY_LIMIT",
    "spill_threshold": "GT_SPILL_THRESHOLD",
    "prefetch": "GT_PREFETCH",
}

_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
    "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
#: No size is larger than this (a typo such as ``8e99`` is an error, not "no limit").
MAX_BYTES = 1 << 60


class SettingError(ValueError):
    """A memory setting that does not parse or is out of range."""


def parse_size(value: Any, what: str = "size") -> int | float | None:
    """Bytes (an int), a fraction of capacity (a float in (0, 1]), or ``None`` (no limit).

    ``None``, ``"none"``, ``"off"``, ``"0"`` and ``0`` mean no limit.

    Raises:
        SettingError: not a size, negative, or too large.
    """
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "off")):
        return None
    if isinstance(value, bool):
        raise SettingError(f"{what} must be a size such as 8GB or 0.8, not {value!r}")
    if isinstance(value, (int, float)):
        number, unit = float(value), ""
        if isinstance(value, int):
            return _bytes(value, what)
    elif isinstance(value, str):
        m = _SIZE.match(value)
        if m is None or m.group(2).lower() not in _UNITS:
            raise SettingError(
                f"{what} {value!r:.40} is not a size: write bytes, a number with a unit (8GB, "
                "512MiB) or a fraction of the device's memory (0.8)"
            )
        number, unit = float(m.group(1)), m.group(2).lower()
    else:
        raise SettingError(f"{what} must be a size such as 8GB or 0.8, not {type(value).__name__}")
    if number == 0:
        return None
    if unit == "" and 0 < number <= 1 and not (isinstance(value, str) and "." not in value):
        return number  # a fraction of capacity
    return _bytes(number * _UNITS[unit], what)


def _bytes(n: float, what: str) -> int | None:
    if n != n or n < 0:
        raise SettingError(f"{what} cannot be negative")
    if n > MAX_BYTES:
        raise SettingError(f"{what} of {n:.3g} bytes is more than any machine has")
    return int(n) or None


def parse_fraction(value: Any, what: str = "spill_threshold") -> float:
    """A fraction in (0, 1].

    Raises:
        SettingError: not a number in (0, 1].
    """
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise SettingError(f"{what} must be a number between 0 and 1, not {value!r:.40}") from None
    if not 0 < f <= 1:
        raise SettingError(f"{what} must be in (0, 1], not {f}")
    return f


def normalize(values: Mapping) -> dict[str, Any]:
    """Check and normalise settings (unknown keys are an error); sizes become int or fraction.

    Raises:
        SettingError: an unknown key or a bad value.
    """
    out: dict[str, Any] = {}
    for k, v in values.items():
        if k not in DEFAULTS:
            raise SettingError(
                f"unknown memory setting {k!r:.40}; the settings are {', '.join(KEYS)}"
            )
        if k == "spill_threshold":
            out[k] = parse_fraction(v)
        elif k == "prefetch":
            p = parse_size(v, k)
            if isinstance(p, float):
                raise SettingError("prefetch is a size (1GB), not a fraction")
            out[k] = p or 0
        else:
            out[k] = parse_size(v, k)
    return out


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings given by ``GT_*`` environment variables (only those that are set).

    Raises:
        SettingError: a variable that does not parse (it names the variable).
    """
    env = os.environ if environ is None else environ
    out = {}
    for k, var in ENV.items():
        if env.get(var, "").strip():
            try:
                out.update(normalize({k: env[var]}))
            except SettingError as exc:
                raise SettingError(f"${var}: {exc}") from None
    return out


def resolve(layers: list[Mapping], capacity: int | None) -> dict[str, Any]:
    """Merge setting layers (first wins) over the defaults; fractions become bytes of ``capacity``.

    A fraction with no known capacity is no limit (and the caller says so).
    """
    out = dict(DEFAULTS)
    for layer in reversed(layers):
        out.update({k: v for k, v in layer.items() if k in DEFAULTS})
    for k in ("memory_limit", "client_memory_limit"):
        v = out[k]
        if isinstance(v, float):
            out[k] = int(v * capacity) if capacity else None
    return out


def human(n: int | None) -> str:
    """``"8.0 GB"`` style (decimal units, as the flags are usually written), ``"none"``."""
    if n is None:
        return "none"
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
