"""How a worker accounts the completion of a background all-reduce (no sockets: the collective's
remaining steps are a stand-in generator)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from gt.runtime.worker.backend import Backend
from gt.runtime.worker.peers import Peers, Pending, _Run


class _Events:
    enabled, offset = True, 0

    def __init__(self) -> None:
        self.emitted: list = []

    def emit(self, kind, fields, t=None) -> None:
        self.emitted.append((kind, fields))


def _peers() -> Peers:
    return Peers(0, None, None, lambda: None, _Events(), Backend(np, "cpu"), lambda: False)


def _pending(p: Peers, busy_s: float, wait_s: float) -> Pending:
    def steps():
        t_end = time.monotonic() + busy_s
        while time.monotonic() < t_end:  # reducing and sending: the collective's own work
            pass
        t0 = time.monotonic_ns()
        time.sleep(wait_s)  # blocked on the peer's part
        p.waited(1, t0, time.monotonic_ns(), "all_reduce")
        yield
        return np.ones(4, np.float32)

    pend = Pending(_Run(p, 0, "all_reduce", None), None, None, {}, 1, 7)
    pend.steps = steps()
    return pend


def test_finishing_a_background_all_reduce_is_not_charged_to_the_op_that_needs_it():
    p = _peers()
    pend = _pending(p, busy_s=0.02, wait_s=0.01)
    t0 = time.monotonic_ns()
    out = p.finish(pend)
    elapsed = time.monotonic_ns() - t0
    np.testing.assert_array_equal(out, np.ones(4, np.float32))
    # all of the completion is excluded from the running op: its waits and its own work
    assert p.waited_ns >= 0.02e9 + 0.01e9
    assert p.waited_ns <= elapsed
    slices = [f for _k, f in p.events.emitted]
    assert [f["direction"] for f in slices] == ["wait", "reduce"]
    reduce = slices[1]
    assert reduce["what"] == "all_reduce" and reduce["bytes"] == 0 and reduce["peer"] is None
    assert (reduce["client"], reduce["batch"]) == (1, 7)  # tagged with the batch that began it
    assert reduce["t1"] - reduce["t0"] >= 0.03e9  # the whole completion; the wait wins inside it


def test_an_all_reduce_already_complete_adds_nothing():
    p = _peers()
    pend = _pending(p, 0, 0)
    pend.done, pend.result = True, np.zeros(2, np.float32)
    p.finish(pend)
    assert p.waited_ns == 0 and p.events.emitted == []


def test_an_all_reduce_failing_in_the_background_fails_itself_not_the_running_op():
    p = _peers()

    def steps():
        yield
        raise OSError("peer socket gone")

    pend = Pending(_Run(p, 0, "all_reduce", None), None, None, {}, 1, 7)
    pend.steps = steps()
    p.inflight.append(pend)
    p.progress()  # pauses at its first step
    p._progress_at = 0
    p.progress()  # the failure: recorded on the all-reduce, not raised into the op around it
    assert pend.done and pend.run.err[0] == "OSError: peer socket gone"
    with pytest.raises(RuntimeError, match="peer socket gone"):
        p.finish(pend)
    assert p.inflight == []


@pytest.mark.timeout(20)  # (what it guards against is a loop that never ends)
def test_an_all_reduce_that_turns_to_the_ring_while_waited_for_syncs_its_copy_not_polls_it():
    # the event of its input's copy to the host: on a GPU that failed meanwhile, a query says
    # "not done" for ever, where synchronize raises; here it is simply never done by itself
    p = _peers()

    class NeverDone:
        done = False

        def __init__(self) -> None:
            self.synced = 0

        def synchronize(self) -> None:
            self.synced += 1

    class RingLink:  # NCCL's decision for this group: the ring (a dtype NCCL lacks, say)
        def headers_missing(self, run, ws):
            return False

        def decide(self, run, code, x, attrs):
            return "ring", []

    ev, host = NeverDone(), np.ones(3, np.float32)
    p._nccl = RingLink()
    p.backend.to_host_async = lambda x: (host, ev)
    pend = Pending(_Run(p, 0, "all_reduce", None), None, None, {"workers": [0]}, 1, 7)
    pend.nccl = (None, object())
    np.testing.assert_array_equal(p.finish(pend), host)
    assert ev.synced == 1


def test_a_send_that_fails_here_tells_the_peer_and_raises_the_original_error():
    p = _peers()
    sent: list = []

    def send(peer, tag, step, arr, what, err=None, quiet=False):
        if arr is not None:
            raise ValueError("cannot include dtype 'E' in a buffer")
        sent.append((peer, step, err))

    p.send = send
    run = _Run(p, 3, "send", None)
    run.send(1, 0, np.ones(2, np.float32))
    # the peer gets an error marker at once (it would otherwise wait out GT_PEER_TIMEOUT)
    assert sent == [(1, 0, ["ValueError: cannot include dtype 'E' in a buffer", run.err[1], 0])]
    err = run.local_error()
    assert isinstance(err, ValueError) and "dtype 'E'" in str(err)
