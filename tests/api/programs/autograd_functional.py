"""``torch.autograd.functional``: Jacobians, Hessians and the vector products, as physics-informed
and second-order methods use them (a tiny network's input Jacobian, a Newton step with the
Hessian of a loss, Gauss-Newton style products)."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr


@program(rtol=1e-6, atol=1e-8)
def jacobians_hessians_and_vector_products(torch):
    AF = torch.autograd.functional
    w1 = torch.tensor(arr(1, 3, 4).astype(np.float64))
    w2 = torch.tensor(arr(2, 4, 2).astype(np.float64))

    def net(x):
        return torch.tanh(x @ w1) @ w2

    def loss(a, b):
        return a.sin().sum() * b.sum() + (a * a).sum() * b.pow(3).sum()

    x = torch.tensor(arr(3, 5, 3).astype(np.float64))
    a = torch.tensor(arr(4, 3).astype(np.float64))
    b = torch.tensor(arr(5, 2).astype(np.float64))
    jac = AF.jacobian(net, x[:2])
    hes = AF.hessian(loss, (a, b))
    out_v, vjp = AF.vjp(net, x, torch.ones(5, 2, dtype=torch.float64))
    out_j, jvp = AF.jvp(net, x, torch.tensor(arr(6, 5, 3).astype(np.float64)))
    _, hvp = AF.hvp(
        loss, (a, b), (torch.ones(3, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    )
    _, vhp = AF.vhp(lambda t: loss(t, b), a, torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64))
    multi = AF.jacobian(lambda p, q: (p * q.sum(), (p * p).sum()), (a, b))

    def cubic(t):
        return (t.pow(3) * torch.arange(3.0, dtype=torch.float64)).sum() + (t * t).sum()

    h1 = AF.hessian(cubic, a)
    newton = a - torch.linalg.solve(h1, AF.jacobian(cubic, a))
    return {"jac": jac, "hes_aa": hes[0][0], "hes_ab": hes[0][1], "hes_bb": hes[1][1],
            "vjp": vjp, "out_v": out_v, "jvp": jvp, "out_j": out_j, "hvp_a": hvp[0], "hvp_b": hvp[1],
            "vhp": vhp, "multi_00": multi[0][0], "multi_01": multi[0][1], "multi_10": multi[1][0],
            "multi_11": multi[1][1], "h1": h1, "newton": newton}  # fmt: skip
