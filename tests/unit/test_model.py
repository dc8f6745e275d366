"""The cluster model on hand-built event sequences: exact shares, gaps, lifecycles, N/A."""

from __future__ import annotations

import json

import pytest

from gt.trace import events as E
from gt.trace.model import ClusterModel
from gt.trace.state import COMM, COMPUTE, state_to_dict

MS = 1_000_000
S = 1_000_000_000
OPS = ("upload", "fetch", "add", "mul", "matmul", "sum")


def ev(kind: str, t: int, **fields) -> list:
    return E.event(kind, t, **fields)


def exec_ev(
    t0: int, t1: int, ops: list, durs: list | None = None, *, worker=0, client=1, batch=0, **kw
):
    return ev(E.EXEC, t1, worker=worker, client=client, batch=batch, t0=t0, t1=t1, n=len(ops), ops=ops,
              outs=list(range(len(ops))), srcs=kw.pop("srcs", [0] * len(ops)), durs=durs or [],
              hot=kw.pop("hot", False), queue=kw.pop("queue", 0), errors=kw.pop("errors", 0))  # fmt: skip


def xfer_ev(t0: int, t1: int, *, worker=0, peer=1, nbytes=1000, direction="send"):
    return ev(E.TRANSFER, t1, worker=worker, peer=peer, bytes=nbytes, t0=t0, t1=t1,
              direction=direction, what=None, client=1, batch=0)  # fmt: skip


def model_with(events: list, window_ns: int = 1 * S) -> ClusterModel:
    m = ClusterModel(OPS, window_ns=window_ns)
    m.apply_batch("worker:0", 0, events)
    return m


def test_compute_comm_wait_idle_shares_are_exact_for_known_spans():
    # window [1s, 2s]; a worker publishes a batch's transfers before the batch itself
    m = model_with([
        ev(E.WORKER_JOINED, 0, worker=0, host="h", pid=1, device="cpu", backend="numpy"),
        exec_ev(1_100 * MS, 1_200 * MS, [2, 3]),  # 100 ms of compute
        xfer_ev(1_550 * MS, 1_600 * MS, direction="wait"),  # blocked 50 ms on a peer
        xfer_ev(1_600 * MS, 1_650 * MS, direction="recv"),  # then 50 ms moving its bytes
        exec_ev(1_500 * MS, 1_700 * MS, [4]),  # the batch around them: 100 ms of compute left
        xfer_ev(1_800 * MS, 1_900 * MS),  # 100 ms of sending outside any batch
    ])  # fmt: skip
    w = m.state(2 * S).workers[0]
    assert w.compute == pytest.approx(0.2)
    assert w.wait == pytest.approx(0.05)
    assert w.comm == pytest.approx(0.15)
    assert w.idle == pytest.approx(0.6)
    assert w.compute + w.comm + w.wait + w.idle == pytest.approx(1.0)
    assert (w.compute_ns, w.comm_ns, w.wait_ns) == (200 * MS, 150 * MS, 50 * MS)


def test_waiting_wins_over_moving_and_moving_over_compute_where_they_overlap():
    m = model_with([
        xfer_ev(1_100 * MS, 1_400 * MS, direction="recv"),
        xfer_ev(1_200 * MS, 1_300 * MS, direction="wait"),
        exec_ev(1_000 * MS, 2_000 * MS, [4]),
    ])  # fmt: skip
    w = m.state(2 * S).workers[0]
    assert (w.compute, w.comm, w.wait, w.idle) == pytest.approx((0.7, 0.2, 0.1, 0.0))


def test_shares_clip_spans_to_the_window():
    m = model_with([exec_ev(0, 100 * MS, [2]), exec_ev(500 * MS, 1_500 * MS, [2])])
    w = m.state(2 * S).workers[0]
    assert w.compute == pytest.approx(0.5)
    assert w.comm == pytest.approx(0.0) and w.wait == pytest.approx(0.0)
    assert w.idle == pytest.approx(0.5)


def test_shares_cover_only_the_time_since_the_worker_was_first_seen():
    m = model_with([exec_ev(1_500 * MS, 1_750 * MS, [2])])
    w = m.state(2 * S).workers[0]  # seen from 1.5 s: half of the 0.5 s since then is compute
    assert w.compute == pytest.approx(0.5) and w.idle == pytest.approx(0.5)


