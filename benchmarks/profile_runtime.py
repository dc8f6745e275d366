"""Where the time goes in runtime benchmarks 1 and 2: CPU time per process and thread, py-spy.

Run ``python benchmarks/profile_runtime.py [--seconds 4] [--no-pyspy] [--keep DIR]``.

For each workload, on GT and on the reference chain of ``bench_runtime.py``:

* ``pipelined``: ``x = x + 1`` in a loop, with a fetch every 100k ops;
* ``roundtrip``: ``(x + 1).numpy()`` (the reference: add + fetch in one message, answered back
  through the forwarder, then straight to the chain worker and back, as GT's direct batches go) in a loop;

it prints the rate, then the CPU time that each process (client, dispatcher/forwarder, worker)
and each of its threads (``main``, ZeroMQ's I/O thread, GT's helper threads) used per op, split
into user and system time, from ``/proc/PID/task/TID/stat``. On a 2-core machine three busy
processes compete for the cores, so CPU per op is a steadier measure than wall time.

With py-spy installed (``pip install py-spy``) it also samples every GT process with
``py-spy record --nonblocking`` (the processes are not paused) and prints the top functions by own
samples with their inclusive share.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence

import zmq
from bench_runtime import ChainClient, chain_worker_main, forwarder_main, worker_blas_env
from common import Children, machine_info, print_machine

import gt
from gt.runtime.launch import LocalCluster

_CLK_TCK = os.sysconf("SC_CLK_TCK")
Counts = tuple[float, float, float, float]  # user s, system s, voluntary / involuntary switches
CpuTable = dict[str, dict[str, Counts]]  # process -> thread name -> counts


def thread_cpu(pid: int) -> dict[str, Counts]:
    """CPU seconds (user, system) and context switches (voluntary, involuntary) per thread name.

    The main thread is called ``main``; threads with the same name are added up. Threads that
    already exited are not counted, which is fine for the long-lived processes measured here.
    A voluntary switch is a thread going to sleep (waiting for a message); an involuntary one is
    a thread preempted because another wanted its core.
    """
    out: dict[str, Counts] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"{base}/comm", encoding="ascii", errors="replace") as f:
                name = f.read().strip()
            with open(f"{base}/status", encoding="ascii", errors="replace") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        name = "main" if tid == str(pid) else name
        now = (
            int(fields[11]) / _CLK_TCK,
            int(fields[12]) / _CLK_TCK,
            float(status.get("voluntary_ctxt_switches", 0)),
            float(status.get("nonvoluntary_ctxt_switches", 0)),
        )
        prev = out.get(name, (0.0, 0.0, 0.0, 0.0))
        out[name] = tuple(x + y for x, y in zip(prev, now, strict=True))  # type: ignore[assignment]
    return out


def snapshot(pids: dict[str, int]) -> CpuTable:
    """:func:`thread_cpu` of every process."""
    return {label: thread_cpu(pid) for label, pid in pids.items()}


def diff(after: CpuTable, before: CpuTable) -> CpuTable:
    """What was used between two snapshots."""
    out: CpuTable = {}
    zero = (0.0, 0.0, 0.0, 0.0)
    for label, threads in after.items():
        out[label] = {}
        for name, now in threads.items():
            prev = before.get(label, {}).get(name, zero)
            out[label][name] = tuple(x - y for x, y in zip(now, prev, strict=True))  # type: ignore[assignment]
    return out


def print_cpu(used: CpuTable, n: int, wall: float, unit: str) -> None:
    """Per process and thread: CPU us per op (user+system), share of a core, switches per op."""
    grand = 0.0
    for label, threads in used.items():
        tu, tk, vol, inv = (sum(c[i] for c in threads.values()) for i in range(4))
        grand += tu + tk
        print(
            f"  {label:11s} {(tu + tk) / n * 1e6:8.2f} us/{unit} "
            f"(user {tu / n * 1e6:7.2f}, sys {tk / n * 1e6:7.2f})  "
            f"{100 * (tu + tk) / wall:5.1f}% of a core; sleeps {vol / n:.2f}/{unit}, "
            f"preempted {inv / n:.2f}/{unit}"
        )
        for name, c in sorted(threads.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
            if (c[0] + c[1]) / wall >= 0.005 or c[2] / n >= 0.1:
                print(
                    f"      {name:16s} {(c[0] + c[1]) / n * 1e6:8.2f} us/{unit}  "
                    f"sleeps {c[2] / n:5.2f}/{unit}"
                )
    print(
        f"  {'all':11s} {grand / n * 1e6:8.2f} us/{unit} of CPU for {wall / n * 1e6:.2f} us of wall"
    )


# ----------------------------------------------------------------------------------------- loads
def gt_pipelined(seconds: float) -> int:
    """GT: ``x = x + 1`` with a fetch every 100k ops, for about ``seconds``; returns ops."""
    x = gt.zeros(4)
    ops = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(100_000):
            x = x + 1
        x.numpy()
        ops += 100_000
    return ops


def gt_roundtrip(seconds: float) -> int:
    """GT: ``(x + 1).numpy()`` for about ``seconds``; returns round trips."""
    x = gt.zeros(4)
    n = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(200):
            (x + 1).numpy()
        n += 200
    return n


def ref_loads(client: ChainClient) -> tuple[Callable[[float], int], Callable[[float], int]]:
    """The reference chain's versions of the two loads."""

    def pipelined(seconds: float) -> int:
        ops = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            client.pipelined_adds(100_000)
            ops += 100_000
        return ops

    def roundtrip(seconds: float, direct: bool = False) -> int:
        n = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            client.roundtrips(200, direct)
            n += 200
        return n

    return pipelined, roundtrip


