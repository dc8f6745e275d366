"""A spectrogram-loss training step in GT against the same step in PyTorch eager (CPU).

The step: ``stft`` (Hann window, ``n_fft`` 512, hop 128, batch 8 of 16,000 samples, float32) ->
power -> a fixed 64-band filterbank (matmul) -> log -> MSE to a target -> backward to the
signal -> one SGD update of the signal. GT runs it on a local cluster with one NumPy worker;
PyTorch runs it in this process. Both with the same thread count (``$GT_BLAS_THREADS``, default 1:
``torch.set_num_threads`` and the BLAS variables the worker reads). Rounds alternate GT and
PyTorch so drift on a shared machine hits both; each round queues ``--steps`` steps and syncs once.

Usage::

    python benchmarks/bench_spectral.py [--steps 20] [--rounds 5] [--json]

PyTorch is a benchmark-only dependency; without it the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

_THREADS = os.environ.setdefault("GT_BLAS_THREADS", "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _THREADS

import numpy as np  # noqa: E402 - after the thread settings

import gt  # noqa: E402

BATCH, SAMPLES, N_FFT, HOP, BANDS = 8, 16000, 512, 128, 64


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SAMPLES)).astype(np.float32)
    fbank = np.abs(rng.standard_normal((BANDS, N_FFT // 2 + 1))).astype(np.float32) / N_FFT
    frames = 1 + SAMPLES // HOP
    target = rng.standard_normal((BATCH, BANDS, frames)).astype(np.float32)
    return x, fbank, target


def make_step(lib: object) -> tuple:
    """``(step, sync)`` for ``lib`` (``gt`` or ``torch``): one training step, and a sync point."""
    x0, fb0, t0 = _inputs()
    x = lib.tensor(x0, requires_grad=True)
    fbank, target = lib.tensor(fb0), lib.tensor(t0)
    window = lib.hann_window(N_FFT)

    def step() -> object:
        spec = lib.stft(x, N_FFT, hop_length=HOP, window=window, return_complex=True)
        power = spec.real**2 + spec.imag**2
        loss = ((fbank @ power + 1e-6).log() - target).pow(2).mean()
        loss.backward()
        with lib.no_grad():
            x.sub_(x.grad * 0.1)
            x.grad.zero_()
        return loss

    return step, lambda loss: float(loss.item())


def timed(step: object, sync: object, steps: int) -> float:
    """Seconds per step over ``steps`` queued steps and one sync."""
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    sync(loss)
    return (time.perf_counter() - t0) / steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        import torch  # noqa: PLC0415 - benchmark-only
    except ImportError:
        print("bench_spectral: PyTorch is not installed; it is the reference (pip install torch)")
        return 0
    torch.set_num_threads(int(_THREADS))
    from gt.runtime.launch import LocalCluster  # noqa: PLC0415

    with LocalCluster(workers=1) as c:
        gt.connect(c.address)
        g_step, g_sync = make_step(gt)
        t_step, t_sync = make_step(torch)
        timed(g_step, g_sync, 2), timed(t_step, t_sync, 2)  # warm-up: plans, caches, allocators
        ratios, gts, tos = [], [], []
        for _ in range(args.rounds):
            g, t = timed(g_step, g_sync, args.steps), timed(t_step, t_sync, args.steps)
            gts.append(g)
            tos.append(t)
            ratios.append(g / t)
        gt.disconnect()
    out = {"gt_ms": 1e3 * statistics.median(gts), "torch_ms": 1e3 * statistics.median(tos),
           "ratio_median": statistics.median(ratios), "ratios": ratios, "threads": int(_THREADS),
           "steps": args.steps, "rounds": args.rounds}  # fmt: skip
    if args.json:
        print(json.dumps(out))
    else:
        print(f"spectrogram step, batch {BATCH}x{SAMPLES}, n_fft {N_FFT}, hop {HOP}, "
              f"{_THREADS} thread(s): GT {out['gt_ms']:.2f} ms, PyTorch eager "
              f"{out['torch_ms']:.2f} ms, GT/PyTorch {out['ratio_median']:.2f}x "
              f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