def test_overlapping_exec_spans_count_once():
    m = model_with([
        exec_ev(0, 100 * MS, [2]),
        exec_ev(1_000 * MS, 1_400 * MS, [2]),
        exec_ev(1_200 * MS, 1_600 * MS, [3]),
    ])  # fmt: skip
    assert m.state(2 * S).workers[0].compute == pytest.approx(0.6)


def test_instruction_rate_counts_batches_that_finished_in_the_window():
    m = model_with(
        [exec_ev(100 * MS, 200 * MS, [2] * 50), exec_ev(1_100 * MS, 1_200 * MS, [2] * 30)]
    )
    assert m.state(2 * S).workers[0].instr_rate == pytest.approx(30.0)


def test_gap_in_sequence_counts_drops_per_source():
    m = ClusterModel(OPS)
    m.apply_batch("worker:0", 0, [exec_ev(0, 10, [2])] * 3)
    m.apply_batch("worker:0", 5, [exec_ev(20, 30, [2])])  # 3 and 4 lost
    m.apply_batch("worker:1", 0, [exec_ev(0, 10, [2], worker=1)])
    m.apply_batch("worker:1", 1, [exec_ev(20, 30, [2], worker=1)])  # contiguous
    st = m.state(100)
    assert dict(st.drops) == {"worker:0": 2}
    assert st.totals.dropped == 2
    assert any(e.kind == E.DROP and "worker:0" in e.text for e in st.log)


def test_restarted_source_is_not_a_drop():
    m = ClusterModel(OPS)
    m.apply_batch("client:1", 10, [ev(E.MARK, 5, client=1, label="a")])
    m.apply_batch("client:1", 0, [ev(E.MARK, 6, client=1, label="b")])
    assert m.state(10).totals.dropped == 0


def test_drop_events_add_to_the_named_source():
    m = model_with([ev(E.DROP, 5, source="worker:3", missing=7)])
    assert dict(m.state(10).drops) == {"worker:3": 7}


def test_worker_that_left_is_shown_dead_not_removed():
    m = model_with([
        ev(E.WORKER_JOINED, 1, worker=0, host="h", pid=11, device="cpu:0", backend="numpy"),
        ev(E.WORKER_JOINED, 2, worker=1, host="h", pid=12, device="cpu:1", backend="numpy"),
        ev(E.WORKER_LEFT, 3, worker=1, reason="exited with code 9"),
    ])  # fmt: skip
    st = m.state(10)
    assert [w.id for w in st.workers] == [0, 1]
    assert st.workers[0].alive and not st.workers[1].alive
    assert st.workers[1].reason == "exited with code 9"
    assert st.workers[1].device == "cpu:1"
    assert any("worker 1 left" in e.text for e in st.log)


def test_missing_device_stats_are_none():
    m = model_with([
        ev(E.WORKER_JOINED, 1, worker=0, host="h", pid=1, device="cpu:0", backend="numpy"),
        ev(E.DEVICE, 2, worker=0, util=None, mem_used=None, mem_total=None, temp=None, power=None,
           pcie_tx=None, pcie_rx=None, name=None),
    ])  # fmt: skip
    w = m.state(10).workers[0]
    d = w.device_stats
    assert (d.util, d.mem_used, d.temp, d.power, d.name) == (None, None, None, None, None)
    assert w.memory.used is None and w.memory.limit is None
    assert w.compute is None and w.instr_rate is None and w.current_op is None


def test_worker_without_any_events_has_no_shares():
    m = ClusterModel(OPS)
    m.apply_snapshot(
        {"workers": [{"id": 0, "alive": True, "device": "cpu:0"}], "clients": []}, t_ns=0
    )
    w = m.state(S).workers[0]
    assert (w.compute, w.comm, w.idle, w.queue) == (None, None, None, None)


def test_device_stats_present():
    m = model_with([ev(E.DEVICE, 2, worker=0, util=87.0, mem_used=10, mem_total=80, temp=61,
                       power=250.5, pcie_tx=None, pcie_rx=None, name="H200")])  # fmt: skip
    d = m.state(10).workers[0].device_stats
    assert (d.util, d.mem_used, d.mem_total, d.temp, d.power, d.name) == (
        87.0,
        10,
        80,
        61.0,
        250.5,
        "H200",
    )


