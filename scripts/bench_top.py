"""Measure ``gt top`` 's CPU under a synthetic event flood (no cluster needed).

A fake dispatcher (an XPUB events endpoint and a control endpoint that answers ``ping`` and
``snapshot``) publishes ``exec`` events for N workers at a fixed rate, while ``gt top`` runs in a
real terminal (tmux) against it. Prints the monitor's CPU use (% of one core) over the run.

    python scripts/bench_top.py --workers 4 --exec-rate 2000 --ops 64 --seconds 10
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import threading
import time

import zmq

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.trace import events as E


def serve_control(sock: zmq.Socket, eps: dict, workers: int, stop: threading.Event) -> None:
    """Answer ping/snapshot/endpoints like a dispatcher would."""
    while not stop.is_set():
        if not sock.poll(100):
            continue
        frames = sock.recv_multipart()
        what = P.parse(frames[-1]).request
        if what == "snapshot":
            payload = {"uptime": 1.0, "clock": time.monotonic_ns(),
                       "workers": [{"id": w, "alive": True, "device": f"cuda:{w}", "backend": "cupy", "host": "bench",
                                    "pid": 1000 + w} for w in range(workers)],
                       "clients": [{"id": 1, "home": 0, "host": "bench", "pid": 1, "argv": ["bench.py"]}]}  # fmt: skip
        elif what == "endpoints":
            payload = eps
        else:
            payload = {"pid": os.getpid(), "uptime": 1.0}
        sock.send_multipart([*frames[:-1], P.encode(P.Reply(True, payload))])


def publish(pub: zmq.Socket, workers: int, exec_rate: float, ops: int, seconds: float) -> int:
    """Publish exec (and memory) events at ``exec_rate`` per second in total; returns events sent."""
    rng = random.Random(0)
    codes = [O.OPCODE[n] for n in ("matmul", "add", "mul", "tanh", "sum", "exp")]
    seqs = [0] * workers
    batch_no = [0] * workers
    flush_every = 0.005
    per_flush = exec_rate * flush_every / workers
    carry = [0.0] * workers
    sent = 0
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        tick = time.monotonic()
        for w in range(workers):
            carry[w] += per_flush
            n = int(carry[w])
            carry[w] -= n
            if not n:
                continue
            now = time.monotonic_ns()
            evs = []
            for i in range(n):
                t0 = now - (n - i) * 400_000
                op = [codes[(j + i) % len(codes)] for j in range(ops)]
                durs = [rng.randint(1000, 9000) for _ in range(ops)]
                evs.append([E.EXEC, t0, {"worker": w, "client": 1, "batch": batch_no[w], "t0": t0, "t1": t0 + sum(durs),
                                         "n": ops, "ops": op, "outs": list(range(ops)), "srcs": [1] * ops,
                                         "durs": durs, "hot": False, "queue": 2, "errors": 0}])  # fmt: skip
                batch_no[w] += 1
            if batch_no[w] % 50 < n:
                evs.append([E.MEMORY, now, {"worker": w, "used": 1 << 30, "reserved": 2 << 30, "limit": 8 << 30,
                                            "spilled": 0, "tensors": 100}])  # fmt: skip
            pub.send_multipart([E.TOPIC, E.pack_batch(f"worker:{w}", seqs[w], evs)])
            seqs[w] += len(evs)
            sent += len(evs)
        time.sleep(max(0.0, flush_every - (time.monotonic() - tick)))
    return sent


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument(
        "--exec-rate", type=float, default=2000, help="exec events per second, all workers"
    )
    ap.add_argument("--ops", type=int, default=64, help="instructions per exec event")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--hz", type=float, default=8)
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("bench_top needs tmux", file=sys.stderr)
        return 1
    ctx = zmq.Context()
    pub = ctx.socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, 0)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    ctl = ctx.socket(zmq.ROUTER)
    ctl.setsockopt(zmq.LINGER, 0)
    cport = ctl.bind_to_random_port("tcp://127.0.0.1")
    eps = {
        "front": f"tcp://127.0.0.1:{cport}",
        "control": f"tcp://127.0.0.1:{cport}",
        "events": f"tcp://127.0.0.1:{port}",
    }
    stop = threading.Event()
    server = threading.Thread(
        target=serve_control, args=(ctl, eps, args.workers, stop), daemon=True
    )
    server.start()
    session = f"gt-bench-{os.getpid()}"
    cmd = f"{sys.executable} -m gt top --connect {eps['front']} --hz {args.hz}"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", f"exec {cmd}"],
        check=True,
    )
    try:
        pid = int(
            subprocess.check_output(
                ["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"]
            ).split()[0]
        )
        time.sleep(2.0)  # let it start and attach
        c0, w0 = cpu_seconds(pid), time.monotonic()
        sent = publish(pub, args.workers, args.exec_rate, args.ops, args.seconds)
        c1, w1 = cpu_seconds(pid), time.monotonic()
        screen = subprocess.check_output(["tmux", "capture-pane", "-p", "-t", session]).decode()
        print("\n".join(screen.splitlines()[:8]))
        rate = sent / (w1 - w0)
        print(f"published {rate:.0f} events/s (~{rate * args.ops:.0f} instr/s); "
              f"gt top used {100 * (c1 - c0) / (w1 - w0):.1f}% of one core")  # fmt: skip
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
        stop.set()
        server.join(timeout=2)
        pub.close(0)
        ctl.close(0)
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
