"""Pure table rows and the header, built from a :class:`~gt.trace.state.ClusterState`.

The app's widgets put these rows into ``DataTable`` s; ``gt top --once`` prints the same rows as
Rich tables. Each table comes in layouts from generous to compact (:mod:`gt.tui.columns` picks the
one that fits), so a narrow terminal shows every column, abbreviated. Sorting and filtering are
pure too: one filter selects workers and clients together (:func:`filter_state`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rich.text import Text

from gt.trace.state import ClientState, ClusterState, LogEntry, WorkerState
from gt.tui import render as R
from gt.tui.columns import Column, Fitted, Layout, Rows, fit, narrower

#: Column keys, the same in every layout (labels differ: see :func:`worker_layouts`).
WORKER_COLUMNS = ("worker", "device", "state", "shares", "op", "queue", "instr/s", "memory",
                  "util", "temp", "power")  # fmt: skip
CLIENT_COLUMNS = ("client", "state", "home", "ops/s", "in flight", "errors", "host", "pid",
                  "script")  # fmt: skip
WORKER_SORTS = ("id", "compute", "instr/s", "memory", "queue")
CLIENT_SORTS = ("id", "ops/s", "errors")
#: The column each sort orders by (where its ▲/▼ goes).
SORT_COLUMNS = {"id": None, "compute": "shares", "instr/s": "instr/s", "memory": "memory",
                "queue": "queue", "ops/s": "ops/s", "errors": "errors"}  # fmt: skip
SHARES_LABEL = "compute/comm/wait/idle"
NARROW_HEADER = 100  # below this width the header drops its "GT " and "totals:" words


@dataclass(frozen=True)
class Status:
    """Where the monitor's data comes from and whether that is working (drawn in the header)."""

    kind: str = "fixture"  # "live", "replay", "fixture"
    address: str | None = None
    connected: bool = True
    detail: str = ""


@dataclass(frozen=True)
class Tier:
    """How compact one layout of the workers or clients table is."""

    name: str
    labels: tuple[str, ...]
    gap: int = 1
    bar: int = 10  # cells of the share bar
    mem_bar: int = 8  # cells of the memory bar (0: the numbers alone)
    short: bool = False  # abbreviated values (device without backend, "left" without reason)


_W_WIDE = ("worker", "device", "state", SHARES_LABEL, "op", "queue", "instr/s", "memory", "util",
           "temp", "power")  # fmt: skip
_W_MEDIUM = ("worker", "device", "state", "c/m/w/i", "op", "queue", "instr/s", "memory", "util",
             "temp", "power")  # fmt: skip
_W_NARROW = ("w", "device", "state", "c/m/w/i", "op", "q", "i/s", "mem", "util", "temp", "pwr")
_C_WIDE = ("client", "state", "home", "ops/s", "in flight", "errors", "host", "pid", "script")
_C_NARROW = ("c", "state", "w", "op/s", "infl", "err", "host", "pid", "script")
WORKER_TIERS = (
    Tier("roomy", _W_WIDE, gap=2, bar=17),
    Tier("wide", _W_WIDE, bar=17),
    Tier("medium", _W_MEDIUM, bar=8, mem_bar=5),
    Tier("narrow", _W_NARROW, bar=5, mem_bar=0, short=True),
)
CLIENT_TIERS = (
    Tier("roomy", _C_WIDE, gap=2),
    Tier("wide", _C_WIDE),
    Tier("narrow", _C_NARROW, short=True),
)


