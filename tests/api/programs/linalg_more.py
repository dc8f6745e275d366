"""The LU factorisation and what uses it (``lu_factor``, ``lu``, ``lu_solve``, ``lu_unpack``),
``matrix_exp`` (as continuous-time models and Lie-group layers use it), ``cond``, the tensor
solves, ``vander`` and the Cholesky solves, with gradients."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr


def _mats(seed: int, *shape: int) -> np.ndarray:
    return arr(seed, *shape).astype(np.float64)


@program(rtol=1e-6, atol=1e-8)
def lu_factorisation_and_solves_with_gradients(torch):
    la = torch.linalg
    a = torch.tensor(_mats(1, 2, 4, 4), requires_grad=True)
    b = torch.tensor(_mats(2, 2, 4, 3), requires_grad=True)
    lu, piv = la.lu_factor(a)
    p, low, up = la.lu(a)
    x = la.lu_solve(lu, piv, b)
    xt = la.lu_solve(lu, piv, b, adjoint=True)
    xr = la.lu_solve(lu, piv, b.mT, left=False)
    tall = torch.tensor(_mats(3, 5, 3), requires_grad=True)
    p2, l2, u2 = la.lu(tall)
    wide_lu, wide_piv, info = la.lu_factor_ex(torch.tensor(_mats(4, 3, 5)))
    unpacked = torch.lu_unpack(lu, piv)
    total = (x.sum() + xt.pow(2).sum() + xr.sum() + lu.sum() + low.sum() + up.pow(2).sum()
             + l2.sum() + u2.sum())  # fmt: skip
    total.backward()
    singular = la.lu_factor_ex(torch.tensor([[1.0, 2.0], [2.0, 4.0]]))
    return {"lu": lu, "pivots": piv, "P": p, "L": low, "U": up, "x": x, "xt": xt, "xr": xr,
            "p2": p2, "l2": l2, "u2": u2, "wide_lu": wide_lu, "wide_piv": wide_piv,
            "info": info, "unpacked_P": unpacked[0], "a_grad": a.grad, "b_grad": b.grad,
            "tall_grad": tall.grad, "singular_lu": singular.LU, "singular_info": singular.info,
            "old_lu": torch.lu(a.detach())[0],
            "old_solve": torch.lu_solve(b.detach(), lu.detach(), piv)}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def matrix_exp_cond_tensor_solves(torch):
    la = torch.linalg
    small = torch.tensor(_mats(5, 3, 3) * 0.3, requires_grad=True)
    big = torch.tensor(_mats(6, 2, 3, 3) * 4.0, requires_grad=True)
    gen = torch.tensor(_mats(7, 3, 3))
    skew = gen - gen.mT  # exp of a skew-symmetric matrix is a rotation
    rot = torch.matrix_exp(skew)
    e_small, e_big = la.matrix_exp(small), torch.linalg.matrix_exp(big)
    (e_small.sum() + e_big.pow(2).sum() * 1e-6).backward()
    m = torch.tensor(_mats(8, 2, 3, 3)) + 3 * torch.eye(3)
    spd = m @ m.mT
    low = torch.linalg.cholesky(spd)
    rhs = torch.tensor(_mats(9, 2, 3, 2))
    t = torch.tensor(_mats(10, 2, 3, 6)) + torch.eye(6).reshape(2, 3, 6)
    return {"exp_small": e_small, "exp_big": e_big, "rotation": rot,
            "orthogonal": rot @ rot.mT, "small_grad": small.grad, "big_grad": big.grad,
            "cond": la.cond(m), "cond_fro": la.cond(m, "fro"), "cond_1": la.cond(m, 1),
            "cond_m2": la.cond(m, -2), "solve_ex": la.solve_ex(m, rhs).result,
            "tensorinv": la.tensorinv(t, ind=2), "tensorsolve": la.tensorsolve(t, torch.ones(2, 3, dtype=torch.float64)),
            "vander": la.vander(torch.tensor([1.0, 2.0, 3.0])),
            "vander_top": torch.vander(torch.tensor([1.0, 2.0, 3.0]), N=4),
            "vander_inc": torch.vander(torch.tensor([2, 3]), increasing=True),
            "chol_solve": torch.cholesky_solve(rhs, low),
            "chol_solve_upper": torch.cholesky_solve(rhs, low.mT, upper=True),
            "chol_inv": torch.cholesky_inverse(low)}  # fmt: skip
