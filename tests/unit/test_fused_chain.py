"""A replayed step's chain of in-place updates as one elementwise kernel (CuPy workers): the
kernel's source does what the steps do, in their order and with their roundings, and the chain
falls back to its steps wherever they would not have written in place.

The real kernel is compiled by CuPy on a GPU (``tests/integration/test_gpu.py`` compares it with
the steps there). Here a stand-in factory runs the generated source with NumPy, statement by
statement, on arrays posing as device arrays: what is tested is the source and the plumbing; the
last test goes through a worker's own backend on the CuPy double, whose ``ElementwiseKernel``
interprets the source the same way.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from gt.runtime.worker.hot_chain import fused_source
from tests.unit.test_executor import ins
from tests.unit.test_hot_chain import BUF, P_, PLAN, G, arrays, replay

_OPS = {"*": np.multiply, "+": np.add, "-": np.subtract}


class Device(np.ndarray):
    """An array that is not a NumPy array by type, as a CuPy array is not."""


def on_device(a: np.ndarray) -> Device:
    d = Device(a.shape, a.dtype)  # (owns its memory: a view would never be written in place)
    d[...] = a
    return d


def interpreted(calls: list):
    """A kernel factory that runs a kernel's source with NumPy (``calls``: one entry a launch)."""

    def make(in_params: str, out_params: str, body: str, name: str):
        ins_ = [p.split() for p in in_params.split(", ")]
        outs = [p.split()[1] for p in out_params.split(", ")]
        dtype = np.dtype(ins_[0][0])

        def value(env: dict, x: str):
            return env[x] if type(env[x]) is np.ndarray else dtype.type(env[x])

        def launch(*args):
            calls.append(body)
            env = {n: (np.asarray(a).copy() if isinstance(a, np.ndarray) else a)
                   for (_t, n), a in zip(ins_, args)}  # fmt: skip
            out_arrays = dict(zip(outs, args[len(ins_) :]))
            for stmt in filter(None, (s.strip() for s in body.split(";"))):
                if m := re.fullmatch(r"(?:float|double) (v\d+) = (i\d+)", stmt):
                    env[m[1]] = env[m[2]].copy()
                elif m := re.fullmatch(r"(v\d+) = \1 \+ (\w+) \* \((?:float|double)\)(c\d+)", stmt):
                    env[m[1]] = env[m[1]] + value(env, m[2]) * dtype.type(env[m[3]])
                elif m := re.fullmatch(r"(v\d+) = \1 ([*+-]) (\w+)", stmt):
                    env[m[1]] = _OPS[m[2]](env[m[1]], value(env, m[3]))
                elif m := re.fullmatch(r"(o\d+) = (v\d+)", stmt):
                    out_arrays[m[1]][...] = env[m[2]]
                else:
                    raise AssertionError(f"a statement the kernel source should not hold: {stmt}")

        return launch

    return make


def fusing(monkeypatch, calls: list) -> None:
    """Executors made from here on fuse with :func:`interpreted` (as a CuPy worker's would)."""
    import tests.unit.test_hot_chain as H

    real = H.executor

    def made(*a, **k):
        ex = real(*a, **k)
        ex._fuse = interpreted(calls)
        return ex

    monkeypatch.setattr(H, "executor", made)


def test_the_source_of_sgds_update_reads_each_register_once_and_writes_each_target_once():
    ops = ((0, 2, 7, 0.0), (1, 2, 3, 0.0), (3, 1, 2, -0.01))  # buf*=m, buf+=g, p+=buf*-lr
    ins_, outs, body = fused_source(ops, (2, 1), (2, 7, 3, 1), frozenset({7}), ("float32", "float"))
    assert ins_ == "float32 i0, float32 s1, float32 a2, float32 i3, float64 c0"
    assert outs == "float32 o0, float32 o3"
    assert body == ("float v0 = i0; float v3 = i3; v0 = v0 * s1; v0 = v0 + a2; "
                    "v3 = v3 + v0 * (float)c0; o0 = v0; o3 = v3;")  # fmt: skip


