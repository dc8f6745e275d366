"""Memory limits: programs under memory pressure against the same programs without it.

Run ``python benchmarks/bench_memory.py [--quick]`` from the repository root (about 2-3 minutes on
2 cores; ``--quick`` under a minute). Every program runs on its own fresh one-worker
``LocalCluster``; the reference is the same program, with the same BLAS threads and the same
batching, measured in the same run, and the sides take turns (step by step in 1, in blocks of a few
seconds in 2) so that the noise of a shared machine hits every side alike. ``--rounds N`` repeats
benchmark 1 on fresh clusters (the order flipped) and gives benchmark 2 ``4 N`` blocks.

1. **over the limit**: a hand-written MLP training step (``L`` layers of ``d × d`` float32 weights
   and their momentum buffers, batch ``b``; forward ``h = relu(h @ W)``, the backward pass written
   out with matmuls, SGD with momentum) whose live tensors need 3× the worker's memory limit, run
   (a) unlimited, (b) limited with prefetch (1 GB, the default), (c) limited with ``prefetch=0``.
   Every step ends with ``loss.item()`` (as a loop that prints its loss would). The three run on
   three clusters at once, taking turns step by step (the order rotating), and each step is
   compared with the unlimited step of the same turn. Targets: the final weights, momentum and
   every step's loss are *bitwise* identical to the unlimited run's, and the median of those
   per-step ratios with prefetch is at most 1.5×; without prefetch it is reported.
   The worker's spill traffic per step (``spill_out``, ``spill_in``, ``prefetched``,
   ``prefetch_hits`` from its stats) is printed, and with ``--why`` also where the spill time
   went (a recorded trace: spill writes and reads on demand, which the executor waits for, and
   prefetch reads, which it does not).
2. **neighbour over its quota**: two clients on one worker. Client B runs a fixed loop (3 chained
   512×512 matmuls and a ``.item()`` per step) and times its steps; client A, in another process,
   runs a memory-heavy loop (``n`` float32 buffers of ``m × m``, each updated elementwise every
   iteration). Phase *fits*: A's working set is under its quota (``client_memory_limit``);
   phase *over*: the quota is a third of A's working set, so A spills all the time. A runs the
   same code in both phases, and switches its quota between them in blocks (fits, over, over,
   fits, ...) while B runs all along. Target: B's median step time changes by at most 10 %
   (the median over adjacent pairs of blocks). B's time with the worker to itself is printed
   too.

Each target prints PASS or FAIL; the exit status is 1 when one fails. The last line says how much
CPU other programs used during the run (above a few percent, run again).

Options: ``--quick`` (smaller sizes, one round), ``--rounds N``, ``--only 1,2``, ``--blas-threads N``
(default: the usable cores, what a one-worker cluster uses by itself), ``--why`` (a recorded
breakdown of the spill time), ``--json PATH``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402 - the benchmarks' shared helpers, next to this file

MB = 1_000_000
#: Memory settings that would limit the reference if they were inherited from the environment.
MEMORY_ENV = ("GT_MEMORY_LIMIT", "GT_CLIENT_MEMORY_LIMIT", "GT_SPILL_THRESHOLD", "GT_PREFETCH")
SLOWDOWN_TARGET = 1.5
NEIGHBOUR_TARGET = 0.10


# ============================================================================ processes
def _spawn(*args: str, stdin: bool = False) -> subprocess.Popen:
    """This script in a child process (a runner or a client), its stdout a pipe of JSON lines."""
    return subprocess.Popen([sys.executable, __file__, *args], text=True,
                            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.PIPE)  # fmt: skip


# ============================================================================ 1. over the limit
@dataclass
class MlpSize:
    """The MLP of benchmark 1."""

    d: int
    layers: int
    batch: int
    warmup: int
    steps: int

    @property
    def live_bytes(self) -> int:
        """Weights and momentum buffers, the activations kept for the backward pass, the input
        and the target: what one step needs alive at its peak."""
        weights = 2 * self.layers * self.d * self.d * 4
        acts = (self.layers + 2) * self.batch * self.d * 4
        return weights + acts


LR, MOMENTUM = 1e-3, 0.9
#: The three configurations: (name, settings for gt.config.set; None: no pool at all).
CONFIGS = ("unlimited", "prefetch", "no-prefetch")


def mlp_settings(name: str, limit: int) -> dict | None:
    """``gt.config.set`` settings of a configuration (a JSON object: those settings, for
    experiments)."""
    if name.startswith("{"):
        return {"memory_limit": limit, **json.loads(name)}
    if name == "unlimited":
        return None
    return {"memory_limit": limit, "prefetch": "1GB" if name == "prefetch" else 0}


def mlp_host_data(size: MlpSize, seed: int = 0) -> tuple:
    """The input, the target and the initial weights (He-scaled, so activations stay O(1))."""
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((size.batch, size.d), dtype=np.float32)
    y = rng.standard_normal((size.batch, size.d), dtype=np.float32)
    scale = np.float32(np.sqrt(2.0 / size.d))
    ws = [rng.standard_normal((size.d, size.d), dtype=np.float32) * scale
          for _ in range(size.layers)]  # fmt: skip
    return x, y, ws


def mlp_step(gt, x, y, ws: list, vs: list, batch: int):
    """One training step, the backward pass by hand: loss = sum((h_L - y)^2) / (2 batch)."""
    hs = [x]
    for w in ws:
        hs.append((hs[-1] @ w).relu())
    err = hs[-1] - y
    loss = (err * err).sum() * (0.5 / batch)
    dh = err * (1.0 / batch)
    for i in range(len(ws) - 1, -1, -1):
        g = dh * (hs[i + 1] > 0)
        if i:
            dh = g @ ws[i].T
        dw = hs[i].T @ g
        vs[i] = vs[i] * MOMENTUM + dw
        ws[i] = ws[i] - vs[i] * LR
    return loss


def worker_stats(address: str) -> dict:
    from gt.runtime.control import request  # noqa: PLC0415

    return request(address, "stats", timeout=10.0)["workers"][0]["stats"] or {}


def quiet_stats(address: str) -> dict:
    """The worker's stats as they are now, from a client that pauses for them: a worker whose
    inbox never empties (two clients keeping it busy) sends no report until it does."""
    time.sleep(0.7)
    return worker_stats(address)


def _memory_counters(st: dict) -> dict:
    m = st.get("memory") or {}
    return {
        k: m.get(k) or 0
        for k in ("spill_out", "spill_in", "prefetched", "prefetch_hits", "spill_reused")
    }


def _mlp_runner(config: str, limit: int, size: MlpSize, record: str | None) -> int:
    """A runner process: its own one-worker cluster in one configuration, taking commands on stdin
    (``step``, ``stats``, ``mark LABEL``, ``digest``, ``breakdown``, ``quit``) and answering each
    with one JSON line. The parent makes the three configurations take turns step by step."""
    import hashlib  # noqa: PLC0415

    import gt  # noqa: PLC0415
    from gt.runtime.launch import LocalCluster, RecorderProcess  # noqa: PLC0415

    def say(obj: object) -> None:
        print(json.dumps(obj), flush=True)

    x_np, y_np, ws_np = mlp_host_data(size)
    with LocalCluster(workers=1) as cluster:
        recorder = RecorderProcess(cluster.address, record) if record else None
        try:
            gt.connect(cluster.address, timeout=120)
            try:
                settings = mlp_settings(config, limit)
                if settings is not None:
                    gt.config.set(**settings)
                x, y = gt.from_numpy(x_np), gt.from_numpy(y_np)
                ws = [gt.from_numpy(w) for w in ws_np]
                vs = [gt.zeros(size.d, size.d) for _ in ws]
                gt.sync()
                say({"ready": cluster.address})
                for line in sys.stdin:
                    cmd, _, arg = line.strip().partition(" ")
                    if cmd == "step":
                        t0 = time.perf_counter()
                        loss = mlp_step(gt, x, y, ws, vs, size.batch).item()
                        say({"t": time.perf_counter() - t0, "loss": loss})
                    elif cmd == "stats":
                        say(worker_stats(cluster.address))
                    elif cmd == "mark":
                        gt.mark(arg)
                        gt.sync()
                        say({})
                    elif cmd == "digest":
                        say([hashlib.sha256(t.numpy().tobytes()).hexdigest() for t in ws + vs])
                    elif cmd == "breakdown":
                        gt.disconnect()
                        if recorder is not None:
                            recorder.stop()
                            recorder = None
                        say(spill_breakdown(record, int(arg)) if record else {})
                    else:
                        break
            finally:
                gt.disconnect()
        finally:
            if recorder is not None:
                recorder.stop()
    return 0


class Runners:
    """The runner processes of one round, stopped (killed if need be) when the block ends."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, config: str, limit: int, size: MlpSize, record: str | None) -> None:
        args = ["--mlp-runner", config, str(limit),
                json.dumps(size.__dict__), record or ""]  # fmt: skip
        self.procs[config] = _spawn(*args, stdin=True)

    def ask(self, config: str, cmd: str, timeout: float = 300) -> object:
        proc = self.procs[config]
        if cmd:
            proc.stdin.write(cmd + "\n")
            proc.stdin.flush()
        return json.loads(common.read_child_line(proc, timeout))

    def __enter__(self) -> Runners:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    proc.stdin.write("quit\n")
                    proc.stdin.flush()
                except OSError:
                    pass
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            common.stop_child(proc)  # kills what is still running; its cluster dies with it


