"""Where a sync round trip's wall time goes: both ends' own time against the time on the wire.

Run ``python benchmarks/roundtrip_timeline.py [--n 4000]``.

``(x + 1).numpy()`` in a loop on a local cluster (direct batches: client to worker and back, two
hops), with every GT process stamping the monotonic clock -- the same clock in every process of
the machine -- when its runtime sends or receives a message (``gt.runtime.sockets.send_parts`` and
``take``, wrapped by a ``sitecustomize`` module that this script puts on ``PYTHONPATH`` for the
client, the dispatcher and the worker). The client also stamps when ``x + 1`` returns and when
``numpy()`` returns. Matching the stamps of each round trip splits it into:

* client: the tensor op, then the fetch up to the batch's send;
* the wire to the worker (ZeroMQ's I/O threads on both sides, the worker waking from its poll);
* worker: the batch received to the reply sent (parse, schedule, run ``add``, run the fetch);
* the wire back;
* client: the reply received to ``numpy()`` returning (parse, hand over, wrap the array).

The same split is measured for a minimal chain over the same transport (a DEALER client, a ROUTER
worker that adds and answers, msgpack bodies, both ends stamping), so the two wires can be
compared: what GT adds over the chain is the difference of the end segments.
"""

from __future__ import annotations

import argparse
import bisect
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import msgpack
import numpy as np
import zmq
from common import bind_random, machine_info, print_machine

#: Put on PYTHONPATH as ``sitecustomize.py``: wraps GT's send and receive helpers in the process
#: that imports it (any GT process started while ``GT_TIMELINE_DIR`` is set), writing the stamps
#: to ``$GT_TIMELINE_DIR/<pid>.txt`` at exit (first line: the process's argv).
SITECUSTOMIZE = """
import atexit, os, sys, time
_dir = os.environ.get("GT_TIMELINE_DIR")
if _dir:
    import gt.runtime.sockets as _s
    _log = []
    _take, _send, _ns = _s.take, _s.send_parts, time.monotonic_ns
    def take(sock, ready=False):
        frames = _take(sock, ready)
        if frames is not None:
            _log.append(("r", _ns(), len(frames)))
        return frames
    def send_parts(sock, parts, flags=0):
        _log.append(("s", _ns(), len(parts)))
        return _send(sock, parts, flags)
    _s.take, _s.send_parts, _s.timeline = take, send_parts, _log
    for _m in list(sys.modules.values()):  # modules that imported the names already
        if getattr(_m, "__name__", "").startswith("gt.") and _m is not _s:
            if getattr(_m, "take", None) is _take:
                _m.take = take
            if getattr(_m, "send_parts", None) is _send:
                _m.send_parts = send_parts
    def _dump():
        with open(os.path.join(_dir, f"{os.getpid()}.txt"), "w") as f:
            f.write(" ".join(sys.argv) + "\\n")
            f.writelines(f"{k} {t} {n}\\n" for k, t, n in _log[-200000:])
    atexit.register(_dump)
"""

SEGMENTS = (
    "client: the op (x + 1)",
    "client: fetch until sent",
    "wire to the worker",
    "worker: received to reply sent",
    "wire back",
    "client: reply to numpy()",
)

Stamps = list[tuple[str, int, int]]


