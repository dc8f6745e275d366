"""Pure tables: layouts fitted to a width, the one filter, sort arrows, the disconnected state."""

from __future__ import annotations

from rich.text import Text

from gt.tui import tables as T
from gt.tui.columns import Column, Layout, fit
from gt.tui.sample import T_END, sample_batches
from gt.tui.sources import ListSource


def sample_state():
    return ListSource(sample_batches(), now_ns=T_END).snapshot()


def test_fit_takes_the_first_layout_that_fits_and_cuts_elastic_text_with_an_ellipsis():
    def rows():
        return [(1, (Text("w1"), Text("a long reason for leaving")))]

    wide = Layout("wide", (Column("id", "worker"), Column("op", "op", elastic=True)), rows, gap=2)
    narrow = Layout("narrow", (Column("id", "w"), Column("op", "op", elastic=True)), rows)
    assert fit([wide, narrow], 40).name == "wide"
    got = fit([wide, narrow], 16)
    assert got.name == "narrow" and got.width == 16
    cell = got.rows[0][1][1].plain
    assert cell.endswith("…") and len(cell) == got.widths[1]


def test_workers_table_keeps_every_column_at_80_columns():
    st = sample_state()
    for width in (77, 117, 137):
        got = T.fit_workers(st, width)
        assert [c.key for c in got.columns] == list(T.WORKER_COLUMNS)
        assert got.width <= width, (width, got.name, got.widths)
        for _key, cells in got.rows:
            for cell, w in zip(cells, got.widths):
                assert cell.cell_len <= w  # nothing cut off by the table itself
    assert T.fit_workers(st, 77).name == "narrow"
    assert T.fit_workers(st, 137).name == "roomy"
    narrow = dict(T.fit_workers(st, 77).rows)
    w0 = [c.plain for c in narrow[0]]
    assert w0[T.WORKER_COLUMNS.index("util")].endswith("%")
    assert "°C" in w0[T.WORKER_COLUMNS.index("temp")]
    assert w0[T.WORKER_COLUMNS.index("power")].endswith("W")
    assert "/2.0G" in w0[T.WORKER_COLUMNS.index("memory")]


def test_clients_state_is_never_cut_and_the_script_gives_way():
    st = sample_state()
    got = T.fit_clients(st, 45)
    state_col = [c.key for c in got.columns].index("state")
    assert got.width <= 45
    assert all(cells[state_col].plain == "alive" for _k, cells in got.rows)
    script = [c.key for c in got.columns].index("script")
    assert any(cells[script].plain.endswith("…") for _k, cells in got.rows)


def test_header_wraps_between_its_parts_at_80_columns():
    st = sample_state()
    status = T.Status("live", "tcp://127.0.0.1:45767", True, "connected")
    lines = T.header_text(st, status, width=78).plain.split("\n")
    assert all(len(line) <= 78 for line in lines)
    assert len(lines) == 2 and "dropped 1" in lines[1]
    wide = T.header_text(st, status, width=160).plain.split("\n")
    assert wide[0].startswith("GT tcp://") and wide[1].startswith("totals:")


def test_one_filter_selects_workers_their_clients_and_their_lanes():
    st = sample_state()
    view = T.filter_state(st, "w1")
    assert [w.id for w in view.workers] == [1]
    assert [lane.worker for lane in view.lanes] == [1]
    assert [c.id for c in view.clients] == [2]  # client 2 runs on worker 1
    by_client = T.filter_state(st, "eval")  # a client's script: it and its home worker stay
    assert [c.id for c in by_client.clients] == [2] and [w.id for w in by_client.workers] == [1]
    assert T.filter_state(st, "") is st
    assert view.totals == st.totals and view.log == st.log  # the header describes the cluster