def _counters_delta(before: dict, after: dict, steps: int) -> dict:
    c0, c1 = _memory_counters(before), _memory_counters(after)
    return {k: (c1[k] - c0[k]) / steps for k in c1}


def run_mlp_round(size: MlpSize, limit: int, rnd: int, why_dir: str | None) -> dict:
    """One round: the three configurations on three fresh clusters, taking turns step by step
    (the order rotates every step), so that machine noise hits all of them alike."""
    out: dict = {c: {"t": [], "loss": []} for c in CONFIGS}
    with Runners() as runners:
        for c in CONFIGS:  # start all three, then wait for them: they start in parallel
            runners.start(
                c, limit, size, os.path.join(why_dir, f"{c}-{rnd}.gtrace") if why_dir else None
            )
        for c in CONFIGS:
            runners.ask(c, "", timeout=300)

        def steps(n: int, keep: bool, offset: int) -> None:
            for s in range(n):
                k = (s + offset) % len(CONFIGS)
                for c in CONFIGS[k:] + CONFIGS[:k]:
                    r = runners.ask(c, "step")
                    out[c]["loss"].append(r["loss"])
                    if keep:
                        out[c]["t"].append(r["t"])

        steps(size.warmup, False, rnd)
        time.sleep(1.1)  # a stats report sent after the warm-up has arrived
        before = {c: runners.ask(c, "stats") for c in CONFIGS}
        if why_dir:
            for c in CONFIGS:
                runners.ask(c, "mark measure")
        steps(size.steps, True, rnd)
        if why_dir:
            for c in CONFIGS:
                runners.ask(c, "mark end")
        time.sleep(1.1)
        after = {c: runners.ask(c, "stats") for c in CONFIGS}
        for c in CONFIGS:
            out[c]["digest"] = runners.ask(c, "digest")
            out[c]["counters"] = _counters_delta(before[c], after[c], size.steps)
            out[c]["peak"] = (after[c].get("memory") or {}).get("peak") or 0
            out[c]["limit"] = after[c].get("limit")
            if why_dir:
                out[c]["why"] = runners.ask(c, f"breakdown {size.steps}")
    return out


