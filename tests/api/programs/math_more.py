"""The smaller math functions as programs use them: angles (``atan2``, inverse trig, ``hypot``),
integration (``trapezoid``, ``cumulative_trapezoid``), statistics (``cov``, ``corrcoef``,
``bincount``, ``histc``, the NaN-aware reductions), running extremes and ``logcumsumexp``, and
array helpers (``kron``, ``diag_embed``, ``rot90``, ``tile``, ``block_diag``, ``cross``)."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr


@program(rtol=1e-5, atol=1e-6)
def angles_and_elementwise_functions_with_gradients(torch):
    x = torch.tensor(np.linspace(-0.9, 0.9, 7), requires_grad=True)  # float64
    y = torch.tensor(arr(1, 7).astype(np.float64), requires_grad=True)
    out = {
        "asin": x.asin(), "acos": torch.acos(x), "atan": torch.arctan(x * 3),
        "asinh": x.asinh(), "acosh": (x.abs() + 1.5).acosh(), "atanh": torch.atanh(x),
        "atan2": torch.atan2(y, x), "hypot": torch.hypot(x, y), "fmod": torch.fmod(y * 4, 1.5),
        "copysign": torch.copysign(x, y), "logaddexp2": torch.logaddexp2(x, y),
        "deg2rad": torch.rad2deg(x).deg2rad(), "float_power": torch.float_power(x.abs(), 2.5),
        "ldexp": torch.ldexp(x, torch.tensor([1, 2, 3, 0, 1, 2, 4])),
        "erfc": torch.erfc(x), "sinc": torch.sinc(y), "xlogy": torch.xlogy(x.abs(), y.abs()),
    }  # fmt: skip
    total = sum(v.sum() for v in out.values())
    total.backward()
    nan = torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0])
    ints = torch.tensor([12, 18, -8, 0])
    return {**out, "x_grad": x.grad, "y_grad": y.grad, "nan_to_num": torch.nan_to_num(nan),
            "nan_to_num_args": nan.nan_to_num(0.5, 9.0, -9.0), "signbit": torch.signbit(y),
            "heaviside": torch.heaviside(y.detach(), torch.tensor([0.5], dtype=torch.float64)),
            "gcd": torch.gcd(ints, torch.tensor([8, 27, 6, 5])),
            "lcm": torch.lcm(ints, torch.tensor([8, 27, 6, 5])), "sgn": y.detach().sgn(),
            "isposinf": torch.isposinf(nan), "isneginf": nan.isneginf()}  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def integration_statistics_and_running_values(torch):
    t = torch.tensor(np.sort(arr(2, 9).astype(np.float64) * 3))
    f = torch.tensor(arr(3, 3, 9).astype(np.float64), requires_grad=True)
    stats = torch.tensor(arr(4, 4, 12).astype(np.float64), requires_grad=True)
    out = {
        "trapz": torch.trapezoid(f, t), "trapz_dx": torch.trapz(f, dx=0.25, dim=0),
        "cumtrapz": torch.cumulative_trapezoid(f, t), "diff": torch.diff(f, n=2, dim=1),
        "cov": torch.cov(stats), "corrcoef": torch.corrcoef(stats),
        "cov_weighted": torch.cov(stats, correction=0, fweights=torch.tensor([1, 2, 1, 3] * 3),
                                  aweights=torch.tensor(np.linspace(0.5, 2, 12))),
        "logcumsumexp": torch.logcumsumexp(f * 20, 1), "cummax": f.cummax(1).values,
        "cummin": torch.cummin(f, 0).values,
    }  # fmt: skip
    total = sum(v.sum() for v in out.values())
    total.backward()
    with_nan = torch.tensor([[1.0, float("nan"), 3.0], [float("nan"), float("nan"), 2.0]])
    counts = torch.tensor(np.array([0, 3, 3, 1, 7, 3]))
    return {**out, "f_grad": f.grad, "stats_grad": stats.grad,
            "cummax_idx": f.cummax(1).indices, "cummin_idx": torch.cummin(f, 0).indices,
            "nansum": with_nan.nansum(1), "nanmean": torch.nanmean(with_nan, 0),
            "bincount": torch.bincount(counts), "bincount_w": counts.bincount(
                torch.tensor(np.linspace(0, 1, 6)), minlength=9),
            "histc": torch.histc(f.detach(), bins=5), "histc_range": torch.histc(
                f.detach(), 4, -1.0, 1.0), "dist": torch.dist(f, f.detach() * 2, 3)}  # fmt: skip


@program
def array_helpers(torch):
    a = torch.tensor(arr(5, 2, 3), requires_grad=True)
    b = torch.tensor(arr(6, 3, 2))
    v = torch.tensor(arr(7, 2, 4), requires_grad=True)
    out = {
        "kron": torch.kron(a, b), "diag_embed": torch.diag_embed(v, offset=-1),
        "diag_embed_dims": v.diag_embed(1, dim1=0, dim2=2), "rot90": torch.rot90(a, 1, [0, 1]),
        "rot90_3": a.rot90(3), "tile": a.tile((2, 1, 2)), "inner": torch.inner(a, v[:, :3]),
        "block_diag": torch.block_diag(a, torch.tensor(2.0), v[0]),
        "cross": torch.cross(a, torch.tensor(arr(8, 2, 3)), dim=1),
        "movedim": torch.movedim(a.reshape(1, 2, 3), 0, 2),
    }  # fmt: skip
    total = sum(o.float().sum() for o in out.values())
    total.backward()
    return {**out, "a_grad": a.grad, "v_grad": v.grad,
            "atleast": [torch.atleast_3d(torch.tensor([1.0, 2.0])).shape],
            "promote": torch.promote_types(torch.int32, torch.float16) == torch.float16,
            "can_cast": torch.can_cast(torch.float32, torch.int32)}  # fmt: skip
