"""``torch.<name>`` spellings of functional ops (``torch.conv2d``, ``torch.dropout`` in eval,
``torch.selu`` ...), the older ``torch.svd``/``torch.qr``/``torch.pinverse``, and ``logspace``,
``range``, ``histogram``, ``gradient``, ``frombuffer``, ``typename``."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr


@program(rtol=1e-5, atol=1e-6)
def torch_level_functions(torch):
    x = torch.tensor(arr(1, 2, 3, 6, 6), requires_grad=True)
    w = torch.tensor(arr(2, 4, 3, 3, 3))
    y = torch.conv2d(x, w, padding=1)
    z = torch.selu(y) + torch.celu(y, 0.5) + torch.threshold(y, 0.1, -1.0)
    z = z + torch.prelu(y, torch.tensor([0.25])) + torch.hardshrink(y, 0.3)
    z = z + torch.dropout(y, 0.5, False)
    z.sum().backward()
    e = torch.embedding(torch.tensor(arr(3, 5, 2)), torch.tensor([[0, 4], [2, 2]]))
    m = torch.tensor(arr(4, 4, 3).astype(np.float64))
    u, s, v = torch.svd(m)
    q, r = torch.qr(m)
    signal = torch.tensor(np.sin(np.linspace(0, 3, 7)) ** 2)
    (g,) = torch.gradient(signal, spacing=0.5)
    g2 = torch.gradient(torch.tensor(arr(5, 3, 4)))
    hist, edges = torch.histogram(torch.tensor(arr(6, 50)), bins=5)
    whist, _ = torch.histogram(torch.tensor(arr(7, 20)), bins=torch.tensor([-2.0, -0.5, 0.0, 1.0,
                                                                            3.0]),
                               weight=torch.tensor(np.linspace(0, 1, 20).astype(np.float32)),
                               density=True)  # fmt: skip
    buf = np.arange(6, dtype=np.float32).tobytes()
    return {"z": z, "x_grad": x.grad, "embedding": e, "svd_s": s,
            "svd_recon": u @ torch.diag(s) @ v.T, "qr_recon": q @ r, "r_abs": r.abs(),
            "pinverse": torch.pinverse(m), "logspace": torch.logspace(-1, 2, 5),
            "logspace_2": torch.logspace(0, 3, 4, base=2.0),
            "range": torch.range(1, 2, 0.25), "gradient": g, "gradient_0": g2[0],
            "gradient_1": g2[1], "hist": hist, "edges": edges, "whist": whist,
            "frombuffer": torch.frombuffer(bytearray(buf), dtype=torch.float32, count=4, offset=4),
            "typename": torch.typename(torch.tensor([1, 2])),
            "angle": torch.angle(torch.tensor([0.5, -1.0, 0.0])), "real": torch.real(s),
            "conj": s.conj(), "isreal": torch.isreal(s),
            "bernoulli_certain": torch.tensor([0.0, 1.0, 1.0]).bernoulli()}  # fmt: skip


@program
def optimizer_in_backward_with_post_accumulate_hooks(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    for p, v in zip(
        model.parameters(), [arr(20 + i, *p.shape) * 0.3 for i, p in enumerate(model.parameters())]
    ):
        with torch.no_grad():
            p.copy_(torch.tensor(v))
    opts = {p: torch.optim.SGD([p], lr=0.05, momentum=0.9) for p in model.parameters()}
    calls = []

    def step(p):
        calls.append(tuple(p.shape))
        opts[p].step()
        opts[p].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(step)
    x, y = torch.tensor(arr(30, 6, 4)), torch.tensor(arr(31, 6, 2))
    losses = []
    for _ in range(3):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        losses.append(loss.item())
    return {"losses": losses, "calls": len(calls),
            **{f"p{i}": p for i, p in enumerate(model.parameters())}}  # fmt: skip


@program
def saved_tensor_hooks_and_save_on_cpu(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
    for i, p in enumerate(model.parameters()):
        with torch.no_grad():
            p.copy_(torch.tensor(arr(40 + i, *p.shape) * 0.4))
    x = torch.tensor(arr(41, 5, 4))
    counts = {"pack": 0}

    def pack(t):
        counts["pack"] += 1
        return t * 1.0

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(x).pow(2).mean()
    loss.backward()
    hooked = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with torch.autograd.graph.save_on_cpu():
        loss2 = model(x).pow(2).mean()
    loss2.backward()
    return {"loss": loss, "loss2": loss2, "packed_some": counts["pack"] > 0,
            **{f"hooked{i}": g for i, g in enumerate(hooked)},
            **{f"cpu{i}": p.grad for i, p in enumerate(model.parameters())}}  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def layer_functions_in_torchs_namespace(torch):
    x = torch.tensor(arr(60, 2, 4, 6, 6), requires_grad=True)
    line = torch.tensor(arr(61, 2, 4, 9))
    w, b = torch.tensor(arr(62, 4)), torch.tensor(arr(63, 4))
    rm, rv = torch.zeros(4), torch.ones(4)
    out = {
        "layer_norm": torch.layer_norm(x, (6, 6)), "group_norm": torch.group_norm(x, 2, w, b),
        "batch_norm": torch.batch_norm(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5, False),
        "instance_norm": torch.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, False),
        "max_pool2d": torch.max_pool2d(x, 2), "max_pool2d_s": torch.max_pool2d(x, 3, 2, 1),
        "pixel_shuffle": torch.pixel_shuffle(x, 2), "channel_shuffle": torch.channel_shuffle(x, 2),
    }  # fmt: skip
    total = sum(v.pow(2).sum() for v in out.values())
    total.backward()
    idx = torch.tensor([0, 5, 17, 23, -1])
    coords = torch.unravel_index(idx, (2, 3, 4))
    return {**out, "x_grad": x.grad, "max_pool1d": torch.max_pool1d(line, 3),
            "avg_pool1d": torch.avg_pool1d(line, 2, 1), "ada_avg": torch.adaptive_avg_pool1d(line, 4),
            "ada_max": torch.adaptive_max_pool1d(line, 4)[0],
            "ada_max_idx": torch.adaptive_max_pool1d(line, 4)[1],
            "pairwise": torch.pairwise_distance(line[0], line[1]),
            "unshuffle": torch.pixel_unshuffle(x.detach(), 2),
            "selu_": torch.selu_(line.clone()), "celu_": torch.celu_(line.clone(), 0.5),
            "threshold_": torch.threshold_(line.clone(), 0.1, -1.0),
            "coords": list(coords), "rv_after": rv}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def tensor_methods_of_functions_and_metadata(torch):
    x = torch.tensor(arr(64, 3, 3).astype(np.float64), requires_grad=True)
    spd = x.detach() @ x.detach().mT + torch.eye(3, dtype=torch.float64)
    low = torch.linalg.cholesky(spd)
    u, s, v = x.svd()
    q, r = x.qr()
    lu, piv = x.detach().lu()
    out = {"svd_s": s, "qr_r_abs": r.abs(), "pinverse": x.pinverse(), "matrix_exp": x.matrix_exp(),
           "hardshrink": x.hardshrink(0.3), "prelu": x.prelu(torch.tensor([0.25], dtype=torch.float64))}  # fmt: skip
    total = sum(v_.sum() for v_ in out.values())
    total.backward()
    b = torch.tensor(arr(65, 3, 2).astype(np.float64))
    return {**out, "x_grad": x.grad, "cholesky_solve": b.cholesky_solve(low),
            "cholesky_inverse": low.cholesky_inverse(), "lu_solve": b.lu_solve(lu, piv),
            "histogram": x.detach().histogram(4).hist, "stride": list(x.stride()),
            "stride1": x.stride(1), "storage_offset": x.storage_offset(),
            "flags": [x.is_cpu, x.is_sparse, x.is_quantized, x.is_meta, x.is_neg(),
                      x.is_inference(), x.get_device()],
            "cfloat": x.detach().cfloat(), "cdouble_is": x.cdouble().dtype == torch.complex128,
            "frexp": list(torch.frexp(torch.tensor([0.0, 1.5, -3.0, 1e-40, 8.0]))),
            "frexp_method": list(x.detach().frexp()),
            "nextafter": torch.nextafter(torch.tensor([1.0, 0.0, -2.0]),
                                         torch.tensor([2.0, -1.0, -2.0])) - torch.tensor([1.0, 0.0, -2.0])}  # fmt: skip
