"""The worker's executor on its own: batches in, results, errors and replies out (no sockets)."""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime import field_checks as F
from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.worker.backend import Backend
from gt.runtime.worker.executor import Executor

OP = O.OPCODE


class FakeIO:
    """Records fetch replies; hands out uploads that 'arrived' on the data socket."""

    def __init__(self) -> None:
        self.replies: dict[int, tuple] = {}
        self.arrived: dict[tuple, bytes] = {}
        self.acks: dict[int, int | None] = {}  # request -> the batch its reply acknowledged

    def upload(self, token, tok, give_way=None):
        return self.arrived.pop((token, tok))

    def reply(self, client, token, req, arr, err, ack=None):
        self.replies[req] = (None if arr is None else np.array(arr), err)
        self.acks[req] = ack

    def client_transfer(self, direction, t0, t1, nbytes, cno):
        pass


class NoPeers:
    cno = batch = waited_ns = 0

    def run(self, *a):
        raise AssertionError("no transfer expected")

    start = finish = run


@pytest.fixture
def ex():
    return Executor(Backend(np, "cpu"), NoPeers(), FakeIO())


def run(ex, instrs, frees=(), free_at=None, bufs=(), timed=False, cno=1):
    body = P.encode_body(list(instrs), list(frees), free_at)
    return ex.run(cno, 1, b"tok", body, list(bufs), timed)


def ins(op, out, args, attrs=None, src=3):
    return [OP[op], out, args, attrs, src]


def test_a_batch_computes_and_fetches(ex):
    a = np.arange(6, dtype=np.float32)
    res = run(ex, [
        ins("upload", 1, [], {"shape": [2, 3], "dtype": "float32", "buf": 0}),
        ins("mul", 2, [1, 2.0]),
        ins("sum", 3, [2], {"axis": [1], "keepdims": False}),
        ins("fetch", 100, [3]),
    ], bufs=[a.tobytes()], timed=True)  # fmt: skip
    assert res.errors == [] and len(res.instrs) == 4 and len(res.durs) == 4
    np.testing.assert_array_equal(ex.io.replies[100][0], [6.0, 24.0])
    assert ex.holdings() == (3, 24 + 24 + 8, {1: 24 + 24 + 8})
    assert ex.instructions == 4 and ex.batches == 1


def _acked(ex, instrs, ack=True, seq=9):
    job = ex.begin(1, seq, b"tok", P.encode_body(list(instrs), [], None), [], False, ack=ack)
    return ex.step(job), job.b.acked


def test_a_fetch_that_ends_a_batch_acknowledges_it_when_the_dispatcher_allows_it(ex):
    full = ins("full", 1, [2.0], {"shape": [2], "dtype": "float32"})
    res, acked = _acked(ex, [full, ins("fetch", 100, [1])])
    assert res.errors == [] and acked and ex.io.acks[100] == 9
    # not allowed (a planned part of a batch, or another worker runs some of it): no ack
    _, acked = _acked(ex, [ins("neg", 2, [1]), ins("fetch", 101, [2])], ack=False)
    assert not acked and ex.io.acks[101] is None
    # a fetch in the middle of the batch: more runs after it
    _, acked = _acked(ex, [ins("fetch", 102, [1]), ins("neg", 3, [1])])
    assert not acked and ex.io.acks[102] is None


def test_a_batch_with_an_error_is_not_acknowledged_by_its_fetch(ex):
    res, acked = _acked(ex, [
        ins("full", 1, [1.0], {"shape": [2, 3], "dtype": "float32"}),
        ins("matmul", 2, [1, 1]),  # fails: the error must travel in the dispatcher's Ack
        ins("full", 3, [1.0], {"shape": [2], "dtype": "float32"}),
        ins("fetch", 100, [3]),
    ])  # fmt: skip
    assert len(res.errors) == 1 and not acked and ex.io.acks[100] is None
    np.testing.assert_array_equal(ex.io.replies[100][0], [1.0, 1.0])