def test_current_op_and_source_line_come_from_last_exec_and_srcloc():
    m = model_with([
        ev(E.SRCLOC, 0, client=1, locs={7: "train.py:12", 8: "train.py:13"}),
        exec_ev(10, 20, [2, 4], srcs=[7, 8]),
    ])  # fmt: skip
    w = m.state(30).workers[0]
    assert w.current_op == "matmul"
    assert w.current_source == "train.py:13"


def test_op_histogram_counts_and_times_by_name():
    m = model_with([exec_ev(0, 60, [2, 4, 2], [10, 40, 10]), exec_ev(100, 110, [4], [10])])
    ops = {o.name: (o.count, o.time_ns) for o in m.state(200).workers[0].ops}
    assert ops == {"matmul": (2, 50), "add": (2, 20)}


@pytest.mark.parametrize("distinct", [2, 12])  # a few ops (summed per op) or many (one by one)
def test_per_op_counts_and_times_add_up_when_ops_repeat_in_a_batch(distinct):
    import random

    rng = random.Random(distinct)
    names = [f"op{i}" for i in range(distinct)]
    ops = [rng.randrange(distinct) for _ in range(500)]
    durs = [rng.randrange(1, 1000) for _ in ops]
    m = ClusterModel(names, window_ns=S)
    m.apply_batch("worker:0", 0, [exec_ev(0, sum(durs), ops, durs)])
    want: dict[str, list[int]] = {}
    for o, d in zip(ops, durs):
        got = want.setdefault(names[o], [0, 0])
        got[0] += 1
        got[1] += d
    state = m.state(sum(durs), timeline_ns=sum(durs))
    assert {o.name: [o.count, o.time_ns] for o in state.workers[0].ops} == want


def test_summary_level_exec_is_one_block_named_by_dominant_op():
    m = model_with([exec_ev(0, 90, [2, 3, 3])])  # no durs
    st = m.state(100, timeline_ns=100)
    assert [(s.t0, s.t1, s.name, s.kind) for s in st.lanes[0].spans] == [(0, 90, "mul", COMPUTE)]
    ops = {o.name: o.time_ns for o in st.workers[0].ops}
    assert ops == {"mul": 60, "add": 30}  # time split by count where durations are absent


def test_full_level_exec_expands_into_instruction_spans():
    m = model_with([exec_ev(0, 60, [2, 2, 4], [10, 10, 40])])
    spans = m.state(100, timeline_ns=100).lanes[0].spans
    assert [(s.t0, s.t1, s.name) for s in spans] == [(0, 20, "add"), (20, 60, "matmul")]


def test_transfers_are_comm_spans_on_the_lane():
    m = model_with([xfer_ev(10, 30, direction="recv", peer=2)])
    (span,) = m.state(100, timeline_ns=100).lanes[0].spans
    assert span.kind == COMM and span.name == "←w2"
    assert m.state(100).totals.transfer_bytes == 1000


def test_timeline_window_can_be_frozen_while_now_moves_on():
    m = model_with([exec_ev(0, 10, [2]), exec_ev(5 * S, 5 * S + 10, [3])])
    st = m.state(6 * S, timeline_ns=S, timeline_end_ns=S)
    assert [s.name for s in st.lanes[0].spans] == ["add"]
    assert st.timeline_end_ns == S and st.now_ns == 6 * S


def test_client_lifecycle_rates_in_flight_and_errors():
    m = model_with([
        ev(E.CLIENT_JOINED, 0, client=1, home=0, host="box", pid=42, argv=["train.py", "--x"]),
        ev(E.SRCLOC, 1, client=1, locs={3: "train.py:40"}),
        ev(E.QUEUED, 100 * MS, client=1, batch=0, n=100, ops={2: 100}, first_id=0),
        ev(E.QUEUED, 200 * MS, client=1, batch=1, n=50, ops={2: 50}, first_id=100),
        exec_ev(210 * MS, 220 * MS, [2] * 100, batch=0),
        ev(E.ERROR, 300 * MS, client=1, worker=0, message="shapes (2,3) and (4,5)", op="matmul", source=3),
    ])  # fmt: skip
    st = m.state(1 * S)
    (c,) = st.clients
    assert (c.host, c.pid, c.argv, c.home) == ("box", 42, ("train.py", "--x"), 0)
    assert c.ops_rate == pytest.approx(150.0)
    assert c.in_flight == 1
    assert c.errors == 1
    assert st.totals.errors == 1
    err = [e for e in st.log if e.kind == E.ERROR][0]
    assert "matmul" in err.text and "train.py:40" in err.text and "shapes" in err.text
    m.apply_batch(
        "worker:0", m.next_seq["worker:0"], [ev(E.CLIENT_LEFT, 2 * S, client=1, reason="bye")]
    )
    c = m.state(3 * S).clients[0]
    assert not c.alive and c.reason == "bye" and c.in_flight == 0