# ---------------------------------------------------------------------- header
def header_text(
    state: ClusterState,
    status: Status,
    *,
    readonly: bool = False,
    paused: bool = False,
    width: int | None = None,
) -> Text:
    """Source and connection, uptime, counts, rates; then totals and drops.

    Two logical lines; with a ``width``, each wraps between its parts (never inside one), so a
    narrow terminal gets three or four short lines instead of lines cut off.
    """
    narrow = width is not None and width < NARROW_HEADER
    where = status.address or status.kind
    if narrow:  # fewer words, so the header keeps to two lines on an 80-column terminal
        where = where.split("://", 1)[-1]
    first = [Text.assemble(("" if narrow else "GT ", "bold"), (where, "bold cyan"))]
    if status.connected:
        first.append(Text(status.detail or status.kind, style="green"))
    else:
        first.append(Text(status.detail or "disconnected", style="bold red"))
    first.append(Text(f"up {R.human_duration(state.uptime_s)}"))
    alive = sum(w.alive for w in state.workers) if status.connected else "?"  # (it cannot tell)
    first.append(Text(f"workers {alive}/{len(state.workers)}"))
    first.append(Text(f"clients {sum(c.alive for c in state.clients)}"))
    rate = _sum_or_none(w.instr_rate for w in state.workers if w.alive)
    first.append(Text(R.human_rate(rate, " instr/s"), style="bold"))
    tot = state.totals
    second = [
        Text(f"{'' if narrow else 'totals: '}{R.human_count(tot.instructions)} instr"),
        Text(f"{R.human_count(tot.batches)} batches"),
        Text(f"{R.human_bytes(tot.transfer_bytes)} moved"),
        Text(f"{R.human_count(tot.events)} events"),
        Text(f"errors {tot.errors}", style="bold red" if tot.errors else ""),
        Text(f"dropped {tot.dropped}", style="bold yellow" if tot.dropped else ""),
    ]
    if tot.bad_events:
        second.append(Text(f"malformed {tot.bad_events}", style="yellow"))
    if tot.bad_messages:
        second.append(Text(f"rejected {tot.bad_messages}", style="yellow"))
    if tot.internal_errors:
        second.append(
            Text(f"GT bugs {tot.internal_errors} (see the dispatcher's log)", style="bold red")
        )
    if paused:
        second.append(Text("[timeline paused]", style="bold yellow"))
    if readonly:
        second.append(Text("[read-only]", style="bold"))
    out = Text()
    for i, line in enumerate((first, second)):
        if i:
            out.append("\n")
        out.append_text(_flow(line, width))
    return out


def _flow(parts: list[Text], width: int | None, sep: str = "  ") -> Text:
    """``parts`` joined by ``sep``, broken onto a new line where the next part would not fit."""
    out = Text()
    col = 0
    for i, part in enumerate(parts):
        if i and width is not None and col + len(sep) + part.cell_len > width:
            out.append("\n")
            col = 0
        elif i:
            out.append(sep)
            col += len(sep)
        out.append_text(part)
        col += part.cell_len
    return out


