"""A YAML ``TextArea`` highlighted without tree-sitter, with the lines that have problems marked."""

from __future__ import annotations

from rich.style import Style
from textual import events
from textual.widgets import TextArea

from gt.runtime.sharding.config_text import highlight_spans

ERROR_HIGHLIGHT = "gt.error"


class YamlArea(TextArea):
    """Highlights keys, numbers, booleans, strings and comments from PyYAML's scanner.

    :meth:`mark_lines` underlines whole lines (1-based) in red: where the problems are. Escape
    runs its screen's ``back`` action.
    """

    error_lines: frozenset[int] = frozenset()

    def __init__(self, text: str = "", **kw) -> None:
        super().__init__(text, soft_wrap=False, tab_behavior="indent", show_line_numbers=True, **kw)

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "escape":  # the screen's "esc back" at once, not a first escape that only
            event.stop()  # moves the focus off the text (TextArea's own use of it)
            event.prevent_default()
            await self.run_action("screen.back")
        # (other keys: Textual calls TextArea's own handler next, as for every class up the MRO)

    def mark_lines(self, lines: frozenset[int]) -> None:
        """Mark these 1-based lines as having problems."""
        if lines != self.error_lines:
            self.error_lines = lines
            self._build_highlight_map()
            self.refresh()

    def _build_highlight_map(self) -> None:
        """Fill the TextArea's highlight map from :func:`highlight_spans` (a Textual internal)."""
        highlights = getattr(self, "_highlights", None)
        cache = getattr(self, "_line_cache", None)
        if highlights is None:
            return
        if cache is not None:
            cache.clear()
        highlights.clear()
        lines = self.document.lines
        theme = getattr(self, "_theme", None)
        if theme is not None and ERROR_HIGHLIGHT not in theme.syntax_styles:
            theme.syntax_styles[ERROR_HIGHLIGHT] = Style(underline=True, color="red", bold=True)
        for row, start, end, name in highlight_spans(self.text):
            if row < len(lines):
                line = lines[row]
                highlights[row].append((_bytes(line, start), _bytes(line, end), name))
        for n in self.error_lines:
            if 0 < n <= len(lines):
                highlights[n - 1].append((0, None, ERROR_HIGHLIGHT))


def _bytes(line: str, col: int) -> int:
    """A character column as a UTF-8 byte offset (what the highlight map holds)."""
    return len(line[:col].encode("utf-8"))
