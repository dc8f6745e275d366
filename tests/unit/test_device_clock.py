"""Device-true timing and device errors in the executor, with a stand-in for CuPy's events and
stream (the logic of recording, fencing and attributing; the GPU check runs it on a real GPU)."""

from __future__ import annotations

import types

import numpy as np

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.worker.backend import Backend
from gt.runtime.worker.clock import CudaClock, HostClock, clock_for
from gt.runtime.worker.executor import Executor
from tests.unit.test_executor import FakeIO, NoPeers, ins


class FakeCuda:
    """Events stamped by a fake device timeline that advances 5 ms per op; the stream can be told
    to fail at its next synchronisation (once, or for good)."""

    def __init__(self) -> None:
        self.device_ms = 0.0
        self.fail: str | None = None
        self.sticky = False
        self.syncs = 0
        outer = self

        class Event:
            def __init__(self) -> None:
                self.at: float | None = None

            def record(self) -> None:
                if outer.fail and outer.sticky:  # a failed context refuses every CUDA call
                    raise RuntimeError(outer.fail)
                self.at = outer.device_ms
                outer.device_ms += 5.0

            def synchronize(self) -> None:
                outer.syncs += 1

        class Stream:
            def synchronize(self) -> None:
                outer.syncs += 1
                if outer.fail:
                    msg = outer.fail
                    if not outer.sticky:
                        outer.fail = None
                    raise RuntimeError(msg)

        self.cuda = types.SimpleNamespace(
            Event=Event,
            get_elapsed_time=lambda a, b: b.at - a.at,
            get_current_stream=lambda: Stream(),
        )


def _executor(fake: FakeCuda) -> Executor:
    ex = Executor(Backend(np, "cpu"), NoPeers(), FakeIO())
    ex.clock = CudaClock(fake)
    return ex


def _run(ex, instrs, timed=True):
    return ex.run(1, 1, b"tok", P.encode_body(instrs, [], None), [], timed)


def test_numpy_workers_time_ops_with_the_host_clock():
    assert isinstance(clock_for(Backend(np, "cpu")), HostClock)


def test_op_times_are_the_differences_between_device_events():
    fake = FakeCuda()
    ex = _executor(fake)
    res = _run(ex, [ins("full", 1, [1.0], {"shape": [4], "dtype": "float32"}),
                    ins("neg", 2, [1]), ins("exp", 3, [2])])  # fmt: skip
    assert res.errors == []
    assert res.durs == [5_000_000, 5_000_000, 5_000_000]  # 5 ms apart on the device's timeline
    assert fake.syncs >= 1  # the batch was fenced before it was reported done


def test_a_device_error_at_the_fence_fails_the_batchs_outputs_and_says_how_to_pin_it():
    fake = FakeCuda()
    ex = _executor(fake)
    # (not sticky: CUDA clears it once reported; a kernel's fault, 700 or 719, would stay)
    fake.fail = "cudaErrorInvalidResourceHandle: invalid resource handle"
    res = _run(ex, [ins("full", 1, [1.0], {"shape": [4], "dtype": "float32"}),
                    ins("neg", 2, [1], src=9), ins("fetch", 3, [2])], timed=False)  # fmt: skip
    assert len(res.errors) == 1 and "invalid resource handle" in res.errors[0][0]
    assert "GT_CUDA_SYNC_EACH_OP=1" in res.errors[0][0]
    assert 2 in ex.failed[1] and 2 not in ex.tables[1]
    assert ex.sticky_error is None  # the device answered again: the worker goes on
    res = _run(ex, [ins("full", 4, [2.0], {"shape": [2], "dtype": "float32"})], timed=False)
    assert res.errors == [] and 4 in ex.tables[1]


def test_an_error_that_stays_is_sticky_and_stops_the_worker():
    fake = FakeCuda()
    ex = _executor(fake)
    fake.fail, fake.sticky = "cudaErrorIllegalAddress: an illegal memory access", True
    _run(ex, [ins("full", 1, [1.0], {"shape": [4], "dtype": "float32"})], timed=False)
    assert ex.sticky_error is not None and "illegal memory access" in ex.sticky_error


def test_a_sticky_error_while_ops_are_timed_fails_the_batch_instead_of_the_worker():
    # timing is on by default: the events recorded around each op fail too once the GPU has
    fake = FakeCuda()
    ex = _executor(fake)
    res = _run(ex, [ins("full", 1, [1.0], {"shape": [4], "dtype": "float32"})])
    fake.fail, fake.sticky = "cudaErrorIllegalAddress: an illegal memory access", True
    res = _run(ex, [ins("neg", 2, [1], src=4), ins("exp", 3, [2], src=5)])
    assert ex.sticky_error is not None and "illegal memory access" in ex.sticky_error
    assert res.done and res.durs == [] and 2 in ex.failed[1] and 3 in ex.failed[1]
    assert "illegal memory access" in res.errors[0][0]


