"""Recurrent training steps: an LSTM's, a GRU's and an Elman RNN's, GT against PyTorch eager on
the CPU.

The model is the Dec 7 perf probe's: ``LSTM(32, 128)``, ``GRU(32, 128)`` or ``RNN(32, 128)``
(tanh), ``batch_first``, over 32 steps of a batch of 32, the last step's output through
``Linear(128, 10)``, cross entropy, Adam (lr 1e-3); float32. Steps are queued back to back with one ``loss.item()`` at the
end. Sides, interleaved round by round in one process:

* ``torch``: PyTorch eager, the reference (``set_num_threads`` = ``--blas-threads``);
* ``eager`` / ``hot``: GT, eagerly and with the step under ``@gt.hot``; each layer direction's
  time loop is one ``lstm_scan`` / ``gru_scan`` / ``rnn_scan`` instruction each way;
* ``eager, composed`` / ``hot, composed``: the same with the layers composed of per-step ops, as
  before the fused loops (``gt.nn.recurrent._FUSED_RNN`` off while the step records or runs).

The GT worker uses the same BLAS threads (``GT_BLAS_THREADS``). Printed: each side's median step
time and its ratio to PyTorch's, with the spread of the per-round ratios. There is no target in
the issues for these models; the ratio is what to watch.

    python benchmarks/bench_recurrent.py [--models lstm,gru,rnn] [--rounds 5] [--steps 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

_ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
_ap.add_argument("--models", default="lstm,gru,rnn", help="comma-separated: lstm, gru, rnn")
_ap.add_argument("--rounds", type=int, default=5)
_ap.add_argument("--steps", type=int, default=30, help="steps per side per round")
_ap.add_argument("--blas-threads", type=int, default=1)
ARGS = _ap.parse_args() if __name__ == "__main__" else _ap.parse_args([])
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "GT_BLAS_THREADS"):
    os.environ[_v] = str(ARGS.blas_threads)

import numpy as np  # noqa: E402 - after the BLAS settings

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - a benchmark-only dependency
    sys.exit("bench_recurrent.py compares with PyTorch eager: pip install torch")

import gt  # noqa: E402
from gt.nn import recurrent  # noqa: E402

SEQ, BATCH, IN, HIDDEN, OUT = 32, 32, 32, 128, 10


def make_step(lib, kind: str):
    """A training step of ``lib`` (``torch`` or ``gt``) for ``kind`` (``"lstm"``, ``"gru"``,
    ``"rnn"``)."""
    lib.manual_seed(0)
    layer = {"lstm": lib.nn.LSTM, "gru": lib.nn.GRU, "rnn": lib.nn.RNN}[kind]
    rnn = layer(IN, HIDDEN, batch_first=True)
    head = lib.nn.Linear(HIDDEN, OUT)
    opt = lib.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-3)

    def step(x, y):
        opt.zero_grad()
        out, _ = rnn(x)
        loss = lib.nn.functional.cross_entropy(head(out[:, -1]), y)
        loss.backward()
        opt.step()
        return loss

    return step


def composed(step):
    """``step`` with GT's recurrent layers composed of per-step ops while it runs."""

    def run(x, y):
        recurrent._FUSED_RNN = False
        try:
            return step(x, y)
        finally:
            recurrent._FUSED_RNN = True

    return run


def time_steps(step, x, y, n: int) -> float:
    """Seconds per step of ``n`` queued steps and one sync."""
    t = time.perf_counter()
    for _ in range(n):
        loss = step(x, y)
    loss.item()
    return (time.perf_counter() - t) / n


def bench(kind: str) -> None:
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((BATCH, SEQ, IN)).astype(np.float32)
    y_np = rng.integers(0, OUT, BATCH)
    gx, gy = gt.tensor(x_np), gt.tensor(y_np)
    sides = {
        "torch": (make_step(torch, kind), torch.from_numpy(x_np), torch.from_numpy(y_np)),
        "eager": (make_step(gt, kind), gx, gy),
        "hot": (gt.hot(make_step(gt, kind)), gx, gy),
        "eager, composed": (composed(make_step(gt, kind)), gx, gy),
        "hot, composed": (gt.hot(composed(make_step(gt, kind))), gx, gy),
    }
    for step, x, y in sides.values():
        time_steps(step, x, y, 4)  # warm up (and capture the hot ones)
    res: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(ARGS.rounds):
        for name, (step, x, y) in sides.items():
            res[name].append(time_steps(step, x, y, ARGS.steps))
    ref = res["torch"]
    print(f"{kind.upper()}: torch {statistics.median(ref) * 1e3:.2f} ms a step")
    for name, times in res.items():
        if name == "torch":
            continue
        ratios = [t / r for t, r in zip(times, ref)]
        print(f"  GT {name:<16} {statistics.median(times) * 1e3:7.2f} ms  "
              f"{statistics.median(ratios):5.2f}x PyTorch (rounds {min(ratios):.2f}-"
              f"{max(ratios):.2f}x)")  # fmt: skip
    for name in ("hot", "hot, composed"):
        state = next(iter(sides[name][0].state.values()))["state"]
        if state != "replaying":
            print(f"  (GT {name}: {state})")


def main() -> int:
    torch.set_num_threads(ARGS.blas_threads)
    gt.connect()
    try:
        for kind in ARGS.models.split(","):
            bench(kind.strip())
    finally:
        gt.disconnect()
    print(f"medians of {ARGS.rounds} rounds of {ARGS.steps} steps; BLAS threads "
          f"{ARGS.blas_threads} on both sides; torch {torch.__version__}, numpy {np.__version__}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
