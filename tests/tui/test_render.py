"""Pure renderables and rows, checked by their characters and styles (no app)."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from gt.trace.state import COMM, COMPUTE, WAIT, ClusterState, Lane, Mark, Span
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


def test_spans_print_with_three_significant_digits_not_floats():
    assert R.human_span(2_311_160_000) == "2.31s"  # a measured span, not "2.31116s"
    assert R.human_span(1_234_567) == "1.23ms" and R.human_span(7_500_000_000) == "7.5s"
    assert R.human_span(120 * 10**9) == "2m" and R.human_span(139 * 10**9) == "2m19s"
    assert R.human_span(2 * 3600 * 10**9) == "2h"


def test_share_bar_stacks_compute_comm_wait_idle():
    bar = R.share_bar(0.4, 0.2, 0.1, 0.3, 10)
    assert bar.plain == "████▒▒░···"
    st = styles_of(bar)
    assert st[0] == R.COMPUTE_STYLE and st[4] == R.COMM_STYLE
    assert st[6] == R.WAIT_STYLE and st[9] == R.IDLE_STYLE
    assert len({R.COMPUTE_STYLE, R.COMM_STYLE, R.WAIT_STYLE, R.IDLE_STYLE}) == 4


def test_share_bar_without_data_is_na():
    assert R.share_bar(None, None, None, None, 10).plain.strip() == "N/A"
    assert len(R.share_bar(None, None, None, None, 10).plain) == 10


def test_memory_bar_draws_used_against_the_capacity_not_the_reserve():
    # 25 used of a limit of 100 (whatever is reserved): a quarter of the bar, never full
    assert R.memory_bar(25, 100, 8).plain == "██······"
    assert R.memory_bar(1, 10**9, 4).plain == "█···"  # something held never draws as empty
    assert R.memory_bar(50, None, 4).plain == "    "  # no capacity: no fake bar, just room
    assert R.memory_amount(300 << 20, 2 << 30) == "300M/2.0G"
    assert R.memory_amount(300 << 20, None) == "300M" and R.memory_amount(None, None) == "N/A"
    from gt.trace.state import MemoryState

    assert R.memory_capacity(MemoryState(), 141 << 30) == 141 << 30  # the device without a limit
    assert R.memory_capacity(MemoryState(limit=2 << 30), 141 << 30) == 2 << 30
    assert R.memory_capacity(MemoryState(), None) is None
    assert R.memory_cached(MemoryState(used=100, reserved=160)) == 60


def test_memory_cell_of_a_worker_is_not_full_when_it_holds_a_cache():
    from gt.trace.state import MemoryState

    w = next(w for w in sample_state().workers if w.id == 0)
    w = dataclasses.replace(w, memory=MemoryState(used=100 << 20, reserved=1 << 30, limit=2 << 30))
    cell = T.worker_cells(w)[T.WORKER_COLUMNS.index("memory")].plain
    assert cell.startswith("█·······") and "100M/2.0G" in cell


def test_worker_detail_memory_shows_spill_traffic_and_who_holds_the_pool():
    from gt.trace.state import MemoryState
    from gt.tui.detail import CLIENTS_SHOWN, memory_text

    w = next(w for w in sample_state().workers if w.id == 0)
    clients = tuple((c, c << 20, (10 - c) << 20) for c in range(1, CLIENTS_SHOWN + 3))
    mem = MemoryState(used=40 << 20, reserved=48 << 20, limit=64 << 20, client_limit=16 << 20,
                      spill_out=300 << 20, spill_in=200 << 20, prefetched=150 << 20,
                      prefetch_hits=31, prefetch_misses=7, oom=2, clients=clients)  # fmt: skip
    lines = memory_text(dataclasses.replace(w, memory=mem), 100).plain.splitlines()
    assert any("spill out 300.0M  in 200.0M  prefetched 150.0M (hits 31, misses 7)  refused 2" in x
               for x in lines)  # fmt: skip
    at = lines.index("by client:")
    shown = lines[at + 1 : at + 1 + CLIENTS_SHOWN]
    # most held (used + spilled) first: every client holds 10M, so by id; the quota is named
    assert [x.split()[0] for x in shown] == [f"c{c}" for c in range(1, CLIENTS_SHOWN + 1)]
    assert "used    1.0M of 16.0M quota  spilled 9.0M" in shown[0]
    assert lines[at + 1 + CLIENTS_SHOWN].strip() == "+2 more: used 15.0M  spilled 5.0M"


def test_worker_detail_memory_without_traffic_or_clients_stays_short():
    from gt.trace.state import MemoryState
    from gt.tui.detail import memory_text

    w = next(w for w in sample_state().workers if w.id == 0)
    text = memory_text(dataclasses.replace(w, memory=MemoryState(used=1 << 20)), 100).plain
    assert "spill out" not in text and "by client" not in text


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
    thin = Lane(
        0, True, (Span(0, 4, "add", COMPUTE),), (Span(0, 4, "", COMPUTE), Span(4, 7, "", WAIT))
    )
    thin = R.timeline_lane(thin, 0, 10, 1)
    assert thin.plain == "▌"  # the most of the cell, under half of it


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
    legend = R.timeline_legend(lanes, 0, 100).plain
    assert legend.startswith("█ matmul  █ add") and "░ wait" in legend and "▒ transfer" in legend


def test_timeline_draws_waits_apart_from_transfers_and_compute():
    lane = Lane(0, True, (Span(0, 40, "→w1", COMM), Span(40, 80, "wait w1", WAIT)))
    text = R.timeline_lane(lane, 0, 100, 10)
    assert text.plain == "▒▒▒▒░░░░··"
    st = styles_of(text)
    assert st[0] == R.COMM_STYLE and st[4] == R.WAIT_STYLE and st[8] == R.IDLE_STYLE


def test_a_wait_inside_a_batch_shows_as_wait_not_as_the_op():
    # the batch runs 0..100, but 0..60 of it is spent waiting for a peer's shard
    lane = Lane(0, True, (Span(0, 100, "batch", COMPUTE), Span(0, 60, "wait w2", WAIT)))
    text = R.timeline_lane(lane, 0, 100, 10)
    assert text.plain.startswith("░░░░░░") and text.plain.endswith("████")


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
    assert R.timeline_lane(lane, 0, 100, 4).plain == "····"  # three quarters idle
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


def naive_cover(lane: Lane, start: int, end: int, width: int):
    """Each span's overlap with each cell, one by one: the reference for lane_cover."""
    dt = (end - start) / width
    out = {COMPUTE: [0.0] * width, COMM: [0.0] * width, WAIT: [0.0] * width}
    for s in lane.spans:
        kind = s.kind if s.kind in (COMM, WAIT) else COMPUTE
        a, b = max(s.t0, start), min(s.t1, end)
        density = s.busy / (s.t1 - s.t0) if s.busy is not None and s.t1 > s.t0 else 1.0
        if b == a and start <= s.t0 < end:
            out[kind][min(width - 1, int((a - start) / dt))] += dt * 0.01
            continue
        for c in range(width):
            lo, hi = start + c * dt, start + (c + 1) * dt
            out[kind][c] += max(0.0, min(b, hi) - max(a, lo)) * density
    return out