# ----------------------------------------------------------------------------------------- py-spy
def collapse(path: str) -> tuple[Counter[str], Counter[str], int]:
    """Own and inclusive sample counts per function from a py-spy ``--format raw`` file."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    n = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [short(fr) for fr in stack.split(";")]
            frames = [fr for fr in frames if not fr.startswith(("process ", "thread "))]
            if not frames:
                continue
            c = int(count)
            n += c
            own[frames[-1]] += c
            for fr in set(frames):
                total[fr] += c
    return own, total, n


def short(frame: str) -> str:
    """``func (path/to/file.py:12)`` -> ``func (file.py:12)``."""
    name, sep, rest = frame.partition(" (")
    if not sep:
        return frame
    return f"{name} ({os.path.basename(rest.rstrip(')'))})"


def print_profile(label: str, path: str, top: int) -> None:
    """Print the ``top`` functions of one py-spy profile by own samples."""
    if not os.path.exists(path):
        print(f"    {label}: no profile written")
        return
    own, total, n = collapse(path)
    print(f"    py-spy {label}: {n} non-idle samples; own% incl% function")
    for fn, c in own.most_common(top):
        print(f"      {100 * c / n:5.1f} {100 * total[fn] / n:5.1f}  {fn}")


def start_pyspy(pyspy: str, pid: int, out: str, seconds: float) -> subprocess.Popen:
    """``py-spy record`` of ``pid`` for ``seconds`` into ``out`` (raw collapsed stacks)."""
    cmd = [pyspy, "record", "--pid", str(pid), "--rate", "250", "--nonblocking", "--format", "raw"]
    cmd += ["--output", out, "--duration", str(max(1, int(seconds)))]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ----------------------------------------------------------------------------------------- driver
def measure(
    title: str,
    run: Callable[[float], int],
    unit: str,
    pids: dict[str, int],
    seconds: float,
    spy: tuple[str, str, int] | None = None,
) -> None:
    """Warm up, then run ``run`` for ``seconds`` while counting every process's CPU time.

    ``spy`` is ``(py-spy path, output dir, top)`` to also sample the processes with py-spy.
    """
    run(0.3)
    time.sleep(0.2)
    spies: dict[str, tuple[subprocess.Popen, str]] = {}
    if spy is not None:
        pyspy, outdir, _top = spy
        for label, pid in pids.items():
            out = os.path.join(outdir, f"{title.split()[0]}-{title.split()[1]}-{label}.txt")
            spies[label] = (start_pyspy(pyspy, pid, out, seconds), out)
        time.sleep(0.5)  # let py-spy attach before the clock starts
    before = snapshot(pids)
    t0 = time.perf_counter()
    n = run(seconds)
    wall = time.perf_counter() - t0
    used = diff(snapshot(pids), before)
    print(
        f"\n== {title}: {n / wall:,.0f} {unit}/s ({wall / n * 1e6:.2f} us/{unit}, {n} in {wall:.1f} s)"
    )
    print_cpu(used, n, wall, unit)
    for label, (proc, out) in spies.items():
        try:
            proc.wait(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert spy is not None
        print_profile(label, out, spy[2])


def main(argv: Sequence[str] | None = None) -> int:
    """Profile both loads on GT (one-worker local cluster) and on the reference chain."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=4.0, help="length of each measured load")
    p.add_argument("--top", type=int, default=12, help="functions to print per process")
    p.add_argument("--no-pyspy", action="store_true", help="CPU accounting only")
    p.add_argument("--keep", metavar="DIR", help="keep the raw py-spy files in DIR")
    args = p.parse_args(argv)
    pyspy = None if args.no_pyspy else shutil.which("py-spy")
    if not args.no_pyspy and pyspy is None:
        print("py-spy not found (pip install py-spy): CPU accounting only")
    print_machine(machine_info())
    outdir = args.keep or tempfile.mkdtemp(prefix="gt-profile-")
    os.makedirs(outdir, exist_ok=True)
    spy = (pyspy, outdir, args.top) if pyspy else None
    me = os.getpid()
    try:
        cluster = LocalCluster(workers=1)
        try:
            gt.connect(cluster.address, timeout=60)
            pids = {
                "client": me,
                "dispatcher": cluster.proc.pid,
                "worker": int(worker_blas_env(cluster)[0]["pid"]),
            }
            measure("gt pipelined x=x+1", gt_pipelined, "op", pids, args.seconds, spy)
            measure("gt roundtrip (x+1).numpy()", gt_roundtrip, "rt", pids, args.seconds, spy)
        finally:
            gt.disconnect()
            cluster.stop()
        with Children() as kids:
            front, back = kids.start(forwarder_main, name="ref-forwarder")
            worker_direct = kids.start(chain_worker_main, back, name="ref-worker")
            fwd_pid, wrk_pid = kids.pids()
            ctx = zmq.Context()
            client = ChainClient(ctx, front, worker_direct)
            try:
                pids = {"client": me, "forwarder": fwd_pid, "worker": wrk_pid}
                pipelined, roundtrip = ref_loads(client)
                measure("reference pipelined x=x+1", pipelined, "op", pids, args.seconds)
                measure("reference roundtrip add+fetch", roundtrip, "rt", pids, args.seconds)
                measure(  # the stronger reference: straight to the worker and back (GT's 2 hops)
                    "reference roundtrip, same hops",
                    lambda seconds: roundtrip(seconds, direct=True),
                    "rt",
                    pids,
                    args.seconds,
                )
            finally:
                client.close()
                ctx.destroy(linger=0)
    finally:
        if not args.keep:
            shutil.rmtree(outdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