def test_a_failure_is_reported_once_and_spreads_to_what_depends_on_it(ex):
    res = run(ex, [
        ins("full", 1, [1.0], {"shape": [2, 3], "dtype": "float32"}),
        ins("matmul", 2, [1, 1], src=7),  # (2,3) @ (2,3) fails
        ins("exp", 3, [2]),
        ins("fetch", 101, [3]),
    ])  # fmt: skip
    assert len(res.errors) == 1
    msg, code, src = res.errors[0]
    assert code == OP["matmul"] and src == 7 and "matmul" in msg
    arr, err = ex.io.replies[101]
    assert arr is None and err == res.errors[0]  # the fetch carries the original error


def _failed_write(out: int = 1) -> list:
    """x = zeros(3); x[tensor([7])] = 1.0 -- the in-place write fails (7 is out of range)."""
    return [
        ins("full", out, [0.0], {"shape": [3], "dtype": "float32"}),
        ins("upload", 2, [], {"shape": [1], "dtype": "int64", "buf": 0}),
        ins("setitem", out, [out, 1.0, 2], {"key": [["t", 0]], "inplace": True},
            src=11),
    ]  # fmt: skip


def test_what_reads_a_tensor_an_in_place_op_failed_on_fails_with_its_error(ex):
    # (PyTorch raised at the write, and nothing after it ran: a silent result here would be
    # computed from the tensor as it was before the write the program meant)
    res = run(ex, [*_failed_write(), ins("add", 3, [1, 1.0]), ins("neg", 4, [3]),
                   ins("fetch", 100, [4])], bufs=[np.array([7]).tobytes()])  # fmt: skip
    assert len(res.errors) == 1 and "IndexError" in res.errors[0][0]
    assert ex.io.replies[100] == (None, res.errors[0])
    # the fetch raised it in the program: the tensor is usable again, as it was
    run(ex, [ins("fetch", 101, [1]), ins("add", 5, [1, 1.0]), ins("fetch", 102, [5])])
    np.testing.assert_array_equal(ex.io.replies[101][0], [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(ex.io.replies[102][0], [1.0, 1.0, 1.0])


def test_a_failed_in_place_write_spoils_only_the_rest_of_its_batch(ex):
    res = run(ex, _failed_write(), bufs=[np.array([7]).tobytes()])
    assert len(res.errors) == 1  # (the client has it, and raises it at its next sync point)
    run(ex, [ins("add", 3, [1, 1.0]), ins("fetch", 100, [3])])
    np.testing.assert_array_equal(ex.io.replies[100][0], [1.0, 1.0, 1.0])


def test_a_tensor_that_never_existed_is_an_error(ex):
    res = run(ex, [ins("neg", 2, [41]), ins("fetch", 102, [2])])
    assert len(res.errors) == 1 and "tensor 41 does not exist" in res.errors[0][0]
    assert ex.io.replies[102][1][0] == res.errors[0][0]


def test_frees_happen_where_the_program_made_them(ex):
    res = run(
        ex,
        [
            ins("full", 1, [1.0], {"shape": [2], "dtype": "float32"}),
            ins("neg", 2, [1]),
            ins("neg", 3, [1]),
        ],  # fmt: skip
        frees=[1],
        free_at=[2],  # after two instructions: the third one no longer finds tensor 1
    )
    assert [e[1] for e in res.errors] == [OP["neg"]] and "does not exist" in res.errors[0][0]
    assert set(ex.tables[1]) == {2}


def test_a_direct_upload_waits_for_its_data(ex):
    ex.io.arrived[(b"tok", 9)] = np.ones(4, np.int64).tobytes()
    res = run(ex, [ins("upload", 1, [], {"shape": [4], "dtype": "int64", "tok": 9}),
                   ins("fetch", 103, [1])])  # fmt: skip
    assert res.errors == [] and ex.io.replies[103][0].tolist() == [1, 1, 1, 1]


def test_an_upload_that_never_came_under_the_ram_cap_says_the_cap_refused_it(ex):
    # ZeroMQ drops a message whose buffer the kernel refused: only the missing data is seen
    def never(token, tok, give_way=None):
        raise TimeoutError("the upload's data never arrived on the direct data socket")

    ex.io.upload = never
    ex.ram_cap = 50_000_000  # (this process has more than that mapped already)
    run(ex, [ins("upload", 1, [], {"shape": [1000, 1000], "dtype": "float32", "tok": 9})])
    err = ex.failed[1][1][0]
    assert err.startswith("OutOfMemory: upload of 4.0 MB (4000000 B)") and "RAM cap" in err
    ex.ram_cap = None  # without a cap the timeout is the reason
    run(ex, [ins("upload", 2, [], {"shape": [4], "dtype": "float32", "tok": 10})])
    assert ex.failed[1][2][0].startswith("TimeoutError: the upload's data never arrived")


def test_malformed_bodies_and_instructions_fail_without_stopping_the_batch(ex):
    bad = ex.run(1, 1, None, b"\x93not a body", [], False)
    assert len(bad.errors) == 1 and bad.errors[0][1] == -1
    res = run(ex, [["not", "an", "instruction"], [OP["neg"], 5, [], None, 0, 1, 2],
                   [999, 6, [], None, 0], ins("full", 7, [0.5], {"shape": [1], "dtype": "float32"})])  # fmt: skip
    assert len(res.errors) == 3
    assert 7 in ex.tables[1]


def test_clients_are_kept_apart_and_dropped_whole(ex):
    run(ex, [ins("full", 1, [1.0], {"shape": [1], "dtype": "float32"})], cno=1)
    run(ex, [ins("full", 1, [2.0], {"shape": [1], "dtype": "float32"})], cno=2)
    assert ex.tables[1][1][0] == 1.0 and ex.tables[2][1][0] == 2.0
    ex.drop_client(1)
    assert 1 not in ex.tables and ex.holdings()[0] == 1


def test_transfers_and_frees_are_refused_in_a_clients_own_batch(ex):
    res = run(ex, [ins("recv", 5, [], {"peer": 1, "tag": 1}), ins("free", 0, [], {"ids": [1]})])
    assert [e[1] for e in res.errors] == [OP["recv"], OP["free"]]
    assert all("may only come from the dispatcher's planner" in e[0] for e in res.errors)


def test_immediates_and_dtypes_that_could_make_python_objects_are_refused(ex):
    res = run(ex, [
        ins("full", 1, ["a string"], {"shape": [2], "dtype": "float32"}),
        ins("full", 2, [[[1, 2]]], {"shape": [2], "dtype": "int64"}),
        ins("full", 3, [1.0], {"shape": [2], "dtype": "object"}),
        ins("full", 5, [[7]], {"shape": [2], "dtype": "int64"}),
    ])  # fmt: skip
    assert len(res.errors) == 3 and set(ex.tables[1]) == {5}
    assert "unsupported dtype 'object'" in res.errors[2][0]


def test_ops_too_large_for_any_worker_are_refused_before_they_run(ex):
    res = run(ex, [
        ins("full", 1, [0.0], {"shape": [1], "dtype": "float32"}),
        ins("expand", 2, [1], {"shape": [1 << 20, 1 << 20]}),  # a tera-element view
        ins("full", 3, [0.0], {"shape": [1 << 40], "dtype": "float32"}),
    ])  # fmt: skip
    assert [e[1] for e in res.errors] == [OP["expand"], OP["full"]]
    assert all("over the limit" in e[0] for e in res.errors)


def test_an_elementwise_op_whose_inputs_broadcast_past_the_limit_is_refused(ex, monkeypatch):
    import gt.runtime.worker.batch as B

    monkeypatch.setattr(B, "MAX_ELEMENTS", 1 << 20)
    res = run(ex, [
        ins("full", 1, [1.0], {"shape": [1 << 11, 1], "dtype": "float32"}),
        ins("full", 2, [1.0], {"shape": [1, 1 << 11], "dtype": "float32"}),
        ins("add", 3, [1, 2]),  # 4M elements from two inputs of 2k: refused before it allocates
        ins("where", 4, [1, 2, 1]),
        ins("add", 5, [1, 1]),  # the same shapes: fine
        ins("mul", 6, [2, 3.0]),  # an immediate: fine
        ins("fetch", 100, [5]),
    ])  # fmt: skip
    assert [e[1] for e in res.errors] == [OP["add"], OP["where"]]
    assert all("broadcasts to 4,194,304 elements, over the limit" in e[0] for e in res.errors)
    assert ex.io.replies[100][0].shape == (1 << 11, 1) and 6 in ex.tables[1]


def test_a_batch_run_in_slices_computes_what_it_computes_in_one_go():
    import numpy as _np

    from gt.runtime.worker.backend import Backend as _Backend
    from gt.runtime.worker.executor import Executor as _Executor

    def batch():
        instrs = [ins("full", 1, [0.0], {"shape": [3], "dtype": "float32"})]
        instrs += [ins("add", 2 + k, [1 + k, 1.0]) for k in range(40)]
        instrs += [ins("neg", 100, [999]), ins("fetch", 7, [41])]  # one error on the way
        frees = list(range(1, 40))
        return P.encode_body(instrs, frees, list(range(2, 41)))  # each freed once used

    whole = _Executor(_Backend(_np, "cpu"), NoPeers(), FakeIO())
    res = whole.run(1, 1, b"t", batch(), [], True)
    sliced = _Executor(_Backend(_np, "cpu"), NoPeers(), FakeIO())
    job = sliced.begin(1, 1, b"t", batch(), [], True)
    asks = {"n": 0}

    def stop():  # cut after every look
        asks["n"] += 1
        return True

    stop.deadline = 0.0  # always past: asked between every two instructions

    parts = []
    while True:
        part = sliced.step(job, stop)
        parts.append(part)
        if part.done:
            break
    assert len(parts) > 3 and asks["n"] >= len(parts) - 1
    assert [len(p.instrs) for p in parts[:-1]] == [1] * (len(parts) - 1)  # one instruction each
    assert sum(len(p.instrs) for p in parts) == len(res.instrs) == 43
    assert sum(len(p.durs) for p in parts) == 43
    _np.testing.assert_array_equal(sliced.io.replies[7][0], whole.io.replies[7][0])
    assert sorted(sliced.tables[1]) == sorted(whole.tables[1]) == [40, 41]  # frees where they were
    fresh = [e for p in parts for e in p.fresh_errors]
    assert fresh == res.errors == parts[-1].errors and len(fresh) == 1  # reported once
    assert sliced.batches == whole.batches == 1


@pytest.mark.parametrize("error", [RuntimeError("CUBLAS_STATUS_ALLOC_FAILED"),
                                   RuntimeError("cudaErrorMemoryAllocation: out of memory"),
                                   MemoryError("Out of memory allocating 512 bytes")])  # fmt: skip
def test_an_op_a_cuda_library_could_not_allocate_for_is_tried_again_after_giving_memory_back(
    ex, error, monkeypatch
):
    # cuBLAS's or cuSOLVER's own workspace: no MemoryError, but the same cure (cached blocks back)
    import gt.runtime.worker.failures as X

    released = []
    monkeypatch.setattr(X, "release_cached", lambda be: released.append(1))
    real, calls = ex.handlers[OP["neg"]], []

    def refused_once(vals, attrs):
        calls.append(1)
        if len(calls) == 1:
            raise error
        return real(vals, attrs)

    ex.handlers[OP["neg"]] = refused_once
    res = run(ex, [ins("full", 1, [2.0], {"shape": [3], "dtype": "float32"}),
                   ins("neg", 2, [1]), ins("fetch", 9, [2])])  # fmt: skip
    assert res.errors == [] and released == [1] and len(calls) == 2
    np.testing.assert_array_equal(ex.io.replies[9][0], [-2.0, -2.0, -2.0])
    ex.handlers[OP["neg"]] = lambda vals, attrs: (_ for _ in ()).throw(RuntimeError("bad"))
    res = run(ex, [ins("neg", 3, [1])])  # any other error fails the op at once
    assert res.errors[0][0] == "RuntimeError: bad"


@pytest.mark.parametrize("bad", [["x", 1, [], None, 1], [True, 1, [], None, "src"],
                                 [OP["add"], 1, [9, 9], None, [1]]])  # fmt: skip
def test_errors_of_malformed_instructions_are_well_formed_for_the_dispatcher(ex, bad):
    # (a string opcode went into Done.errors as it was: the dispatcher refused the Done, the
    # worker's slot was never freed, and four such batches wedged the worker for everyone)
    res = run(ex, [bad])
    assert res.errors and all(F.is_error(e) for e in res.errors)
    P.encode(P.Done(1, 1, res.errors, 1, 0))  # (it encodes, and the dispatcher parses it)
    assert P.parse(P.encode(P.Done(1, 1, res.errors, 1, 0))).errors == res.errors
