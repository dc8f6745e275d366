"""gt.testing, gt.jit, gt.compile and gt.profiler on a real cluster."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def _message(a, b, **kw) -> str:
    with pytest.raises(AssertionError) as info:
        gt.testing.assert_close(a, b, **kw)
    return str(info.value)


def test_assert_close_reports_mismatches_like_pytorch(conn):
    msg = _message(gt.tensor([1.0, 2.0, 3.0]), gt.tensor([1.0, 2.5, 3.1]))
    assert msg == (
        "Tensor-likes are not close!\n\nMismatched elements: 2 / 3 (66.7%)\n"
        "Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.20000000298023224 at index (1,) (up to 1.3e-06 allowed)"
    )
    assert "Tensor-likes are not equal!" in _message(gt.tensor([1, 2]), gt.tensor([1, 3]))
    assert "'dtype' do not match" in _message(gt.ones(2), gt.ones(2, dtype=gt.float64))
    assert "'shape' do not match" in _message(gt.ones(2), gt.ones(3))
    assert _message({"a": gt.ones(2)}, {"a": gt.zeros(2)}).endswith("item ['a']")
    assert _message(gt.ones(2), gt.zeros(2), msg="mine") == "mine"
    assert _message(1.0, 1.1).startswith("Scalars are not close!\n\nExpected 1.1 but got 1.0.")


def test_assert_close_default_tolerances_by_dtype(conn):
    a = gt.tensor(np.linspace(1, 2, 5, dtype=np.float32))
    gt.testing.assert_close(a, a + 1e-6)
    _message(a, a + 1e-3)
    d = gt.tensor(np.linspace(1, 2, 5))
    _message(d, d + 1e-6)
    h = a.half()
    gt.testing.assert_close(h, (a * (1 + 2e-4)).half())
    gt.testing.assert_close(a, d, check_dtype=False)
    nan = gt.tensor([float("nan")])
    _message(nan, nan)
    gt.testing.assert_close(nan, nan, equal_nan=True)
    gt.testing.assert_close([a, 2, {"k": True}], [a.clone(), 2, {"k": True}])
    with pytest.raises(TypeError):
        gt.testing.assert_close(a, [1.0])
    with pytest.raises(ValueError):
        gt.testing.assert_close(a, a, rtol=1e-3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        gt.testing.assert_allclose(gt.ones(2), [1.00001, 1.0])
    assert w and w[0].category is FutureWarning


def test_make_tensor_ranges_and_options(conn):
    f = gt.testing.make_tensor(50, 4, dtype=gt.float32, device="cpu").numpy()
    assert f.shape == (50, 4) and f.min() >= -9 and f.max() < 9
    i = gt.testing.make_tensor((200,), dtype=gt.int64, device="cpu", exclude_zero=True).numpy()
    assert i.min() >= -9 and i.max() < 10 and (i != 0).all()
    u = gt.testing.make_tensor(100, dtype=gt.uint8, device="cpu").numpy()
    assert u.min() >= 0 and u.max() < 10
    g = gt.testing.make_tensor(2, 3, dtype=gt.float64, device="cpu", noncontiguous=True,
                               low=0, high=1, requires_grad=True)  # fmt: skip
    assert g.shape == (2, 3) and g.requires_grad
    with pytest.raises(ValueError):
        gt.testing.make_tensor(2, dtype=gt.int32, device="cpu", requires_grad=True)


def test_jit_helpers_return_what_they_are_given(conn):
    def f(x):
        return x + 1

    model = gt.nn.Linear(2, 2)
    assert gt.jit.script(f) is f and gt.jit.trace(f, (gt.ones(2),)) is f
    assert gt.jit.script(model) is model and isinstance(model, gt.jit.ScriptModule)
    assert gt.jit.ignore(f) is f and gt.jit.ignore(drop=True)(f) is f
    assert gt.jit.unused(f) is f and gt.jit.export(f) is f
    assert not gt.jit.is_scripting() and not gt.jit.is_tracing()
    assert gt.jit.annotate(list, [1]) == [1]
    assert gt.jit.wait(gt.jit.fork(f, 1)) == 2
    with pytest.raises(NotImplementedError, match="gt.save"):
        gt.jit.save(model, "m.pt")
    with pytest.raises(NotImplementedError):
        gt.jit.load("m.pt")


def test_compile_replays_a_step_and_leaves_modules_eager(conn):
    model = gt.nn.Linear(3, 1)
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    x, y = gt.tensor(np.ones((4, 3), np.float32)), gt.tensor(np.zeros((4, 1), np.float32))

    @gt.compile(mode="max-autotune")
    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    losses = [step(x, y).item() for _ in range(6)]
    assert all(b < a for a, b in zip(losses, losses[1:]))
    assert [s["state"] for s in step.state.values()] == ["replaying"]
    assert gt.compile(model) is model
    assert gt.compile(step.fn, disable=True) is step.fn
    fwd = gt.compile(lambda v: model(v))
    for _ in range(4):  # a result with a graph: stays eager so backward works
        out = fwd(x)
        out.sum().backward()
    assert fwd.eager_reason is not None and out.requires_grad
    assert gt.compiler.disable(step.fn) is step.fn and not gt.compiler.is_compiling()


def test_a_compiled_forward_keeps_its_graph_whenever_gradients_appear(conn):
    # (first called under no_grad, or with the model frozen, it was replayed detached later,
    # when gradients were wanted: backward() left every .grad None)
    gt.manual_seed(0)
    model = gt.nn.Linear(4, 2)
    x = gt.ones(3, 4)
    fwd = gt.compile(lambda v: model(v).relu().sum())
    with gt.no_grad():
        cold = [fwd(x).item() for _ in range(4)]
    out = fwd(x)
    out.backward()
    assert out.requires_grad and model.weight.grad is not None
    assert cold == [out.item()] * 4  # (the replays under no_grad: the same value)
    frozen = gt.compile(lambda v: model(v).sum())
    model.requires_grad_(False)
    for _ in range(4):
        frozen(x)
    model.requires_grad_(True)
    model.zero_grad()
    out = frozen(x)
    out.backward()
    assert model.weight.grad is not None and model.weight.grad.abs().sum().item() > 0


def test_profiler_records_blocks_by_schedule(conn):
    seen = []
    sched = gt.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    with gt.profiler.profile(activities=[gt.profiler.ProfilerActivity.CPU], schedule=sched,
                             on_trace_ready=lambda p: seen.append(p.step_num)) as prof:  # fmt: skip
        for _ in range(6):
            with gt.profiler.record_function("step"):
                gt.ones(3).sum()
            prof.step()
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["step"].count == 2 and seen == [4]  # as in PyTorch
    assert rows["step"].cpu_time_total >= 0 and "ProfilerStep#3" in rows
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
    assert "step" in table and "# of Calls" in table

    @gt.profiler.record_function("deco")
    def g():
        return 1

    with gt.profiler.profile() as p2:
        g()
        g()
    assert [(e.key, e.count) for e in p2.key_averages()] == [("deco", 2)]