def spill_breakdown(trace: str, steps: int) -> dict:
    """From a recording: per measured step, the time the executor spent writing spills and reading
    buffers back on demand (waits of the step), and the prefetch thread's reads (in the
    background), with their bytes; and the executor's op time, for scale."""
    from gt.trace.reader import Reader  # noqa: PLC0415

    with Reader(trace) as r:
        marks = {ev.fields["label"]: ev.t_ns for ev in r.events() if ev.kind == "mark"}
        t_a, t_b = marks["measure"], marks["end"]
        out = {k: [0.0, 0, 0] for k in ("spill", "unspill", "prefetch", "ops")}
        for ev in r.events():
            f = ev.fields
            if ev.kind == "transfer" and f.get("direction") in out and t_a <= f["t0"] < t_b:
                o = out[f["direction"]]
                o[0] += (f["t1"] - f["t0"]) / 1e9
                o[1] += f["bytes"]
                o[2] += 1
            elif ev.kind == "exec" and t_a <= f["t0"] < t_b:
                out["ops"][0] += sum(f["durs"]) / 1e9
                out["ops"][1] += f["n"]
                out["ops"][2] += 1
    return {k: [s / steps, n / steps, k2 / steps] for k, (s, n, k2) in out.items()}


def _ms(samples: list[float]) -> str:
    return f"{common.median(samples) * 1e3:7.1f} ms"


