"""All-reduces between CuPy workers on distinct GPUs go over NCCL, decided alike by every
participant over real ZeroMQ peer links; everything else keeps the host-staged ring.

The workers here are threads with the CuPy test double, whose ``cupy.cuda.nccl`` queues each
collective on its stream as NCCL does (it happens only once that stream's work runs) and meets
its ranks in files. This exercises GT's decisions, set-up, stream order and failure paths; it is
not NCCL itself, which needs two GPUs (``scripts/gpu_check.sh`` runs the ``gpu`` test on one).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zmq

from gt.runtime import ops as O
from gt.runtime.worker.backend import Backend
from gt.runtime.worker.nccl import _TYPE_CODES, NcclLink
from gt.runtime.worker.peers import PeerFailure
from gt.trace import events as E
from tests.integration.test_sharding_peers import Node, in_threads
from tests.unit.test_peers_accounting import _Events as Events

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import cupy_double as cp  # noqa: E402

pytestmark = pytest.mark.timeout(60)
ALL_REDUCE = O.OPCODE["all_reduce"]


@pytest.fixture
def gpus(tmp_path, monkeypatch):
    """``make(devices)``: one node per entry, a CuPy worker pinned to that double device."""
    monkeypatch.setenv("CUPY_DOUBLE_DEVICES", "4")
    monkeypatch.setenv("CUPY_DOUBLE_NCCL_DIR", str(tmp_path / "nccl"))
    monkeypatch.setenv("CUPY_DOUBLE_NCCL_TIMEOUT", "20")
    ctx = zmq.Context()
    made: list[Node] = []

    def make(devices: list[int]) -> list[Node]:
        for i, dev in enumerate(devices):
            node = Node(ctx, i, str(tmp_path))
            node.peers.backend = Backend(cp, dev, name="cupy")
            node.peers.via = "zmq+pinned"
            node.peers.events = Events()
            made.append(node)
        table = {i: x.endpoint for i, x in enumerate(made)}
        for x in made:
            x.peers.set_endpoints(table)
        return made

    yield make
    for x in made:
        x.peers.close()
        x.data.close(0)
    ctx.term()


def _inputs(n: int, count: int = 1000, dtype=np.float32) -> list:
    return [cp.asarray((np.arange(count) % 7 + w).astype(dtype)) for w in range(n)]


def _sum_of_two(gpus, devices=(0, 1), timeout: float | None = None) -> list[Node]:
    """Two workers on double GPUs ``devices`` all-reduce (results checked); the nodes.
    ``timeout``: their peer timeout (NCCL's set-up gets half of it)."""
    nodes = gpus(list(devices))
    if timeout is not None:
        for node in nodes:
            node.peers.timeout = timeout
    xs = _inputs(2)
    attrs = {"workers": [0, 1], "op": "sum", "tag": 5}
    out = in_threads(lambda w: nodes[w].peers.run(ALL_REDUCE, [xs[w]], attrs), range(2))
    for w in range(2):
        np.testing.assert_array_equal(cp.asnumpy(out[w]), cp.asnumpy(xs[0]) + cp.asnumpy(xs[1]))
    return nodes


def _vias(node: Node) -> set:
    """How the data moved (headers and set-up, a few bytes over ZeroMQ, left out)."""
    return {f["via"] for _k, f in node.peers.events.emitted
            if f["direction"] in ("send", "recv") and f["bytes"] > 100}  # fmt: skip


@pytest.mark.parametrize("n", [2, 3])
def test_workers_on_distinct_gpus_all_reduce_over_nccl(gpus, n):
    nodes = gpus(list(range(n)))
    xs = _inputs(n)
    attrs = {"workers": list(range(n)), "op": "sum", "tag": 5}
    out = in_threads(lambda w: nodes[w].peers.run(ALL_REDUCE, [xs[w]], attrs), range(n))
    want = sum(cp.asnumpy(x) for x in xs)
    for w in range(n):
        assert type(out[w]) is cp.ndarray, out[w]
        np.testing.assert_array_equal(cp.asnumpy(out[w]), want)
        assert _vias(nodes[w]) == {"nccl"}
        assert isinstance(nodes[w].peers._nccl, NcclLink)
        sent = [f["bytes"] for _k, f in nodes[w].peers.events.emitted
                if f["direction"] == "send" and f["via"] == "nccl"]  # fmt: skip
        assert sent == [2 * (n - 1) * xs[w].nbytes // n]


@pytest.mark.parametrize("api", ["14", "13", "13-unsigned"])
def test_the_unique_id_reaches_nccl_in_the_form_each_cupy_takes(gpus, monkeypatch, api):
    # CuPy 14 hands NCCL's id over as bytes; CuPy 13 as a tuple of C chars (unsigned on ARM)
    monkeypatch.setenv("CUPY_DOUBLE_NCCL_API", api)
    for node in _sum_of_two(gpus):
        assert _vias(node) == {"nccl"}, node.peers._nccl.unused


@pytest.mark.parametrize(("version", "via"), [(20900, "zmq+pinned"), (21000, "nccl")])
def test_bfloat16_goes_over_nccl_only_from_the_nccl_version_that_has_it(monkeypatch, version, via):
    monkeypatch.setenv("CUPY_DOUBLE_NCCL_VERSION", str(version))
    link = NcclLink(Backend(cp, 0, name="cupy"), cp.cuda.nccl)
    head = np.array([_TYPE_CODES["bfloat16"], 1, 8], np.int64)
    fits = link._fits(ALL_REDUCE, [head, head], {"workers": [0, 1], "op": "sum"})
    assert fits is (via == "nccl")


def test_the_communicator_is_made_once_per_group_and_max_min_reduce(gpus):
    nodes = gpus([0, 1])
    xs = _inputs(2, 64, np.int32)
    comms = []
    for tag, op, fold in ((1, "sum", np.add), (2, "max", np.maximum), (3, "min", np.minimum)):
        attrs = {"workers": [0, 1], "op": op, "tag": tag}
        out = in_threads(lambda w, a=attrs: nodes[w].peers.run(ALL_REDUCE, [xs[w]], a), range(2))
        want = fold(cp.asnumpy(xs[0]), cp.asnumpy(xs[1]))
        for w in range(2):
            np.testing.assert_array_equal(cp.asnumpy(out[w]), want)
        comms.append(dict(nodes[0].peers._nccl.comms))
    assert len(comms[0]) == 1 and comms[0] == comms[1] == comms[2]  # the same communicator
    comm = next(iter(comms[0].values()))
    nodes[0].peers.close()  # a stopping worker aborts it: destroying could wait on a dead peer
    assert comm._aborted and nodes[0].peers._nccl.comms == {}


def test_a_background_all_reduce_is_there_only_once_the_compute_stream_waits_for_it(gpus):
    nodes = gpus([0, 1])
    xs = _inputs(2, 4096)
    attrs = {"workers": [0, 1], "op": "sum", "tag": 9, "async": True}

    def work(w):
        peers = nodes[w].peers
        pend = peers.start(ALL_REDUCE, [xs[w]], attrs)
        for _ in range(3):
            peers.progress()
        return peers.finish(pend)

    out = in_threads(work, range(2))
    want = cp.asnumpy(xs[0]) + cp.asnumpy(xs[1])
    for w in range(2):
        np.testing.assert_array_equal(cp.asnumpy(out[w]), want)
        assert _vias(nodes[w]) == {"nccl"}


def test_a_failed_input_fails_every_participant_with_its_own_message(gpus):
    nodes = gpus([0, 1])
    xs = _inputs(2)
    attrs = {"workers": [0, 1], "op": "sum", "tag": 4}
    err = ["ZeroDivisionError: the input broke", O.OPCODE["div"], 3]

    def work(w):
        if w == 0:
            return nodes[0].peers.run(ALL_REDUCE, [None], attrs, err)
        return nodes[1].peers.run(ALL_REDUCE, [xs[1]], attrs)

    out = in_threads(work, range(2))
    for w in range(2):
        assert isinstance(out[w], PeerFailure), out[w]
        assert out[w].err[0] == err[0]
    # and the group goes on: the next all-reduce still works over NCCL
    attrs2 = {**attrs, "tag": 6}
    out = in_threads(lambda w: nodes[w].peers.run(ALL_REDUCE, [xs[w]], attrs2), range(2))
    np.testing.assert_array_equal(cp.asnumpy(out[0]), cp.asnumpy(xs[0]) + cp.asnumpy(xs[1]))


def test_two_workers_on_one_gpu_take_the_ring(gpus):
    for node in _sum_of_two(gpus, (1, 1)):  # NCCL refuses two ranks on one device
        assert _vias(node) == {"zmq+pinned"}
        assert node.peers._nccl.comms == {(0, 1): None}


def test_a_dtype_nccl_lacks_takes_the_ring_for_that_all_reduce_only(gpus):
    nodes = gpus([0, 1])
    xs = [cp.asarray(np.full(100, 1 + 2j, np.complex64) * (w + 1)) for w in range(2)]
    attrs = {"workers": [0, 1], "op": "sum", "tag": 7}
    out = in_threads(lambda w: nodes[w].peers.run(ALL_REDUCE, [xs[w]], attrs), range(2))
    for w in range(2):
        np.testing.assert_array_equal(cp.asnumpy(out[w]), cp.asnumpy(xs[0]) + cp.asnumpy(xs[1]))
        assert _vias(nodes[w]) == {"zmq+pinned"}
        assert list(nodes[w].peers._nccl.comms.values())[0] is not None  # the group keeps NCCL


def test_gt_nccl_0_keeps_the_ring_and_says_why(gpus, monkeypatch):
    monkeypatch.setenv("GT_NCCL", "0")
    for node in _sum_of_two(gpus):
        assert _vias(node) == {"zmq+pinned"}
        assert node.peers._nccl.nccl is None and node.peers.nccl_unused == "GT_NCCL=0"
        assert node.peers._nccl.comms == {(0, 1): None}


def data_parallel_gradient() -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """A 2-worker local cluster (in this environment) computes a data-parallel gradient: ``(its
    gradient, NumPy's, the all-reduce's data-carrying send events)``."""
    import gt
    from gt.runtime.launch import LocalCluster
    from tests.integration import test_sharding_runtime as sharding

    with LocalCluster(workers=2) as cluster:
        gt.connect(cluster.address, timeout=30)
        try:
            bus = sharding.Bus(cluster)
            got, want = sharding.data_parallel_gradient()
            events = bus.collect(1.0)
        finally:
            gt.config.clear()
            gt.disconnect()
    moved = [f for _s, k, f in events if k == E.TRANSFER and f["what"] == "all_reduce"
             and f["direction"] == "send" and f["bytes"] > 256]  # fmt: skip
    return got, want, moved


def test_a_data_parallel_gradient_is_all_reduced_over_nccl_between_worker_processes(tmp_path):
    """Two worker processes of a local cluster, each pinned to its own (double) GPU: the gradient's
    partial sums meet over NCCL, and the event stream says so."""
    from helpers import cupy_double_environment

    with cupy_double_environment(), pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUPY_DOUBLE_DEVICES", "2")
        mp.setenv("CUPY_DOUBLE_NCCL_DIR", str(tmp_path / "nccl"))
        got, want, moved = data_parallel_gradient()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert moved and {f["via"] for f in moved} == {"nccl"}, moved
    assert {f["worker"] for f in moved} == {0, 1}


def test_a_peer_at_a_new_address_gets_a_new_communicator(gpus):
    nodes = gpus([0, 1])
    xs = _inputs(2)
    attrs = {"workers": [0, 1], "op": "sum", "tag": 1}
    in_threads(lambda w: nodes[w].peers.run(ALL_REDUCE, [xs[w]], attrs), range(2))
    link = nodes[0].peers._nccl
    assert list(link.comms) == [(0, 1)]
    nodes[0].peers.set_endpoints({1: nodes[1].endpoint})  # unchanged: kept
    assert list(link.comms) == [(0, 1)]
    nodes[0].peers.set_endpoints({1: nodes[1].endpoint + "-restarted"})
    assert link.comms == {}


def test_a_peer_that_never_joins_aborts_the_communicator_after_the_peer_timeout(gpus):
    nodes = gpus([0, 1])
    xs = _inputs(2)
    attrs = {"workers": [0, 1], "op": "sum", "tag": 1}
    in_threads(lambda w: nodes[w].peers.run(ALL_REDUCE, [xs[w]], attrs), range(2))  # the comm
    first = nodes[0].peers
    first.timeout = 1.0
    # worker 1 sends its header (it reached the collective) but then stops, as a dead process
    # would, before NCCL's part: worker 0's all-reduce is queued and must not wait forever.
    nodes[1].peers._nccl.send_headers(_Solo(nodes[1].peers, 2), xs[1], [0, 1])
    with pytest.raises(TimeoutError, match="aborted"):
        first.run(ALL_REDUCE, [xs[0]], {**attrs, "tag": 2})
    assert first._nccl.comms == {}  # the next all-reduce of the group makes a new one


def test_an_aborted_communicator_is_forgotten_whatever_the_order_of_the_workers(gpus):
    nodes = gpus([0, 1])
    xs = _inputs(2)
    attrs = {"workers": [1, 0], "op": "sum", "tag": 1}  # an all-reduce may list them any way
    in_threads(lambda w: nodes[w].peers.run(ALL_REDUCE, [xs[w]], attrs), range(2))
    first = nodes[0].peers
    assert list(first._nccl.comms) == [(0, 1)]
    first.timeout = 1.0
    nodes[1].peers._nccl.send_headers(_Solo(nodes[1].peers, 2), xs[1], [1, 0])
    with pytest.raises(TimeoutError, match="aborted"):
        first.run(ALL_REDUCE, [xs[0]], {**attrs, "tag": 2})
    assert first._nccl.comms == {}  # not kept, aborted, for the group's next collective


class _Solo:
    """Just enough of a run for :meth:`NcclLink.send_headers`."""

    def __init__(self, peers, tag):
        self.me, self.p, self.tag = peers.wid, peers, tag

    def send(self, peer, step, arr):
        self.p.send(peer, self.tag, step, arr, "all_reduce")


def _matrices(n: int, shape=(6, 4), dtype=np.float32) -> list:
    rng = np.random.default_rng(3)
    return [cp.asarray(rng.standard_normal(shape).astype(dtype)) for _ in range(n)]


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("axis", [0, 1])
def test_all_gather_and_reduce_scatter_go_over_nccl_and_match_the_ring(gpus, n, axis):
    nodes = gpus(list(range(n)))
    xs = _matrices(n, (12, 12))
    ws = list(range(n))
    gather = {"workers": ws, "axis": axis, "tag": 1}
    out = in_threads(lambda w: nodes[w].peers.run(O.OPCODE["all_gather"], [xs[w]], gather), ws)
    want = np.concatenate([cp.asnumpy(x) for x in xs], axis=axis)
    for w in ws:
        np.testing.assert_array_equal(cp.asnumpy(out[w]), want)
    scatter = {"workers": ws, "axis": axis, "sizes": [12 // n] * n, "op": "sum", "tag": 2}
    out = in_threads(lambda w: nodes[w].peers.run(O.OPCODE["reduce_scatter"], [xs[w]], scatter), ws)
    total = sum(cp.asnumpy(x) for x in xs)
    for w in ws:
        k = 12 // n
        block = total[w * k : (w + 1) * k] if axis == 0 else total[:, w * k : (w + 1) * k]
        np.testing.assert_allclose(cp.asnumpy(out[w]), block, rtol=1e-6)
        assert cp.asnumpy(out[w]).flags.c_contiguous
        assert _vias(nodes[w]) == {"nccl"}


def test_a_broadcast_from_any_worker_goes_over_nccl(gpus):
    nodes = gpus([0, 1, 2])
    x = _matrices(1, (50, 3))[0]
    attrs = {"workers": [2, 0, 1], "root": 2, "tag": 3}  # the root first, as the planner puts it
    code = O.OPCODE["bcast"]
    out = in_threads(lambda w: nodes[w].peers.run(code, [x] if w == 2 else [], attrs), range(3))
    for w in range(3):
        np.testing.assert_array_equal(cp.asnumpy(out[w]), cp.asnumpy(x))
        assert _vias(nodes[w]) == {"nccl"}
    assert list(nodes[0].peers._nccl.comms) == [(0, 1, 2)]  # one communicator, ranks ascending


def test_uneven_blocks_and_out_of_order_groups_take_the_ring(gpus):
    nodes = gpus([0, 1])
    xs = _matrices(2, (50, 2))
    uneven = {"workers": [0, 1], "axis": 0, "sizes": [20, 30], "op": "sum", "tag": 1}
    code = O.OPCODE["reduce_scatter"]
    out = in_threads(lambda w: nodes[w].peers.run(code, [xs[w]], uneven), range(2))
    total = cp.asnumpy(xs[0]) + cp.asnumpy(xs[1])
    np.testing.assert_allclose(cp.asnumpy(out[0]), total[:20], rtol=1e-6)
    np.testing.assert_allclose(cp.asnumpy(out[1]), total[20:], rtol=1e-6)
    backwards = {"workers": [1, 0], "axis": 0, "tag": 2}  # NCCL would concatenate 0 then 1
    out = in_threads(
        lambda w: nodes[w].peers.run(O.OPCODE["all_gather"], [xs[w]], backwards), range(2)
    )
    want = np.concatenate([cp.asnumpy(xs[1]), cp.asnumpy(xs[0])])
    for w in range(2):
        np.testing.assert_array_equal(cp.asnumpy(out[w]), want)
        assert _vias(nodes[w]) == {"zmq+pinned"}


def _launching_late(node: Node, monkeypatch, late_s: float = 0.3) -> None:
    """This worker reaches each collective (its header goes out) but queues its NCCL part
    ``late_s`` later, as a slow peer's device would take it up."""
    link = node.peers._nccl
    launch = link.launch

    def late(*args, **kwargs):
        time.sleep(late_s)
        return launch(*args, **kwargs)

    monkeypatch.setattr(link, "launch", late)


def test_a_collectives_time_is_the_workers_communication_or_its_wait_not_compute(gpus, monkeypatch):
    nodes = gpus([0, 1])
    xs = _inputs(2)
    attrs = {"workers": [0, 1], "op": "sum", "tag": 1}
    in_threads(lambda w: nodes[w].peers.run(ALL_REDUCE, [xs[w]], attrs), range(2))  # set-up
    _launching_late(nodes[1], monkeypatch)
    for node in nodes:
        node.peers.events.emitted.clear()
    sync = {**attrs, "tag": 2}
    in_threads(lambda w: nodes[w].peers.run(ALL_REDUCE, [xs[w]], sync), range(2))
    sends = [f for _k, f in nodes[0].peers.events.emitted
             if f["direction"] == "send" and f["via"] == "nccl"]  # fmt: skip
    # worker 0 sat 0.3 s in NCCL for its peer's part: the collective's time (communication)
    assert len(sends) == 1 and sends[0]["t1"] - sends[0]["t0"] >= 250_000_000, sends

    for node in nodes:
        node.peers.events.emitted.clear()
    waited = nodes[0].peers.waited_ns
    background = {**attrs, "tag": 3, "async": True}
    in_threads(lambda w: nodes[w].peers.finish(nodes[w].peers.start(ALL_REDUCE, [xs[w]], background)),
               range(2))  # fmt: skip
    emitted = [f for _k, f in nodes[0].peers.events.emitted]
    sends = [f for f in emitted if f["direction"] == "send" and f["via"] == "nccl"]
    waits = [f["t1"] - f["t0"] for f in emitted if f["direction"] == "wait"]
    # in the background only the launch is the worker's; where it then needs the result, it
    # waits for the device, and that wait (which the executor takes off the op) is its own slice
    assert len(sends) == 1 and sends[0]["t1"] - sends[0]["t0"] < 250_000_000, sends
    assert sum(waits) >= 250_000_000, emitted
    assert nodes[0].peers.waited_ns - waited >= 250_000_000


def test_a_group_whose_nccl_set_up_fails_on_one_worker_takes_the_ring(gpus, monkeypatch, capfd):
    monkeypatch.setenv("CUPY_DOUBLE_NCCL_FAIL_DEVICE", "1")
    nodes = _sum_of_two(gpus, timeout=2.0)  # the healthy worker gives NCCL's set-up 1 s
    for node in nodes:
        assert _vias(node) == {"zmq+pinned"}
        assert node.peers._nccl.comms == {(0, 1): None}
    assert "ncclSystemError" in nodes[1].peers._nccl.unused
    assert "no answer in 1s" in nodes[0].peers._nccl.unused  # it waited for the broken one
    said = capfd.readouterr().err
    assert said.count("the collectives of workers [0, 1] take ZeroMQ") == 2, said