def test_memory_sample_and_history():
    m = model_with([ev(E.MEMORY, i, worker=0, used=100 * i, reserved=1000, limit=4000, spilled=0, tensors=i)
                    for i in range(1, 6)])  # fmt: skip
    mem = m.state(10).workers[0].memory
    assert (mem.used, mem.reserved, mem.limit, mem.spilled, mem.tensors) == (500, 1000, 4000, 0, 5)
    assert mem.history == (100, 200, 300, 400, 500)


def test_marks_and_config_changes_are_kept_and_logged():
    m = model_with([
        ev(E.MARK, 10, client=1, label="epoch 3"),
        ev(E.CONFIG, 20, before={}, after={"layer1": {"shard": {"axis": 0}}}, by="gt top"),
    ])  # fmt: skip
    st = m.state(30)
    assert [(k.t_ns, k.label) for k in st.marks] == [(10, "epoch 3")]
    assert st.configs[0].after == {"layer1": {"shard": {"axis": 0}}}
    assert [e.kind for e in st.log] == [E.MARK, E.CONFIG]


def test_snapshot_fills_workers_and_clients_for_a_late_joiner():
    m = ClusterModel(OPS)
    snap = {
        "uptime": 12.5,
        "workers": [
            {"id": 0, "alive": True, "in_flight": 2, "instructions": 1000, "stats": {"bytes": 4096, "tensors": 3},
             "host": "h", "pid": 9, "device": "cpu:0", "backend": "numpy"},
            {"id": 1, "alive": False, "instructions": 0, "host": "h", "pid": 10, "device": "cpu:1"},
        ],
        "clients": [{"id": 4, "home": 0, "queued": 1, "in_flight": 2, "errors": 3, "host": "h", "pid": 77,
                     "argv": ["a.py"]}],
    }  # fmt: skip
    m.apply_snapshot(snap, t_ns=0)
    snap["workers"][0]["instructions"] = 3000
    m.apply_snapshot(snap, t_ns=1 * S)
    st = m.state(1 * S)
    w0, w1 = st.workers
    assert (w0.device, w0.in_flight, w0.memory.used, w0.memory.tensors) == ("cpu:0", 2, 4096, 3)
    assert w0.instr_rate == pytest.approx(2000.0)  # from stats when there are no exec events
    assert not w1.alive
    (c,) = st.clients
    assert (c.id, c.in_flight, c.errors, c.argv) == (4, 3, 3, ("a.py",))
    assert st.uptime_s == pytest.approx(12.5)


def test_malformed_events_are_counted_not_raised():
    m = model_with([ev(E.EXEC, 1), ev(E.MEMORY, 2, worker="zero"), ev("unknown_kind", 3)])
    assert m.state(10).totals.bad_events == 2
    assert m.state(10).totals.events == 3


def test_opcodes_without_names_show_as_opN():
    m = ClusterModel()
    m.apply_batch("worker:0", 0, [exec_ev(0, 10, [5])])
    assert m.state(20).workers[0].current_op == "op5"


def test_state_is_json_serialisable():
    m = model_with([
        ev(E.CLIENT_JOINED, 0, client=1, home=0, host="box", pid=42, argv=["train.py"]),
        exec_ev(0, 60, [2, 4], [20, 40]), xfer_ev(60, 70), ev(E.MARK, 70, client=1, label="m"),
    ])  # fmt: skip
    data = json.loads(json.dumps(state_to_dict(m.state(100))))
    assert data["workers"][0]["current_op"] == "matmul"
    assert data["lanes"][0]["spans"][0][2] == "add"


