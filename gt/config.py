"""``gt.config``: the shard config of the dispatcher this program is connected to.

A config maps :mod:`gt.signal` names to placements (see :mod:`gt.runtime.sharding.config` for the
schema, which this module re-exports)::

    gt.config.load_config("configs/tp2.yaml")   # replace it (new instructions follow it)
    gt.config.set({"auto_shard": True})          # change some of its top-level keys
    gt.config.current()                          # read it back (YAML form)
    gt.config.clear()                            # no rules: every tensor stays on its home worker
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def set(values: Mapping) -> dict:  # noqa: A001 - gt.config.set reads naturally
    """Change some top-level keys of the current config (e.g. ``{"auto_shard": True}``)."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"config.set expects a mapping, got {type(values).__name__}")
    conn = get_connection()
    merged = to_yaml_dict(conn.control("config_get"))
    merged.update(values)
    validate(merged)
    return conn.apply_config(merged)


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
    "parse",
    "resolve_workers",
    "set",
    "to_yaml_dict",
    "validate",
]
