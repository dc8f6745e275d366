"""``torch.func`` as research code uses it: per-sample gradients (``vmap(grad(f))`` with
``functional_call``), a MAML-style inner step with ``grad``, Jacobians and Hessians with
``jacrev``/``jacfwd``/``hessian``, and ``vjp``/``jvp``."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, set_weights


@program(rtol=1e-5, atol=1e-7)
def per_sample_gradients_and_maml_step(torch):
    nn, F = torch.nn, torch.nn.functional
    fn = torch.func
    model = set_weights(torch, nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)), seed=5)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.tensor(arr(6, 5, 3)), torch.tensor(np.array([0, 1, 1, 0, 1]))

    def loss(p, xb, yb):
        out = fn.functional_call(model, p, (xb.unsqueeze(0),))
        return F.cross_entropy(out, yb.unsqueeze(0))

    per_sample = fn.vmap(fn.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    inner = fn.grad(lambda p: sum(loss(p, x[i], y[i]) for i in range(5)) / 5)(params)
    adapted = {k: params[k] - 0.1 * inner[k] for k in params}
    value_and_grad = fn.grad_and_value(lambda p: loss(p, x[0], y[0]))(params)
    out = {f"ps_{k}": v for k, v in per_sample.items()}
    out.update({f"adapted_{k}": v for k, v in adapted.items()})
    out["value"] = value_and_grad[1]
    out["mean_of_per_sample"] = per_sample["0.weight"].mean(0)
    return out


@program(rtol=1e-6, atol=1e-8)
def jacobians_hessians_vjp_jvp(torch):
    fn = torch.func
    w = torch.tensor(arr(7, 3, 2).astype(np.float64))

    def f(x, b):
        return torch.tanh(x @ w) * b.sum() + x.pow(2).sum()

    x = torch.tensor(arr(8, 3).astype(np.float64))
    b = torch.tensor(arr(9, 2).astype(np.float64))
    jr = fn.jacrev(f)(x, b)
    jf = fn.jacfwd(f, argnums=(0, 1))(x, b)
    h = fn.hessian(lambda t: (t.sin() * t).sum())(x)
    out, vjp_fn = fn.vjp(f, x, b)
    (vx, vb) = vjp_fn(torch.ones(2, dtype=torch.float64))
    _, tangent = fn.jvp(f, (x, b), (torch.ones(3, dtype=torch.float64), b))
    batched = fn.vmap(lambda r: r @ w, in_dims=1, out_dims=1)(
        torch.tensor(arr(10, 3, 4).astype(np.float64))
    )
    return {"jacrev": jr, "jacfwd_x": jf[0], "jacfwd_b": jf[1], "hessian": h, "out": out,
            "vjp_x": vx, "vjp_b": vb, "jvp": tangent,
            "second": fn.grad(lambda t: fn.grad(lambda s: s.pow(3).sum())(t).sum())(x),
            "batched": batched}  # fmt: skip


@program
def forward_ad_dual_tensors_jvp_and_forward_over_reverse(torch):
    """``torch.autograd.forward_ad`` as forward-gradient and Gauss-Newton code writes it: the JVP
    of a network along a direction, a directional derivative of a loss used as a "forward
    gradient" estimate, and a Hessian-vector product by forward-over-reverse."""
    fwAD = torch.autograd.forward_ad
    net = set_weights(torch, torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(),
                                                 torch.nn.Linear(6, 2)), seed=41)  # fmt: skip
    x = torch.tensor(arr(42, 5, 4))
    v = torch.tensor(arr(43, 5, 4))
    with fwAD.dual_level():
        out = net(fwAD.make_dual(x, v))
        y, jvp = fwAD.unpack_dual(out)
        params = {n: p.detach() for n, p in net.named_parameters()}
        tangents = {
            n: torch.tensor(arr(44 + i, *p.shape)) for i, (n, p) in enumerate(params.items())
        }
        duals = {n: fwAD.make_dual(p, tangents[n]) for n, p in params.items()}
        loss = torch.func.functional_call(net, duals, (x,)).pow(2).mean()
        directional = fwAD.unpack_dual(loss).tangent
        forward_grad = {n: directional * t for n, t in tangents.items()}
    w = torch.tensor(arr(50, 3), requires_grad=True)
    u = torch.tensor(arr(51, 3))

    def f(z):
        return (z.sin() * z.pow(2)).sum()

    with fwAD.dual_level():
        wd = fwAD.make_dual(w, u)
        (g,) = torch.autograd.grad(f(wd), wd, create_graph=True)
        g_primal, hvp = fwAD.unpack_dual(g)
    return {"y": y, "jvp": jvp, "directional": directional, "forward_grad": forward_grad,
            "hvp": hvp, "grad": g_primal}  # fmt: skip