def test_the_sorted_column_shows_its_direction():
    st = sample_state()
    labels = [c.label for c in T.fit_workers(st, 137, "compute").columns]
    assert labels[T.WORKER_COLUMNS.index("shares")].endswith("▼")
    assert labels[0] == "worker"
    labels = [c.label for c in T.fit_workers(st, 137, "id").columns]
    assert labels[0] == "worker▲"
    flipped = T.fit_workers(st, 137, "compute", reverse=True)
    assert flipped.columns[T.WORKER_COLUMNS.index("shares")].label.endswith("▲")
    assert [k for k, _ in flipped.rows][-1] == 2  # dead workers stay last either way
    clients = [c.label for c in T.fit_clients(st, 100, "errors").columns]
    assert clients[T.CLIENT_COLUMNS.index("errors")] == "errors▼"


def test_disconnected_monitor_does_not_claim_workers_are_alive():
    st = sample_state()
    rows = dict(T.worker_rows(st, connected=False))
    state_col = T.WORKER_COLUMNS.index("state")
    assert rows[0][state_col].plain == "unknown" and "dim" in str(rows[0][state_col].style)
    assert rows[2][state_col].plain == "dead"  # what is known to be dead stays dead
    assert dict(T.worker_rows(st))[0][state_col].plain == "alive"


def test_a_cluster_on_several_machines_names_each_workers_machine():
    import dataclasses

    st = ListSource(sample_batches(), now_ns=T_END).snapshot()
    one = tuple(dataclasses.replace(w, host="box") for w in st.workers)
    labels = [str(c[1]) for _w, c in T.worker_rows(dataclasses.replace(st, workers=one))]
    assert labels and not any(d.startswith("box:") for d in labels)
    many = tuple(dataclasses.replace(w, host=f"node{w.id}.lab") for w in st.workers)
    labels = [str(c[1]) for _w, c in T.worker_rows(dataclasses.replace(st, workers=many))]
    assert sorted(d.split(":")[0] for d in labels) == sorted(f"node{w.id}" for w in many)


def test_once_tables_take_the_dashboards_layout_for_the_width(monkeypatch):
    # (gt top --once drew every column at its widest in a bordered table: at 80 columns the
    # worker ids, states and ops were all "…"; piped, $COLUMNS was ignored)
    from gt.cli.dashboard import format_once

    st = sample_state()
    status = T.Status("fixture")
    for width in (60, 80, 200):
        lines = format_once(st, status, width).splitlines()
        assert max(len(line) for line in lines) <= width
        rows = lines[lines.index("workers") + 3 :]
        for w in st.workers:  # each worker's id and state are whole, never "…"
            assert any(r.split()[:1] == [f"w{w.id}"] for r in rows), (width, rows)
    monkeypatch.setenv("COLUMNS", "70")
    assert max(map(len, format_once(st, status).splitlines())) <= 70


def test_once_tables_leave_out_their_last_columns_rather_than_wrap_at_40_columns():
    st = sample_state()
    for table, n in (
        (T.workers_table(st, 40), len(st.workers)),
        (T.clients_table(st, 40), len(st.clients)),
    ):
        lines = table.plain.split("\n")
        assert len(lines) == 3 + n and all(len(line) <= 40 for line in lines)  # one line a row
    head = T.workers_table(st, 40).plain.split("\n")[1].split()
    assert head == ["w", "c/m/w/i", "op"]  # the time shares and the op stay to the last


def test_once_prints_each_event_on_one_row_cut_at_the_width():
    # (the event log's rows wrapped at 60 columns: "client 1 joined: ... (pid" and "24913, vm)")
    import dataclasses

    from gt.cli.dashboard import format_once
    from gt.trace.state import LogEntry

    st = sample_state()
    status = T.Status("fixture")
    long = "client 1 joined: train_nn.py 100 (pid 24913, vm) " + "x" * 80
    rows = {}
    for text in ("short", long):
        log = (LogEntry(st.now_ns, "join", "client:1", text),)
        out = format_once(dataclasses.replace(st, log=log), status, 60).splitlines()
        rows[text] = out
    assert len(rows[long]) == len(rows["short"])
    assert rows[long][-1].endswith("…") and len(rows[long][-1]) <= 60
