"""The NumPy worker's own kernels for a training step's heaviest ops, against the plain NumPy call
they replace and PyTorch eager on the CPU (when installed), in one process, one BLAS thread.

1. **Linear forward** ``x @ W.T`` (``W`` is ``[out, in]``): the worker's ``matmul`` handler (which
   computes ``(W @ x.T).T`` for float32 when ``x`` has fewer rows than ``W``) against
   ``np.matmul(x, W.T)`` and ``torch.matmul``, for batch sizes 1-1024 and common layer shapes.
   Results are checked equal, bit for bit, to ``np.matmul``'s.
2. **SGD's update** ``p += -lr * buf`` of a 784x512 float32 weight: the ``add_scaled`` handler in
   place against the two passes it replaces (``buf * lr``, then ``p -= ...``) and PyTorch's
   ``p.add_(buf, alpha=-lr)``.
3. **The error function without SciPy** (exact GELU's and ``erf``'s kernel on a worker without
   SciPy, which is not a dependency): GT's own (``gt.runtime.ops.error_function``) on 500k float32
   values drawn as GELU's ``x / sqrt(2)`` is, against ``scipy.special.erf`` (when installed), the
   element-by-element ``math.erf`` it replaced and ``torch.erf``.

Ratios are kernel time over reference time (< 1: the kernel is faster), medians over rounds that
alternate the sides.

    python benchmarks/bench_cpu_kernels.py [--rounds 7] [--blas-threads 1]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import timeit

_ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
_ap.add_argument("--rounds", type=int, default=7)
_ap.add_argument("--blas-threads", type=int, default=1)
ARGS = _ap.parse_args() if __name__ == "__main__" else _ap.parse_args([])
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = str(ARGS.blas_threads)

import numpy as np  # noqa: E402 - after the BLAS settings

from gt.runtime import ops as O  # noqa: E402
from gt.runtime.ops import error_function  # noqa: E402
from gt.runtime.worker.backend import Backend  # noqa: E402

try:
    import torch  # noqa: E402

    torch.set_num_threads(ARGS.blas_threads)
except ImportError:  # a benchmark-only dependency: without it, NumPy is the only reference
    torch = None

BE = Backend(np, "cpu")
MATMUL = BE.handlers[O.OPCODE["matmul"]]
ADD_SCALED = BE.handlers[O.OPCODE["add_scaled"]]
LAYERS = [(784, 512), (512, 10), (1024, 1024), (128, 4096), (4096, 128)]
BATCHES = [1, 8, 64, 256, 1024]


def per_call(fn, budget: float = 0.02) -> float:
    """Seconds per call: best of 3 timings of a loop sized to take about ``budget``."""
    n = max(1, int(budget / max(timeit.timeit(fn, number=1), 1e-7)))
    return min(timeit.repeat(fn, number=n, repeat=3)) / n


def compare(sides: dict) -> dict:
    """Median seconds per call of each side, rounds alternating between them."""
    got: dict = {k: [] for k in sides}
    for _ in range(ARGS.rounds):
        for k, fn in sides.items():
            got[k].append(per_call(fn))
    return {k: statistics.median(v) for k, v in got.items()}


def _linear_sides(x: np.ndarray, w: np.ndarray) -> dict:
    sides = {"gt": lambda: MATMUL([x, w.T], None), "np": lambda: np.matmul(x, w.T)}
    if torch is not None:
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        sides["torch"] = lambda: torch.matmul(tx, tw.T)
    return sides


def linear_forward() -> None:
    rng = np.random.default_rng(0)
    print("1. Linear forward x @ W.T, float32 (kernel / np.matmul; kernel / torch)")
    for b in BATCHES:
        for i, o in LAYERS:
            x = rng.standard_normal((b, i)).astype(np.float32)
            w = rng.standard_normal((o, i)).astype(np.float32)
            assert np.array_equal(MATMUL([x, w.T], None), np.matmul(x, w.T))
            t = compare(_linear_sides(x, w))
            vs_torch = f"{t['gt'] / t['torch']:5.2f}x" if torch is not None else "  n/a"
            print(f"   batch {b:5d} {i:5d}->{o:<5d} {t['gt'] * 1e6:9.1f} us  "
                  f"vs NumPy {t['gt'] / t['np']:5.2f}x  vs torch {vs_torch}")  # fmt: skip


def sgd_update() -> None:
    rng = np.random.default_rng(1)
    p = rng.standard_normal((512, 784)).astype(np.float32)
    buf = rng.standard_normal((512, 784)).astype(np.float32)
    want = p.copy()
    want -= buf * np.float32(0.01)
    assert np.array_equal(ADD_SCALED([p.copy(), buf], {"alpha": -0.01, "inplace": True}), want)
    # alpha 0: the update leaves p as it is, so repeated calls time the same values
    sides = {
        "gt": lambda: ADD_SCALED([p, buf], {"alpha": -0.0, "inplace": True}),
        "np": lambda: np.subtract(p, buf * np.float32(0.0), out=p),
    }
    if torch is not None:
        tp, tb = torch.from_numpy(p.copy()), torch.from_numpy(buf)
        sides["torch"] = lambda: tp.add_(tb, alpha=-0.0)
    t = compare(sides)
    vs_torch = f"{t['gt'] / t['torch']:5.2f}x" if torch is not None else "  n/a"
    print("2. SGD update p += -lr * buf, 512x784 float32 in place")
    print(f"   {t['gt'] * 1e6:9.1f} us  vs two NumPy passes {t['gt'] / t['np']:5.2f}x  "
          f"vs torch add_(alpha=) {vs_torch}")  # fmt: skip


def erf_without_scipy() -> None:
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(500_000) / math.sqrt(2)).astype(np.float32)
    by_element = np.vectorize(math.erf, otypes=[np.float64])
    want = by_element(x).astype(np.float32)
    got = error_function.erf(x)
    # (both round a float64 value once: they differ only where the float64 values differ by an ulp
    # across a float32 rounding boundary)
    same = float(np.mean(got == want))
    assert same > 0.9999, same
    sides = {"gt": lambda: error_function.erf(x)}
    try:
        from scipy.special import erf as scipy_erf  # noqa: PLC0415 - optional

        sides["scipy"] = lambda: scipy_erf(x)
    except ImportError:
        pass
    if torch is not None:
        tx = torch.from_numpy(x)
        sides["torch"] = lambda: torch.erf(tx)
    t = compare(sides)
    old = min(timeit.repeat(lambda: by_element(x).astype(np.float32), number=1, repeat=3))
    rows = [f"vs math.erf per element {t['gt'] / old:5.2f}x"]
    rows += [f"vs {k} {t['gt'] / t[k]:5.2f}x" for k in ("scipy", "torch") if k in t]
    print("3. erf without SciPy, 500k float32 (GELU's x/sqrt(2))")
    print(f"   {t['gt'] * 1e3:9.2f} ms  " + "  ".join(rows) + f"  (bitwise math.erf's: {same:.4%})")


if __name__ == "__main__":
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else 'not installed'}, "
          f"BLAS threads {ARGS.blas_threads}, {ARGS.rounds} rounds")  # fmt: skip
    linear_forward()
    sgd_update()
    erf_without_scipy()
