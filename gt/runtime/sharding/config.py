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

YAML comes from users, files and editors, so reading it is bounded: at most :data:`MAX_TEXT`
characters, :data:`MAX_DEPTH` levels of nesting, :data:`MAX_ALIASES` aliases and
:data:`MAX_NODES` values once aliases are expanded; a key given twice in one mapping is an
error, and so is an empty document (clearing every rule is explicit: ``{}``, or
``gt.config.clear()``). Every message quotes at most a short excerpt of a value.

Pure: no sockets. The user-facing functions that talk to a dispatcher live in :mod:`gt.config`.
"""

from __future__ import annotations

import builtins
import os
import reprlib
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
#: Bounds on YAML text: characters, nesting, aliases, and values once aliases are expanded
#: (a few aliases keep a config DRY; a "billion laughs" expands to more than fits anywhere).
MAX_TEXT = 1 << 20
MAX_DEPTH = 32
MAX_ALIASES = 100
MAX_NODES = 100_000
EMPTY = (
    "the config is empty; to remove every rule, clear it explicitly "
    "({} in YAML, gt.config.clear() in Python)"
)


class ConfigError(ValueError):
    """A shard config is malformed, or names workers, signals or axes that do not exist.

    Attributes:
        line: the 1-based line of the YAML text the problem is on (``None``: not known).
        reason: the message to show next to that line (the message without the line).
    """

    def __init__(self, message: str, line: int | None = None, reason: str | None = None):
        super().__init__(message)
        self.line = line
        self.reason = reason or message


# ----------------------------------------------------------------------------- validation (pure)
def _keys(where: str, d: Any, allowed: Iterable[str]) -> dict:
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {type(d).__name__} {_short(d)}")
    allowed = tuple(allowed)
    for k in d:
        if k not in allowed:
            raise ConfigError(
                f"{where}: unknown key {_short(k)} (expected one of: {', '.join(allowed)})"
            )
    return dict(d)


def _worker_spec(where: str, spec: Any, worker_ids: Iterable[int] | None) -> Any:
    """Normalize a worker list: ``"all"``, ``{"part": i, "of": n}`` or a sorted list of ids."""
    if spec == "all":
        return "all"
    if isinstance(spec, Mapping):
        d = _keys(where, spec, ("part", "of"))
        part, of = d.get("part"), d.get("of")
        if type(of) is not int or of < 1:
            raise ConfigError(f"{where}.of must be a positive integer, got {_short(of)}")
        if type(part) is not int or not 0 <= part < of:
            raise ConfigError(f"{where}.part must be an integer in 0..{of - 1}, got {_short(part)}")
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


_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxdict, _repr.maxlist, _repr.maxstring, _repr.maxother = 2, 4, 4, 40, 40


def _short(v: Any, limit: int = 60) -> str:
    """A value for an error message, cut short (a config may be large, deep, or hostile).

    A bounded ``repr`` (:mod:`reprlib`): a value with shared parts (YAML aliases) or deep nesting
    is never expanded in full.
    """
    try:
        text = _repr.repr(v)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still named
        text = f"<{type(v).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _name(name: str, limit: int = 80) -> str:
    """A signal name as the start of a key path in a message (cut if very long)."""
    return name if len(name) <= limit else name[: limit - 3] + "..."


def _signal(key: str, rule: Any, worker_ids: Iterable[int] | None) -> dict:
    if not isinstance(key, str) or not key:
        raise ConfigError(f"signal names must be non-empty strings, got {_short(key)}")
    name = _name(key)
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
            raise ConfigError(f"{name}.shard.axis must be an integer, got {_short(axis)}")
        out["kind"], out["axis"] = "shard", axis
        if "workers" in sh:
            ws = _worker_spec(f"{name}.shard.workers", sh["workers"], worker_ids)
            if stage is not None and ws != stage:
                raise ConfigError(
                    f"{name}: shard.workers {_short(ws)} differs from the stage's workers "
                    f"{_short(stage)}"
                )
            out["workers"] = ws
    elif "replicate" in d:
        rp = _keys(f"{name}.replicate", d["replicate"] or {}, _REPLICATE_KEYS)
        out["kind"] = "replicate"
        if "workers" in rp:
            ws = _worker_spec(f"{name}.replicate.workers", rp["workers"], worker_ids)
            if stage is not None and ws != stage:
                raise ConfigError(
                    f"{name}: replicate.workers {_short(ws)} differs from the stage's workers "
                    f"{_short(stage)}"
                )
            out["workers"] = ws
    if out["workers"] is None and out["kind"] in ("shard", "replicate"):
        out["workers"] = "all"
    if "backward" in d:
        b = d["backward"]
        if b is not None and (not isinstance(b, str) or not b):
            raise ConfigError(f"{name}.backward must name a signal, got {_short(b)}")
        out["backward"] = b
    if "compile" in d:
        if not isinstance(d["compile"], bool):
            raise ConfigError(f"{name}.compile must be true or false, got {_short(d['compile'])}")
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
    raw = _yaml_form(raw)
    if len(raw) > MAX_SIGNALS:
        raise ConfigError(f"a config holds at most {MAX_SIGNALS} signals, this one {len(raw)}")
    ids = None if worker_ids is None else builtins.list(worker_ids)
    names = frozenset(k for k in raw if k not in SETTINGS)
    settings = dict(SETTINGS)
    signals: dict[str, dict] = {}
    for key, value in raw.items():
        entry = validate_entry(key, value, ids, names)
        if key in SETTINGS:
            settings[key] = entry
        else:
            signals[key] = entry
    return {"settings": settings, "signals": signals}


def _yaml_form(raw: Any) -> Mapping:
    """A config as a mapping in its YAML form (``None`` is empty; a normal form is turned back)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"a config is a mapping of signal names to rules, got {type(raw).__name__}"
        )
    if frozenset(raw) == {"settings", "signals"} and isinstance(raw.get("signals"), Mapping):
        settings = raw["settings"] or {}
        if not isinstance(settings, Mapping):
            raise ConfigError(f"settings must be a mapping, got {_short(settings)}")
        return {**settings, **{k: _denormal(v) for k, v in raw["signals"].items()}}
    return raw


