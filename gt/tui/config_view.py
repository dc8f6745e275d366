"""Renderables and rules of the shard-config editor (shared with ``gt config``): the diff against the
running config, the problems list, and who may change a dispatcher (the checks themselves are
pure, in :mod:`gt.runtime.sharding.config_text`)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence

from rich.text import Text

from gt.runtime.control import is_remote
from gt.runtime.sharding.config_text import Checked, normal_yaml, to_text


def differs(running: str, edited: str, checked: Checked | None = None) -> bool:
    """Whether ``edited`` asks for another config than ``running`` (its text in normal form).

    Formatting, comments and defaults spelled out do not count: ``{axis: 0}`` and ``{axis: 0,
    workers: all}`` are the same config.
    """
    if edited == running:
        return False
    if checked is not None and checked.ok:
        return to_text(normal_yaml(checked.normal)) != running
    return True


def diff_text(running: str, edited: str, checked: Checked | None = None) -> Text:
    """A coloured unified diff of the running config's text against the edited text."""
    if not differs(running, edited, checked):
        return Text("no changes: the editor holds the running config", style="dim")
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


def user_name(uid: int) -> str:
    """The login name of ``uid`` (``uid 1234`` when it has none here)."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def owner_refusal(uid: object, endpoint: str, token: str | None) -> str | None:
    """Why a dispatcher on this machine started by another user must not be changed from here.

    ``uid`` is what the dispatcher answered (``ping``); ``None`` when it did not say. A dispatcher
    on another machine is guarded by its control token instead (user ids differ between machines),
    and giving the token is its owner's permission.
    """
    if type(uid) is not int or uid == os.getuid() or token or is_remote(endpoint):
        return None
    return (f"the dispatcher at {endpoint} was started by {user_name(uid)}, not by you: it is "
            "theirs to change (with its control token, --token, they can let you)")  # fmt: skip