def bench_over_limit(args: argparse.Namespace, report: list) -> list[tuple[str, str, bool]]:
    size = (MlpSize(d=512, layers=12, batch=128, warmup=2, steps=6) if args.quick
            else MlpSize(d=1024, layers=12, batch=256, warmup=2, steps=8))  # fmt: skip
    live = size.live_bytes
    limit = live // 3
    print(f"\n1. over the limit: MLP {size.layers} x {size.d}x{size.d} float32 (+ momentum), "
          f"batch {size.batch}; live tensors {live / MB:.1f} MB, limit {limit / MB:.1f} MB "
          f"({live / limit:.2f}x); three clusters taking turns step by step, {size.warmup} warm-up"
          f" + {size.steps} timed steps each, {args.rounds} round(s)", flush=True)  # fmt: skip
    rounds = []
    with tempfile.TemporaryDirectory() as d:
        for rnd in range(args.rounds):
            res = run_mlp_round(size, limit, rnd, d if args.why else None)
            rounds.append(res)
            u = res["unlimited"]["t"]
            for c in CONFIGS:
                r = res[c]
                t, cn = r["t"], r["counters"]
                line = (f"  round {rnd + 1} {c:<12} median step {_ms(t)} (min {min(t) * 1e3:.1f},"
                        f" max {max(t) * 1e3:.1f})")  # fmt: skip
                if c != "unlimited":
                    line += (f" = {common.median(t) / common.median(u):.2f}x; per step: spill_out "
                             f"{cn['spill_out'] / MB:.1f} MB, spill_in {cn['spill_in'] / MB:.1f} MB,"
                             f" prefetched {cn['prefetched'] / MB:.1f} MB, prefetch_hits "
                             f"{cn['prefetch_hits']:.1f}; peak {r['peak'] / MB:.1f} MB")  # fmt: skip
                print(line, flush=True)
                print(f"      steps (ms): {' '.join(f'{x * 1e3:.0f}' for x in t)}", flush=True)
                w = r.get("why")
                if w:
                    print(f"      why (recorded): per step, executor ops {w['ops'][0] * 1e3:.1f} ms"
                          f" ({w['ops'][1]:.0f} instructions); spill writes "
                          f"{w['spill'][0] * 1e3:.1f} ms ({w['spill'][1] / MB:.1f} MB in "
                          f"{w['spill'][2]:.0f}); reads on demand {w['unspill'][0] * 1e3:.1f} ms "
                          f"({w['unspill'][1] / MB:.1f} MB in {w['unspill'][2]:.0f}); prefetch "
                          f"reads {w['prefetch'][0] * 1e3:.1f} ms ({w['prefetch'][1] / MB:.1f} MB "
                          f"in {w['prefetch'][2]:.0f}, in the background)", flush=True)  # fmt: skip

    ref = rounds[0]["unlimited"]
    identical = all(r[c]["digest"] == ref["digest"] and r[c]["loss"] == ref["loss"]
                    for r in rounds for c in CONFIGS)  # fmt: skip
    limited = [r[c] for r in rounds for c in CONFIGS[1:]]
    spilled = all(x["counters"]["spill_out"] > 0 for x in limited)
    under = all(x["peak"] <= limit and x["limit"] == limit for x in limited)
    med = {c: common.median([t for r in rounds for t in r[c]["t"]]) for c in CONFIGS}
    paired = {c: common.median([a / b for r in rounds
                                for a, b in zip(r[c]["t"], r["unlimited"]["t"], strict=True)])
              for c in CONFIGS[1:]}  # fmt: skip
    per_round = {c: [common.median(r[c]["t"]) / common.median(r["unlimited"]["t"]) for r in rounds]
                 for c in CONFIGS[1:]}  # fmt: skip

    def ratio_text(c: str) -> str:
        return (
            f"{paired[c]:.2f}x (per round {', '.join(f'{x:.2f}x' for x in per_round[c])}; pooled "
            f"medians {med[c] * 1e3:.0f} vs {med['unlimited'] * 1e3:.0f} ms)"
        )

    rows = [
        ("1. results identical to the unlimited run (weights, momentum, every loss; bitwise)",
         f"{len(rounds) * len(CONFIGS)} runs, loss {ref['loss'][0]:.6g} -> {ref['loss'][-1]:.6g}",
         identical),
        ("1. the limited runs spilled, and stayed under the limit",
         f"peak {max(x['peak'] for x in limited) / MB:.1f} MB of {limit / MB:.1f} MB",
         spilled and under),
        (f"1. step time, limited + prefetch vs unlimited (<= {SLOWDOWN_TARGET:.2f}x)",
         ratio_text("prefetch"), paired["prefetch"] <= SLOWDOWN_TARGET),
        ("1. step time, limited without prefetch vs unlimited (reported)",
         ratio_text("no-prefetch"), True),
    ]  # fmt: skip
    report.append({"benchmark": "over_limit", "size": size.__dict__, "live": live,
                   "limit": limit, "rounds": rounds, "median_step_s": med,
                   "identical": identical})  # fmt: skip
    return rows


