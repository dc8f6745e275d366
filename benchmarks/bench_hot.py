"""Hot paths (issue 14): a captured training step and captured tiny ops against PyTorch eager.

Three measurements, each GT side against the strongest reference a user would pick instead,
PyTorch eager on the CPU, measured in the same run, interleaved round by round:

1. **MLP step**: ``Linear(784, 512) -> ReLU -> Linear(512, 10)``, batch 64, float32, cross
   entropy, SGD with momentum 0.9; steps queued back to back and one ``loss.item()`` at the end.
   PyTorch eager vs GT eager vs GT with the step under ``@gt.hot``. Both libraries use the same
   number of BLAS threads (``--blas-threads``, default 1: PyTorch's ``set_num_threads`` and the GT
   worker's ``GT_BLAS_THREADS``). GT's hot results are checked equal, bitwise, to its eager ones.
2. **client CPU per step**: the process time the GT program itself spends per step, eager vs hot
   (the dispatcher and worker run elsewhere). Target: at least 5x lower captured.
3. **tiny ops**: ``x = x + 1`` on a 4-element float32 tensor, 100 per call of a function, as ops
   per second: PyTorch eager vs GT eager vs the same function under ``@gt.hot``.

Targets: MLP step <= 1.0x PyTorch eager (hot); tiny ops >= 1.0x PyTorch eager's rate (hot);
client CPU >= 5x lower (hot vs eager). PyTorch is needed (``pip install torch``); it is a
benchmark-only dependency.

    python benchmarks/bench_hot.py [--rounds 5] [--steps 200] [--blas-threads 1] [--optim adam]
                                   [--schedule per-step] [--loop outside]

``--schedule per-step`` steps a cosine ``LambdaLR`` after every training step (as transformer
training does), outside the captured step: a new learning rate every call. ``--schedule
onecycle`` steps ``OneCycleLR`` (its defaults: ``cycle_momentum=True``), which also sets a new
momentum (SGD) or beta1 (Adam, AdamW) every call.

``--loop outside`` calls ``opt.zero_grad()`` before each step, outside the captured function;
``--loop accumulate4`` captures forward and backward only (the loss divided by 4) and runs
``opt.step(); opt.zero_grad()`` outside after every fourth call (gradient accumulation; a "step"
is then one call, a micro-batch). Both on all three sides.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

_ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
_ap.add_argument("--rounds", type=int, default=5)
_ap.add_argument("--steps", type=int, default=200)
_ap.add_argument("--calls", type=int, default=300, help="tiny-op function calls (100 ops each)")
_ap.add_argument("--blas-threads", type=int, default=1)
_ap.add_argument("--optim", choices=("sgd", "adam", "adamw"), default="sgd",
                 help="the MLP step's optimizer: SGD with momentum 0.9 (the target's), or Adam / "
                      "AdamW (lr 1e-3, PyTorch's defaults otherwise, not capturable)")  # fmt: skip
_ap.add_argument("--schedule", choices=("none", "per-step", "onecycle"), default="none",
                 help="per-step: a cosine LambdaLR stepped after every step on all three sides "
                      "(outside the captured step); onecycle: OneCycleLR with its defaults "
                      "(cycle_momentum: a new momentum or beta1 every step too)")  # fmt: skip
_ap.add_argument("--loop", choices=("inside", "outside", "accumulate4"), default="inside",
                 help="where zero_grad runs: inside the step (default), outside it before every "
                      "call, or outside after every fourth call with the optimizer's step "
                      "(the captured function then runs forward and backward)")  # fmt: skip
ARGS = _ap.parse_args() if __name__ == "__main__" else _ap.parse_args([])
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "GT_BLAS_THREADS"):
    os.environ[_v] = str(ARGS.blas_threads)

import numpy as np  # noqa: E402 - after the BLAS settings

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - a benchmark-only dependency
    sys.exit("bench_hot.py compares with PyTorch eager: pip install torch")

import gt  # noqa: E402

IN, HIDDEN, OUT, BATCH = 784, 512, 10, 64
TINY = 100  # ops per tiny-op call


def torch_mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT)
    )
    return training(torch, model, optimizer(torch.optim, model.parameters()))


def gt_mlp():
    gt.manual_seed(0)
    model = gt.nn.Sequential(gt.nn.Linear(IN, HIDDEN), gt.nn.ReLU(), gt.nn.Linear(HIDDEN, OUT))
    return training(gt, model, optimizer(gt.optim, model.parameters()))


def training(lib, model, opt):
    """``(the function a user would capture, what runs after each call, what runs before)`` for
    ``--loop`` and ``--schedule`` (``lib``: ``torch`` or ``gt``)."""
    sched = schedule(lib.optim.lr_scheduler, opt)
    if ARGS.loop == "accumulate4":
        calls = [0]

        def forward_backward(x, y):
            loss = lib.nn.functional.cross_entropy(model(x), y) / 4
            loss.backward()
            return loss

        def after():
            calls[0] += 1
            if calls[0] % 4 == 0:
                opt.step()
                opt.zero_grad()
                if sched is not None:
                    sched()

        return forward_backward, after, None

    def step(x, y):
        if ARGS.loop == "inside":
            opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, sched, (opt.zero_grad if ARGS.loop == "outside" else None)


def optimizer(optim, params):
    """``--optim``'s optimizer from ``optim`` (``torch.optim`` or ``gt.optim``)."""
    if ARGS.optim == "sgd":
        return optim.SGD(params, lr=0.01, momentum=0.9)
    return {"adam": optim.Adam, "adamw": optim.AdamW}[ARGS.optim](params, lr=1e-3)


