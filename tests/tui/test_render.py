"""Pure renderables and rows, checked by their characters and styles (no app)."""

from __future__ import annotations

from gt.trace.state import COMM, COMPUTE, ClusterState, Lane, Mark, Span
from gt.tui import render as R
from gt.tui import tables as T
from gt.tui.sample import T_END, sample_batches
from gt.tui.sources import ListSource


def styles_of(text) -> list[str]:
    """The style of every character."""
    out = [""] * len(text.plain)
    for span in text.spans:
        for i in range(span.start, span.end):
            out[i] = str(span.style)
    return out


def test_na_and_human_formats():
    assert R.na(None) == "N/A" and R.na(3, "{}%") == "3%"
    assert R.human_bytes(None) == "N/A"
    assert R.human_bytes(512) == "512B"
    assert R.human_bytes(1536) == "1.5K"
    assert R.human_bytes(3 << 30) == "3.0G"
    assert R.human_rate(None) == "N/A"
    assert R.human_rate(12_345) == "12.3k/s"
    assert R.human_rate(950, " instr/s") == "950 instr/s"
    assert R.human_duration(None) == "N/A"
    assert R.human_duration(5.25) == "5.2s"
    assert R.human_duration(185) == "3m05s"
    assert R.human_duration(7_500) == "2h05m"
    assert R.percent(0.372) == "37%" and R.percent(None) == "N/A"
    assert R.human_span(250_000_000) == "250ms" and R.human_span(10 * 10**9) == "10s"


def test_share_bar_stacks_compute_comm_idle():
    bar = R.share_bar(0.5, 0.2, 0.3, 10)
    assert bar.plain == "█████▒▒░░░"
    st = styles_of(bar)
    assert st[0] == R.COMPUTE_STYLE and st[5] == R.COMM_STYLE and st[9] == R.IDLE_STYLE


def test_share_bar_without_data_is_na():
    assert R.share_bar(None, None, None, 10).plain.strip() == "N/A"
    assert len(R.share_bar(None, None, None, 10).plain) == 10


def test_memory_bar_scales_to_the_limit():
    assert R.memory_bar(25, 50, 100, 8).plain == "██▒▒░░░░"
    assert R.memory_bar(50, 100, None, 4).plain == "██▒▒"  # no limit: scaled to reserved
    assert R.memory_bar(None, None, None, 6).plain.strip() == "N/A"


def test_sparkline_scales_from_minimum_to_max():
    assert R.sparkline([0, 4, 8], 10).plain == "▁▅█"
    assert R.sparkline([10, 20], 10, minimum=None).plain == "▁█"
    assert R.sparkline(list(range(100)), 5).plain.endswith("█")
    assert len(R.sparkline(list(range(100)), 5).plain) == 5
    assert R.sparkline([], 5).plain == "N/A"
    assert R.sparkline([3, 3], 5, minimum=None).plain == "▁▁"


def test_op_colors_are_stable_and_from_the_palette():
    assert R.op_color("matmul") == R.op_color("matmul")
    assert R.op_color("matmul") in R.PALETTE


def test_timeline_lane_cells_show_ops_transfers_idle_and_marks():
    lane = Lane(0, True, (Span(0, 40, "matmul", COMPUTE), Span(60, 80, "→w1", COMM)))
    text = R.timeline_lane(lane, 0, 100, 10, [Mark(95, "m", None)])
    assert text.plain == "████··▒▒·│"
    st = styles_of(text)
    assert st[0] == R.op_color("matmul")
    assert st[6] == R.COMM_STYLE and st[9] == R.MARK_STYLE


def test_timeline_lane_cell_takes_the_op_that_fills_it_most():
    lane = Lane(0, True, (Span(0, 3, "add", COMPUTE), Span(3, 10, "exp", COMPUTE)))
    text = R.timeline_lane(lane, 0, 10, 1)
    assert text.plain == "█" and styles_of(text)[0] == R.op_color("exp")
    thin = R.timeline_lane(Lane(0, True, (Span(0, 2, "add", COMPUTE),)), 0, 10, 1)
    assert thin.plain == "▌"