# ============================================================================ 2. neighbour
@dataclass
class NeighbourSize:
    """Benchmark 2: A's buffers, B's matmuls, and the phase blocks."""

    a_buffers: int
    a_side: int
    b_side: int
    block_s: float  # the measured window of each phase block
    settle_s: float  # the start of a block that is not measured (spills and reads settling)
    blocks: int  # fits, over, over, fits, ... (ABBA)
    alone_s: float  # B alone, before A starts

    @property
    def a_bytes(self) -> int:
        return self.a_buffers * self.a_side * self.a_side * 4

    @property
    def plan(self) -> list[str]:
        abba = ("fits", "over", "over", "fits")
        return [abba[i % 4] for i in range(self.blocks)]


def _quota(size: NeighbourSize, phase: str) -> int:
    return 4 * size.a_bytes if phase == "fits" else size.a_bytes // 3


def _client_a(address: str, size: NeighbourSize) -> int:
    """Client A: ``n`` buffers of ``side²`` float32, each updated elementwise every iteration (one
    ``gt.sync()`` per iteration). It runs the phase blocks, setting its quota at the start of each,
    and prints the measured window of each block (monotonic times, its iteration times, and the
    worker's spill counters across the window) as JSON."""
    import gt  # noqa: PLC0415

    n, side = size.a_buffers, size.a_side
    gt.connect(address, timeout=120)
    try:
        gt.config.set(client_memory_limit=_quota(size, size.plan[0]))
        xs = [gt.full((side, side), float(i)) for i in range(n)]

        def iteration() -> float:
            t0 = time.perf_counter()
            for i in range(n):
                xs[i] = xs[i] * 0.5 + 1.0  # converges to 2: bounded, the same work every time
            gt.sync()
            return time.perf_counter() - t0

        for _ in range(2):
            iteration()
        print("ready", flush=True)
        blocks = []
        for phase in size.plan:
            gt.config.set(client_memory_limit=_quota(size, phase))
            t_switch = time.monotonic()
            while time.monotonic() < t_switch + size.settle_s:
                iteration()
            before = quiet_stats(address)
            t_start = time.monotonic()
            iters = []
            while time.monotonic() < t_start + size.block_s:
                iters.append(iteration())
            t_end = time.monotonic()
            after = quiet_stats(address)
            blocks.append({"phase": phase, "t0": t_start, "t1": t_end, "iter_s": iters,
                           "counters": _counters_delta(before, after, 1),
                           "clients": after.get("memory_clients") or {}})  # fmt: skip
        print(json.dumps({"blocks": blocks}), flush=True)
    finally:
        gt.disconnect()
    return 0


def _client_b(address: str, side: int) -> int:
    """Client B: a fixed step (3 chained matmuls, ``.item()``) until a line arrives on stdin;
    prints ``[monotonic start, seconds]`` of every step as JSON."""
    import numpy as np  # noqa: PLC0415

    import gt  # noqa: PLC0415

    gt.connect(address, timeout=120)
    try:
        rng = np.random.default_rng(1)
        scale = np.float32(1 / np.sqrt(side))
        x = gt.from_numpy(rng.standard_normal((side, side), dtype=np.float32))
        w = [gt.from_numpy(rng.standard_normal((side, side), dtype=np.float32) * scale)
             for _ in range(3)]  # fmt: skip

        def step() -> None:
            h = x
            for wj in w:
                h = h @ wj
            h.sum().item()

        for _ in range(5):
            step()
        print("ready", flush=True)
        steps = []
        while not select.select([sys.stdin], [], [], 0)[0]:
            t0 = time.monotonic()
            step()
            steps.append([t0, time.monotonic() - t0])
        print(json.dumps({"steps": steps}), flush=True)
    finally:
        gt.disconnect()
    return 0


