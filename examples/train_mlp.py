"""A small training-style workload used by the docs and tests: fit a linear map by gradient descent."""

import sys

import gt

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
gt.manual_seed(0)
x = gt.randn(256, 64)
w_true = gt.randn(64, 8)
y = x @ w_true
w = gt.zeros(64, 8)
for step in range(steps):
    err = x @ w - y
    w = w - (x.T @ err) * (0.2 / 256)
    if step % 25 == 0:
        gt.mark(f"step {step}")
        print(f"step {step:4d} loss {(err * err).mean().item():.5f}", flush=True)
print(f"final loss {((x @ w - y) ** 2).mean().item():.2e}")
