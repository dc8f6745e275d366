"""Data tables for workers and clients, updated in place from pure rows."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

from gt.trace.state import ClusterState
from gt.tui import tables as T


class RowTable(DataTable):
    """A row-cursor ``DataTable`` that takes whole row lists and changes only what changed.

    The cursor stays on the same key when rows are added, removed or reordered.
    """

    COLUMNS: Sequence[str] = ()
    SORTS: Sequence[str] = ("id",)

    def __init__(self, **kw) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self.sort_key = self.SORTS[0]
        self.filter_text = ""
        self._cells: dict[str, tuple[Text, ...]] = {}
        self._order: list[str] = []

    def on_mount(self) -> None:
        for c in self.COLUMNS:
            self.add_column(c, key=c)

    def cycle_sort(self) -> str:
        """Sort by the next key in :attr:`SORTS`; returns it."""
        i = (list(self.SORTS).index(self.sort_key) + 1) % len(self.SORTS)
        self.sort_key = self.SORTS[i]
        return self.sort_key

    def selected_key(self) -> str | None:
        """The key of the row under the cursor."""
        if 0 <= self.cursor_row < len(self._order):
            return self._order[self.cursor_row]
        return None

    def set_rows(self, rows: Sequence[tuple[object, tuple[Text, ...]]]) -> None:
        """Show exactly these ``(key, cells)`` rows, in this order."""
        keys = [str(k) for k, _ in rows]
        if keys != self._order:
            keep = self.selected_key()
            self.clear()
            self._cells.clear()
            for key, (_k, cells) in zip(keys, rows):
                self.add_row(*cells, key=key)
                self._cells[key] = cells
            self._order = keys
            if keep in keys:
                self.move_cursor(row=keys.index(keep), animate=False)
            return
        for key, (_k, cells) in zip(keys, rows):
            old = self._cells.get(key)
            if old == cells:
                continue
            for i, (col, cell) in enumerate(zip(self.COLUMNS, cells)):
                if old is None or old[i] != cell:
                    self.update_cell(key, col, cell, update_width=True)
            self._cells[key] = cells

    def show(self, state: ClusterState) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class WorkersTable(RowTable):
    """One row per worker (dead ones stay, drawn dead)."""

    COLUMNS = T.WORKER_COLUMNS
    SORTS = T.WORKER_SORTS

    def show(self, state: ClusterState) -> None:
        """Draw these workers."""
        self.set_rows(T.worker_rows(state, self.sort_key, self.filter_text))


class ClientsTable(RowTable):
    """One row per client."""

    COLUMNS = T.CLIENT_COLUMNS
    SORTS = T.CLIENT_SORTS

    def show(self, state: ClusterState) -> None:
        """Draw these clients."""
        self.set_rows(T.client_rows(state, self.sort_key, self.filter_text))
