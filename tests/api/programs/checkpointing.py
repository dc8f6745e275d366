"""Activation checkpointing as training code uses it: ``torch.utils.checkpoint.checkpoint`` around
the blocks of a model (both variants), ``checkpoint_sequential``, keyword and nested arguments,
``autograd.grad`` and a second derivative through a checkpoint, and the warnings and errors.
(No dropout: the two libraries draw different random numbers.)"""

from __future__ import annotations

import warnings

from programs import program
from programs.common import arr, grads, ints, set_weights


def _blocks(torch, n: int, width: int, seed: int):
    nn = torch.nn
    return [
        set_weights(torch, nn.Sequential(nn.Linear(width, width), nn.Tanh()), seed=seed + i)
        for i in range(n)
    ]


@program(rtol=1e-3, atol=1e-5)
def checkpointed_blocks_train_like_plain_ones(torch):
    F = torch.nn.functional
    ckpt = torch.utils.checkpoint.checkpoint
    out = {}
    for variant, reentrant in (("plain", None), ("nonreentrant", False), ("reentrant", True)):
        blocks = _blocks(torch, 4, 6, seed=10)
        head = set_weights(torch, torch.nn.Linear(6, 3), seed=20)
        params = [p for b in blocks for p in b.parameters()] + list(head.parameters())
        opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
        x = torch.tensor(arr(1, 8, 6))
        y = torch.tensor(ints(2, 3, 8))
        losses = []
        for _ in range(3):
            h = x.requires_grad_(True) if reentrant else x
            for b in blocks:
                h = b(h) if reentrant is None else ckpt(b, h, use_reentrant=reentrant)
            loss = F.cross_entropy(head(h), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out[variant] = {"losses": losses, **grads(blocks[0]), "head": head.weight}
    return out


@program(rtol=1e-3, atol=1e-5)
def checkpoint_sequential_segments(torch):
    nn = torch.nn
    seq = lambda: set_weights(  # noqa: E731
        torch,
        nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 7), nn.Sigmoid(),
                      nn.Linear(7, 4), nn.Tanh(), nn.Linear(4, 2)),
        seed=3,
    )  # fmt: skip
    out = {}
    for segments in (1, 2, 3):
        for reentrant in (False, True):
            model = seq()
            x = torch.tensor(arr(4, 6, 5), requires_grad=True)
            y = torch.utils.checkpoint.checkpoint_sequential(
                model, segments, x, use_reentrant=reentrant
            )
            (y**2).sum().backward()
            out[f"s{segments}_{reentrant}"] = {"y": y, "x_grad": x.grad, **grads(model)}
    model = seq()
    x = torch.tensor(arr(4, 6, 5), requires_grad=True)
    y = torch.utils.checkpoint.checkpoint_sequential(list(model), 2, x, use_reentrant=False)
    (y**2).sum().backward()
    out["list"] = {"y": y, "x_grad": x.grad}
    return out


@program
def nonreentrant_kwargs_nested_inputs_and_frozen_inputs(torch):
    nn = torch.nn
    enc = set_weights(torch, nn.Linear(4, 4), seed=5)
    mix = set_weights(torch, nn.Linear(4, 4), seed=6)

    def block(feats, scale=1.0, extra=None):
        a = torch.tanh(enc(feats["a"])) * scale
        b = mix(feats["b"] + extra[0])
        return {"sum": a + b, "pair": (a * b, torch.argmax(b, dim=1)), "n": 3}

    a = torch.tensor(arr(7, 5, 4))  # needs no gradient: the parameters still get theirs
    b = torch.tensor(arr(8, 5, 4), requires_grad=True)
    bias = torch.tensor(arr(9, 4), requires_grad=True)
    out = torch.utils.checkpoint.checkpoint(
        block, {"a": a, "b": b}, use_reentrant=False, scale=0.5, extra=[bias]
    )
    loss = out["sum"].pow(2).sum() + out["pair"][0].sum()
    loss.backward()
    return {
        "sum": out["sum"],
        "argmax": out["pair"][1],
        "n": out["n"],
        "requires_grad": out["sum"].requires_grad,
        "b_grad": b.grad,
        "bias_grad": bias.grad,
        "a_grad_is_none": a.grad is None,
        **{f"enc.{k}": v for k, v in grads(enc).items()},
        **{f"mix.{k}": v for k, v in grads(mix).items()},
    }


@program(rtol=1e-3, atol=1e-5)
def autograd_grad_and_second_derivative_through_checkpoint(torch):
    lin = set_weights(torch, torch.nn.Linear(3, 3), seed=11)
    x = torch.tensor(arr(12, 4, 3), requires_grad=True)
    v = torch.tensor(arr(13, 4, 3))

    def f(t):
        return (torch.sin(lin(t)) * t).sum()

    y = torch.utils.checkpoint.checkpoint(f, x, use_reentrant=False)
    (gx,) = torch.autograd.grad(y, x, create_graph=True)
    (hv,) = torch.autograd.grad((gx * v).sum(), x)
    z = torch.utils.checkpoint.checkpoint(lin, x, use_reentrant=False)
    gw, gb = torch.autograd.grad(z.pow(2).sum(), [lin.weight, lin.bias])
    return {
        "y": y,
        "gx": gx,
        "hv": hv,
        "gw": gw,
        "gb": gb,
        "weight_grad_untouched": lin.weight.grad is None,
    }


@program
def checkpoint_warnings_and_errors(torch):
    cp = torch.utils.checkpoint
    lin = set_weights(torch, torch.nn.Linear(3, 2), seed=14)
    x = torch.tensor(arr(15, 4, 3))
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = cp.checkpoint(lin, x.clone().requires_grad_(True))
        out["missing_flag_warns"] = [w.category.__name__ for w in caught]
        out["missing_flag_is_reentrant_requires_grad"] = y.requires_grad
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = cp.checkpoint(lin, x, use_reentrant=True)
        out["reentrant_no_grad_input_warns"] = len(caught)
        out["reentrant_no_grad_input_requires_grad"] = y.requires_grad
        z = cp.checkpoint(lin, x, use_reentrant=False)
        out["nonreentrant_requires_grad"] = z.requires_grad
        out["nonreentrant_warns"] = len(caught)
    with torch.no_grad():
        out["under_no_grad"] = cp.checkpoint(lin, x, use_reentrant=False).requires_grad
    errors = []
    for kwargs in (
        {"use_reentrant": True, "scale": 2},
        {"use_reentrant": True, "debug": True},
        {"use_reentrant": False, "determinism_check": "shapes"},
    ):
        try:
            cp.checkpoint(lin, x, **kwargs)
            errors.append("none")
        except ValueError:
            errors.append("ValueError")
    out["option_errors"] = errors
    calls = []

    def shrinking(t):
        calls.append(1)
        return torch.sin(t[: 4 - len(calls)])

    y = cp.checkpoint(shrinking, x.clone().requires_grad_(True), use_reentrant=False)
    try:
        y.sum().backward()
        out["mismatch"] = "none"
    except cp.CheckpointError as e:
        out["mismatch"] = type(e).__name__
        out["mismatch_is_runtime_error"] = isinstance(e, RuntimeError)
    w = x.clone().requires_grad_(True)
    y = cp.checkpoint(lin, w, use_reentrant=False).sum()
    y.backward(retain_graph=True)
    y.backward()
    out["twice_with_retain"] = w.grad
    try:
        y.backward()
        out["third"] = "none"
    except RuntimeError:
        out["third"] = "RuntimeError"
    return out
