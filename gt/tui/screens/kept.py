"""Screens made once and shown again keep what they had rendered.

Textual restyles a screen and everything on it each time it is shown again (its ``ScreenResume``
handler calls :meth:`update_node_styles`), which throws away every line its widgets had
rendered: half the CPU of showing the help screen on a ``?`` (11.2 ms against 4.6-5.2 ms,
headless at 140×40). A screen that is installed once and pushed again needs that only when
something its styles depend on changed: the theme, ANSI colour, its classes or pseudo-classes.
"""

from __future__ import annotations


class KeptStyles:
    """Mixin (before ``Screen``): restyle on :meth:`update_node_styles` only when the theme, ANSI
    colour or the screen's own classes or pseudo-classes changed since the last time."""

    _styled_for: tuple | None = None  # what the screen was last styled for

    def update_node_styles(self, animate: bool = True) -> None:
        app = self.app  # type: ignore[attr-defined]
        key = (app.theme, app.ansi_color, frozenset(self.classes),  # type: ignore[attr-defined]
               frozenset(self.get_pseudo_classes()))  # type: ignore[attr-defined]  # fmt: skip
        if key == self._styled_for:
            return
        self._styled_for = key
        super().update_node_styles(animate=animate)  # type: ignore[misc]