def test_lane_cover_matches_cell_by_cell_overlaps():
    import random

    rng = random.Random(3)
    for width in (1, 7, 40, 151):
        spans = []
        for _ in range(300):
            t0 = rng.randint(-200, 10_200)
            t1 = t0 + rng.choice([0, rng.randint(1, 60), rng.randint(60, 3000)])
            kind = rng.choice([COMPUTE, COMPUTE, COMM, WAIT])
            busy = rng.choice([None, (t1 - t0) // 2]) if t1 > t0 else None
            spans.append(Span(t0, t1, rng.choice(["add", "matmul"]), kind, busy))
        lane = Lane(0, True, tuple(sorted(spans)))
        comp, comm, wait, names = R.lane_cover(lane, 0, 10_000, width)
        want = naive_cover(lane, 0, 10_000, width)
        for got, kind in ((comp, COMPUTE), (comm, COMM), (wait, WAIT)):
            assert [round(x, 6) for x in got] == [round(x, 6) for x in want[kind]]
        assert all((n is None) == (c == 0) for n, c in zip(names, comp))


def test_hot_paths_print_calls_and_time_per_call_eager_and_replayed():
    from gt.trace.state import HotPath
    from gt.tui.detail import hot_text

    text = hot_text((HotPath(1, 3, "train_step", 58, "replaying", 1234, 4_000_000, 2_500_000),
                     HotPath(2, 4, "eval", 9, "eager: it runs fetch (a sync point)", 0, None,
                             None)))  # fmt: skip
    assert "c1 train_step  58 instr  1,234 calls  4ms → 2.5ms a call  1.60× faster" in text.plain
    assert "c2 eval  9 instr  0 calls  eager: it runs fetch (a sync point)" in text.plain


def test_worker_detail_names_how_its_bytes_move_when_known():
    from gt.tui.detail import worker_detail

    w = next(w for w in sample_state().workers if w.id == 0)
    console = Console(width=120, record=True)
    console.print(worker_detail(dataclasses.replace(w, via="zmq+pinned"), 120))
    assert " via zmq+pinned" in console.export_text()
    console.print(worker_detail(dataclasses.replace(w, via=None), 120))
    assert console.export_text().count(" via ") == 0


def test_config_impact_compares_a_young_worker_over_its_life_not_a_full_span():
    import threading

    from gt.trace import events as E
    from gt.trace.model import ClusterModel
    from gt.trace.state import ConfigChange
    from gt.tui.impact import impact_text

    s = 1_000_000_000
    model = ClusterModel(("upload", "add"))
    busy = [  # the same loop, half busy, from 1 s to 3 s; the change at 2 s
        E.event(E.EXEC, t + s // 4, worker=0, client=1, batch=i, t0=t, t1=t + s // 4, n=1,
                ops=[1], outs=[0], srcs=[0], durs=[], hot=False, queue=0, errors=0)
        for i, t in enumerate(range(s, 3 * s, s // 2))
    ]  # fmt: skip
    model.apply_batch("worker:0", 0, busy)
    model.workers[0].seen = s
    src = type("Src", (), {"model": model, "_lock": threading.Lock(), "now": lambda _: 3 * s})()
    con = Console(width=100, record=True)
    con.print(impact_text(src, ConfigChange(2 * s, {}, {}, None)))
    out = con.export_text()
    assert "1s before vs 1s after" in out
    assert "50% → 50%" in out
    model.workers[0].seen = 2 * s  # it came with the change: no "0us before"
    con = Console(width=100, record=True)
    con.print(impact_text(src, ConfigChange(2 * s, {}, {}, None)))
    out = con.export_text()
    assert "1s after (no worker before it)" in out and "before vs" not in out


def test_timeline_cells_split_time_as_the_shares_do_idle_included():
    # a batch 0..100 holds a transfer 0..30 and a wait 30..60 (the shares: 40 compute, 30 comm,
    # 30 wait); 100..400 is idle; the spans alone would overlap
    spans = (Span(0, 100, "matmul", COMPUTE), Span(0, 30, "→w1", COMM), Span(30, 60, "wait", WAIT))
    parts = (Span(0, 30, "", COMM), Span(30, 60, "", WAIT), Span(60, 100, "", COMPUTE))
    lane = Lane(0, True, spans, parts)
    assert R.timeline_lane(lane, 0, 400, 4).plain == "▌···"
    assert R.timeline_lane(lane, 0, 100, 10).plain == "▒▒▒░░░████"
    mostly_idle = Lane(0, True, (Span(0, 10, "→w1", COMM),), (Span(0, 10, "", COMM),))
    assert R.timeline_lane(mostly_idle, 0, 100, 1).plain == "·"


def test_time_bar_and_replay_header_round_a_position_alike():
    from gt.tui.timebar import fmt_time

    t = 2_962_600_000  # 2.9626 s: the header prints 2.963s
    assert f"{t / 1e9:.3f}s" == "2.963s" and fmt_time(t) == "0:02.963"
    assert fmt_time(3_723_000_400_000) == "1:02:03.000"


def test_output_lines_keep_colours_and_drop_what_moves_the_terminal():
    red = R.output_line("\x1b[31mRED\x1b[0m plain\n")
    assert red.plain == "RED plain" and red.spans[0].style.color.number == 1  # (ANSI red)
    assert R.output_line("\x1b[2J\x1b[Hcleared").plain == "cleared"
    assert R.output_line("\x1b]0;a title\x07after").plain == "after"
    assert R.output_line("  10%\r  50%\r 100%\r\n").plain == " 100%"  # a progress bar's last state
    assert R.output_line("bell\x07 back\x08").plain == "bell back"
