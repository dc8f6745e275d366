"""The client's own CPU for recording ops and walking backward, this checkout against another.

Run ``python benchmarks/bench_client_autograd.py --against DIR [--rounds 4]``, where ``DIR`` is
another checkout of GT (``git worktree add /tmp/base HEAD~1``). Each round runs one process per
tree, alternately, each with a private local cluster; a process measures its main thread's CPU
time (``time.thread_time``, so the workers and the machine's other load do not count), best of
nine repetitions, for:

* ``record``: an eager chain ``y = (y * 1.01).tanh().exp() * 0.5`` on a tensor that requires grad
  (per op: shape inference, instruction, graph node);
* ``module``: a call of ``Sequential(Linear, Tanh, Linear)`` (per call);
* ``backward``: ``backward()`` through that chain (per node).

It prints each tree's medians over the rounds and the ratio this/other: what a change to the
client's autograd costs every eager training step. No target: a change should stay within noise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

PROBE = r"""
import json, time, gt
import gt.nn as nn
x = gt.randn(4, requires_grad=True)
m = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
inp = gt.randn(2, 8)
def chain():
    y = x
    for _ in range(500):
        y = (y * 1.01).tanh().exp() * 0.5
    return y
best = {"record": 1e9, "module": 1e9, "backward": 1e9}
for _ in range(9):
    t = time.thread_time(); y = chain()
    best["record"] = min(best["record"], (time.thread_time() - t) / 2000 * 1e6)
    t = time.thread_time(); y.sum().backward()
    best["backward"] = min(best["backward"], (time.thread_time() - t) / 2000 * 1e6)
    y.detach().numpy()
    t = time.thread_time()
    for _ in range(200):
        m(inp)
    best["module"] = min(best["module"], (time.thread_time() - t) / 200 * 1e6)
    x.grad = None
print(json.dumps(best))
"""


def measure(tree: Path) -> dict[str, float]:
    """One process on ``tree``'s ``gt``: the best CPU µs per op, per call and per node."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd="/", capture_output=True, text=True,
        timeout=300, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", required=True, type=Path, help="another checkout of GT")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args(argv)
    if not (args.against / "gt" / "__init__.py").exists():
        ap.error(f"{args.against} holds no gt/ package")
    runs: dict[str, list[dict[str, float]]] = {"this": [], "other": []}
    for _ in range(args.rounds):
        runs["this"].append(measure(HERE))
        runs["other"].append(measure(args.against))
    print(f"{'':10} {'this':>10} {'other':>10} {'ratio':>7}   (client main-thread CPU, µs)")
    for key, unit in (("record", "per op"), ("module", "per call"), ("backward", "per node")):
        a = statistics.median(r[key] for r in runs["this"])
        b = statistics.median(r[key] for r in runs["other"])
        print(f"{key:10} {a:10.2f} {b:10.2f} {a / b:6.3f}x   {unit}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
