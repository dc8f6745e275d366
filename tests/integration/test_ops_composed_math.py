"""The inverse trigonometric and hyperbolic primitives, ``atan2``, ``fmod``, ``signbit``,
``gcd``/``lcm``, and the functions composed from primitives (``gt/ops/composed.py``) through a
real local cluster, against NumPy. Every test runs on NumPy workers and on workers whose CuPy is
the test double; derivatives are checked in ``test_autograd_ops.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt
from gt.errors import ShapeError

pytestmark = pytest.mark.timeout(120)
rng = np.random.default_rng(5)


cluster = each_backend_cluster()


def _close(t, want, **kw):
    np.testing.assert_allclose(t.numpy(), want, **{"rtol": 1e-6, "atol": 1e-7, **kw})


def test_inverse_trig_and_hyperbolic_match_numpy_with_aliases(conn):
    a = rng.uniform(-0.95, 0.95, (3, 4))
    x = gt.tensor(a, dtype="float64")
    for name, alias, fn, arg in [("asin", "arcsin", np.arcsin, a), ("acos", "arccos", np.arccos, a),
                                 ("atan", "arctan", np.arctan, a * 9), ("asinh", "arcsinh", np.arcsinh, a * 9),
                                 ("acosh", "arccosh", np.arccosh, np.abs(a) + 1.5),
                                 ("atanh", "arctanh", np.arctanh, a)]:  # fmt: skip
        t = gt.tensor(arg, dtype="float64")
        _close(getattr(t, name)(), fn(arg))
        _close(getattr(gt, alias)(t), fn(arg))
    assert gt.tensor([1, 2]).atan().dtype == "float32"
    out = x.asin().numpy()
    assert np.isnan(gt.tensor([2.0]).asin().numpy()).all() and out.shape == (3, 4)


def test_atan2_fmod_signbit_gcd_lcm(conn):
    y, x = rng.standard_normal((2, 3)), rng.standard_normal((3,))
    _close(gt.atan2(gt.tensor(y), gt.tensor(x)), np.arctan2(y, x).astype(np.float32), rtol=1e-5)
    _close(gt.tensor([0, 1]).arctan2(gt.tensor([-1, 0])), [math.pi, math.pi / 2], rtol=1e-6)
    a = np.array([-7.5, 7.5, -3.0, 5.0])
    _close(gt.fmod(gt.tensor(a), 2.0), np.fmod(a, 2.0))
    _close(gt.tensor(a).fmod(gt.tensor([-2.0, -2.0, 2.0, 3.0])), np.fmod(a, [-2.0, -2.0, 2.0, 3.0]))
    assert gt.fmod(gt.tensor([-7, 7]), 3).numpy().tolist() == [-1, 1]
    assert gt.tensor([-0.0, 0.0, -2.0, math.inf]).signbit().numpy().tolist() == [
        True,
        False,
        True,
        False,
    ]
    i, j = np.array([12, 18, 0, -4]), np.array([8, 27, 5, 6])
    assert gt.gcd(gt.tensor(i), gt.tensor(j)).numpy().tolist() == np.gcd(i, j).tolist()
    assert gt.tensor(i).lcm(gt.tensor(j)).numpy().tolist() == np.lcm(i, j).tolist()
    with pytest.raises(TypeError, match="integer"):
        gt.gcd(gt.tensor([1.0]), gt.tensor([2.0]))


def test_elementwise_compositions(conn):
    a, b = rng.standard_normal(5), rng.standard_normal(5)
    ta, tb = gt.tensor(a, dtype="float64"), gt.tensor(b, dtype="float64")
    _close(gt.hypot(ta, tb), np.hypot(a, b))
    _close(ta.copysign(tb), np.copysign(a, b))
    _close(ta.copysign(-0.0), -np.abs(a))
    assert gt.tensor([1.0, 2.0]).copysign(gt.tensor([-0.0, 0.0])).numpy().tolist() == [-1.0, 2.0]
    _close(ta.logaddexp2(tb), np.logaddexp2(a, b))
    _close(gt.deg2rad(gt.tensor([180, 90])), [math.pi, math.pi / 2])
    _close(gt.tensor([math.pi]).rad2deg(), [180.0], rtol=1e-6)
    _close(gt.heaviside(gt.tensor([-1.0, 0.0, 2.0]), gt.tensor([0.5])), [0.0, 0.5, 1.0])
    fp = gt.float_power(gt.tensor([2.0, 3.0]), 2)
    assert fp.dtype == "float64" and fp.numpy().tolist() == [4.0, 9.0]
    _close(gt.ldexp(gt.tensor([1.0, 3.0]), gt.tensor([3, -1])), [8.0, 1.5])
    z = np.array([np.nan, np.inf, -np.inf, 1.5], dtype=np.float32)
    _close(gt.nan_to_num(gt.tensor(z)), np.nan_to_num(z), rtol=0)
    _close(gt.tensor(z).nan_to_num(nan=1.0, posinf=2.0, neginf=-2.0), [1.0, 2.0, -2.0, 1.5])
    assert gt.tensor(z).isposinf().numpy().tolist() == [False, True, False, False]
    assert gt.tensor(z).isneginf().numpy().tolist() == [False, False, True, False]
    _close(gt.erfc(gt.tensor([0.0, 1.0])), [1.0, math.erfc(1.0)])
    _close(gt.tensor([0.0, 0.5]).sinc(), [1.0, math.sin(math.pi / 2) / (math.pi / 2)])
    assert gt.sgn(gt.tensor([-2.0, 0.0, 3.0])).numpy().tolist() == [-1.0, 0.0, 1.0]


def test_along_a_dimension(conn):
    a = rng.standard_normal((3, 6))
    t = gt.tensor(a, dtype="float64")
    _close(t.diff(), np.diff(a))
    _close(gt.diff(t, n=2, dim=0), np.diff(a, n=2, axis=0))
    pre, app = rng.standard_normal((3, 1)), rng.standard_normal((3, 2))
    _close(t.diff(prepend=gt.tensor(pre, dtype="float64"), append=gt.tensor(app, dtype="float64")),
           np.diff(a, prepend=pre, append=app))  # fmt: skip
    bools = gt.tensor([True, True, False]).diff().numpy().tolist()
    assert bools == [False, True]
    xs = np.sort(rng.uniform(0, 3, 6))
    _close(gt.trapezoid(t), np.trapezoid(a) if hasattr(np, "trapezoid") else np.trapz(a))
    trap = np.trapezoid if hasattr(np, "trapezoid") else np.trapz
    _close(gt.trapezoid(t, gt.tensor(xs, dtype="float64")), trap(a, xs))
    _close(gt.trapz(t, dx=0.5, dim=0), trap(a, dx=0.5, axis=0))
    steps = np.cumsum((a[:, 1:] + a[:, :-1]) * np.diff(xs) / 2, axis=1)
    _close(gt.cumulative_trapezoid(t, gt.tensor(xs, dtype="float64")), steps)
    n = a.copy()
    n[0, 2] = n[1, :] = np.nan
    tn = gt.tensor(n, dtype="float64")
    _close(tn.nansum(), np.nansum(n))
    _close(gt.nansum(tn, 1), np.nansum(n, 1))
    got = tn.nanmean(1).numpy()
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanmean(n, 1)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_arrays(conn):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 2, 2))
    _close(gt.kron(gt.tensor(a, dtype="float64"), gt.tensor(b, dtype="float64")), np.kron(a, b))
    v = rng.standard_normal((2, 3))
    tv = gt.tensor(v, dtype="float64")
    for off in (0, 1, -2):
        want = np.stack([np.diag(r, off) for r in v])
        _close(tv.diag_embed(off), want)
    moved = tv.diag_embed(dim1=0, dim2=2).numpy()
    assert moved.shape == (3, 2, 3)
    np.testing.assert_allclose(moved[:, 1, :], np.diag(v[1]))
    c = rng.standard_normal((2, 3, 4))
    tc = gt.tensor(c, dtype="float64")
    for k in (1, 2, 3, -1, 4):
        _close(tc.rot90(k, (1, 2)), np.rot90(c, k, axes=(1, 2)))
    _close(gt.inner(gt.tensor(a, dtype="float64"), gt.tensor(a, dtype="float64")), np.inner(a, a))
    _close(gt.tile(gt.tensor(a), (2,)), np.tile(a.astype(np.float32), (2,)))
    _close(gt.tensor(a).tile(2, 1, 2), np.tile(a.astype(np.float32), (2, 1, 2)))
    _close(gt.movedim(tc, 0, -1), np.moveaxis(c, 0, -1))
    _close(tc.moveaxis((0, 1), (2, 0)), np.moveaxis(c, (0, 1), (2, 0)))
    bd = gt.block_diag(gt.tensor(2.0), gt.tensor([1.0, 2.0]), gt.tensor(np.ones((2, 2)))).numpy()
    want = np.zeros((4, 5))
    want[0, 0], want[1, 1:3], want[2:, 3:] = 2.0, [1.0, 2.0], 1.0
    np.testing.assert_array_equal(bd, want)
    assert gt.atleast_1d(gt.tensor(1.0)).shape == (1,)
    assert [t.shape for t in gt.atleast_2d(gt.tensor(1.0), gt.tensor([1.0, 2.0]))] == [
        (1, 1),
        (1, 2),
    ]
    assert gt.atleast_3d(gt.tensor([1.0, 2.0])).shape == (1, 2, 1)
    assert gt.atleast_3d(gt.tensor(np.ones((2, 3)))).shape == (2, 3, 1)
    u, w = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    _close(gt.cross(gt.tensor(u, dtype="float64"), gt.tensor(w, dtype="float64")), np.cross(u, w))
    with pytest.raises(ValueError, match="rotation dims"):
        tc.rot90(1, (1, 1))


def test_statistics(conn):
    x = rng.standard_normal((3, 7))
    t = gt.tensor(x, dtype="float64")
    _close(t.cov(), np.cov(x))
    _close(gt.cov(t, correction=0), np.cov(x, ddof=0))
    fw, aw = rng.integers(1, 4, 7), rng.uniform(0.5, 2.0, 7)
    got = t.cov(fweights=gt.tensor(fw), aweights=gt.tensor(aw, dtype="float64"))
    _close(got, np.cov(x, fweights=fw, aweights=aw))
    _close(t.corrcoef(), np.corrcoef(x))
    _close(gt.tensor(x[0], dtype="float64").cov(), np.cov(x[0]))
    y = rng.standard_normal((3, 7))
    _close(gt.dist(t, gt.tensor(y, dtype="float64")), np.linalg.norm(x - y))
    _close(t.dist(gt.tensor(y, dtype="float64"), 1), np.abs(x - y).sum())
    ints = np.array([0, 3, 3, 1, 7])
    assert gt.bincount(gt.tensor(ints)).numpy().tolist() == np.bincount(ints).tolist()
    wts = rng.standard_normal(5)
    _close(gt.tensor(ints).bincount(gt.tensor(wts, dtype="float64"), minlength=10),
           np.bincount(ints, wts, minlength=10))  # fmt: skip
    with pytest.raises(RuntimeError, match="non-negative"):  # (PyTorch's type)
        gt.tensor([-1, 2]).bincount()
    h = rng.standard_normal(200).astype(np.float32)
    counts, _ = np.histogram(h, bins=10, range=(float(h.min()), float(h.max())))
    _close(gt.histc(gt.tensor(h), bins=10), counts.astype(np.float32))
    inside, _ = np.histogram(h, bins=4, range=(-1.0, 1.0))
    _close(gt.tensor(h).histc(4, -1.0, 1.0), inside.astype(np.float32))
    with pytest.raises(ShapeError):
        gt.tensor(np.ones((2, 2, 2))).cov()


def test_dtype_helpers_follow_pytorchs_rules():
    assert gt.promote_types("int32", "float16") == "float16"
    assert gt.promote_types("float32", "float64") == "float64"
    assert gt.promote_types("bool", "uint8") == "uint8"
    assert gt.can_cast("float32", "int32") is False and gt.can_cast("int32", "float32") is True
    assert gt.can_cast("int64", "bool") is False


def test_result_type_with_a_tensor(conn):
    assert gt.result_type(gt.tensor([1, 2]), 1.0) == "float32"
    assert (
        gt.result_type(gt.tensor([1.0], dtype="float64"), gt.tensor([1], dtype="int32"))
        == "float64"
    )


def test_running_extremes_and_logcumsumexp(conn):
    x = rng.integers(0, 4, (3, 7)).astype(np.float64)
    x[1, 2] = x[1, 5] = np.nan

    def reference(row, smallest):  # PyTorch's rule: ties take the later index; NaN sticks
        best, where, out = None, 0, []
        for i, v in enumerate(row):
            if best is None:
                best, where, out = v, i, [i]
                continue
            better = v <= best if smallest else v >= best
            if not np.isnan(best) and (np.isnan(v) or better):
                best, where = v, i
            out.append(where)
        return out

    for name, smallest in (("cummax", False), ("cummin", True)):
        values, indices = getattr(gt.tensor(x), name)(1)
        want = np.array([reference(r, smallest) for r in x])
        np.testing.assert_array_equal(indices.numpy(), want)
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, want, 1))
    ints = gt.tensor([[3, 1, 3], [0, 5, 2]])
    assert gt.cummax(ints, 0).indices.numpy().tolist() == [[0, 0, 0], [0, 1, 0]]
    assert ints.cummin(1).values.numpy().tolist() == [[3, 1, 1], [0, 0, 0]]
    big = rng.standard_normal((2, 9)) * 300
    got = gt.tensor(big, dtype="float64").logcumsumexp(1).numpy()
    np.testing.assert_allclose(got, np.logaddexp.accumulate(big, axis=1), rtol=1e-12)
    with pytest.raises(TypeError, match="floating point"):
        gt.tensor([1, 2]).logcumsumexp(0)


def test_mean_and_var_divide_by_the_count_as_pytorchs_cpu_kernels_do(conn):
    """0.2 * 6 summed in float32 is 1.2000000477; divided by 6 it rounds to float32's 0.2, but
    times float32(1/6) it rounds one ulp higher (PyTorch CPU: mean 0.2, std 0.0)."""
    x = np.full((3, 2), 0.2, np.float32)
    total = x.sum(dtype=np.float32)
    t = gt.tensor(x)
    assert t.mean().item() == float(total / np.float32(6)) == float(np.float32(0.2))
    assert t.mean(0).numpy().tolist() == [float(np.float32(0.2))] * 2
    assert t.std().item() == 0.0 and t.var(1, correction=0).numpy().tolist() == [0.0] * 3
    half = gt.tensor(x.astype(np.float16))
    assert half.mean().item() == float(np.float16(total / np.float32(6)))


def test_a_constant_column_has_a_std_of_exactly_zero_as_in_pytorch(conn):
    """PyTorch's var and std (Welford) give exactly 0 for constant data, and scalers rely on it
    (``std[std == 0] = 1``); a mean rounded an ulp off would leave 1e-8 and a column of noise."""
    x = np.full((7, 22), 0.1, np.float32)  # (7 rows: 0.1 * 7 / 7 is not 0.1 in float32)
    x[:, 1] = np.arange(7)
    t = gt.tensor(x)
    std = t.std(0)
    assert std[0].item() == 0.0 and std[1].item() > 1.0
    std[std == 0] = 1.0
    scaled = ((t - t.mean(0)) / std).numpy()
    assert np.abs(scaled[:, 0]).max() < 1e-7  # (x - mean) / 1: the mean's rounding only
    assert t.var(1)[0].item() != 0.0 and t.var().item() > 0.0
    assert gt.var_mean(t[:, 2:], 1)[0].numpy().tolist() == [0.0] * 7


def test_group_norm_of_constant_groups_is_exactly_zero(conn):
    x = np.full((3, 7, 1), 0.3, np.float32)
    assert not gt.nn.functional.group_norm(gt.tensor(x), 1).numpy().any()


def test_the_gradient_of_var_is_unchanged_by_centering_on_the_first_element(conn):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 9)).astype(np.float32)
    t = gt.tensor(x, requires_grad=True)
    t.var(1).sum().backward()
    want = 2.0 * (x - x.mean(1, keepdims=True)) / 8.0
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-5, atol=1e-6)
