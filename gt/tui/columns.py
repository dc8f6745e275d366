"""Fitting a table to the width it has, purely: candidate layouts in, the first that fits out.

A table is offered as a series of layouts from the most generous to the most compact (long
labels and wide bars first, abbreviations and short bars last). :func:`fit` takes the first whose
columns fit the width; its *elastic* columns (free text such as the current op or a script's
command line) take what the others leave, cut with ``…`` where that is less than their text. So a
narrow terminal gets narrower columns and abbreviations, never fewer columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from rich.text import Text

#: ``(key, cells)`` rows, in display order.
Rows = list[tuple[object, tuple[Text, ...]]]


@dataclass(frozen=True)
class Column:
    """One column of a layout.

    Attributes:
        key: what the column shows, the same in every layout (sorts refer to it).
        label: the header.
        elastic: takes the width the other columns leave, its cells cut with ``…``.
        min_width: the least an elastic column is cut to.
        want: the width below which an elastic column's layout is given up for a more compact one.
    """

    key: str
    label: str
    elastic: bool = False
    min_width: int = 4
    want: int = 12


@dataclass(frozen=True)
class Layout:
    """A candidate: its columns, the gap between them and how to make its rows."""

    name: str
    columns: tuple[Column, ...]
    rows: Callable[[], Rows]
    gap: int = 1


@dataclass(frozen=True)
class Fitted:
    """The layout that was chosen, with each column's width (the gap not included)."""

    name: str
    columns: tuple[Column, ...]
    widths: tuple[int, ...]
    gap: int
    rows: Rows

    @property
    def width(self) -> int:
        """Cells the whole table takes (every column with its gap)."""
        return sum(self.widths) + self.gap * len(self.widths)


def measure(columns: Sequence[Column], rows: Rows) -> list[int]:
    """The width of each column: its widest cell or its label."""
    widths = [len(c.label) for c in columns]
    for _key, cells in rows:
        for i, cell in enumerate(cells):
            n = cell.cell_len
            if n > widths[i]:
                widths[i] = n
    return widths


def cut(cell: Text, width: int) -> Text:
    """``cell`` cut to ``width`` cells, its last one an ellipsis when something was cut off."""
    if cell.cell_len <= width:
        return cell
    out = cell.copy()
    out.truncate(max(0, width), overflow="ellipsis")
    return out


def narrower(layout: Layout, drop: Sequence[str]) -> Iterator[Layout]:
    """``layout`` less the column keyed ``drop[0]``, then less ``drop[1]`` too, and so on: for a
    table that must fit a width where even the most compact layout is too wide (``gt top --once``
    at 40 columns), so that its rows are never wrapped."""
    keys = [c.key for c in layout.columns]
    idx = list(range(len(keys)))
    for key in drop:
        if key not in keys:
            continue
        idx.remove(keys.index(key))
        kept = tuple(idx)
        yield Layout(
            f"{layout.name}-{len(kept)}",
            tuple(layout.columns[i] for i in kept),
            lambda kept=kept: [(k, tuple(c[i] for i in kept)) for k, c in layout.rows()],
            layout.gap,
        )


def fit(
    layouts: Iterable[Layout], width: int, floors: Mapping[str, Sequence[int]] | None = None
) -> Fitted:
    """The first layout whose columns fit ``width``, else the last with its elastic columns cut.

    Elastic columns take whatever width the others leave, so the table fills ``width`` exactly
    and its column widths change only when a fixed column's content does.

    Args:
        layouts: candidates, most generous first.
        width: the cells available.
        floors: per layout name, the least width of each column (what a table showed last, so
            its columns do not jump back and forth as numbers change length).

    Raises:
        ValueError: no layouts.
    """
    chosen: tuple[Layout, Rows, list[int]] | None = None
    for layout in layouts:
        rows = layout.rows()
        widths = measure(layout.columns, rows)
        floor = (floors or {}).get(layout.name)
        if floor is not None and len(floor) == len(widths):
            widths = [w if c.elastic else max(w, f)
                      for w, f, c in zip(widths, floor, layout.columns)]  # fmt: skip
        chosen = (layout, rows, widths)
        # elastic text may be cut down to what it wants (long reasons, long command lines)
        need = sum(min(w, c.want) if c.elastic else w for w, c in zip(widths, layout.columns))
        if need + layout.gap * len(widths) <= width:
            break
    if chosen is None:
        raise ValueError("fit() needs at least one layout")
    layout, rows, widths = chosen
    return _spread(layout, rows, widths, width)


def _spread(layout: Layout, rows: Rows, widths: list[int], width: int) -> Fitted:
    """Give the elastic columns what the fixed ones leave; cut their cells to it."""
    cols = layout.columns
    elastic = [i for i, c in enumerate(cols) if c.elastic]
    if not elastic:
        return Fitted(layout.name, cols, tuple(widths), layout.gap, rows)
    fixed = sum(w for i, w in enumerate(widths) if i not in elastic)
    room = width - fixed - layout.gap * len(widths)
    for n, i in enumerate(elastic):  # share what is left evenly, the first taking the remainder
        share = room // len(elastic) + (room % len(elastic) if n == 0 else 0)
        widths[i] = max(cols[i].min_width, share)
    rows = [(key, tuple(cut(c, widths[i]) if i in elastic else c for i, c in enumerate(cells)))
            for key, cells in rows]  # fmt: skip
    return Fitted(layout.name, cols, tuple(widths), layout.gap, rows)
