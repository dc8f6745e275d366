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
