"""Custom autograd functions as research code writes them: a straight-through estimator, a gradient
reversal layer, PyTorch's documented ``LinearFunction``, several outputs with a non-differentiable
one, the ``setup_context`` style with a second derivative."""

from __future__ import annotations

from programs import program
from programs.common import arr, grads, ints, set_weights


@program
def straight_through_binarized_net(torch):
    class BinarizeSTE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sign(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x.abs() <= 1).to(g.dtype)  # pass the gradient inside [-1, 1]

    nn = torch.nn
    l1, l2 = (
        set_weights(torch, nn.Linear(6, 8), seed=1),
        set_weights(torch, nn.Linear(8, 3), seed=2),
    )
    opt = torch.optim.SGD([*l1.parameters(), *l2.parameters()], lr=0.1)
    x, y = torch.tensor(arr(3, 10, 6)), torch.tensor(ints(4, 3, 10))
    losses = []
    for _ in range(3):
        h = BinarizeSTE.apply(l1(x))
        loss = nn.functional.cross_entropy(l2(h), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "h_grad_fn": type(h.grad_fn).__name__ != "NoneType", **grads(l1)}


@program
def gradient_reversal_domain_adaptation(torch):
    class GradReverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            ctx.alpha = alpha
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return -ctx.alpha * g, None

    nn = torch.nn
    feat = set_weights(torch, nn.Linear(4, 5), seed=5)
    label_head = set_weights(torch, nn.Linear(5, 2), seed=6)
    domain_head = set_weights(torch, nn.Linear(5, 2), seed=7)
    x = torch.tensor(arr(8, 6, 4))
    f = torch.relu(feat(x))
    task = nn.functional.cross_entropy(label_head(f), torch.tensor(ints(9, 2, 6)))
    dom = nn.functional.cross_entropy(
        domain_head(GradReverse.apply(f, 0.5)), torch.tensor(ints(10, 2, 6))
    )
    (task + dom).backward()
    return {"task": task, "dom": dom, **grads(feat), "domain_w": domain_head.weight.grad}


@program
def documented_linear_function(torch):
    class LinearFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, weight, bias=None):
            ctx.save_for_backward(input, weight, bias)
            output = input.mm(weight.t())
            if bias is not None:
                output += bias.unsqueeze(0).expand_as(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            grad_input = grad_weight = grad_bias = None
            if ctx.needs_input_grad[0]:
                grad_input = grad_output.mm(weight)
            if ctx.needs_input_grad[1]:
                grad_weight = grad_output.t().mm(input)
            if bias is not None and ctx.needs_input_grad[2]:
                grad_bias = grad_output.sum(0)
            return grad_input, grad_weight, grad_bias

    x = torch.tensor(arr(11, 5, 3), requires_grad=True)
    w = torch.tensor(arr(12, 4, 3), requires_grad=True)
    b = torch.tensor(arr(13, 4), requires_grad=True)
    out = LinearFunction.apply(x, w, b)
    (out.tanh() ** 2).sum().backward()
    no_bias = LinearFunction.apply(x.detach(), w)  # only w wants a gradient here
    no_bias.sum().backward()
    return {"out": out, "x_grad": x.grad, "w_grad": w.grad, "b_grad": b.grad}


@program
def several_outputs_one_without_gradient(torch):
    class MinMax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            lo, hi = x.min(dim=1), x.max(dim=1)
            ctx.save_for_backward(lo.indices, hi.indices)
            ctx.mark_non_differentiable(hi.indices)
            ctx.set_materialize_grads(False)
            ctx.width = x.shape[1]
            return lo.values, hi.values, hi.indices

        @staticmethod
        def backward(ctx, g_lo, g_hi, g_idx):
            lo_i, hi_i = ctx.saved_tensors
            n = ctx.width
            out = 0
            if g_lo is not None:
                out = out + torch.nn.functional.one_hot(lo_i, n).to(g_lo.dtype) * g_lo[:, None]
            if g_hi is not None:
                out = out + torch.nn.functional.one_hot(hi_i, n).to(g_hi.dtype) * g_hi[:, None]
            return out

    x = torch.tensor(arr(14, 3, 5), requires_grad=True)
    lo, hi, idx = MinMax.apply(x)
    (hi * 2).sum().backward()  # lo's gradient never arrives: None, as materialize is off
    only_hi = x.grad.clone()
    x.grad = None
    lo, hi, idx = MinMax.apply(x)
    (lo * 3 + hi).sum().backward()
    return {"only_hi": only_hi, "both": x.grad, "idx": idx, "idx_rg": idx.requires_grad}


@program(rtol=1e-3, atol=1e-5)
def setup_context_style_and_second_derivative(torch):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x**3

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x**2 * g

    x = torch.tensor(arr(15, 4), requires_grad=True)
    y = Cube.apply(x).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    return {"y": y, "g": g, "h": h}