def test_logs_and_span_history_stay_bounded():
    m = ClusterModel(OPS)
    m.apply_batch("worker:0", 0, [exec_ev(i, i + 1, [2]) for i in range(20_000)])
    m.apply_batch("client:1", 0, [ev(E.MARK, i, client=1, label="x") for i in range(5_000)])
    assert len(m.workers[0].execs) <= 4096
    assert len(m.state(30_000).log) <= 1000


def test_batch_of_frees_only_keeps_the_current_op():
    m = model_with([exec_ev(0, 10, [4]), exec_ev(20, 30, [])])
    assert m.state(40).workers[0].current_op == "matmul"


def test_zoomed_out_lanes_are_binned_and_keep_busy_time():
    # 3000 batches of 64 instructions, 1ms busy every 4ms: too many to draw one by one
    m = model_with(
        [
            exec_ev(i * 4 * MS, i * 4 * MS + MS, [2] * 64, [MS // 64] * 64, batch=i)
            for i in range(3000)
        ]
    )
    st = m.state(12 * S, timeline_ns=10 * S)
    spans = st.lanes[0].spans
    assert len(spans) <= 700
    inside = [s for s in spans if s.t0 >= 3 * S and s.t1 <= 11 * S]
    busy = sum(s.busy for s in inside)
    extent = sum(s.t1 - s.t0 for s in inside)
    assert busy / extent < 0.5  # not drawn as solid
    assert abs(busy / (inside[-1].t1 - inside[0].t0) - 0.25) < 0.02
    assert {s.name for s in spans} == {"add"}
    more = [
        exec_ev(12 * S + i * MS, 12 * S + i * MS + 500_000, [4], batch=3000 + i) for i in range(10)
    ]
    m.apply_batch("worker:0", m.next_seq["worker:0"], more)  # bins fill incrementally
    assert m.state(13 * S, timeline_ns=10 * S).lanes[0].spans[-1].name == "matmul"


def test_a_recordings_workers_attach_at_its_first_event_not_at_clock_zero():
    from gt.trace.keyframes import attach

    m = ClusterModel(OPS)
    attach(m, [{"id": 0, "device": "cpu"}])
    m.apply_batch("worker:0", 0, [exec_ev(5 * S, 5 * S + 10, [2])])
    attach_entries = [e for e in m.state(6 * S).log if e.kind == "attach"]
    assert [e.t_ns for e in attach_entries] == [5 * S + 10]


def test_totals_count_from_the_dispatchers_start_not_from_the_monitors():
    m = ClusterModel(OPS)
    m.apply_batch("worker:0", 0, [exec_ev(10, 20, [2, 2])])  # 2 instructions seen here
    m.apply_snapshot({"clock": 30, "workers": [
        {"id": 0, "instructions": 18_002, "batches": 901, "stats": {"sent": 4096}},
    ], "clients": [{"id": 1, "errors": 3}]})  # fmt: skip
    m.apply_batch("worker:0", 1, [exec_ev(40, 50, [2] * 3)])  # 3 more after the snapshot
    tot = m.state(60).totals
    assert (tot.instructions, tot.batches) == (18_005, 902)
    assert tot.transfer_bytes == 4096 and tot.errors == 3


def test_bytes_moved_count_client_fetches_from_before_the_monitor_attached():
    m = ClusterModel(OPS)
    m.apply_snapshot({"clock": 30, "workers": [
        {"id": 0, "stats": {"sent": 100, "received": 0, "client_bytes": 20 * 2**20}},
        {"id": 1, "stats": {"sent": 0, "received": 100, "client_bytes": 0}},
    ]})  # fmt: skip
    assert m.state(60).totals.transfer_bytes == 20 * 2**20 + 200


def hot_ev(t: int, state: str = "replaying", calls: int = 0, eager=None, hot=None, plan=3):
    return ev(E.HOT, t, client=1, plan=plan, name="train_step", steps=58, state=state,
              calls=calls, eager_ns=eager, hot_ns=hot)  # fmt: skip


def test_hot_paths_show_their_latest_calls_and_speedup_on_their_clients_home_worker():
    m = ClusterModel(OPS)
    m.apply_batch("dispatcher", 0, [ev(E.CLIENT_JOINED, 0, client=1, host="h", pid=9,
                                       argv=["train.py"], home=1)])  # fmt: skip
    m.apply_batch(
        "client:1", 0, [hot_ev(1 * S), hot_ev(2 * S, calls=500, eager=4 * MS, hot=2 * MS)]
    )
    m.apply_batch("worker:0", 0, [exec_ev(0, 10, ["add", "mul"], hot=2)])
    st = m.state(3 * S)
    (h,) = st.hot
    assert (h.name, h.calls, h.steps, h.speedup) == ("train_step", 500, 58, 2.0)
    assert st.hot_on(1) == (h,) and st.hot_on(0) == ()
    assert st.worker(0).hot == 2  # replays the worker ran
    logs = [e.text for e in st.log if e.kind == E.HOT]
    assert logs == ["client 1: captured train_step (58 instructions a call)"]  # once, not per event
    m.apply_batch("client:1", 2, [hot_ev(4 * S, "eager: it runs fetch (a sync point)")])
    assert m.state(5 * S).hot[0].speedup is None
    assert (
        m.state(5 * S).log[-1].text
        == "client 1: train_step runs eager: it runs fetch (a sync point)"
    )


def test_a_malformed_hot_event_is_counted_not_folded():
    m = ClusterModel(OPS)
    m.apply_batch("client:1", 0, [ev(E.HOT, 1, client="x", plan=None)])
    assert m.state(2).hot == () and m.bad_events == 1


def test_a_client_holding_a_tenants_own_key_shows_as_tenant_at_host():
    m = model_with([
        ev(E.CLIENT_JOINED, 0, client=1, home=0, host="box", pid=42, argv=["a.py"], tenant="alice"),
        ev(E.CLIENT_JOINED, 1, client=2, home=0, host="box", pid=43, argv=["b.py"], tenant=None),
    ])  # fmt: skip
    m.apply_snapshot({"clients": [{"id": 3, "host": "lab", "pid": 7, "tenant": "bob"}]}, t_ns=2)
    hosts = {c.id: c.host for c in m.state(10).clients}
    assert hosts == {1: "alice@box", 2: "box", 3: "bob@lab"}


def test_a_workers_transfer_path_is_the_last_one_its_sends_and_receives_named():
    old = xfer_ev(10, 30)  # a trace from before transfer events said their path
    pinned = ev(E.TRANSFER, 60, worker=0, peer=1, bytes=10, t0=40, t1=60, direction="send",
                what="all_reduce", client=1, batch=0, via="zmq+pinned")  # fmt: skip
    wait = ev(E.TRANSFER, 90, worker=0, peer=1, bytes=0, t0=70, t1=90, direction="wait",
              what="all_reduce", client=1, batch=0, via=None)  # fmt: skip
    assert next(w for w in model_with([old]).state(100).workers).via is None
    (w,) = model_with([old, pinned, wait]).state(100).workers
    assert w.via == "zmq+pinned"


def test_a_client_whose_batch_a_worker_is_inside_has_it_in_flight():
    # (a direct batch reaches the dispatcher's count only once it ran, and the client publishes
    # its own events after its sync point: a client 7 s into a matmul read 0 in flight)
    m = model_with([
        ev(E.WORKER_JOINED, 0, worker=0, host="h", pid=1, device="cpu", backend="numpy"),
        ev(E.BUSY, 1_500 * MS, worker=0, client=4, batch=9, t0=1_250 * MS, op=4, src=7),
    ])  # fmt: skip
    m.apply_snapshot({"clients": [{"id": 4, "home": 0, "queued": 0, "in_flight": 0},
                                  {"id": 5, "home": 0, "queued": 0, "in_flight": 0}]}, t_ns=S)  # fmt: skip
    st = m.state(2 * S)
    assert {c.id: c.in_flight for c in st.clients} == {4: 1, 5: 0}
    m.apply_batch("worker:0", m.next_seq["worker:0"], [exec_ev(1_250 * MS, 2_100 * MS, [4])])
    assert {c.id: c.in_flight for c in m.state(3 * S).clients} == {4: 0, 5: 0}


def test_a_worker_inside_a_long_batch_is_busy_with_its_op_until_the_batch_ends():
    # (exec events come when a batch ends: a worker 7 s into a matmul was shown idle, op N/A)
    m = model_with([
        ev(E.SRCLOC, 0, client=1, locs={7: "train.py:12"}),
        ev(E.WORKER_JOINED, 0, worker=0, host="h", pid=1, device="cpu", backend="numpy"),
        exec_ev(100 * MS, 200 * MS, [2]),  # a short batch, done
        ev(E.BUSY, 1_500 * MS, worker=0, client=1, batch=1, t0=1_250 * MS, op=4, src=7),
        ev(E.BUSY, 1_750 * MS, worker=0, client=1, batch=1, t0=1_250 * MS, op=4, src=7),
    ])  # fmt: skip
    w = m.state(2 * S).workers[0]  # window [1 s, 2 s]: running from 1.25 s on
    assert (w.current_op, w.current_source) == ("matmul", "train.py:12")
    assert w.compute == pytest.approx(0.75) and w.idle == pytest.approx(0.25)
    m.apply_batch("worker:0", 5, [exec_ev(1_250 * MS, 2_100 * MS, [4, 2])])
    w = m.state(3 * S).workers[0]  # ended at 2.1 s: window [2 s, 3 s] holds 0.1 s of it
    assert w.compute == pytest.approx(0.1) and w.current_op == "add"
    # a busy event that arrives after its batch's exec event changes nothing
    m.apply_batch("worker:0", 6, [ev(E.BUSY, 2_200 * MS, worker=0, client=1, batch=1,
                                     t0=1_250 * MS, op=4, src=7)])  # fmt: skip
    assert m.state(3 * S).workers[0].compute == pytest.approx(0.1)
    m.apply_batch("worker:0", 7, [ev(E.BUSY, 3_500 * MS, worker=0, client=1, batch=2,
                                     t0=3_200 * MS, op=4, src=7),
                                  ev(E.WORKER_LEFT, 3_600 * MS, worker=0, reason="killed")])  # fmt: skip
    w = m.state(4 * S).workers[0]
    assert not w.alive and w.compute == pytest.approx(0.0)  # (a dead worker runs nothing)


def test_a_workers_counts_include_what_it_ran_before_the_monitor_attached():
    # (the header said 1,003 instructions since the dispatcher started, the worker's row 0)
    m = ClusterModel(OPS, window_ns=S)
    m.apply_snapshot({"clock": 10, "workers": [{"id": 0, "instructions": 1000, "batches": 10,
                                                "alive": True}]})  # fmt: skip
    m.apply_batch("worker:0", 0, [exec_ev(20, 30, [2, 2, 2, 2, 2])])
    w = m.state(40).workers[0]
    assert (w.instructions, w.batches) == (1005, 11)
    m.apply_snapshot({"clock": 50, "workers": [{"id": 0, "instructions": 1005, "batches": 11}]})
    w = m.state(60).workers[0]
    assert (w.instructions, w.batches) == (1005, 11)  # (a later snapshot counts nothing twice)
    from gt.trace.keyframes import restore_model, snapshot_model

    again = restore_model(snapshot_model(m), OPS, window_ns=S).state(60).workers[0]
    assert (again.instructions, again.batches) == (1005, 11)


def test_a_dead_worker_holds_no_memory_and_a_late_monitor_learns_why_it_died():
    m = model_with([
        ev(E.WORKER_JOINED, 0, worker=0, host="h", pid=1, device="cpu", backend="numpy"),
        ev(E.MEMORY, 10, worker=0, used=262_148, reserved=262_148, limit=None, spilled=0,
           tensors=3),
        ev(E.WORKER_LEFT, 20, worker=0, reason="exited with code -9"),
    ])  # fmt: skip
    w = m.state(30).workers[0]
    assert not w.alive and w.memory.used == 0 and w.memory.tensors == 0
    late = ClusterModel(OPS, window_ns=S)  # (attached after the death: only the snapshot says)
    late.apply_snapshot({"clock": 40, "workers": [{"id": 0, "alive": False,
                                                   "reason": "exited with code -9",
                                                   "stats": {"bytes": 262_148, "tensors": 3}}]})  # fmt: skip
    w = late.state(50).workers[0]
    assert w.reason == "exited with code -9" and not w.memory.used


def test_a_worker_that_ran_nothing_for_a_second_has_no_current_op():
    m = model_with([exec_ev(1 * S, 1 * S + 100, [2])])
    assert m.state(1 * S + S // 2).workers[0].current_op == "add"
    idle = m.state(3 * S).workers[0]
    assert idle.current_op is None and idle.current_source is None
