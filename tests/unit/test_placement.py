"""The placement planner, run on simulated workers: every plan must compute what one worker would."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_placement_sim import OP, Client, Sim

from gt.config import ConfigError
from gt.runtime.sharding import relayout as R
from gt.runtime.sharding.layout import (
    LOCAL,
    PARTIAL,
    REPL,
    SHARD,
    Layout,
    Program,
    local,
    partial,
    repl,
    shard,
)
from gt.runtime.sharding.placement import Placement

RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def client(config: dict | None, n: int = 2, home: int = 0) -> Client:
    pl = Placement()
    pl.apply_config(config, list(range(n)))
    return Client(pl, n, home)


def check(c: Client, tid: int) -> np.ndarray:
    got = c.value(tid)
    np.testing.assert_allclose(got, c.ref[tid], rtol=1e-5, atol=1e-5)
    return got


# ----------------------------------------------------------------------------- no config
def test_without_a_config_every_instruction_runs_on_the_home_worker_unchanged():
    c = client(None, n=3, home=1)
    x = c.upload(rand(4, 3), sig="layer1")
    y = c.op("relu", [x], sig="layer1")
    prog = c.flush()
    assert set(prog.parts) == {1} and not prog.moves
    assert [len(i) for i in prog.parts[1]] == [5, 5]  # the signal id is stripped
    check(c, y)


# ----------------------------------------------------------------------------- matmul rules
def test_row_sharded_times_replicated_stays_row_sharded_without_moves():
    c = client({"rows": {"shard": {"axis": 0}}, "w": {"replicate": {}}}, n=2)
    a, b = c.upload(rand(6, 4)), c.upload(rand(4, 5))
    c.place(a, "rows")
    c.place(b, "w")
    c.flush()
    out = c.op("matmul", [a, b])
    prog = c.flush()
    assert not prog.moves and set(prog.parts) == {0, 1}
    assert c.layout(out) == "shard(axis=0, [0, 1], [3, 3])"
    check(c, out)


def test_replicated_times_column_sharded_stays_column_sharded():
    c = client({"cols": {"shard": {"axis": 1}}, "x": {"replicate": {}}}, n=3)
    a, b = c.upload(rand(5, 4)), c.upload(rand(4, 7))
    c.place(a, "x")
    c.place(b, "cols")
    out = c.op("matmul", [a, b])
    c.flush()
    assert c.layout(out) == "shard(axis=1, [0, 1, 2], [3, 2, 2])"
    check(c, out)


def test_contraction_sharded_matmul_all_reduces_its_partial_sums_in_the_background():
    c = client({"k": {"shard": {"axis": 1}}, "kt": {"shard": {"axis": 0}}}, n=2)
    a, b = c.upload(rand(3, 8)), c.upload(rand(8, 2))
    c.place(a, "k")
    c.place(b, "kt")
    c.flush()
    out = c.op("matmul", [a, b])
    y = c.op("relu", [out])
    prog = c.flush()
    assert prog.moves["all_reduce"] == 1
    (ar,) = [i for i in prog.parts[0] if i[0] == OP["all_reduce"]]
    assert ar[3]["async"] is True and prog.parts[0][-1][0] == OP["relu"]
    assert c.layout(out) == "repl([0, 1])"
    check(c, y)


def test_a_signal_rule_moves_partial_sums_by_reduce_scatter():
    c = client(
        {"k": {"shard": {"axis": 1}}, "kt": {"shard": {"axis": 0}}, "rows": {"shard": {"axis": 0}}},
        n=2,
    )
    a, b = c.upload(rand(4, 6)), c.upload(rand(6, 3))
    c.place(a, "k")
    c.place(b, "kt")
    out = c.op("matmul", [a, b], sig="rows")
    prog = c.flush()
    assert prog.moves["reduce_scatter"] == 1 and not prog.moves["all_reduce"]
    assert c.layout(out) == "shard(axis=0, [0, 1], [2, 2])"
    check(c, out)


def test_batched_matmul_shards_the_batch_axis():
    c = client({"b": {"shard": {"axis": 0}}}, n=2)
    a, b = c.upload(rand(4, 3, 5)), c.upload(rand(4, 5, 2))
    c.place(a, "b")
    c.place(b, "b")
    out = c.op("matmul", [a, b])
    prog = c.flush()
    assert c.layout(out).startswith("shard(axis=0")
    assert not prog.moves["all_gather"]
    check(c, out)


# ----------------------------------------------------------------------------- elementwise
def test_elementwise_on_co_sharded_operands_and_a_broadcast_bias():
    c = client({"rows": {"shard": {"axis": 0}}, "bias": {"replicate": {}}}, n=4)
    x, y = c.upload(rand(7, 3)), c.upload(rand(7, 3))
    b = c.upload(rand(3))
    for t in (x, y):
        c.place(t, "rows")
    c.place(b, "bias")
    c.flush()
    s = c.op("add", [c.op("mul", [x, y]), b])
    prog = c.flush()
    assert not prog.moves
    assert c.layout(s) == "shard(axis=0, [0, 1, 2, 3], [2, 2, 2, 1])"  # uneven, not unsharded
    check(c, s)


def test_partial_sums_pass_through_linear_ops_only():
    c = client({"rows": {"shard": {"axis": 0}}}, n=2)
    a, b = c.upload(rand(6, 2)), c.upload(rand(6, 2))
    c.place(a, "rows")
    c.place(b, "rows")
    p1 = c.op("sum", [a], {"axis": [0], "keepdims": False})
    p2 = c.op("sum", [b], {"axis": [0], "keepdims": False})
    q = c.op("mul", [c.op("sub", [p1, p2]), 0.5])
    r = c.op("neg", [q])
    prog = c.flush()
    assert c.layout(r) == "partial(sum, [0, 1])" and not prog.moves["all_reduce"]
    s = c.op("exp", [r])  # not linear: combined first
    check(c, s)
    assert c.layout(r) == "repl([0, 1])"


# ----------------------------------------------------------------------------- reductions
@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_reductions_over_the_sharded_axis_combine_across_workers(name):
    c = client({"rows": {"shard": {"axis": 0}}}, n=3)
    x = c.upload(rand(8, 5))
    c.place(x, "rows")
    total = c.op(name, [x], {"axis": [0], "keepdims": False})
    per_row = c.op(name, [x], {"axis": [1], "keepdims": True})
    everything = c.op(name, [x])
    c.flush()
    assert c.layout(total) == f"partial({name}, [0, 1, 2])"
    assert c.layout(per_row) == "shard(axis=0, [0, 1, 2], [3, 3, 2])"
    for t in (total, per_row, everything):
        check(c, t)


@pytest.mark.parametrize("name", ["cumsum", "log_softmax", "cumprod", "argsort"])
def test_ops_along_an_axis_run_per_shard_unless_it_is_the_sharded_axis(name):
    c = client({"rows": {"shard": {"axis": 0}}}, n=2)
    x = c.upload(rand(6, 5))
    c.place(x, "rows")
    c.flush()
    across = c.op(name, [x], {"axis": 1})  # each worker has whole rows
    prog = c.flush()
    assert c.layout(across) == "shard(axis=0, [0, 1], [3, 3])" and not prog.moves
    down = c.op(name, [x], {"axis": 0})  # needs whole columns: the blocks are joined first
    prog = c.flush()
    assert prog.moves["gather"] + prog.moves["all_gather"] == 1
    check(c, across)
    check(c, down)


def test_argmax_over_the_sharded_axis_needs_the_whole_axis():
    c = client({"rows": {"shard": {"axis": 0}}}, n=2)
    x = c.upload(rand(6, 3))
    c.place(x, "rows")
    i = c.op("argmax", [x], {"axis": 0, "keepdims": False})
    j = c.op("argmax", [x], {"axis": 1, "keepdims": False})
    c.flush()
    assert c.layout(i).startswith(("local", "repl")) and c.layout(j).startswith("shard(axis=0")
    check(c, i)
    check(c, j)


# ----------------------------------------------------------------------------- shape ops
def test_reshape_transpose_expand_and_slices_keep_the_sharding_where_the_layout_allows():
    c = client({"rows": {"shard": {"axis": 0}}}, n=2)
    x = c.upload(rand(6, 4))
    c.place(x, "rows")
    c.flush()
    flat = c.op("reshape", [x], {"shape": [24]})
    back = c.op("reshape", [flat], {"shape": [6, 2, 2]})
    t = c.op("transpose", [back], {"perm": [2, 0, 1]})
    e = c.op("expand", [c.op("reshape", [x], {"shape": [1, 6, 4]})], {"shape": [3, 6, 4]})
    s = c.op("getitem", [x], {"key": [["s", None, None, None], ["s", 1, 3, None]]})
    prog = c.flush()
    assert not prog.moves
    assert c.layout(flat) == "shard(axis=0, [0, 1], [12, 12])"
    assert c.layout(t) == "shard(axis=1, [0, 1], [3, 3])"
    assert c.layout(e) == "shard(axis=1, [0, 1], [3, 3])"
    assert c.layout(s) == "shard(axis=0, [0, 1], [3, 3])"
    for v in (flat, back, t, e, s):
        check(c, v)


def test_a_layout_that_does_not_survive_a_reshape_is_re_laid_out_explicitly():
    c = client({"cols": {"shard": {"axis": 1}}}, n=2)
    x = c.upload(rand(3, 4))
    c.place(x, "cols")
    r = c.op("reshape", [x], {"shape": [12]})  # columns do not stay blocks
    i = c.op("getitem", [x], {"key": [["i", 1]]})  # takes one row: every block is needed
    prog = c.flush()
    assert sum(prog.moves.values()) >= 1
    check(c, r)
    check(c, i)


def test_slices_and_ints_along_the_sharded_axis_index_each_block():
    c = client({"rows": {"shard": {"axis": 0}}}, n=3)
    x = c.upload(rand(8, 4))
    c.place(x, "rows")
    c.flush()
    mid = c.op("getitem", [x], {"key": [["s", 2, 7, None]]})
    tail = c.op("getitem", [x], {"key": [["s", -3, None, None], ["i", 1]]})
    one = c.op("getitem", [x], {"key": [["i", -1], ["s", 1, 3, None]]})
    inner = c.op("getitem", [x], {"key": [["s", 3, 5, None]]})
    prog = c.flush()
    assert not prog.moves
    assert c.layout(mid) == "shard(axis=0, [0, 1, 2], [1, 3, 1])"
    assert c.layout(tail) == "shard(axis=0, [1, 2], [1, 2])"
    assert c.layout(one) == "local(2)" and c.layout(inner) == "local(1)"
    for t in (mid, tail, one, inner):
        check(c, t)
    strided = c.op("getitem", [x], {"key": [["s", 0, 8, 2]]})  # a step: the blocks are gathered
    assert c.flush().moves
    check(c, strided)


def test_concat_along_another_axis_keeps_the_sharding():
    c = client({"rows": {"shard": {"axis": 0}}}, n=2)
    a, b = c.upload(rand(4, 2)), c.upload(rand(4, 3))
    c.place(a, "rows")
    c.place(b, "rows")
    out = c.op("concat", [a, b], {"axis": 1})
    c.flush()
    assert c.layout(out) == "shard(axis=0, [0, 1], [2, 2])"
    check(c, out)


# ----------------------------------------------------------------------------- creation and frees
def test_sharded_random_tensors_have_the_values_of_an_unsharded_one():
    c = client({"rows": {"shard": {"axis": 0}}}, n=3)
    attrs = {"shape": [5, 2], "dtype": "float32", "seed": 7}
    r = c.op("randn", [], attrs, sig="rows")
    z = c.op("full", [1.5], {"shape": [5, 2], "dtype": "float32"}, sig="rows")
    c.flush()
    assert c.layout(r) == c.layout(z) == "shard(axis=0, [0, 1, 2], [2, 2, 1])"
    check(c, r)
    check(c, z)


def test_frees_reach_every_worker_that_holds_a_part():
    c = client({"rows": {"shard": {"axis": 0}}}, n=3)
    x = c.op("full", [1.0], {"shape": [6, 2], "dtype": "float32"}, sig="rows")
    c.flush()
    c.free(x)
    prog = c.flush()
    assert {w: ids for w, ids in prog.frees.items()} == {0: [x], 1: [x], 2: [x]}
    assert all(x not in tbl for tbl in c.sim.tables.values())


def test_frees_and_temporaries_are_dropped_where_the_program_no_longer_needs_them():
    # gradient steps over row-sharded data: each matmul's partial sums are combined in a
    # temporary, and the client drops last step's tensors as it goes (as Python frees them)
    c = client({"rows": {"shard": {"axis": 0}}, "w": {"replicate": {}}}, n=2)
    x = c.upload(rand(6, 4), sig="rows")
    w = c.upload(rand(4, 3), sig="w")
    c.flush()
    old = []
    for _ in range(3):
        err = c.op("matmul", [x, w], sig="rows")
        xt = c.op("transpose", [x], {"perm": [1, 0]}, sig="rows")
        g = c.op("matmul", [xt, err])
        w2 = c.op("sub", [w, g], sig="w")
        for t in old:
            c.free(t)
        old, w = [err, xt, g, w], w2
    prog = c.flush()
    check(c, w)
    for wid, ids in prog.frees.items():
        ends = len(prog.parts.get(wid, ()))
        at = dict(zip(ids, prog.free_at[wid]))
        temps = [t for t in ids if t < 0]
        # one step's temporaries go when its matmul has run, not when the batch ends
        assert len({at[t] for t in temps}) >= 3, (wid, at, ends)
        assert any(at[t] < ends for t in ids if t > 0), (wid, at, ends)  # the client's, in place
    assert sum(len(t) for t in c.sim.tables.values()) <= 2 * 6  # no step's leftovers pile up


def test_auto_shard_splits_large_new_tensors_on_axis_0():
    c = client({"auto_shard": True, "auto_shard_min_bytes": 1000}, n=2)
    big = c.op("full", [2.0], {"shape": [300, 2], "dtype": "float32"})
    small = c.op("full", [2.0], {"shape": [3, 2], "dtype": "float32"})
    c.flush()
    assert c.layout(big) == "shard(axis=0, [0, 1], [150, 150])"
    assert c.layout(small) == "local(0)"
    check(c, c.op("sum", [big]))


def test_pipeline_stages_move_activations_by_send_and_recv():
    c = client({"s1": {"workers": [0]}, "s2": {"workers": [1]}}, n=2)
    x, w1, w2 = c.upload(rand(4, 3)), c.upload(rand(3, 3)), c.upload(rand(3, 2))
    c.place(w1, "s1")
    c.place(w2, "s2")
    h = c.op("relu", [c.op("matmul", [x, w1], sig="s1")], sig="s1")
    y = c.op("matmul", [h, w2], sig="s2")
    prog = c.flush()
    assert c.layout(h) == "local(0)" and c.layout(y) == "local(1)"
    assert set(prog.moves) == {"send"}
    check(c, y)


def test_bad_rules_and_axes_are_reported_not_silently_ignored():
    c = client({"deep": {"shard": {"axis": 3}}}, n=2)
    x = c.upload(rand(4, 2))
    c.place(x, "deep")
    prog = c.flush()
    assert "axis 3 is out of range" in prog.errors[0][0]
    with pytest.raises(ConfigError, match="worker 5 does not exist"):
        Placement().apply_config({"a": {"replicate": {"workers": [0, 5]}}}, [0, 1])


# ----------------------------------------------------------------------------- re-layouts
def _layouts(shape: tuple[int, ...]) -> list[Layout]:
    out = [
        local(0),
        local(2),
        repl((0, 1)),
        repl((0, 1, 2)),
        repl((1, 2)),
        partial((0, 1, 2)),
        partial((1, 2)),
    ]
    for axis in range(len(shape)):
        out.append(shard(axis, (0, 1, 2), (3, 2, 1) if shape[axis] == 6 else (2, 1, 1)))
        out.append(shard(axis, (2, 0), (shape[axis] - 2, 2)))
    return out


@pytest.mark.parametrize("have,want", list(itertools.product(_layouts((6, 4)), _layouts((6, 4)))))
@pytest.mark.parametrize("in_place", [False, True])
def test_every_re_layout_preserves_the_value(have, want, in_place):
    if want.kind == PARTIAL:
        return  # nothing asks for partial sums
    value = rand(6, 4)
    sim = Sim(3)
    for i, w in enumerate(have.workers):  # lay the value out as `have`
        if have.kind in (LOCAL, REPL):
            sim.tables[w][7] = value.copy()
        elif have.kind == SHARD:
            sl = [slice(None)] * 2
            sl[have.axis] = slice(have.starts()[i], have.starts()[i] + have.sizes[i])
            sim.tables[w][7] = value[tuple(sl)].copy()
        else:
            sim.tables[w][7] = value / len(have.workers)
    prog = Program()
    lay, ids = R.move(prog, 7, have, want, value.nbytes, 0, in_place)
    sim.run(prog, [])
    for i, w in enumerate(want.workers):
        got = sim.tables[w][ids[w]]
        if want.kind == SHARD:
            sl = [slice(None)] * 2
            sl[want.axis] = slice(want.starts()[i], want.starts()[i] + want.sizes[i])
            np.testing.assert_allclose(got, value[tuple(sl)], rtol=1e-6)
        else:
            np.testing.assert_allclose(got, value, rtol=1e-5)
    if in_place:
        assert all(ids[w] == 7 for w in want.workers)
        stale = [w for w in range(3) if 7 in sim.tables[w] and w not in lay.workers]
        assert stale == []
    assert R.cost(have, want, value.nbytes) >= 0


def test_costs_prefer_cheaper_collectives():
    nb = 1 << 20
    p = partial((0, 1))
    assert R.cost(p, shard(0, (0, 1), (4, 4)), nb) < R.cost(p, repl((0, 1)), nb)
    assert R.cost(repl((0, 1)), shard(0, (0, 1), (4, 4)), nb) < R.cost(
        local(0), shard(0, (0, 1), (4, 4)), nb
    )
    assert R.cost(local(0), local(0), nb) == 0 == R.cost(repl((0, 1)), local(1), nb)


def test_opcodes_of_the_planner_exist():
    assert {"send", "recv", "all_reduce", "free", "chunk"} <= {k for k in OP}


def test_gradient_ops_follow_the_backward_signal():
    from gt.config import validate
    from gt.runtime.sharding.special import rule_for

    sigs = validate({"l2": {"workers": [1], "backward": "l2b"}, "l2b": {"workers": [0]}, "l3": {}})[
        "signals"
    ]
    assert rule_for(sigs, ("l2", None, False))[0] == "l2"
    assert rule_for(sigs, ("l2", None, True))[0] == "l2b"  # the config's backward entry
    assert rule_for(sigs, ("l2", "l3", True))[0] == "l3"  # the context's backward= wins
    assert rule_for(sigs, ("l3", None, True)) == (None, None)  # gradients follow their inputs
    c = client({"l2": {"workers": [1], "backward": "l2b"}, "l2b": {"workers": [0]}}, n=2, home=1)
    x = c.upload(rand(3, 3))
    c.signals.append([9, "l2", None, True])
    y = c.op("exp", [x])
    c.instrs[-1].append(9)
    fwd = c.op("exp", [x], sig="l2")
    c.flush()
    assert c.layout(y) == "local(0)" and c.layout(fwd) == "local(1)"