def test_timeline_has_labels_marks_row_and_axis():
    lanes = [Lane(0, True, (Span(0, 50, "add", COMPUTE),)), Lane(1, False, ())]
    text = R.timeline(lanes, 0, 10**9, 45, [Mark(5 * 10**8, "epoch", 1)], label_width=5)
    rows = text.plain.split("\n")
    assert len(rows) == 4
    assert rows[0].strip() == "▼epoch"
    assert rows[1].startswith("w0") and rows[2].startswith("w1✗")
    assert rows[3].strip().startswith("-1s") and rows[3].endswith("now")
    assert all(len(r) == 45 for r in rows)
    assert R.timeline(lanes, 0, 10**9, 45, paused=True).plain.endswith("paused")


def test_legend_lists_ops_by_time():
    lanes = [Lane(0, True, (Span(0, 10, "add", COMPUTE), Span(10, 60, "matmul", COMPUTE)))]
    assert R.timeline_legend(lanes, 0, 100).plain.startswith("█ matmul  █ add")


def sample_state() -> ClusterState:
    return ListSource(sample_batches(), now_ns=T_END).snapshot()


def test_worker_rows_show_dead_workers_dead_and_missing_values_na():
    rows = dict(T.worker_rows(sample_state()))
    assert set(rows) == {0, 1, 2}
    w1 = [c.plain for c in rows[1]]
    assert w1[T.WORKER_COLUMNS.index("util")] == "N/A"
    assert w1[T.WORKER_COLUMNS.index("temp")] == "N/A"
    w2 = [c.plain for c in rows[2]]
    assert w2[T.WORKER_COLUMNS.index("state")] == "dead"
    assert "heartbeat" in w2[T.WORKER_COLUMNS.index("op")]


def test_worker_rows_sort_and_filter():
    st = sample_state()
    assert [k for k, _ in T.worker_rows(st, "id")] == [0, 1, 2]
    assert [k for k, _ in T.worker_rows(st, "compute")][0] == 0
    assert [k for k, _ in T.worker_rows(st, "id", "numpy")] == [1]
    assert [k for k, _ in T.worker_rows(st, "id", "dead")] == [2]
    assert [k for k, _ in T.client_rows(st, "id", "eval")] == [2]


def test_header_shows_disconnected_readonly_and_drops():
    st = sample_state()
    text = T.header_text(
        st, T.Status("live", "tcp://h:1", False, "disconnected: no answer for 3s"), readonly=True
    )
    assert (
        "disconnected" in text.plain and "[read-only]" in text.plain and "dropped 1" in text.plain
    )


def test_empty_state_draws_without_errors():
    from gt.trace.state import empty_state

    st = empty_state()
    assert "N/A" in T.header_text(st, T.Status()).plain
    assert T.worker_rows(st) == [] and T.log_lines(st.log, 5, 0).plain == "no events yet"


def test_binned_span_draws_by_its_busy_share():
    lane = Lane(0, True, (Span(0, 100, "add", COMPUTE, busy=25),))
    assert R.timeline_lane(lane, 0, 100, 4).plain == "▌▌▌▌"
    full = Lane(0, True, (Span(0, 100, "add", COMPUTE, busy=90),))
    assert R.timeline_lane(full, 0, 100, 4).plain == "████"


def test_header_shows_rejected_messages_and_bugs_in_gt_from_the_dispatchers_counters():
    from gt.trace import events as E
    from gt.trace.model import ClusterModel

    m = ClusterModel(["add"])
    m.apply_batch("dispatcher", 0, [E.event(E.STATS, 10, counters={"bad_messages": 3})])
    text = T.header_text(m.state(20), T.Status("live", "tcp://h:1", True)).plain
    assert "rejected 3" in text and "GT bugs" not in text
    m.apply_batch("dispatcher", 1, [E.event(E.STATS, 30, counters={"internal_errors": 2})])
    assert "GT bugs 2" in T.header_text(m.state(40), T.Status("live", "tcp://h:1", True)).plain
