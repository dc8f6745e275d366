"""Which line of the user's program made each instruction: every instruction carries a small id of
the first stack frame outside the ``gt`` package (a mixin of
:class:`gt.runtime.client.connection.Connection`, whose new ids ride the next batch).

Looking that frame up runs for every op, so both steps are cached: whether a code object is GT's
own, and the id of each (code, bytecode offset) seen before. A walk that makes many instructions
for one user line -- a backward pass -- pins that line once (:meth:`SourceLines.pin_source_line`)
instead of climbing the same GT frames for each of them.
"""

from __future__ import annotations

import os
import sys
from threading import get_ident
from typing import Any

_GT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_GT_CLI_DIR = os.path.join(_GT_DIR, "cli") + os.sep


def _not_the_users(filename: str) -> bool:
    """Frames to look past for the user's line: GT's own (but not the workloads of ``gt/cli``,
    such as ``gt demo``'s) and the interpreter's frozen modules (``runpy`` under ``python -m``)."""
    if filename.startswith(_GT_DIR):
        return not filename.startswith(_GT_CLI_DIR)
    return filename.startswith("<frozen ")


class SourceLines:
    """Source-line ids for instructions (see the module docstring)."""

    def _init_source_lines(self) -> None:
        self._new_srclocs: list[list] = []
        self._srcloc_ids: dict[tuple, int] = {}
        self._srcloc_at: dict[tuple, int] = {}
        self._gt_code: dict[Any, bool] = {}
        self._pin: tuple[int, int] | None = None  # (thread, id) every op of that thread carries
        self.srclocs: dict[int, str] = {0: "?"}

    def srcloc(self) -> int:
        """The id of the first stack frame outside the ``gt`` package (or the pinned one)."""
        pin = self._pin
        if pin is not None and pin[0] == get_ident():
            return pin[1]
        f = sys._getframe(2)
        inside = self._gt_code
        while f is not None:
            code = f.f_code
            own = inside.get(code)
            if own is None:
                own = inside[code] = _not_the_users(code.co_filename)
            if not own:
                break
            f = f.f_back
        if f is None:
            return 0
        key = (code, f.f_lasti)
        sid = self._srcloc_at.get(key)
        if sid is None:
            line = (code, f.f_lineno)
            sid = self._srcloc_ids.get(line)
            if sid is None:
                sid = len(self._srcloc_ids) + 1
                self._srcloc_ids[line] = sid
                text = f"{os.path.basename(code.co_filename)}:{f.f_lineno}"
                self.srclocs[sid] = text
                self._new_srclocs.append([sid, text])
            self._srcloc_at[key] = sid
        return sid

    def pin_source_line(self) -> tuple[int, int] | None:
        """Make every instruction this thread makes carry the caller's user line, until
        :meth:`restore_source_line` is given what this returned (the pin before)."""
        before = self._pin
        self._pin = None
        self._pin = (get_ident(), self.srcloc())
        return before

    def restore_source_line(self, pin: tuple[int, int] | None) -> tuple[int, int] | None:
        """Put back a pin (``None``: look frames up again); returns the one replaced, so user
        code called inside a pinned walk (a custom backward, a hook) can have its own lines."""
        before = self._pin
        self._pin = pin
        return before