def test_every_parameters_chain_and_every_learning_rate_share_one_kernel_source():
    # other registers (another parameter's update) and another alpha (a scheduled learning rate)
    a = fused_source(((0, 2, 7, 0.0), (3, 1, 2, -0.01)), (2, 1), (2, 7, 1), frozenset({7}),
                     ("float32", "float"))  # fmt: skip
    b = fused_source(((0, 12, 9, 0.0), (3, 4, 12, -0.5)), (12, 4), (12, 9, 4), frozenset({9}),
                     ("float32", "float"))  # fmt: skip
    assert a == b  # compiled once by CuPy


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_fused_sgd_step_equals_the_steps_bit_for_bit(monkeypatch, dtype):
    a = arrays(1000, dtype, seed=3)
    ex_steps, _ = replay(a, 3)  # NumPy, step by step (small: not blocked either)
    calls: list = []
    fusing(monkeypatch, calls)
    ex, _ = replay({k: on_device(v) for k, v in a.items()}, 3)
    assert len(calls) == 3  # one launch a replay
    assert ex.hot.fused_launches() == 3 and ex_steps.hot.fused_launches() == 0  # (its stats)
    for k in (P_, BUF):
        got, want = np.asarray(ex.tables[1][k]), ex_steps.tables[1][k]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_a_shared_target_is_updated_step_by_step_as_eagerly(monkeypatch):
    a = arrays(1000, seed=4)
    calls: list = []
    fusing(monkeypatch, calls)
    dev = {k: on_device(v) for k, v in a.items()}
    ex, _ = replay(dev, 1)
    held = ex.tables[1][BUF]  # someone else now holds the buffer: no step may write it in place
    before = np.asarray(held).copy()
    from tests.unit.test_hot_worker import run

    run(ex, [ins("hot", 0, [G], {"plan": PLAN["plan"], "outs": [], "seeds": []})])
    assert len(calls) == 1  # the second replay ran its steps instead
    assert np.asarray(held).tobytes() == before.tobytes()


def test_arrays_of_other_shapes_are_not_fused(monkeypatch):
    a = arrays(1000, seed=5)
    a[G] = a[G][:1].copy()  # a gradient that broadcasts
    calls: list = []
    fusing(monkeypatch, calls)
    ex_steps, _ = replay(a, 2)
    ex, _ = replay({k: on_device(v) for k, v in a.items()}, 2)
    assert calls == []
    assert np.asarray(ex.tables[1][P_]).tobytes() == ex_steps.tables[1][P_].tobytes()


def test_a_kernel_that_will_not_compile_leaves_the_steps_to_run(monkeypatch):
    a = arrays(1000, seed=6)
    ex_steps, _ = replay(a, 2)
    tried: list = []

    def broken(*_args):
        def launch(*_xs):
            tried.append(1)
            raise RuntimeError("NVRTC_ERROR_COMPILATION")

        return launch

    import tests.unit.test_hot_chain as H

    real = H.executor

    def made(*a_, **k):
        ex = real(*a_, **k)
        ex._fuse = broken
        return ex

    monkeypatch.setattr(H, "executor", made)
    ex, res = replay({k: on_device(v) for k, v in a.items()}, 2)
    assert tried == [1] and not res.errors  # tried once, then the steps; nothing failed
    assert np.asarray(ex.tables[1][P_]).tobytes() == ex_steps.tables[1][P_].tobytes()


def test_a_cupy_worker_on_the_double_fuses_its_replays_from_one_compiled_source():
    """The worker's own wiring (its backend's kernel factory, GT_FUSED_CHAINS unset) on the CuPy
    double, whose ElementwiseKernel interprets the source: one launch a replay, the steps' bits."""
    import sys
    from pathlib import Path

    from gt.runtime.worker.backend import Backend
    from gt.runtime.worker.executor import Executor
    from tests.unit.test_hot_worker import FakeIO, NoPeers, run

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
    import cupy_double as cp

    a = arrays(1000, seed=7)
    ex_steps, _ = replay(a, 3)
    be = Backend(cp, name="cupy", cupyx=cp.cupyx)
    ex = Executor(be, NoPeers(), FakeIO())
    run(ex, [ins("hot_define", 0, [], PLAN)])
    for k, v in a.items():
        ex.tables[1][k] = be.from_host(v.copy())
    for _ in range(3):
        run(ex, [ins("hot", 0, [G], {"plan": PLAN["plan"], "outs": [], "seeds": []})])
    assert ex.hot.fused_launches() == 3
    assert len(be._elementwise) == 1  # one source, compiled once
    for k in (P_, BUF):
        assert be.to_host(ex.tables[1][k]).tobytes() == ex_steps.tables[1][k].tobytes()