def run_neighbour(size: NeighbourSize) -> dict:
    """B alone, then A and B together while A's quota switches between the phases."""
    from gt.runtime.launch import LocalCluster  # noqa: PLC0415

    a = b = None
    with LocalCluster(workers=1) as cluster:
        try:
            b = _spawn("--client-b", cluster.address, str(size.b_side), stdin=True)
            if common.read_child_line(b, 120).strip() != "ready":
                raise RuntimeError("client B did not start")
            alone = (time.monotonic(), time.monotonic() + size.alone_s)
            time.sleep(size.alone_s)
            a = _spawn("--client-a", cluster.address, json.dumps(size.__dict__))
            if common.read_child_line(a, 120).strip() != "ready":
                raise RuntimeError("client A did not start")
            blocks = json.loads(
                common.read_child_line(a, 60 + 3 * (size.block_s + size.settle_s + 2) * size.blocks)
            )["blocks"]
            if a.wait(timeout=30) != 0:
                raise RuntimeError(f"client A exited with code {a.returncode}")
            b.stdin.write("stop\n")
            b.stdin.flush()
            steps = json.loads(common.read_child_line(b, 120))["steps"]
            if b.wait(timeout=30) != 0:
                raise RuntimeError(f"client B exited with code {b.returncode}")
        finally:
            common.stop_child(b)
            common.stop_child(a)

    def inside(t0: float, t1: float) -> list[float]:
        return [dt for s, dt in steps if s >= t0 and s + dt <= t1]

    for blk in blocks:
        blk["b_step_s"] = inside(blk["t0"], blk["t1"])
    return {"alone": inside(*alone), "blocks": blocks}


def _med(samples: list[float]) -> float:
    """The median, NaN for no samples (a window in which B finished no step)."""
    return common.median(samples) if samples else float("nan")


def bench_neighbour(args: argparse.Namespace, report: list) -> list[tuple[str, str, bool]]:
    size = (NeighbourSize(a_buffers=12, a_side=1024, b_side=512, block_s=1.5, settle_s=0.8,
                          blocks=4, alone_s=1.0) if args.quick else
            NeighbourSize(a_buffers=16, a_side=1024, b_side=512, block_s=3.0, settle_s=1.0,
                          blocks=4 * args.rounds, alone_s=2.0))  # fmt: skip
    print(
        f"\n2. neighbour over its quota: A holds {size.a_buffers} x {size.a_side}^2 float32 "
        f"({size.a_bytes / MB:.1f} MB), quota {_quota(size, 'fits') / MB:.0f} MB (fits) or "
        f"{_quota(size, 'over') / MB:.1f} MB (over), switched in {size.blocks} blocks "
        f"({' '.join(size.plan)}), each measured for {size.block_s:g} s after {size.settle_s:g} s "
        f"of settling; B: 3 chained {size.b_side}^2 matmuls + .item() per step, all along",
        flush=True,
    )
    res = run_neighbour(size)
    print(
        f"  B alone          median step {_med(res['alone']) * 1e3:6.2f} ms "
        f"({len(res['alone'])} steps)"
    )
    for k, blk in enumerate(res["blocks"]):
        c, it = blk["counters"], blk["iter_s"]
        a_clients = {c2: [round(u / MB, 1), round(s / MB, 1)]
                     for c2, (u, s) in blk["clients"].items()}  # fmt: skip
        print(
            f"  block {k + 1} {blk['phase']:<5}  B median step "
            f"{_med(blk['b_step_s']) * 1e3:6.2f} ms ({len(blk['b_step_s'])} steps); "
            f"A: {len(it)} iterations, median {_med(it) * 1e3:.1f} ms, spill_out "
            f"{c['spill_out'] / MB / max(1, len(it)):.1f} MB/iter, prefetch_hits "
            f"{c['prefetch_hits']:.0f}; clients [used, spilled] MB {a_clients}",
            flush=True,
        )
    by = {p: [blk for blk in res["blocks"] if blk["phase"] == p] for p in ("fits", "over")}
    med = {p: _med([t for blk in bs for t in blk["b_step_s"]]) for p, bs in by.items()}
    a_med = {p: _med([t for blk in bs for t in blk["iter_s"]]) for p, bs in by.items()}
    pairs = [_med(o["b_step_s"]) / _med(f["b_step_s"]) - 1
             for o, f in zip(by["over"], by["fits"], strict=True)]  # fmt: skip
    change = _med(pairs)  # over adjacent blocks (ABBA): robust to the machine's load drifting
    over_spilled = all(blk["counters"]["spill_out"] > 0 for blk in by["over"])
    fits_clean = all(blk["counters"]["spill_out"] == 0 for blk in by["fits"])
    rows = [
        ("2. A spilled when over its quota, and not when within it",
         f"spill_out per block over: {[round(b['counters']['spill_out'] / MB) for b in by['over']]}"
         f" MB, fits: {[round(b['counters']['spill_out'] / MB) for b in by['fits']]} MB; A's "
         f"iteration {a_med['over'] * 1e3:.0f} vs {a_med['fits'] * 1e3:.0f} ms",
         over_spilled and fits_clean),
        (f"2. B's median step, A over its quota vs A within it (change <= {NEIGHBOUR_TARGET:.0%})",
         f"{change:+.1%} (adjacent block pairs: {', '.join(f'{x:+.1%}' for x in pairs)}; pooled "
         f"medians {med['over'] * 1e3:.1f} vs {med['fits'] * 1e3:.1f} ms; B alone "
         f"{_med(res['alone']) * 1e3:.1f} ms)", abs(change) <= NEIGHBOUR_TARGET),
    ]  # fmt: skip
    report.append({"benchmark": "neighbour", "size": size.__dict__, **res,
                   "median_b_step_s": med})  # fmt: skip
    return rows


