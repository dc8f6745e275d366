"""``gt demo``: a real local cluster running a small training-style workload."""

from __future__ import annotations

import time

import numpy as np


def run_demo(workers: int = 2, steps: int = 200) -> int:
    """Start a local cluster, run a least-squares fit by gradient descent, print what happened."""
    import gt

    gt.gpu_workers(workers)
    t0 = time.perf_counter()
    conn = gt.session.get_connection()
    print(f"started a local cluster: dispatcher {conn.address}, {workers} worker(s) "
          f"({', '.join(w['device'] for w in conn.workers)})")
    gt.manual_seed(0)
    x = gt.randn(256, 64)
    w_true = gt.randn(64, 1)
    y = x @ w_true
    w = gt.zeros(64, 1)
    lr = 0.1
    for step in range(steps):
        err = x @ w - y
        grad = x.T @ err * (2.0 / 256)
        w = w - grad * lr
        if step % max(1, steps // 5) == 0 or step == steps - 1:
            loss = (err * err).mean().item()
            print(f"step {step:4d}  loss {loss:.6f}")
    gt.sync()
    dt = time.perf_counter() - t0
    final = float(((x @ w - y) ** 2).mean())
    print(f"{conn.sent_instructions} instructions in {conn.sent_batches} batches, {dt:.2f}s; final loss {final:.2e}")
    ok = final < 1e-3 and np.isfinite(final)
    print("demo finished" if ok else "demo did not converge")
    gt.disconnect()
    return 0 if ok else 1
