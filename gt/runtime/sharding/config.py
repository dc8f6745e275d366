"""Shard configs: which workers hold the tensors made under each :mod:`gt.signal`, and how.

A config maps signal names to rules (YAML file, ``$GT_CONFIG``, a Python dict, or applied live
through the dispatcher's control endpoint)::

    layer1:
      shard: {axis: 0, workers: [0, 1]}   # split along axis 0 over these workers
    params:
      replicate: {workers: all}           # a full copy on every worker
    stage2:
      workers: {part: 1, of: 2}           # pipeline stage: the second half of the workers
      backward: stage2_bwd                # the rule for the gradients of ops made under stage2
    auto_shard: false                     # true: shard large new tensors on axis 0 over all workers

Per signal: ``shard`` (``axis``, optional ``workers``), ``replicate`` (optional ``workers``),
``workers`` (the stage's workers; alone it shards the stage's tensors on axis 0 over them, or puts
them on the one worker it names), ``backward`` (another signal in the config) and ``compile`` (a
hint that the signal's ops form a hot path). A worker list is a list of ids, ``all``, or
``{part: i, of: n}`` (the i-th of n contiguous groups of the live workers, so one config runs on
any cluster size). Validation raises :class:`ConfigError` naming the exact key that is wrong.

Pure: no sockets. The user-facing functions that talk to a dispatcher live in :mod:`gt.config`.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: Top-level keys that are settings, not signal names.
SETTINGS = {"auto_shard": False, "auto_shard_min_bytes": 1 << 20}
SIGNAL_KEYS = ("backward", "compile", "replicate", "shard", "workers")
_SHARD_KEYS = ("axis", "workers")
_REPLICATE_KEYS = ("workers",)


#: Bounds that keep validating (and applying) any config to a fraction of a second, so the
#: dispatcher's loop is never held up by one: signals per config, worker ids per list.
MAX_SIGNALS = 4096
MAX_WORKERS = 4096


class ConfigError(ValueError):
    """A shard config is malformed, or names workers, signals or axes that do not exist."""


# ----------------------------------------------------------------------------- validation (pure)
def _keys(where: str, d: Any, allowed: Iterable[str]) -> dict:
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {type(d).__name__} {d!r}")
    allowed = tuple(allowed)
    for k in d:
        if k not in allowed:
            raise ConfigError(f"{where}: unknown key {k!r} (expected one of: {', '.join(allowed)})")
    return dict(d)


def _worker_spec(where: str, spec: Any, worker_ids: Iterable[int] | None) -> Any:
    """Normalize a worker list: ``"all"``, ``{"part": i, "of": n}`` or a sorted list of ids."""
    if spec == "all":
        return "all"
    if isinstance(spec, Mapping):
        d = _keys(where, spec, ("part", "of"))
        part, of = d.get("part"), d.get("of")
        if type(of) is not int or of < 1:
            raise ConfigError(f"{where}.of must be a positive integer, got {of!r}")
        if type(part) is not int or not 0 <= part < of:
            raise ConfigError(f"{where}.part must be an integer in 0..{of - 1}, got {part!r}")
        return {"part": part, "of": of}
    if isinstance(spec, int) and not isinstance(spec, bool):
        spec = [spec]
    if not isinstance(spec, (list, tuple)) or not spec:
        raise ConfigError(
            f"{where} must be a non-empty list of worker ids, 'all', or {{part: i, of: n}}; "
            f"got {_short(spec)}"
        )
    if len(spec) > MAX_WORKERS:
        raise ConfigError(f"{where}: {len(spec)} worker ids; at most {MAX_WORKERS} are allowed")
    ids = []
    seen: set[int] = set()
    for w in spec:
        if type(w) is not int or w < 0:
            raise ConfigError(f"{where}: worker ids are non-negative integers, got {_short(w)}")
        if w in seen:
            raise ConfigError(f"{where}: worker {w} is listed twice")
        seen.add(w)
        ids.append(w)
    if worker_ids is not None:
        known = set(worker_ids)
        for w in ids:
            if w not in known:
                have = ", ".join(map(str, sorted(known))) or "none"
                raise ConfigError(f"{where}: worker {w} does not exist (workers: {have})")
    return ids


def _short(v: Any, limit: int = 60) -> str:
    """A value for an error message, cut short (a config may be large, or hostile)."""
    text = repr(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _signal(name: str, rule: Any, worker_ids: Iterable[int] | None) -> dict:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"signal names must be non-empty strings, got {name!r}")
    if rule is None:
        rule = {}
    d = _keys(name, rule, SIGNAL_KEYS)
    out: dict[str, Any] = {
        "kind": "none",
        "axis": None,
        "workers": None,
        "backward": None,
        "compile": False,
    }
    stage = None
    if "workers" in d:
        stage = _worker_spec(f"{name}.workers", d["workers"], worker_ids)
        out["workers"] = stage
        out["kind"] = "stage"
    if "shard" in d and "replicate" in d:
        raise ConfigError(f"{name}: shard and replicate exclude each other; choose one")
    if "shard" in d:
        sh = _keys(f"{name}.shard", d["shard"], _SHARD_KEYS)
        axis = sh.get("axis")
        if type(axis) is not int:
            raise ConfigError(f"{name}.shard.axis must be an integer, got {axis!r}")
        out["kind"], out["axis"] = "shard", axis
        if "workers" in sh:
            ws = _worker_spec(f"{name}.shard.workers", sh["workers"], worker_ids)
            if stage is not None and ws != stage:
                raise ConfigError(
                    f"{name}: shard.workers {ws!r} differs from the stage's workers {stage!r}"
                )
            out["workers"] = ws
    elif "replicate" in d:
        rp = _keys(f"{name}.replicate", d["replicate"] or {}, _REPLICATE_KEYS)
        out["kind"] = "replicate"
        if "workers" in rp:
            ws = _worker_spec(f"{name}.replicate.workers", rp["workers"], worker_ids)
            if stage is not None and ws != stage:
                raise ConfigError(
                    f"{name}: replicate.workers {ws!r} differs from the stage's workers {stage!r}"
                )
            out["workers"] = ws
    if out["workers"] is None and out["kind"] in ("shard", "replicate"):
        out["workers"] = "all"
    if "backward" in d:
        b = d["backward"]
        if b is not None and (not isinstance(b, str) or not b):
            raise ConfigError(f"{name}.backward must name a signal, got {b!r}")
        out["backward"] = b
    if "compile" in d:
        if not isinstance(d["compile"], bool):
            raise ConfigError(f"{name}.compile must be true or false, got {d['compile']!r}")
        out["compile"] = d["compile"]
    return out


def validate(raw: Any, worker_ids: Iterable[int] | None = None) -> dict:
    """Check a config and return its normal form.

    Args:
        raw: the parsed YAML (a mapping of signal names and settings), or ``None`` for an empty one.
        worker_ids: the ids of the live workers; ``None`` skips the check that named workers exist.

    Returns:
        ``{"settings": {...}, "signals": {name: {"kind", "axis", "workers", "backward",
        "compile"}}}``, plain data that travels over msgpack. A normal form is accepted as input too.

    Raises:
        ConfigError: with the key that is wrong and why.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"a config is a mapping of signal names to rules, got {type(raw).__name__}"
        )
    if frozenset(raw) == {"settings", "signals"} and isinstance(raw.get("signals"), Mapping):
        raw = {**(raw["settings"] or {}), **{k: _denormal(v) for k, v in raw["signals"].items()}}
    settings = dict(SETTINGS)
    signals: dict[str, dict] = {}
    ids = None if worker_ids is None else builtins.list(worker_ids)
    if len(raw) > MAX_SIGNALS:
        raise ConfigError(f"a config holds at most {MAX_SIGNALS} signals, this one {len(raw)}")
    for key, value in raw.items():
        if key == "auto_shard":
            if not isinstance(value, bool):
                raise ConfigError(f"auto_shard must be true or false, got {value!r}")
            settings[key] = value
        elif key == "auto_shard_min_bytes":
            if type(value) is not int or value < 0:
                raise ConfigError(
                    f"auto_shard_min_bytes must be a non-negative integer, got {value!r}"
                )
            settings[key] = value
        else:
            signals[key] = _signal(key, value, ids)
    for name, rule in signals.items():
        b = rule["backward"]
        if b is not None and b not in signals:
            raise ConfigError(f"{name}.backward names {b!r}, which is not a signal in this config")
    return {"settings": settings, "signals": signals}


