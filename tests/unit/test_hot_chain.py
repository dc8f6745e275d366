"""A replayed step's runs of in-place updates (an optimizer's), run a block at a time: found in
the plan, equal bit for bit to running them step by step, and left step by step whenever the
arrays would not be updated in place eagerly (no sockets)."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.worker.hot_chain import BLOCK, Chain, find_chains
from tests.unit.test_executor import ins
from tests.unit.test_hot_worker import executor, run

P_, BUF, G, Q = 1, 2, 3, 4  # a parameter, its momentum buffer, its gradient, another parameter
SGD = [
    ins("mul", BUF, [BUF, 0.9], {"inplace": True}),
    ins("add", BUF, [BUF, G], {"inplace": True}),
    ins("add_scaled", P_, [P_, BUF], {"alpha": -0.01, "inplace": True}),
]
PLAN = {"plan": 1, "name": "sgd", "steps": SGD, "inputs": [G], "temps": [], "outs": []}


@pytest.fixture
def blocked_runs(monkeypatch):
    """What every :meth:`Chain.blocked` call answered."""
    seen: list[bool] = []
    real = Chain.blocked
    monkeypatch.setattr(Chain, "blocked", lambda self, r: seen.append(real(self, r)) or seen[-1])
    return seen


def arrays(n: int, dtype=np.float32, seed: int = 0) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(n).astype(dtype) for k in (P_, BUF, G)}


def sgd_eager(a: dict[int, np.ndarray], calls: int) -> tuple[np.ndarray, np.ndarray]:
    p, buf = a[P_].copy(), a[BUF].copy()
    for _ in range(calls):
        buf = buf * 0.9
        buf = buf + a[G]
        p = p + buf * -0.01
    return p, buf


def defined(a: dict[int, np.ndarray], plan=PLAN, extra=None):
    """An executor holding ``plan`` and the arrays ``a`` (copies) and ``extra`` (as they are)."""
    ex = executor()
    run(ex, [ins("hot_define", 0, [], plan)])
    t = ex.tables[1]
    for k, v in a.items():
        t[k] = v.copy(order="K")
    for k, v in (extra or {}).items():
        t[k] = v
    return ex


def replay(a: dict[int, np.ndarray], calls: int, plan=PLAN, extra=None):
    ex = defined(a, plan, extra)
    for _ in range(calls):
        res = run(ex, [ins("hot", 0, [G], {"plan": plan["plan"], "outs": [], "seeds": []})])
        assert res.hot == 1
    return ex, res


def test_an_optimizer_update_is_found_as_one_chain_and_other_steps_are_not():
    def step(op, out, args, **at):
        own = out if at.get("inplace") else -1
        return (None, tuple(args), at or None, out, (), O.OPCODE[op], 0, own)

    steps = [
        step("matmul", 10, [5, 6]),
        step("mul", 2, [2, 7], inplace=True),  # buf.mul_(m) (7: the constant's register)
        step("add", 2, [2, 10], inplace=True),  # buf.add_(g)
        step("add_scaled", 1, [1, 2], inplace=True, alpha=-0.1),  # p.add_(buf, alpha=-lr)
        step("mul", 3, [3, 7], inplace=True),  # the next parameter's buffer: a new chain
        step("add", 3, [3, 11], inplace=True),
        step("relu", 12, [3]),
        step("mul", 13, [13, 7], inplace=True),  # alone: not a chain
        step("add", 14, [14, 7]),  # not in place
    ]
    assert find_chains(steps) == [(1, 4), (4, 6)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_blocked_chain_updates_in_place_bit_for_bit_as_step_by_step(blocked_runs, dtype):
    a = arrays(5 * BLOCK + 123, dtype)  # (not a whole number of blocks)
    ex, res = replay(a, calls=3)
    assert res.errors == [] and blocked_runs == [True] * 3
    p, buf = sgd_eager(a, calls=3)
    t = ex.tables[1]
    np.testing.assert_array_equal(t[BUF], buf)
    np.testing.assert_array_equal(t[P_], p)
    assert t[P_].dtype == dtype


def test_the_chain_writes_the_kept_tensors_own_memory():
    a = arrays(3 * BLOCK)
    ex = defined(a)
    t = ex.tables[1]
    kept = weakref.ref(t[P_]), weakref.ref(t[BUF])
    run(ex, [ins("hot", 0, [G], {"plan": 1, "outs": [], "seeds": []})])
    assert t[P_] is kept[0]() and t[BUF] is kept[1]()


def test_small_tensors_run_step_by_step(blocked_runs):
    a = arrays(100)
    ex, res = replay(a, calls=2)
    assert res.errors == [] and blocked_runs == [False, False]
    p, buf = sgd_eager(a, calls=2)
    np.testing.assert_array_equal(ex.tables[1][P_], p)
    np.testing.assert_array_equal(ex.tables[1][BUF], buf)


def test_a_parameter_another_tensor_shares_is_not_written_behind_its_back(blocked_runs):
    a = arrays(3 * BLOCK)
    shared = a[P_].copy()
    ex, res = replay(a, calls=1, extra={P_: shared, 9: shared})  # id 9 holds the same array
    assert res.errors == [] and blocked_runs == [False]
    np.testing.assert_array_equal(shared, a[P_])  # the other holder still sees the old values
    np.testing.assert_array_equal(ex.tables[1][P_], sgd_eager(a, calls=1)[0])


def test_arrays_of_other_shapes_or_layouts_run_step_by_step(blocked_runs):
    a = arrays(3 * BLOCK)
    a[G] = a[G].reshape(3, BLOCK)
    a[BUF] = np.asfortranarray(a[BUF].reshape(BLOCK, 3).T)  # (3, BLOCK), not C-ordered
    a[P_] = a[P_].reshape(3, BLOCK)
    ex, res = replay(a, calls=1)
    assert res.errors == [] and blocked_runs == [False]
    p, buf = sgd_eager(a, calls=1)
    np.testing.assert_array_equal(ex.tables[1][BUF], buf)
    np.testing.assert_array_equal(ex.tables[1][P_], p)


def test_a_failing_step_of_a_chain_fails_it_and_what_follows_as_eagerly():
    a = arrays(3 * BLOCK)
    a[G] = a[G][:1000]  # buf.add_(g) cannot broadcast
    plan = {**PLAN, "steps": [*SGD, ins("mul", 20, [P_, 2.0])], "outs": [20]}
    ex = defined(a, plan)
    res = run(ex, [ins("hot", 0, [G], {"plan": 1, "outs": [21], "seeds": []})])
    assert len(res.errors) == 1 and res.errors[0][0].startswith("ValueError")
    failed = ex.failed[1]
    assert {BUF, P_, 21} <= set(failed)  # the add, the update that reads it, the result
    assert failed[21][0] == res.errors[0][0]  # each says why: the add's error


def test_a_random_op_after_a_chain_still_draws_with_its_calls_seed():
    steps = [*SGD, ins("randn", 30, [], {"shape": [4], "dtype": "float32", "seed": 1})]
    plan = {**PLAN, "steps": steps, "outs": [30]}
    a = arrays(3 * BLOCK)
    ex = defined(a, plan)
    t = ex.tables[1]
    run(ex, [ins("hot", 0, [G], {"plan": 1, "outs": [o], "seeds": [s]})
             for o, s in ((40, 7), (41, 8), (42, 7))])  # fmt: skip
    assert not np.array_equal(t[40], t[41])
    np.testing.assert_array_equal(t[40], t[42])