def gt_client(n: int) -> None:
    """The GT side (run in a child process that has the ``sitecustomize`` on its path)."""
    import gt
    import gt.runtime.sockets as sockets

    log = sockets.timeline  # (set by the sitecustomize)
    ns = time.monotonic_ns
    x = gt.zeros(4)
    x.numpy()
    for _ in range(n // 4):  # warm up: direct batches start after the first ones
        (x + 1).numpy()
    for _ in range(n):
        y = x + 1
        log.append(("a", ns(), 0))
        y.numpy()
        log.append(("b", ns(), 0))
    gt.disconnect()


def read_stamps(folder: Path) -> dict[str, Stamps]:
    """Each process's stamps, keyed ``client``, ``dispatcher`` or ``worker``."""
    out: dict[str, Stamps] = {}
    for f in folder.glob("*.txt"):
        head, *lines = f.read_text().splitlines()
        words = head.split()
        who = "worker" if "worker" in words else "dispatcher" if "dispatcher" in words else "client"
        out[who] = [(k, int(t), int(m)) for k, t, m in (ln.split() for ln in lines)]
    return out


def gt_segments(stamps: dict[str, Stamps]) -> dict[str, list[int]]:
    """Per round trip, the six segments in ns. A direct batch is ``[header, body]`` from the
    client and ``[identity, header, body]`` at the worker; a fetch's reply is three frames at the
    worker (``[identity, header, data]``) and two at the client."""
    c, w = stamps["client"], stamps["worker"]
    w_in = [t for k, t, m in w if k == "r" and m == 3]
    w_out = [t for k, t, m in w if k == "s" and m == 3]
    segs: dict[str, list[int]] = {s: [] for s in SEGMENTS}
    prev_b = None
    a = s = r = None
    for k, t, m in c:
        if k == "a":
            a = t
            if prev_b is not None:
                segs[SEGMENTS[0]].append(t - prev_b)
        elif k == "s" and m == 2 and a is not None:
            s = t
        elif k == "r" and m == 2 and s is not None:
            r = t
        elif k == "b" and a is not None and s is not None and r is not None:
            i = bisect.bisect_left(w_in, s)  # the worker received it after the client sent it
            j = bisect.bisect_left(w_out, w_in[i]) if i < len(w_in) else len(w_out)
            if j < len(w_out) and w_out[j] <= r:
                segs[SEGMENTS[1]].append(s - a)
                segs[SEGMENTS[2]].append(w_in[i] - s)
                segs[SEGMENTS[3]].append(w_out[j] - w_in[i])
                segs[SEGMENTS[4]].append(r - w_out[j])
                segs[SEGMENTS[5]].append(t - r)
            prev_b, a, s, r = t, None, None, None
    return segs


def chain_worker(conn: mp.connection.Connection) -> None:
    """The minimal chain's worker: a ROUTER that runs ``[op, out, arg]`` lists on NumPy and
    answers fetches on the same socket; stamps each batch's arrival and reply."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    conn.send(bind_random(sock))
    ns, table, stamps = time.monotonic_ns, {}, []
    try:
        while True:
            ident, body = sock.recv_multipart()
            t_in = ns()
            instrs = msgpack.unpackb(body)
            if instrs == "stop":
                break
            for op, out, arg in instrs:
                if op == 0:
                    table[out] = np.zeros(4, np.float32)
                elif op == 1:
                    table[out] = table[arg] + 1.0
                else:
                    a = table[arg]
                    t_out = ns()
                    sock.send_multipart([ident, msgpack.packb([out, a.dtype.name]), a.tobytes()])
                    stamps.append((t_in, t_out))
        conn.send(stamps)
    finally:
        ctx.destroy(linger=0)


def chain_segments(n: int) -> dict[str, list[int]]:
    """The six segments for the minimal chain (its op and fetch are one message)."""
    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=chain_worker, args=(child,), daemon=True)
    proc.start()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.RCVTIMEO, 10_000)
    try:
        sock.connect(parent.recv())
        sock.send(msgpack.packb([[0, 1, 0]]))
        ns, rows = time.monotonic_ns, []
        for i in range(n + n // 4):
            t0 = ns()
            body = msgpack.packb([[1, 2, 1], [2, 3, 2]])
            t_sent = ns()
            sock.send(body)
            hdr, data = sock.recv_multipart()
            t_in = ns()
            np.frombuffer(data, dtype=msgpack.unpackb(hdr)[1])
            if i >= n // 4:
                rows.append((t0, t_sent, t_in, ns()))
        sock.send(msgpack.packb("stop"))
        worker = parent.recv()[-n:]
    finally:
        sock.close(0)
        ctx.destroy(linger=0)
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
    segs: dict[str, list[int]] = {s: [] for s in SEGMENTS}
    for (t0, t_sent, t_in, t_done), (w_in, w_out) in zip(rows, worker):
        segs[SEGMENTS[0]].append(0)  # (its op is built with the fetch, in one message)
        segs[SEGMENTS[1]].append(t_sent - t0)
        segs[SEGMENTS[2]].append(w_in - t_sent)
        segs[SEGMENTS[3]].append(w_out - w_in)
        segs[SEGMENTS[4]].append(t_in - w_out)
        segs[SEGMENTS[5]].append(t_done - t_in)
    return segs


def run_gt(n: int) -> dict[str, list[int]]:
    """Start the GT client (and so its local cluster) with the stamping ``sitecustomize``."""
    with tempfile.TemporaryDirectory(prefix="gt-timeline-") as tmp:
        site, stamps = Path(tmp, "site"), Path(tmp, "stamps")
        site.mkdir()
        stamps.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        here = str(Path(__file__).resolve().parent)
        path = os.pathsep.join(p for p in (str(site), here, os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path, "GT_TIMELINE_DIR": str(stamps)}
        code = f"import roundtrip_timeline as r; r.gt_client({n})"
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=600)
        deadline = time.monotonic() + 10  # the cluster's processes write theirs as they exit
        while len(list(stamps.glob("*.txt"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        return gt_segments(read_stamps(stamps))


def report(gt_segs: dict[str, list[int]], chain: dict[str, list[int]]) -> None:
    """Print the medians side by side (µs)."""

    def med(v: list[int]) -> float:
        return statistics.median(v) / 1e3 if v else float("nan")

    print(f"{'segment (median, µs)':34s} {'GT':>8s} {'chain':>8s}")
    for s in SEGMENTS:
        print(f"{s:34s} {med(gt_segs[s]):8.1f} {med(chain[s]):8.1f}")
    ends = (0, 1, 3, 5)
    for label, idx in (("the ends (GT's Python and NumPy)", ends), ("the wire", (2, 4))):
        g = sum(med(gt_segs[SEGMENTS[i]]) for i in idx)
        c = sum(med(chain[SEGMENTS[i]]) for i in idx)
        print(f"{label:34s} {g:8.1f} {c:8.1f}")
    print(
        f"{'round trips matched':34s} {len(gt_segs[SEGMENTS[3]]):8d} {len(chain[SEGMENTS[3]]):8d}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4000, help="round trips measured on each side")
    args = ap.parse_args(argv)
    print_machine(machine_info())
    chain = chain_segments(args.n)
    gt_segs = run_gt(args.n)
    report(gt_segs, chain)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