def _sum_or_none(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


# ---------------------------------------------------------------------- filter
_ID = re.compile(r"^([wc])(\d+)$")


def _matches(needle: str, *hay: object) -> bool:
    n = needle.lower()
    return any(n in str(h).lower() for h in hay if h is not None)


def worker_matches(w: WorkerState, text: str) -> bool:
    """Whether the filter ``text`` names this worker: ``w3`` exactly, else any of its fields."""
    m = _ID.match(text.strip().lower())
    if m is not None:
        return m.group(1) == "w" and int(m.group(2)) == w.id
    return _matches(text, f"w{w.id}", w.device, w.backend, w.host, w.current_op,
                    "alive" if w.alive else "dead")  # fmt: skip


def client_matches(c: ClientState, text: str) -> bool:
    """Whether the filter ``text`` names this client: ``c2`` exactly, else host, pid or script."""
    m = _ID.match(text.strip().lower())
    if m is not None:
        return m.group(1) == "c" and int(m.group(2)) == c.id
    return _matches(text, f"c{c.id}", c.host, c.pid, " ".join(c.argv))


def filter_state(state: ClusterState, text: str) -> ClusterState:
    """The state narrowed to what ``text`` selects, consistently for every panel.

    A worker is kept when it matches or is the home of a matching client; a client when it
    matches or its home worker matches; timeline lanes follow the kept workers. Totals, marks and
    the log stay whole (the header describes the cluster, not the filter).
    """
    text = text.strip()
    if not text:
        return state
    ws = {w.id for w in state.workers if worker_matches(w, text)}
    cs = {c.id for c in state.clients if client_matches(c, text)}
    homes = {c.home for c in state.clients if c.id in cs and c.home is not None}
    cs |= {c.id for c in state.clients if c.home in ws}
    ws |= homes
    return dataclasses.replace(
        state,
        workers=tuple(w for w in state.workers if w.id in ws),
        clients=tuple(c for c in state.clients if c.id in cs),
        lanes=tuple(lane for lane in state.lanes if lane.worker in ws),
    )


def sorted_column(sort: str, id_column: str) -> str | None:
    """The key of the column a sort orders by (``id`` orders by the table's first column)."""
    return id_column if sort == "id" else SORT_COLUMNS.get(sort)


def sort_label(label: str, key: str, sorted_key: str | None, descending: bool) -> str:
    """A column's header, with ▼ (largest first) or ▲ when the table is sorted by it."""
    return f"{label}{'▼' if descending else '▲'}" if key == sorted_key else label


# ---------------------------------------------------------------------- workers
def worker_cells(w: WorkerState, tier: Tier = WORKER_TIERS[0], *, connected: bool = True,
                 device_total: int | None = None, hosts: bool = False) -> tuple[Text, ...]:  # fmt: skip
    """The cells of one worker row (see :data:`WORKER_COLUMNS`).

    Without a connection to the dispatcher a worker that was alive is shown as ``unknown`` and
    dimmed: the monitor cannot tell any more (the header says why). With ``hosts`` (the cluster
    spans machines) the device says which machine it is on: ``node2:cuda:0 ...``.
    """
    known = connected or not w.alive
    dim = "" if w.alive and known else "dim"
    mem = w.memory
    dev = w.device_stats
    if w.alive:
        shares = R.share_bar(w.compute, w.comm, w.wait, w.idle, tier.bar)
        if w.compute is not None:
            shares.append(f" {R.percent(w.compute):>4}")
        if not known:
            shares.stylize("dim")
    else:
        shares = Text("-" * tier.bar, style="dim")
    cap = R.memory_capacity(mem, dev.mem_total if device_total is None else device_total)
    mem_cell = R.memory_bar(mem.used, cap, tier.mem_bar) if tier.mem_bar else Text()
    if tier.mem_bar:
        mem_cell.append(" ")
    amount_style = dim or ("" if mem.used is not None else R.NA_STYLE)
    mem_cell.append(R.memory_amount(mem.used, cap), style=amount_style)
    if w.alive and known:
        state_cell = Text("alive", style="green")
    elif w.alive:
        state_cell = Text("unknown", style="dim yellow")
    else:
        state_cell = Text("dead", style="bold red")
    op = (w.current_op or "idle") if w.alive else (w.reason or "dead")
    return (
        Text(f"w{w.id}", style="bold" if w.alive and known else "dim" if w.alive else "dim strike"),
        R.na_text(_device_label(w, tier.short, hosts), dim),
        state_cell,
        shares,
        R.na_text(op, "red" if not w.alive else dim),
        R.na_text(R.na(w.queue if w.queue is not None else w.in_flight), dim),
        R.na_text(R.human_rate(w.instr_rate, ""), dim),
        mem_cell,
        R.na_text(R.na(dev.util, "{:.0f}%"), dim),
        R.na_text(R.na(dev.temp, "{:.0f}°C"), dim),
        R.na_text(R.na(dev.power, "{:.0f}W"), dim),
    )


def _device_label(w: WorkerState, short: bool = False, hosts: bool = False) -> str | None:
    if w.device is None and w.backend is None:
        return None
    where = f"{(w.host or '?').split('.')[0]}:" if hosts else ""
    if short:  # "cuda:0", "cpu": the backend is in the worker's detail
        return where + (w.device or w.backend or "?").split(" ")[0]
    return where + (f"{w.device or '?'}/{w.backend}" if w.backend else str(w.device))


def spans_hosts(state: ClusterState) -> bool:
    """Whether the cluster's workers run on more than one machine."""
    return len({w.host for w in state.workers if w.host}) > 1


_WORKER_KEYS = {
    "compute": lambda w: -(w.compute or 0.0),
    "instr/s": lambda w: -(w.instr_rate or 0.0),
    "memory": lambda w: -(w.memory.used or 0),
    "queue": lambda w: -(w.queue or 0),
}


def _sorted_workers(state: ClusterState, sort: str, reverse: bool) -> list[WorkerState]:
    key = _WORKER_KEYS.get(sort, lambda w: 0)
    ws = sorted(state.workers, key=lambda w: (key(w), w.id), reverse=reverse)
    return sorted(ws, key=lambda w: not w.alive)  # dead workers last, whatever the order


def worker_rows(state: ClusterState, sort: str = "id", filter_text: str = "", *,
                tier: Tier = WORKER_TIERS[0], connected: bool = True, reverse: bool = False) -> Rows:  # fmt: skip
    """``(worker id, cells)`` for every worker that matches the filter, in sort order.

    Dead workers sort after live ones; ``sort`` is one of :data:`WORKER_SORTS` (largest first,
    ids ascending; ``reverse`` flips it).
    """
    st = filter_state(state, filter_text)
    hosts = spans_hosts(state)
    return [(w.id, worker_cells(w, tier, connected=connected, hosts=hosts))
            for w in _sorted_workers(st, sort, reverse)]  # fmt: skip


def fit_workers(state: ClusterState, width: int, sort: str = "id", *, reverse: bool = False,
                connected: bool = True, floors: Mapping[str, Sequence[int]] | None = None,
                shrink: bool = False) -> Fitted:  # fmt: skip
    """The workers table in the most generous layout that fits ``width`` cells (``shrink``: with
    its last columns left out where even the most compact one does not fit)."""
    ws = _sorted_workers(state, sort, reverse)
    descending = (sort != "id") != reverse
    by = sorted_column(sort, "worker")
    hosts = spans_hosts(state)

    def layout(t: Tier) -> Layout:
        cols = tuple(Column(k, sort_label(lab, k, by, descending), elastic=k == "op")
                     for k, lab in zip(WORKER_COLUMNS, t.labels))  # fmt: skip
        return Layout(t.name, cols, lambda: [(w.id, worker_cells(w, t, connected=connected,
                                                                 hosts=hosts))
                                             for w in ws], t.gap)  # fmt: skip

    layouts = [layout(t) for t in WORKER_TIERS]
    if shrink:  # (what matters least goes first: the time shares and the op stay)
        layouts += narrower(layouts[-1], ("power", "temp", "util", "memory", "queue", "instr/s",
                                          "state", "device"))  # fmt: skip
    return fit(layouts, width, floors)


def workers_table(state: ClusterState, width: int = 160) -> Text:
    """All workers as a Rich table ``width`` cells wide at most (``gt top --once``): the layout
    the dashboard would choose for that width."""
    return fitted_table("workers", fit_workers(state, width, sort="", shrink=True))  # (by id)


def fitted_table(title: str, got: Fitted) -> Text:
    """A fitted layout as text, as the dashboard draws it: the title, the labels over a rule,
    one line per row, every cell cut to its column's width."""
    gap = " " * got.gap

    def line(cells: Iterable[Text]) -> Text:
        parts = []
        for cell, w in zip(cells, got.widths):
            cell = cell.copy()
            cell.truncate(w, overflow="ellipsis", pad=True)
            parts.append(cell)
        return Text(gap).join(parts)

    out = [Text(title), line(Text(c.label, style="bold") for c in got.columns),
           Text("─" * max(0, got.width - got.gap))]  # fmt: skip
    out += [line(cells) for _key, cells in got.rows]
    return Text("\n").join(out)


# ---------------------------------------------------------------------- clients
def client_cells(c: ClientState, tier: Tier = CLIENT_TIERS[0]) -> tuple[Text, ...]:
    """The cells of one client row (see :data:`CLIENT_COLUMNS`)."""
    dim = "" if c.alive else "dim"
    script = " ".join(c.argv) if c.argv else None
    if c.alive:
        state = Text("alive", style="green")
    else:
        why = c.reason or "?"
        state = Text("left" if tier.short else f"left ({why[:24]})", style="dim")
    return (
        Text(f"c{c.id}", style="bold" if c.alive else "dim"),
        state,
        R.na_text(R.na(c.home, "w{}"), dim),
        R.na_text(R.human_rate(c.ops_rate, ""), dim),
        R.na_text(R.na(c.in_flight), dim),
        Text(str(c.errors), style="bold red" if c.errors else dim),
        R.na_text(c.host, dim),
        R.na_text(R.na(c.pid), dim),
        R.na_text(script, dim),
    )


def _sorted_clients(state: ClusterState, sort: str, reverse: bool) -> list[ClientState]:
    keys = {"ops/s": lambda c: -(c.ops_rate or 0.0), "errors": lambda c: -c.errors}
    key = keys.get(sort, lambda c: 0)
    cs = sorted(state.clients, key=lambda c: (key(c), c.id), reverse=reverse)
    return sorted(cs, key=lambda c: not c.alive)


def client_rows(state: ClusterState, sort: str = "id", filter_text: str = "", *,
                tier: Tier = CLIENT_TIERS[0], reverse: bool = False) -> Rows:  # fmt: skip
    """``(client id, cells)`` for the clients the filter keeps, in sort order."""
    st = filter_state(state, filter_text)
    return [(c.id, client_cells(c, tier)) for c in _sorted_clients(st, sort, reverse)]


def fit_clients(state: ClusterState, width: int, sort: str = "id", *, reverse: bool = False,
                floors: Mapping[str, Sequence[int]] | None = None, shrink: bool = False) -> Fitted:  # fmt: skip
    """The clients table in the most generous layout that fits ``width`` cells (``shrink``: as
    :func:`fit_workers`)."""
    cs = _sorted_clients(state, sort, reverse)
    descending = (sort != "id") != reverse
    by = sorted_column(sort, "client")

    def layout(t: Tier) -> Layout:
        cols = tuple(Column(k, sort_label(lab, k, by, descending), elastic=k == "script",
                            min_width=6, want=10) for k, lab in zip(CLIENT_COLUMNS, t.labels))  # fmt: skip
        return Layout(t.name, cols, lambda: [(c.id, client_cells(c, t)) for c in cs], t.gap)

    layouts = [layout(t) for t in CLIENT_TIERS]
    if shrink:
        layouts += narrower(layouts[-1], ("pid", "host", "in flight", "errors", "home", "ops/s"))
    return fit(layouts, width, floors)


def clients_table(state: ClusterState, width: int = 160) -> Text:
    """All clients as a Rich table ``width`` cells wide at most (``gt top --once``)."""
    return fitted_table("clients", fit_clients(state, width, sort="", shrink=True))


# ---------------------------------------------------------------------- log
LOG_STYLES = {"error": "bold red", "worker_left": "red", "client_left": "yellow", "drop": "yellow",
              "mark": "bold yellow", "config": "cyan", "worker_joined": "green", "client_joined": "green"}  # fmt: skip


def log_lines(entries: tuple[LogEntry, ...] | list[LogEntry], height: int, now_ns: int,
              *, kind_width: int = 13) -> Text:  # fmt: skip
    """The newest ``height`` log entries, oldest first, stamped relative to ``now_ns``."""
    text = Text()
    for i, e in enumerate(entries[-height:] if height > 0 else ()):
        if i:
            text.append("\n")
        ago = (now_ns - e.t_ns) / 1e9
        text.append(f"{'-' + R.human_duration(ago) if ago > 0.05 else 'now':>7} ", style="dim")
        if kind_width:
            text.append(f"{e.kind[:kind_width]:<{kind_width}} ", style=LOG_STYLES.get(e.kind, ""))
        text.append(e.text, style=LOG_STYLES.get(e.kind, "") if not kind_width else "")
    if not entries:
        text.append("no events yet", style="dim")
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text