def validate_entry(
    key: Any, value: Any, worker_ids: Iterable[int] | None = None, signals: Iterable[Any] = ()
) -> Any:
    """Check one top-level entry of a config: a setting's value, or a signal's normal rule.

    Args:
        key: the entry's key (a setting's name or a signal name).
        value: what the config gives it.
        worker_ids: the ids of the live workers (``None``: not checked).
        signals: the signal names of the whole config (a ``backward`` must name one of them).

    Raises:
        ConfigError: with the key that is wrong and why.
    """
    if key == "auto_shard":
        if not isinstance(value, bool):
            raise ConfigError(f"auto_shard must be true or false, got {_short(value)}")
        return value
    if key == "auto_shard_min_bytes":
        if type(value) is not int or value < 0:
            raise ConfigError(
                f"auto_shard_min_bytes must be a non-negative integer, got {_short(value)}"
            )
        return value
    rule = _signal(key, value, worker_ids)
    b = rule["backward"]
    if b is not None and b not in signals:
        raise ConfigError(
            f"{_name(key)}.backward names {_short(b)}, which is not a signal in this config"
        )
    return rule


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
    """Read a config from a mapping, a path to a YAML file, or YAML text.

    ``None`` and mappings are returned as they are (``None``: no config, which clears it); text
    and files are read with :func:`load_yaml`, and an empty one is an error.

    Raises:
        ConfigError: the file cannot be read, or the YAML is invalid, too big, or empty.
    """
    if source is None or isinstance(source, Mapping):
        return source
    if isinstance(source, Path) or (
        isinstance(source, str) and source.strip() and "\n" not in source and ":" not in source
    ):
        path = Path(source)
        try:
            with open(path, "rb") as f:  # never more than the bound, whatever the file is
                data = f.read(MAX_TEXT + 1)
        except OSError as exc:
            raise ConfigError(
                f"cannot read config file {_short(str(path))}: {exc.strerror or exc}"
            ) from None
        if len(data) > MAX_TEXT:
            raise ConfigError(f"config file {_short(str(path))} is over {MAX_TEXT:,} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"config file {_short(str(path))} is not UTF-8 text") from None
    elif isinstance(source, str):
        text = source
    else:
        raise ConfigError(
            f"a config is a dict, a YAML file path or YAML text, not {type(source).__name__}"
        )
    raw, _ = load_yaml(text)
    if raw is None:
        raise ConfigError(EMPTY)
    return raw


def load_yaml(text: str) -> tuple[Any, Any]:
    """Parse YAML text within the bounds: ``(value, root node)``; the node has line numbers.

    The parser's events are walked first (no recursion, no values built) to check the bounds;
    only then is the text composed and constructed, with libyaml where it is installed.
    An empty document (or only comments, or ``null``) gives ``(None, None)``.

    Raises:
        ConfigError: too long, not YAML, nested too deep, too many aliases or values, or a key
            given twice (``line`` says where).
    """
    if len(text) > MAX_TEXT:
        raise ConfigError(
            f"the config is {len(text):,} characters; at most {MAX_TEXT:,} are allowed"
        )
    import yaml  # noqa: PLC0415 - only when text is read

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _check_events(yaml, yaml.parse(text, Loader=loader_class))
        loader = loader_class(text)
        try:
            node = loader.get_single_node()
            return (loader.construct_document(node) if node is not None else None), node
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise _yaml_error(exc.problem or exc.context or "not YAML", mark) from None
    except yaml.YAMLError as exc:
        raise _yaml_error(str(exc), None) from None


def _yaml_error(problem: str, mark: Any) -> ConfigError:
    what = " ".join(problem.split())  # one short line: a parser's message may quote the input
    what = what if len(what) <= 160 else what[:157] + "..."
    line = mark.line + 1 if mark is not None else None
    where = f" (line {line})" if line else ""
    return ConfigError(f"config is not valid YAML{where}: {what}", line, f"YAML: {what}")


def _check_events(yaml: Any, events: Iterable[Any]) -> None:
    """Enforce :data:`MAX_DEPTH`, :data:`MAX_ALIASES`, :data:`MAX_NODES` and unique keys."""
    resolve = yaml.resolver.Resolver().resolve  # the tag a plain key resolves to (1 vs "1")
    done: dict[str, int] = {}  # anchor -> values in its node, aliases expanded
    stack: list[list] = []  # open collections: [values, anchor, keys (a mapping) or None, key?]
    aliases = 0
    for ev in events:
        mark, key = ev.start_mark, None
        if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if len(stack) >= MAX_DEPTH:
                raise _yaml_error(f"nested deeper than {MAX_DEPTH} levels", mark)
            keys = {} if isinstance(ev, yaml.MappingStartEvent) else None
            stack.append([1, ev.anchor, keys, True])
            continue
        if isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            size, anchor, _, _ = stack.pop()
            if size > MAX_NODES:
                raise _yaml_error(f"more than {MAX_NODES:,} values once aliases are expanded", mark)
            if anchor is not None:
                done[anchor] = size
        elif isinstance(ev, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise _yaml_error(f"more than {MAX_ALIASES} aliases", mark)
            if any(f[1] == ev.anchor for f in stack):  # it would contain itself
                raise _yaml_error("an alias inside the node it names", mark)
            size = done.get(ev.anchor, 1)  # an unknown one: composing says so
        elif isinstance(ev, yaml.ScalarEvent):
            size = 1
            if ev.anchor is not None:
                done[ev.anchor] = 1
            tag = ev.tag if ev.tag not in (None, "!") else resolve(yaml.ScalarNode, ev.value,
                                                                   ev.implicit)  # fmt: skip
            key = None if tag == "tag:yaml.org,2002:merge" else (tag, ev.value)
        else:  # stream and document events
            continue
        if stack:
            top = stack[-1]
            top[0] += size
            if top[2] is not None:  # a mapping: keys and values alternate
                if top[3] and key is not None:
                    _unique(top[2], key, mark.line + 1)
                top[3] = not top[3]


def _unique(keys: dict, key: tuple, line: int) -> None:
    if key in keys:
        what = f"duplicate key {_short(key[1])}"
        raise ConfigError(
            f"{what} on line {line} (first on line {keys[key]})",
            line,
            f"{what} (first on line {keys[key]})",
        )
    keys[key] = line


def from_env() -> dict | None:
    """The config that ``$GT_CONFIG`` (a YAML path) and ``$GT_AUTO_SHARD=1`` ask for, if any."""
    path = os.environ.get("GT_CONFIG")
    auto = os.environ.get("GT_AUTO_SHARD", "").lower() in ("1", "true", "yes", "on")
    if not path and not auto:
        return None
    try:
        raw = dict(_yaml_form(parse(path))) if path else {}
    except ConfigError as exc:
        raise ConfigError(f"GT_CONFIG={path}: {exc}") from None
    if auto:
        raw["auto_shard"] = True
    return raw


__all__ = [
    "EMPTY",
    "SETTINGS",
    "ConfigError",
    "from_env",
    "load_yaml",
    "parse",
    "resolve_workers",
    "to_yaml_dict",
    "validate",
    "validate_entry",
]