def _denormal(rule: Mapping) -> dict:
    """The YAML form of one normalized rule (so a normal form can be validated again)."""
    if not isinstance(rule, Mapping) or "kind" not in rule:
        return rule  # type: ignore[return-value]
    out: dict[str, Any] = {}
    kind, ws = rule.get("kind"), rule.get("workers")
    if kind == "shard":
        out["shard"] = {"axis": rule.get("axis"), "workers": ws}
    elif kind == "replicate":
        out["replicate"] = {"workers": ws}
    elif kind == "stage":
        out["workers"] = ws
    if rule.get("backward") is not None:
        out["backward"] = rule["backward"]
    if rule.get("compile"):
        out["compile"] = True
    return out


def to_yaml_dict(cfg: Mapping) -> dict:
    """The user-facing (YAML) form of a normalized config, for editors and ``gt config``."""
    out: dict[str, Any] = {}
    settings = cfg.get("settings") or {}
    for k, default in SETTINGS.items():
        if settings.get(k, default) != default:
            out[k] = settings[k]
    for name, rule in (cfg.get("signals") or {}).items():
        out[name] = _denormal(rule)
    return out


def resolve_workers(spec: Any, alive: Iterable[int]) -> tuple[int, ...]:
    """The worker ids a normalized worker spec names among the ``alive`` ones (sorted)."""
    ids = sorted(alive)
    if spec is None or spec == "all":
        return tuple(ids)
    if isinstance(spec, Mapping):
        k, part, of = len(ids), spec["part"], spec["of"]
        if not ids:
            return ()
        if k >= of:
            return tuple(ids[part * k // of : (part + 1) * k // of])
        return (ids[part * k // of],)
    return tuple(w for w in spec if w in frozenset(ids))


def parse(source: Any) -> Any:
    """Read a config from a mapping, a path to a YAML file, or YAML text."""
    if source is None or isinstance(source, Mapping):
        return source
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and ":" not in source
    ):
        path = Path(source)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}") from None
    elif isinstance(source, str):
        text = source
    else:
        raise ConfigError(
            f"a config is a dict, a YAML file path or YAML text, not {type(source).__name__}"
        )
    import yaml  # noqa: PLC0415 - only when a file is read

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config is not valid YAML: {exc}") from None


def from_env() -> dict | None:
    """The config that ``$GT_CONFIG`` (a YAML path) and ``$GT_AUTO_SHARD=1`` ask for, if any."""
    path = os.environ.get("GT_CONFIG")
    auto = os.environ.get("GT_AUTO_SHARD", "").lower() in ("1", "true", "yes", "on")
    if not path and not auto:
        return None
    raw = dict(parse(path) or {}) if path else {}
    if auto:
        raw["auto_shard"] = True
    return raw


__all__ = [
    "SETTINGS",
    "ConfigError",
    "from_env",
    "parse",
    "resolve_workers",
    "to_yaml_dict",
    "validate",
]