def schedule(lr_scheduler, opt):
    """The scheduler's ``step`` with ``--schedule`` (else ``None``): ``per-step``, a cosine decay
    over 10,000 steps, a new rate every step; ``onecycle``, ``OneCycleLR`` with its defaults over
    10,000,000 steps (a new rate and momentum or beta1 every step)."""
    if ARGS.schedule == "none":
        return None
    if ARGS.schedule == "onecycle":
        max_lr = 0.05 if ARGS.optim == "sgd" else 1e-3
        return lr_scheduler.OneCycleLR(opt, max_lr=max_lr, total_steps=10_000_000).step
    return lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, 10_000) / 10_000))
    ).step


def hot_mlp():
    step, after, before = gt_mlp()
    return gt.hot(step), after, before


def time_steps(stepper, x, y, n: int) -> tuple[float, float, float]:
    """``(wall s, process s, last loss)`` of ``n`` pipelined steps (each between what
    :func:`training` runs before and after one) and one sync."""
    step, after, before = stepper
    c, t = time.process_time(), time.perf_counter()
    for _ in range(n):
        if before is not None:
            before()
        loss = step(x, y)
        if after is not None:
            after()
    last = loss.item()
    return time.perf_counter() - t, time.process_time() - c, last


def tiny(x):
    for _ in range(TINY):
        x = x + 1
    return x


def time_tiny(fn, x0, calls: int) -> tuple[float, float]:
    """``(ops/s, final value)``."""
    x = x0
    t = time.perf_counter()
    for _ in range(calls):
        x = fn(x)
    v = float(x.sum().item())
    return calls * TINY / (time.perf_counter() - t), v


