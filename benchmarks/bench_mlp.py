"""One MLP training step in GT against the same model written in plain NumPy in one process.

The model: ``Linear(784, 512) -> ReLU -> Linear(512, 10)``, batch 64, float32, softmax cross
entropy, SGD with momentum 0.9. The NumPy version does the same arithmetic by hand (forward,
backward, update) in this process; the GT version is ordinary ``gt.nn`` / ``gt.optim`` code run on a
local cluster with one worker. Both use the same BLAS thread count (``$GT_BLAS_THREADS``, default 1).

Two GT timings:

* ``pipelined``: steps are queued back to back; one sync at the end (``loss.item()``).
* ``synced``: ``loss.item()`` after every step (a round trip per step, as a loop that prints
  its loss every step would do).

Usage::

    python benchmarks/bench_mlp.py [--steps 200] [--hidden 512] [--batch 64] [--json]
    GT_BLAS_THREADS=4 python benchmarks/bench_mlp.py   # both sides with 4 BLAS threads
"""

from __future__ import annotations

import argparse
import json
import os
import time

# The same BLAS thread count here and in the worker: $GT_BLAS_THREADS, 1 by default (on a small
# shared machine, spinning BLAS threads in two processes make both timings noisy).
_THREADS = os.environ.setdefault("GT_BLAS_THREADS", "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _THREADS

import numpy as np  # noqa: E402 - after the BLAS settings

import gt  # noqa: E402

IN, OUT = 784, 10


class NumpyMLP:
    """The reference: the same model, loss and optimizer in plain NumPy."""

    def __init__(self, hidden: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        b1, b2 = 1 / np.sqrt(IN), 1 / np.sqrt(hidden)
        self.params = [
            rng.uniform(-b1, b1, (hidden, IN)).astype(np.float32),
            rng.uniform(-b1, b1, hidden).astype(np.float32),
            rng.uniform(-b2, b2, (OUT, hidden)).astype(np.float32),
            rng.uniform(-b2, b2, OUT).astype(np.float32),
        ]
        self.bufs = [None] * 4

    def step(self, x: np.ndarray, y: np.ndarray, lr: float = 0.01, momentum: float = 0.9) -> float:
        w1, b1, w2, b2 = self.params
        n = x.shape[0]
        h_pre = x @ w1.T + b1
        h = np.maximum(h_pre, 0)
        z = h @ w2.T + b2
        s = z - z.max(1, keepdims=True)
        logp = s - np.log(np.exp(s).sum(1, keepdims=True))
        loss = -logp[np.arange(n), y].mean()
        dz = np.exp(logp)
        dz[np.arange(n), y] -= 1
        dz /= n
        grads = [None, None, dz.T @ h, dz.sum(0)]
        dh = (dz @ w2) * (h_pre > 0)
        grads[0] = dh.T @ x
        grads[1] = dh.sum(0)
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if self.bufs[i] is None:
                self.bufs[i] = g.copy()
            else:
                self.bufs[i] *= momentum
                self.bufs[i] += g
            p -= lr * self.bufs[i]
        return float(loss)


def gt_model(hidden: int) -> tuple:
    gt.manual_seed(0)
    model = gt.nn.Sequential(gt.nn.Linear(IN, hidden), gt.nn.ReLU(), gt.nn.Linear(hidden, OUT))
    opt = gt.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, opt


def gt_step(model: gt.nn.Module, opt: gt.optim.Optimizer, x: gt.Tensor, y: gt.Tensor) -> gt.Tensor:
    opt.zero_grad()
    loss = gt.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _best_of(fn, repeats: int) -> float:
    return min(fn() for _ in range(repeats))


def run(steps: int, hidden: int, batch: int, repeats: int = 3) -> dict:
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((batch, IN)).astype(np.float32)
    y_np = rng.integers(0, OUT, batch)

    ref = NumpyMLP(hidden)
    for _ in range(5):
        ref.step(x_np, y_np)

    def time_numpy() -> float:
        t = time.perf_counter()
        for _ in range(steps):
            ref.step(x_np, y_np)
        return (time.perf_counter() - t) / steps

    gt.connect()
    try:
        model, opt = gt_model(hidden)
        x, y = gt.tensor(x_np), gt.tensor(y_np)
        for _ in range(5):
            gt_step(model, opt, x, y)
        gt.sync()

        def time_pipelined() -> float:
            t = time.perf_counter()
            for _ in range(steps):
                loss = gt_step(model, opt, x, y)
            loss.item()
            return (time.perf_counter() - t) / steps

        def time_synced() -> float:
            t = time.perf_counter()
            for _ in range(steps):
                gt_step(model, opt, x, y).item()
            return (time.perf_counter() - t) / steps

        conn = gt.session.current()
        before = conn.sent_instructions + len(conn._instrs)
        gt_step(model, opt, x, y)
        ops_per_step = conn.sent_instructions + len(conn._instrs) - before

        # Interleave the measurements so machine noise hits both sides alike.
        np_t, pipe_t, sync_t = [], [], []
        for _ in range(repeats):
            np_t.append(time_numpy())
            pipe_t.append(time_pipelined())
            sync_t.append(time_synced())
    finally:
        gt.disconnect()
    numpy_s, pipelined_s, synced_s = min(np_t), min(pipe_t), min(sync_t)
    return {
        "model": f"{IN}-{hidden}-{OUT} MLP, batch {batch}, float32, SGD momentum",
        "steps": steps,
        "instructions_per_step": ops_per_step,
        "numpy_ms": numpy_s * 1e3,
        "gt_pipelined_ms": pipelined_s * 1e3,
        "gt_synced_ms": synced_s * 1e3,
        "ratio_pipelined": pipelined_s / numpy_s,
        "ratio_synced": synced_s / numpy_s,
        "blas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    r = run(args.steps, args.hidden, args.batch, args.repeats)
    if args.json:
        print(json.dumps(r))
        return
    print(r["model"])
    print(f"  NumPy, one process:       {r['numpy_ms']:7.3f} ms/step")
    print(
        f"  GT, pipelined:            {r['gt_pipelined_ms']:7.3f} ms/step   ratio {r['ratio_pipelined']:.2f}x"
    )
    print(
        f"  GT, loss.item() per step: {r['gt_synced_ms']:7.3f} ms/step   ratio {r['ratio_synced']:.2f}x"
    )
    print(
        f"  ({r['instructions_per_step']} instructions per GT step, {r['blas_threads']} BLAS threads)"
    )


if __name__ == "__main__":
    main()
