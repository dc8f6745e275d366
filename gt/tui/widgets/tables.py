"""Data tables for workers and clients, fitted to their width and updated in place."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widgets import DataTable

from gt.trace.state import ClusterState
from gt.tui import tables as T
from gt.tui.columns import Fitted

#: Cells kept free on the right for the vertical scrollbar (1 cell wide, see gt.tcss).
SCROLLBAR = 1


class RowTable(DataTable):
    """A row-cursor ``DataTable`` that shows a :class:`~gt.tui.columns.Fitted` table.

    Columns get fixed widths (the fit's width plus the gap), so the table never needs a
    horizontal scrollbar; the columns are rebuilt only when the layout, a width or a header
    (the sort arrow) changes. Rows change only where they changed, and the cursor stays on the
    same key when rows are added, removed or reordered.
    """

    SORTS: tuple[str, ...] = ("id",)
    COLUMN_ID = "id"  # the key of the column the ``id`` sort orders by

    def __init__(self, **kw) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, cell_padding=0, **kw)
        self.sort_key = self.SORTS[0]
        self.reverse = False
        self.layout_name = ""  # the layout in use ("wide", "medium", "narrow"; tests read it)
        self._columns_sig: tuple = ()
        self._floors: dict[str, tuple[int, ...]] = {}  # per layout: the widths last shown
        self._floors_width = 0
        self._cells: dict[str, tuple[Text, ...]] = {}
        self._order: list[str] = []
        self._shown: tuple[ClusterState, bool] | None = None  # what to refit on a resize

    def on_resize(self, event: events.Resize) -> None:
        """Refit the last state to the new width at once (not at the next repaint)."""
        if self._shown is not None:
            self.show(self._shown[0], connected=self._shown[1])

    def cycle_sort(self) -> str:
        """Sort by the next key in :attr:`SORTS` (its natural direction); returns it."""
        i = (list(self.SORTS).index(self.sort_key) + 1) % len(self.SORTS)
        self.sort_key = self.SORTS[i]
        self.reverse = False
        return self.sort_key

    def flip_sort(self) -> bool:
        """Reverse the order; returns whether it is now reversed."""
        self.reverse = not self.reverse
        return self.reverse

    def selected_key(self) -> str | None:
        """The key of the row under the cursor."""
        if 0 <= self.cursor_row < len(self._order):
            return self._order[self.cursor_row]
        return None

    def available_width(self) -> int:
        """The cells a row may take (the scrollbar's column excluded)."""
        width = self.scrollable_content_region.width or self.content_size.width
        if width <= 0:  # not laid out yet: a guess from the screen, corrected on the next repaint
            width = self.app.size.width - 2
        return max(10, width - SCROLLBAR)

    def floors(self, width: int) -> dict[str, tuple[int, ...]]:
        """The widths last shown per layout, so columns do not jump as numbers change length
        (forgotten when the table's width changes)."""
        if width != self._floors_width:
            self._floors_width = width
            self._floors.clear()
        return self._floors

    def show_fitted(self, fitted: Fitted) -> None:
        """Show exactly this table (columns, widths and rows, in order)."""
        self._floors[fitted.name] = fitted.widths
        sig = (fitted.name, tuple(c.label for c in fitted.columns), fitted.widths, fitted.gap)
        keys = [str(k) for k, _ in fitted.rows]
        self.layout_name = fitted.name
        if sig != self._columns_sig:
            keep = self.selected_key()
            self.clear(columns=True)
            for col, width in zip(fitted.columns, fitted.widths):
                self.add_column(col.label, key=col.key, width=width + fitted.gap)
            self._columns_sig = sig
            self._order = []
            self._cells.clear()
            self._add_rows(keys, fitted, keep)
            return
        if keys != self._order:
            keep = self.selected_key()
            self.clear()
            self._cells.clear()
            self._add_rows(keys, fitted, keep)
            return
        for key, (_k, cells) in zip(keys, fitted.rows):
            old = self._cells.get(key)
            if old == cells:
                continue
            for i, (col, cell) in enumerate(zip(fitted.columns, cells)):
                if old is None or old[i] != cell:
                    self.update_cell(key, col.key, cell)
            self._cells[key] = cells

    def _add_rows(self, keys: list[str], fitted: Fitted, keep: str | None) -> None:
        for key, (_k, cells) in zip(keys, fitted.rows):
            self.add_row(*cells, key=key)
            self._cells[key] = cells
        self._order = keys
        if keep in keys:
            self.move_cursor(row=keys.index(keep), animate=False)

    def show(self, state: ClusterState, *, connected: bool = True) -> None:  # pragma: no cover
        raise NotImplementedError


class WorkersTable(RowTable):
    """One row per worker (dead ones stay, drawn dead)."""

    SORTS = T.WORKER_SORTS
    COLUMN_ID = "worker"

    def show(self, state: ClusterState, *, connected: bool = True) -> None:
        """Draw these workers (``connected``: whether the monitor still hears the dispatcher)."""
        self._shown = (state, connected)
        width = self.available_width()
        self.show_fitted(T.fit_workers(state, width, self.sort_key, reverse=self.reverse,
                                       connected=connected, floors=self.floors(width)))  # fmt: skip


class ClientsTable(RowTable):
    """One row per client."""

    SORTS = T.CLIENT_SORTS
    COLUMN_ID = "client"

    def show(self, state: ClusterState, *, connected: bool = True) -> None:
        """Draw these clients."""
        self._shown = (state, connected)
        width = self.available_width()
        self.show_fitted(T.fit_clients(state, width, self.sort_key, reverse=self.reverse,
                                       floors=self.floors(width)))  # fmt: skip
