"""``gt.config``: the shard config of the dispatcher this program is connected to.

A config maps :mod:`gt.signal` names to placements (see :mod:`gt.runtime.sharding.config` for the
schema, which this module re-exports)::

    gt.config.load_config("configs/tp2.yaml")   # replace it (new instructions follow it)
    gt.config.set({"auto_shard": True})          # change some of its top-level keys
    gt.config.current()                          # read it back (YAML form)
    gt.config.clear()                            # no rules: every tensor stays on its home worker
    gt.config.set(memory_limit="8GB")            # the workers' memory settings (see set)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gt.runtime import memory_settings as MS
from gt.runtime.sharding.config import (
    ConfigError,
    parse,
    resolve_workers,
    to_yaml_dict,
    validate,
)
from gt.session import get_connection


def load_config(source: Any) -> dict:
    """Replace the dispatcher's shard config (new instructions follow it; placed tensors stay).

    Args:
        source: a path to a YAML file, YAML text, a dict, or ``None`` for no config at all.

    Returns:
        The config in normal form, as the dispatcher applied it.

    Raises:
        ConfigError: the config is malformed or names workers that do not exist.
    """
    raw = parse(source)
    validate(raw)  # structural errors are raised here, at the user's line
    return get_connection().apply_config(raw)


def set(values: Mapping | None = None, /, **memory: Any) -> dict:  # noqa: A001 - reads naturally
    """Change some top-level keys of the shard config, or the workers' memory settings.

    ::

        gt.config.set({"auto_shard": True})                  # shard config keys: a mapping
        gt.config.set(memory_limit="8GB", spill_threshold=0.8, prefetch="1GB")
        gt.config.set(client_memory_limit=0.25)              # a quarter of each device's memory

    Memory settings (see :mod:`gt.runtime.memory_settings`) apply to every worker at once and win
    over the flags the workers and dispatcher started with; ``None`` removes a limit.

    Returns:
        The shard config in normal form; with memory settings only, the workers' memory settings
        (``{"flags": ..., "runtime": ...}``).

    Raises:
        ConfigError: an unknown key or a value out of range (raised here, at your line).
    """
    unknown = sorted(k for k in memory if k not in MS.DEFAULTS)
    if unknown:
        raise ConfigError(
            f"config.set: unknown setting {unknown[0]!r}; memory settings are "
            f"{', '.join(MS.KEYS)} (shard config keys go in a mapping: set({{'key': value}}))"
        )
    if values is None and not memory:
        raise ConfigError("config.set needs a mapping of shard config keys or memory settings")
    result: dict = {}
    if memory:
        try:
            MS.normalize(memory)
        except MS.SettingError as exc:
            raise ConfigError(str(exc)) from None
        result = get_connection().set_memory(memory)
    if values is None:
        return result
    if not isinstance(values, Mapping):
        raise ConfigError(f"config.set expects a mapping, got {type(values).__name__}")
    conn = get_connection()
    merged = to_yaml_dict(conn.control("config_get"))
    merged.update(values)
    validate(merged)
    return conn.apply_config(merged)


def memory() -> dict:
    """The workers' memory settings: ``{"flags": ..., "runtime": ...}`` (the dispatcher's flags,
    and what programs set since; a worker's own flags win over the dispatcher's)."""
    return get_connection().control("memory_get")


def current() -> dict:
    """The dispatcher's current config in its YAML form."""
    return to_yaml_dict(get_connection().control("config_get"))


def clear() -> dict:
    """Remove every rule: new tensors stay on each client's home worker."""
    return load_config(None)


__all__ = [
    "ConfigError",
    "clear",
    "current",
    "load_config",
    "memory",
    "parse",
    "resolve_workers",
    "set",
    "to_yaml_dict",
    "validate",
]
