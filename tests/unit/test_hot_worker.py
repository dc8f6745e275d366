"""Replaying a captured step on a worker's executor (no sockets): the same results as running
its instructions eagerly, bound to the kernels or instruction by instruction."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.worker.backend import Backend
from gt.runtime.worker.executor import Executor
from gt.runtime.worker.hot import MAX_PLANS, TEMP_BASE
from gt.runtime.worker.pool import MemoryPool
from gt.runtime.worker.spill import SpillStore
from tests.unit.test_executor import FakeIO, NoPeers, ins

F32 = "float32"


def executor(tmp_path=None, limit=None) -> Executor:
    ex = Executor(Backend(np, "cpu"), NoPeers(), FakeIO())
    if limit is not None:
        ex.use_pool(MemoryPool(limit=limit, threshold=0.5, store=SpillStore(parent=str(tmp_path))))
    return ex


def run(ex, instrs, cno=1):
    return ex.run(cno, 1, b"tok", P.encode_body(list(instrs), [], None), [], False, False)


def fetched(ex, req):
    arr, err = ex.io.replies[req]
    assert err is None, err
    return arr


# a step: y = relu(x @ W) * 2 (returned), S = S + sum(y) (kept state), one temporary
W, S, X = 1, 2, 3
STEP = [
    ins("matmul", 10, [X, W]),
    ins("relu", 11, [10]),
    ins("mul", 12, [11, 2.0]),
    ins("sum", 13, [12], {"axis": None, "keepdims": False}),
    ins("add", S, [S, 13]),
]
PLAN = {"plan": 1, "name": "step", "steps": STEP, "inputs": [X], "temps": [10, 11, 13],
        "outs": [12]}  # fmt: skip


def setup(ex):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    run(ex, [ins("full", S, [0.0], {"shape": [], "dtype": F32})])
    ex.tables[1][W] = w
    return w


def inputs(ex, ids):
    rng = np.random.default_rng(1)
    for i in ids:
        ex.tables[1][i] = rng.standard_normal((2, 3)).astype(np.float32)


@pytest.mark.parametrize("limited", [False, True], ids=["bound to kernels", "through the pool"])
def test_replays_compute_what_the_eager_instructions_compute(tmp_path, limited):
    eager, hot = executor(), executor(tmp_path, limit=1 << 20 if limited else None)
    setup(eager), setup(hot)
    run(hot, [ins("hot_define", 0, [], PLAN)])
    for call in range(3):
        x, out = 100 + call, 200 + call
        inputs(eager, [x]), inputs(hot, [x])
        run(eager, [[c, out if o == 12 else o, [x if a == X else (out if a == 12 else a)
                                                 for a in args], at, s]
                    for c, o, args, at, s in STEP])  # fmt: skip
        res = run(hot, [ins("hot", 0, [x], {"plan": 1, "outs": [out], "seeds": []})])
        assert res.errors == [] and res.hot == 1
        np.testing.assert_array_equal(hot.tables[1][out], eager.tables[1][out])
        np.testing.assert_array_equal(hot.tables[1][S], eager.tables[1][S])
    # temporaries never reach the table (or are dropped right after their last use)
    assert not any(k <= TEMP_BASE for k in hot.tables[1]) and 10 not in hot.tables[1]
    assert hot.hot.calls[(1, 1)] == 3


def test_a_failing_step_fails_its_result_and_what_uses_it_and_the_worker_goes_on():
    ex = executor()
    setup(ex)
    run(ex, [ins("hot_define", 0, [], PLAN)])
    ex.tables[1][100] = np.ones((2, 5), np.float32)  # the wrong shape: the matmul fails
    res = run(ex, [ins("hot", 0, [100], {"plan": 1, "outs": [200], "seeds": []}),
                   ins("fetch", 201, [200])])  # fmt: skip
    assert len(res.errors) == 1
    msg = res.errors[0][0]
    assert msg.startswith("ValueError")
    _arr, err = ex.io.replies[201]
    assert err is not None and err[0] == msg  # the result says why it never came
    # the state the step updates stays as it was, as an eager in-place op that fails leaves it,
    # and the fetch that raised the error made it usable again
    assert S in ex.tables[1] and S not in ex.failed[1]
    inputs(ex, [101])
    res = run(ex, [ins("hot", 0, [101], {"plan": 1, "outs": [202], "seeds": []})])
    assert res.errors == [] and 202 in ex.tables[1]  # the next call runs


def test_a_replayed_step_keeps_the_size_limits(monkeypatch):
    import gt.runtime.worker.batch as B

    monkeypatch.setattr(B, "MAX_ELEMENTS", 1 << 20)
    ex = executor()
    plan = {"plan": 1, "name": "wide", "inputs": [1, 2], "temps": [], "outs": [3, 4],
            "steps": [ins("add", 3, [1, 2]),  # broadcasts as wide as its inputs say
                      ins("full", 4, [0.0], {"shape": [1 << 21], "dtype": F32})]}  # fmt: skip
    run(ex, [ins("hot_define", 0, [], plan)])
    ex.tables[1][10] = np.ones((4, 1), np.float32)
    ex.tables[1][11] = np.ones((1, 4), np.float32)
    res = run(ex, [ins("hot", 0, [10, 11], {"plan": 1, "outs": [20, 21], "seeds": []})])
    assert 20 in ex.tables[1]  # small inputs: the add runs, and the full is refused
    assert len(res.errors) == 1 and "full of shape [2097152]" in res.errors[0][0]
    ex.tables[1][12] = np.ones((1 << 11, 1), np.float32)
    ex.tables[1][13] = np.ones((1, 1 << 11), np.float32)
    res = run(ex, [ins("hot", 0, [12, 13], {"plan": 1, "outs": [22, 23], "seeds": []})])
    assert any("broadcasts to 4,194,304 elements" in e[0] for e in res.errors)
    assert 22 not in ex.tables[1]
    plan_fits = {**plan, "plan": 2, "steps": plan["steps"][:1], "outs": [3]}
    run(ex, [ins("hot_define", 0, [], plan_fits)])  # bound to the kernels: checked there too
    assert ex.hot.plans[1][2].compiled(ex.handlers) is not None
    res = run(ex, [ins("hot", 0, [12, 13], {"plan": 2, "outs": [24], "seeds": []})])
    assert any("broadcasts to 4,194,304 elements" in e[0] for e in res.errors)


def test_a_missing_input_fails_the_results_as_it_would_eagerly():
    ex = executor()
    setup(ex)
    run(ex, [ins("hot_define", 0, [], PLAN)])
    res = run(ex, [ins("hot", 0, [999], {"plan": 1, "outs": [200], "seeds": []}),
                   ins("fetch", 201, [200])])  # fmt: skip
    _arr, err = ex.io.replies[201]
    assert err is not None and "999 does not exist" in err[0]
    assert len(res.errors) == 1


def test_seeds_change_every_call_and_the_same_seed_draws_the_same_numbers():
    ex = executor()
    plan = {"plan": 2, "name": "noise", "inputs": [], "temps": [], "outs": [50],
            "steps": [ins("randn", 50, [], {"shape": [3], "dtype": F32, "seed": 1})]}  # fmt: skip
    run(ex, [ins("hot_define", 0, [], plan)])
    run(ex, [ins("hot", 0, [], {"plan": 2, "outs": [o], "seeds": [s]})
             for o, s in ((60, 7), (61, 8), (62, 7))])  # fmt: skip
    t = ex.tables[1]
    assert not np.array_equal(t[60], t[61])
    np.testing.assert_array_equal(t[60], t[62])


@pytest.mark.parametrize(
    ("attrs", "why"),
    [
        ({**PLAN, "steps": [ins("hot", 0, [], {"plan": 1})]}, "cannot hold hot"),
        ({**PLAN, "steps": [ins("send", 5, [1], {"peer": 1})]}, "cannot hold send"),
        ({**PLAN, "steps": []}, "1..100000 steps"),
        ({**PLAN, "inputs": ["x"]}, "lists of ids"),
        ({**PLAN, "plan": "p"}, "by an int"),
    ],
)
def test_malformed_plans_are_refused_and_counted_as_the_clients_error(attrs, why):
    ex = executor()
    res = run(ex, [ins("hot_define", 0, [], attrs)])
    assert len(res.errors) == 1 and why in res.errors[0][0]
    assert not ex.hot.plans.get(1)


def test_calls_that_do_not_fit_the_plan_are_refused():
    ex = executor()
    setup(ex)
    run(ex, [ins("hot_define", 0, [], PLAN)])
    for args, attrs in (([], {"plan": 1, "outs": [200], "seeds": []}),
                        ([100], {"plan": 1, "outs": [], "seeds": []}),
                        ([100], {"plan": 1, "outs": [200], "seeds": [1]}),
                        ([100], {"plan": 9, "outs": [200], "seeds": []})):  # fmt: skip
        res = run(ex, [ins("hot", 0, args, attrs)])
        assert len(res.errors) == 1 and res.errors[0][0].startswith("ProtocolError")


def test_a_client_keeps_a_bounded_number_of_plans_and_loses_them_when_it_leaves():
    ex = executor()
    run(ex, [ins("hot_define", 0, [], {**PLAN, "plan": k}) for k in range(MAX_PLANS)])
    res = run(ex, [ins("hot_define", 0, [], {**PLAN, "plan": MAX_PLANS})])
    assert "256 hot plans" in res.errors[0][0]
    run(ex, [ins("hot_define", 0, [], {"plan": 0, "steps": None})])  # dropped on request
    assert 0 not in ex.hot.plans[1] and len(ex.hot.plans[1]) == MAX_PLANS - 1
    ex.drop_client(1)
    assert 1 not in ex.hot.plans


def test_an_integer_immediate_reaches_a_replayed_kernel_as_the_integer():
    """``[v]`` on the wire is the integer v: a replay must not hand the kernel the list (NumPy
    broadcasts it by luck; CuPy refuses it)."""
    steps = [ins("ne", 10, [X, [-100]]), ins("mul", 12, [10, 2.0])]
    plan = {"plan": 2, "name": "mask", "steps": steps, "inputs": [X], "temps": [10], "outs": [12]}
    ex = executor()
    run(ex, [ins("hot_define", 0, [], plan)])
    seen = []
    ex.handlers[O.OPCODE["ne"]] = lambda v, at: seen.append(v[1]) or np.not_equal(*v)
    ex.tables[1][X] = np.array([-100, 3], np.int64)
    res = run(ex, [ins("hot", 0, [X], {"plan": 2, "outs": [50], "seeds": []})])
    assert res.errors == [] and res.hot == 1
    assert seen == [-100] and type(seen[0]) is int
    np.testing.assert_array_equal(ex.tables[1][50], [0.0, 2.0])


def test_an_in_place_update_of_kept_state_writes_its_own_memory_as_eagerly():
    # S.mul_(0.5).add_(sum) as a momentum buffer is updated: a replay must not copy S each call
    step = [ins("sum", 10, [X], {"axis": 0, "keepdims": False}),
            ins("mul", S, [S, 0.5], {"inplace": True}),
            ins("add", S, [S, 10], {"inplace": True})]  # fmt: skip
    plan = {"plan": 1, "name": "ema", "steps": step, "inputs": [X], "temps": [10], "outs": []}
    ex = executor()
    run(ex, [ins("hot_define", 0, [], plan)])
    ex.tables[1][S] = np.ones(3, np.float32)
    state = weakref.ref(ex.tables[1][S])  # (a strong reference here would make it shared)
    for call in range(3):
        inputs(ex, [100 + call])
        res = run(ex, [ins("hot", 0, [100 + call], {"plan": 1, "outs": [], "seeds": []})])
        assert res.errors == [] and res.hot == 1
    assert ex.tables[1][S] is state()  # the same buffer, updated in place
    expect = np.ones(3, np.float32)
    for _call in range(3):
        rng = np.random.default_rng(1)
        expect = expect * np.float32(0.5) + rng.standard_normal((2, 3)).astype(np.float32).sum(0)
    np.testing.assert_array_equal(ex.tables[1][S], expect)


def test_an_in_place_update_of_a_shared_array_leaves_the_other_holder_alone():
    step = [ins("add", S, [S, X], {"inplace": True})]
    plan = {"plan": 1, "name": "acc", "steps": step, "inputs": [X], "temps": [], "outs": []}
    ex = executor()
    run(ex, [ins("hot_define", 0, [], plan)])
    shared = np.zeros((2, 3), np.float32)
    ex.tables[1][S] = shared
    ex.tables[1][7] = shared  # another id holds the same array (an alias the table made)
    inputs(ex, [100])
    res = run(ex, [ins("hot", 0, [100], {"plan": 1, "outs": [], "seeds": []})])
    assert res.errors == [] and res.hot == 1
    assert not shared.any() and ex.tables[1][S] is not shared and ex.tables[1][S].any()