# ============================================================================ main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes, one round (~40 s)")
    p.add_argument(
        "--rounds", type=int, default=None, help="alternating rounds (default 2, quick 1)"
    )
    p.add_argument("--only", default="1,2", help="which benchmarks: 1, 2 or 1,2")
    p.add_argument("--blas-threads", type=int, default=common.usable_cores())
    p.add_argument("--why", action="store_true",
                   help="also record one run of each limited configuration and break its spill "
                        "time down (writes, reads on demand, prefetch reads)")  # fmt: skip
    p.add_argument("--json", metavar="PATH", help="write every sample as JSON")
    p.add_argument("--client-a", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--client-b", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--mlp-runner", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.client_a:
        return _client_a(args.client_a[0], NeighbourSize(**json.loads(args.client_a[1])))
    if args.client_b:
        return _client_b(args.client_b[0], int(args.client_b[1]))
    if args.mlp_runner:
        config, limit, size, record = args.mlp_runner
        return _mlp_runner(config, int(limit), MlpSize(**json.loads(size)), record or None)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 2
    only = {s.strip() for s in args.only.split(",")}

    cleared = [v for v in MEMORY_ENV if os.environ.pop(v, None) is not None]
    common.set_blas_threads(args.blas_threads)
    os.environ["GT_BLAS_THREADS"] = str(args.blas_threads)
    os.environ.setdefault("GT_TIMEOUT", "120")
    info = common.machine_info()
    print("GT memory benchmark" + (" (quick)" if args.quick else ""))
    common.print_machine(info)
    if cleared:
        print(f"  (ignoring {', '.join(cleared)} from the environment: the reference is unlimited)")
    load = common.OtherLoad()
    load.start()
    t_start = time.perf_counter()
    rows: list[tuple[str, str, bool]] = []
    report: list = []
    if "1" in only:
        rows += bench_over_limit(args, report)
    if "2" in only:
        rows += bench_neighbour(args, report)
    print()
    width = max(len(r[0]) for r in rows) if rows else 0
    for what, numbers, ok in rows:
        print(f"{'PASS' if ok else 'FAIL'}  {what:<{width}}  {numbers}")
    other = load.share()
    print(
        f"\nBLAS threads {args.blas_threads}; {time.perf_counter() - t_start:.0f} s; other "
        f"programs used {'n/a' if other is None else f'{other:.0%}'} of the CPU during the run"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "machine": info,
                    "results": report,
                    "checks": [{"what": w, "numbers": n, "passed": ok} for w, n, ok in rows],
                },
                f,
                indent=1,
                default=lambda o: o.hex() if isinstance(o, bytes) else str(o),
            )
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