def test_what_is_left_of_a_batch_when_the_gpu_fails_mid_slice_fails_with_its_error():
    fake = FakeCuda()
    ex = _executor(fake)
    body = P.encode_body([ins("full", 1, [1.0], {"shape": [4], "dtype": "float32"}, src=1),
                          ins("neg", 2, [1], src=2), ins("exp", 3, [2], src=3)], [], None)  # fmt: skip
    job = ex.begin(1, 1, b"tok", body, [], False)

    class AfterOne:  # a slice's stop: asked from the second op on, it says stop
        deadline = 0.0

        def __call__(self):
            return True

    res = ex.step(job, AfterOne())
    assert not res.done and job.idx == 1
    ex.sticky_error = "CUDARuntimeError: cudaErrorIllegalAddress"
    ex.abandon(job)
    assert job.idx == 3 and 2 in ex.failed[1] and 3 in ex.failed[1]
    assert ex.failed[1][2][:3] == ["the GPU failed before this op ran: "
                                   "CUDARuntimeError: cudaErrorIllegalAddress", O.OPCODE["neg"], 2]  # fmt: skip
    assert [e[2] for e in job.b.errors] == [2]


def test_sync_each_op_puts_a_device_error_on_the_op_that_caused_it():
    fake = FakeCuda()
    ex = _executor(fake)
    ex.sync_each_op = True
    ops = [ins("full", 1, [1.0], {"shape": [4], "dtype": "float32"}, src=1),
           ins("neg", 2, [1], src=2), ins("exp", 3, [2], src=3)]  # fmt: skip
    calls = {"n": 0}
    real = ex.clock.fence

    def fence():  # the second op's kernel fails
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("cudaErrorLaunchFailure")
        real()

    ex.clock.fence = fence
    res = _run(ex, ops, timed=False)
    assert [e[2] for e in res.errors] == [2]  # src 2: the neg, not the batch's last op
    assert 1 in ex.tables[1] and 2 in ex.failed[1] and 3 in ex.failed[1]


class CUDARuntimeError(RuntimeError):
    """Named as CuPy's (``cupy_backends.cuda.api.runtime.CUDARuntimeError``)."""


class FaultAtFetch(FakeIO):
    """A fetch's copy to the host is the first call to wait for the device: an earlier kernel's
    fault is reported there."""

    def reply(self, client, token, req, arr, err, ack=None):
        if arr is not None:
            raise CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access")
        super().reply(client, token, req, arr, err, ack)


def _fetch_after_a_faulty_kernel(sync_each: bool) -> list:
    ex = Executor(Backend(np, "cpu"), NoPeers(), FaultAtFetch())
    ex.sync_each_op = sync_each
    _run(ex, [ins("full", 1, [1.0], {"shape": [4], "dtype": "float32"}, src=1),
              ins("neg", 2, [1], src=2), ins("fetch", 3, [2], src=3)], timed=False)  # fmt: skip
    return ex.io.replies[3][1]


def test_a_gpu_error_first_seen_at_a_fetch_says_an_earlier_op_may_have_caused_it():
    msg, opcode, src = _fetch_after_a_faulty_kernel(sync_each=False)
    assert (opcode, src) == (O.OPCODE["fetch"], 3)  # where CUDA reported it
    assert msg.startswith("CUDARuntimeError: cudaErrorIllegalAddress")
    assert "an earlier op of the batch may have caused" in msg and "GT_CUDA_SYNC_EACH_OP=1" in msg


def test_with_each_op_fenced_a_gpu_error_at_a_fetch_is_the_fetchs_own():
    msg, _, _ = _fetch_after_a_faulty_kernel(sync_each=True)
    assert msg == "CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access"


def test_an_ordinary_error_of_an_op_is_not_blamed_on_the_gpu():
    ex = Executor(Backend(np, "cpu"), NoPeers(), FakeIO())
    res = _run(ex, [ins("full", 1, [1.0], {"shape": [4], "dtype": "float32"}),
                    ins("full", 2, [1.0], {"shape": [3], "dtype": "float32"}),
                    ins("matmul", 3, [1, 2], src=7)], timed=False)  # fmt: skip
    assert len(res.errors) == 1 and res.errors[0][2] == 7
    assert "GT_CUDA_SYNC_EACH_OP" not in res.errors[0][0]
