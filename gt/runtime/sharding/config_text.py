"""The shard-config editor's pure parts: YAML text with line numbers for every problem, the diff
against the running config, highlighting spans, and what a change did to the workers' times.

:func:`check_text` parses YAML keeping node positions, validates each top-level entry on its own
with :func:`gt.runtime.sharding.config.validate` (so every broken signal is reported, not only the first) against
the live workers, adds checks the schema cannot know (axes out of range), and maps each message's
key path (``layer1.shard.axis``) back to its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from gt.runtime.sharding import config as C

#: Axes a shard rule may name (GT tensors have at most this many dimensions).
MAX_AXES = 8


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the text: a 1-based line (``None``: the whole config) and why."""

    line: int | None
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass
class Checked:
    """The result of :func:`check_text`."""

    raw: Any = None  # the parsed YAML
    normal: dict | None = None  # the validated normal form (None when there are problems)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Valid and applicable."""
        return not self.problems and self.normal is not None


def check_text(text: str, worker_ids: Iterable[int] | None = None) -> Checked:
    """Parse and validate editor text; every problem carries its line.

    The text is read within the bounds of :func:`gt.runtime.sharding.config.load_yaml` (size,
    nesting, aliases, duplicate keys). An empty text is a problem: clearing every rule is
    explicit (``{}``).
    """
    try:
        raw, node = C.load_yaml(text)
    except C.ConfigError as exc:
        return Checked(problems=[Problem(exc.line, exc.reason)])
    ids = None if worker_ids is None else sorted(worker_ids)
    out = Checked(raw=raw)
    if raw is None:
        out.problems.append(Problem(None, C.EMPTY))
        return out
    if not isinstance(raw, Mapping):
        out.problems.append(Problem(1, "a config is a mapping of signal names to rules"))
        return out
    if len(raw) > C.MAX_SIGNALS:  # one problem, not one per signal
        out.problems.append(Problem(None, f"a config holds at most {C.MAX_SIGNALS} signals, "
                                          f"this one {len(raw)}"))  # fmt: skip
        return out
    names = frozenset(k for k in raw if k not in C.SETTINGS)
    for key, value in raw.items():  # each entry on its own: every broken signal is reported
        try:
            C.validate_entry(key, value, ids, names)
        except C.ConfigError as exc:
            out.problems.append(Problem(line_of(node, str(exc), key), str(exc)))
            continue
        out.problems.extend(_axis_problems(node, key, value))
    if not out.problems:
        try:
            out.normal = C.validate(raw, ids)
        except C.ConfigError as exc:
            out.problems.append(Problem(line_of(node, str(exc)), str(exc)))
    return out


def _axis_problems(root: Any, key: Any, value: Any) -> list[Problem]:
    if not isinstance(value, Mapping) or not isinstance(value.get("shard"), Mapping):
        return []
    axis = value["shard"].get("axis")
    if type(axis) is int and not -MAX_AXES <= axis < MAX_AXES:
        where = f"{key}.shard.axis"
        msg = f"{where}: axis {axis} is out of range (tensors have at most {MAX_AXES} axes)"
        return [Problem(line_of(root, where), msg)]
    return []


def line_of(root: Any, message: str, hint: Any = None) -> int | None:
    """The 1-based line of the deepest YAML node named by the key path a message starts with."""
    if not isinstance(root, yaml.MappingNode):
        return 1 if root is not None else None
    m = re.match(r"([^\s:]+)", message)
    path = m.group(1) if m else ""
    best = None
    node: Any = root
    while isinstance(node, yaml.MappingNode) and path:
        for k, v in node.value:
            key = str(k.value)
            if path == key or path.startswith(key + "."):
                best = k.start_mark.line + 1
                path = path[len(key) + 1 :]
                node = v
                break
        else:
            break
    unknown = re.search(r"unknown key '([^']+)'", message)
    if unknown and isinstance(node, yaml.MappingNode):
        for k, _v in node.value:
            if str(k.value) == unknown.group(1):
                return k.start_mark.line + 1
    if best is None and hint is not None:
        for k, _v in root.value:
            if str(k.value) == str(hint):
                return k.start_mark.line + 1
    return best


def to_text(cfg: Mapping | None) -> str:
    """A config (YAML form) as editor text: one block per signal, small values in flow style.

    No config is ``{}``, said explicitly (an empty text is not a config).
    """
    if not cfg:
        return "# no shard config: every tensor stays on its client's home worker\n{}\n"
    lines = []
    for key, value in cfg.items():
        if isinstance(value, Mapping) and value:
            lines.append(f"{_scalar(key)}:")
            for k, v in value.items():
                lines.append(f"  {_scalar(k)}: {_flow(v)}")
        else:
            lines.append(f"{_scalar(key)}: {_flow(value)}")
    return "\n".join(lines) + "\n"


def _flow(v: Any) -> str:
    return (
        yaml.safe_dump(v, default_flow_style=True, width=1000).strip().removesuffix("\n...").strip()
    )


def _scalar(v: Any) -> str:
    return _flow(v)


def normal_yaml(cfg: Any) -> dict:
    """The YAML form of a config given in normal form, YAML form or ``None``."""
    if not cfg:
        return {}
    try:
        return C.to_yaml_dict(C.validate(cfg))
    except C.ConfigError:
        return dict(cfg) if isinstance(cfg, Mapping) else {}


# ---------------------------------------------------------------------- highlighting
def highlight_spans(text: str) -> list[tuple[int, int, int, str]]:
    """``(line, start_col, end_col, name)`` spans for a TextArea theme (columns in characters).

    Keys are ``yaml.field``, numbers ``number``, ``true``/``false`` ``boolean``, other scalars
    ``string``, comments ``comment``, brackets and punctuation ``punctuation.bracket``. A text
    that does not scan is highlighted up to where it stops scanning.
    """
    spans: list[tuple[int, int, int, str]] = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        j = _comment_start(line)
        if j is not None:
            spans.append((i, j, len(line), "comment"))
    after_key = False
    try:
        for tok in yaml.scan(text, Loader=yaml.SafeLoader):
            s, e = tok.start_mark, tok.end_mark
            if isinstance(tok, yaml.KeyToken):
                after_key = True
                continue
            if isinstance(tok, yaml.ScalarToken) and s.line == e.line:
                if after_key:
                    name = "yaml.field"
                elif tok.plain and re.fullmatch(r"-?\d+(\.\d*)?", tok.value):
                    name = "number"
                elif tok.plain and tok.value in ("true", "false", "null", "~"):
                    name = "boolean"
                else:
                    name = "string"
                spans.append((s.line, s.column, e.column, name))
            elif isinstance(tok, (yaml.FlowMappingStartToken, yaml.FlowMappingEndToken,
                                  yaml.FlowSequenceStartToken, yaml.FlowSequenceEndToken)):  # fmt: skip
                spans.append((s.line, s.column, e.column, "punctuation.bracket"))
            after_key = False
    except yaml.YAMLError:
        pass
    return spans


def _comment_start(line: str) -> int | None:
    """Where a ``#`` comment starts (outside quotes), or ``None``."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
    return None
