"""How often GT's float32 results equal PyTorch's CPU results to the last bit, op by op.

    python scripts/probe_last_bits.py      # needs torch (a benchmark-only dependency)

GT's NumPy kernels round each step of an op; several of PyTorch's CPU kernels fuse steps (a
multiply-add rounded once: ``add(alpha=)``, ``lerp``, ``addcmul``), divide by a number as a
multiply by its reciprocal, or use SLEEF's vectorised transcendental functions, which are within
an ulp but not always the correctly rounded value NumPy gives. Results then differ in the last
bit for some elements, never by more than a few ulps per op; the differential suite's tolerances
absorb that, and this script measures it: the share of elements equal bit for bit, over random
inputs, for single ops and for ten optimizer steps.
"""

from __future__ import annotations

import sys

import numpy as np

try:
    import torch
except ImportError:  # pragma: no cover - a probe-only dependency
    sys.exit("probe_last_bits.py compares with PyTorch: pip install torch")

import gt

RNG = np.random.default_rng(0)
A, B, C = (RNG.standard_normal((256, 64)).astype(np.float32) for _ in range(3))
POS = np.abs(C) + 0.1
X = RNG.uniform(-10, 10, 1 << 18).astype(np.float32)

OPS = {
    "add(b, alpha=0.37)": lambda L: L.tensor(A).add_(L.tensor(B), alpha=0.37),
    "lerp_(b, 0.1)": lambda L: L.tensor(A).lerp_(L.tensor(B), 0.1),
    "lerp_(b, 0.9)": lambda L: L.tensor(A).lerp_(L.tensor(B), 0.9),
    "addcmul_(b, c, value=1e-3)": lambda L: L.tensor(A).addcmul_(
        L.tensor(B), L.tensor(C), value=0.001
    ),  # fmt: skip
    "addcdiv_(b, c, value=-0.01)": lambda L: L.tensor(A).addcdiv_(
        L.tensor(B), L.tensor(POS), value=-0.01
    ),  # fmt: skip
    "x / 0.3": lambda L: L.tensor(POS) / 0.3,
    "mul_(0.9).add_(b * 0.1)": lambda L: L.tensor(A).mul_(0.9).add_(L.tensor(B) * 0.1),
    "sqrt() / 0.3 + 1e-8": lambda L: (L.tensor(POS).sqrt() / 0.3).add_(1e-8),
    "exp": lambda L: L.tensor(X).exp(),
    "tanh": lambda L: L.tensor(X).tanh(),
    "log": lambda L: (L.tensor(X).abs() + 1e-3).log(),
    "sigmoid": lambda L: L.tensor(X).sigmoid(),
}


def optimizer_run(lib, name: str) -> np.ndarray:
    w0 = np.random.default_rng(2).standard_normal((64, 32)).astype(np.float32)
    grads = np.random.default_rng(1).standard_normal((10, 64, 32)).astype(np.float32)
    p = lib.tensor(w0, requires_grad=True)
    kw = {"momentum": 0.9} if name == "SGD" else {}
    opt = getattr(lib.optim, name)([p], lr=1e-2, **kw)
    for g in grads:
        p.grad = lib.tensor(g)
        opt.step()
    return p.detach().numpy()


def main() -> int:
    torch.set_num_threads(1)
    gt.connect()
    try:
        print(f"{'op (float32)':34} equal bit for bit   max |diff|")
        for name, f in OPS.items():
            a, b = f(torch).numpy(), f(gt).numpy()
            print(f"{name:34} {np.mean(a == b):8.2%}          {np.abs(a - b).max():.3g}")
        for name in ("SGD", "Adam", "AdamW", "NAdam", "RAdam", "Adamax"):
            a, b = optimizer_run(torch, name), optimizer_run(gt, name)
            label = f"{name}, 10 steps"
            print(f"{label:34} {np.mean(a == b):8.2%}          {np.abs(a - b).max():.3g}")
    finally:
        gt.disconnect()
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
