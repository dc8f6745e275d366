"""Renderables of the shard-config editor: the diff against the running config and the problems
list (the checks themselves are pure, in :mod:`gt.runtime.sharding.config_text`)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from rich.text import Text

from gt.runtime.sharding.config_text import Checked


def diff_text(running: str, edited: str) -> Text:
    """A coloured unified diff of the running config's text against the edited text."""
    a, b = running.splitlines(), edited.splitlines()
    out = Text()
    body = list(difflib.unified_diff(a, b, "running", "edited", lineterm="", n=1))
    if not body:
        return Text("no changes: the editor holds the running config", style="dim")
    for line in body[2:]:
        style = (
            "green"
            if line.startswith("+")
            else "red"
            if line.startswith("-")
            else "dim"
            if line.startswith("@@")
            else ""
        )
        out.append(line + "\n", style=style)
    return out


def problems_text(checked: Checked, worker_ids: Sequence[int] | None) -> Text:
    """The problems list, or a line saying the config is valid for these workers."""
    if checked.ok:
        ws = ", ".join(map(str, worker_ids)) if worker_ids is not None else "any workers"
        return Text(f"✓ valid for workers {ws}", style="bold green")
    t = Text()
    for i, p in enumerate(checked.problems):
        if i:
            t.append("\n")
        t.append("✗ ", style="bold red")
        if p.line:
            t.append(f"line {p.line}: ", style="bold")
        t.append(p.message)
    return t