def main() -> int:
    torch.set_num_threads(ARGS.blas_threads)
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((BATCH, IN)).astype(np.float32)
    y_np = rng.integers(0, OUT, BATCH)
    tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)
    gt.connect()
    try:
        gx, gy = gt.tensor(x_np), gt.tensor(y_np)
        t_step, g_eager, g_hot = torch_mlp(), gt_mlp(), hot_mlp()
        for s, x, y in ((t_step, tx, ty), (g_eager, gx, gy), (g_hot, gx, gy)):
            time_steps(s, x, y, 10)  # warm up (and capture the hot one)
        g_tiny = gt.hot(tiny)
        for fn, x in ((tiny, torch.zeros(4)), (tiny, gt.zeros(4)), (g_tiny, gt.zeros(4))):
            time_tiny(fn, x, 5)
        res: dict[str, list] = {k: [] for k in ("torch", "eager", "hot", "eager_cpu", "hot_cpu",
                                                 "t_tiny", "e_tiny", "h_tiny")}  # fmt: skip
        losses: dict[str, list] = {"eager": [], "hot": []}
        for r in range(ARGS.rounds):
            wall, _, _ = time_steps(t_step, tx, ty, ARGS.steps)
            res["torch"].append(wall / ARGS.steps)
            for name, s in (("eager", g_eager), ("hot", g_hot)):
                wall, cpu, last = time_steps(s, gx, gy, ARGS.steps)
                res[name].append(wall / ARGS.steps)
                res[f"{name}_cpu"].append(cpu / ARGS.steps)
                losses[name].append(last)
            res["t_tiny"].append(time_tiny(tiny, torch.zeros(4), ARGS.calls)[0])
            rate, v_e = time_tiny(tiny, gt.zeros(4), ARGS.calls)
            res["e_tiny"].append(rate)
            rate, v_h = time_tiny(g_tiny, gt.zeros(4), ARGS.calls)
            res["h_tiny"].append(rate)
            assert v_e == v_h == 4.0 * ARGS.calls * TINY, (v_e, v_h)
            print(f"round {r + 1}: torch {res['torch'][-1] * 1e3:.2f} ms, GT eager "
                  f"{res['eager'][-1] * 1e3:.2f} ms, GT hot {res['hot'][-1] * 1e3:.2f} ms a step; "
                  f"tiny ops torch {res['t_tiny'][-1] / 1e3:.0f}k, GT eager "
                  f"{res['e_tiny'][-1] / 1e3:.0f}k, GT hot {res['h_tiny'][-1] / 1e3:.0f}k/s",
                  flush=True)  # fmt: skip
        state = next(iter(g_hot[0].state.values()))["state"]
    finally:
        gt.disconnect()
    m = {k: statistics.median(v) for k, v in res.items()}
    same = losses["eager"] == losses["hot"]
    rows = [
        (f"1. MLP step ({', '.join(w for w in (ARGS.optim, ARGS.schedule, ARGS.loop) if w not in ('none', 'inside'))}), GT hot vs PyTorch", m["hot"] / m["torch"], "<= 1.00x",
         m["hot"] / m["torch"] <= 1.0,
         f"{m['hot'] * 1e3:.2f} vs {m['torch'] * 1e3:.2f} ms (GT eager {m['eager'] * 1e3:.2f} ms "
         f"= {m['eager'] / m['torch']:.2f}x); hot {state}; losses hot == eager: {same}"),
        ("2. client CPU per step, eager / hot", m["eager_cpu"] / m["hot_cpu"], ">= 5x",
         m["eager_cpu"] / m["hot_cpu"] >= 5,
         f"{m['eager_cpu'] * 1e3:.3f} vs {m['hot_cpu'] * 1e3:.3f} ms"),
        ("3. tiny ops, GT hot vs PyTorch eager", m["h_tiny"] / m["t_tiny"], ">= 1.00x",
         m["h_tiny"] / m["t_tiny"] >= 1.0,
         f"{m['h_tiny'] / 1e3:.0f}k vs {m['t_tiny'] / 1e3:.0f}k ops/s (GT eager "
         f"{m['e_tiny'] / 1e3:.0f}k = {m['e_tiny'] / m['t_tiny']:.2f}x)"),
    ]  # fmt: skip
    print()
    for name, ratio, target, ok, detail in rows:
        print(f"{'PASS' if ok else 'FAIL'}  {name:<40} {ratio:6.2f}x  target {target:<9} {detail}")
    print(f"medians of {ARGS.rounds} rounds; BLAS threads {ARGS.blas_threads} on both sides; "
          f"torch {torch.__version__}, numpy {np.__version__}")  # fmt: skip
    return 0 if same and all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
