"""Per-tenant bounds with two real clients, one of them hostile: the other's step time and results.

Run ``python benchmarks/bench_hostile.py [--quick]`` from the repository root (~1 min on 2 cores,
``--quick`` ~20 s). One cluster shared as users share one: ``python -m gt dispatcher --workers 1
--client-memory-limit 16MB`` (TCP, CURVE; a private keyring and ``GT_RUNTIME_DIR`` in a temporary
directory). Two client processes hold only the *client* role's keys:

* **B, the victim**, steps all along: 3 chained 256×256 float32 matmuls, a row summed, ``.item()``;
  small-integer inputs keep every partial sum an integer under 2**24, so each value must be exactly
  NumPy's (int64) answer, in any summation order.
* **A, the attacker**, alternates blocks (quiet, attack, attack, quiet, ...; each measured a few
  seconds after ~1 s of settling, as ``bench_memory.py``'s neighbour scenario). Quiet: idle,
  connected. Attack, through the public API and the protocol by hand (pyzmq, client keys):
  ``broadcast`` (an op over a 2**40-element broadcast view), ``quota`` (a result over the quota),
  ``object`` (object dtypes, non-number immediates), ``srclocs`` (2,000 long source lines a batch),
  ``hello`` (a HELLO flood), ``control`` (admin-only and unknown requests), ``garbage`` (random
  frames, wrong versions, malformed fields), ``forged`` (DONE, RELAY, DATA naming B's client number
  on the front, PEER data for B on the worker's data socket), ``upload`` (unclaimed 256 KiB uploads).

Pacing: fixed rates (``RATES``, ~330 attempts/s in all; ``--rate`` scales, ``--kinds`` picks),
checked every 10 ms, sleeping in between (A uses a few % of a core): an attacker wants to break
bounds; on 2 cores a spinning process would slow B through the OS scheduler whatever GT does.

Printed: B's median step per block, pooled medians quiet vs attack, the change judged (as in
``bench_memory.py``) by the median over adjacent quiet/attack block pairs (target <= 10 %), B's
exactness, A's attempts and the answers it got, whether dispatcher and worker live, and the
dispatcher's ``bad_messages`` and ``internal_errors`` (must be 0). Exits 1 when a check fails, as
the other benchmarks do (``--strict`` is accepted and changes nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zmq

import gt
from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime import security as S
from gt.runtime.control import ControlError, request

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402 - the benchmarks' shared helpers, next to this file

REPO = Path(__file__).resolve().parent.parent
TARGET = 0.10
QUOTA = "16MB"
N = 256  # B's matrices are N x N
#: Attempts per second of each kind during an attack block.
RATES = {"garbage": 150, "forged": 40, "hello": 20, "control": 20, "object": 40, "srclocs": 5,
         "upload": 20, "broadcast": 30, "quota": 5}  # fmt: skip
TICK_S = 0.01
#: What an answer's text is counted as (the first that occurs in it, else its start).
LABELS = ("over the limit", "quota", "unsupported dtype", "an argument is", "needs the admin role",
          "unknown control request", "unknown client", "may not run programs")  # fmt: skip


@dataclass
class Size:
    """The run's shape: blocks, and how long each is measured after settling."""

    blocks: int
    block_s: float
    settle_s: float
    rate: float = 1.0
    kinds: tuple[str, ...] = tuple(RATES)
    decoy: bool = False

    @property
    def plan(self) -> list[str]:
        """quiet, attack, attack, quiet, quiet, attack, ... (ABBA: drift hits both alike); with
        ``decoy``, quiet, attack, decoy, decoy, attack, quiet, ..."""
        cycle = ("quiet", "attack", "decoy", "decoy", "attack", "quiet") if self.decoy else (
            "quiet", "attack", "attack", "quiet")  # fmt: skip
        return [cycle[k % len(cycle)] for k in range(self.blocks)]


def _label(text: str) -> str:
    return next((lab for lab in LABELS if lab in text), text[:48])


# ============================================================================ processes
def _spawn(env: dict, *args: str) -> subprocess.Popen:
    """This script in a child process (a client), its stdout a pipe of JSON lines."""
    return subprocess.Popen([sys.executable, __file__, *args], text=True, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip


# ============================================================================ B, the victim
def _victim(front: str) -> int:
    rng = np.random.default_rng(7)
    x = rng.integers(-1, 2, size=(N, N)).astype(np.float32)
    ws = [rng.choice(np.float32([-1, 0, 1]), size=(N, N), p=[1 / 64, 31 / 32, 1 / 64])
          for _ in range(3)]  # fmt: skip
    bound, exact = np.abs(x).astype(np.int64), x.astype(np.int64)
    for w in ws:
        bound, exact = bound @ np.abs(w).astype(np.int64), exact @ w.astype(np.int64)
    # every partial sum of any order is an integer under 2**24, so float32 gets it exactly
    assert bound.sum(axis=1).max() < 1 << 24, "B's inputs are not exact in float32"
    want = exact.sum(axis=1).astype(np.float64)  # step k fetches the sum of row k % N
    gt.connect(front, timeout=60)
    try:
        gx, gw = gt.from_numpy(x), [gt.from_numpy(w) for w in ws]
        gx.sum().item()  # uploaded
        print("ready", flush=True)
        steps, wrong, errors, k = [], 0, Counter(), 0
        while not select.select([sys.stdin], [], [], 0)[0]:
            t0 = time.monotonic()
            try:
                v = (((gx @ gw[0]) @ gw[1]) @ gw[2])[k % N].sum().item()
                wrong += int(v != want[k % N])
            except gt.GTError as exc:
                errors[_label(f"{type(exc).__name__}: {exc}")] += 1
            steps.append((t0, time.monotonic() - t0))
            k += 1
        print(json.dumps({"steps": steps, "wrong": wrong, "errors": errors}), flush=True)
    finally:
        gt.disconnect()
    return 0


# ============================================================================ A, the attacker
class Hostile:
    """A tenant with client keys that tries everything it should not get away with."""

    def __init__(self, front: str) -> None:
        self.conn = gt.connect(front, timeout=60)  # the public API, as any program
        others = [c["id"] for c in self.conn.control("stats")["clients"]
                  if c["id"] != self.conn.client_no]  # fmt: skip
        self.victim = others[0] if others else self.conn.client_no - 1  # B's client number
        self.ctx = zmq.Context()
        self.raw = self._dealer(front)  # the protocol by hand, as another client
        self.hellos = self._dealer(front)
        self.junk = self._dealer(front)
        w = self.conn.workers[0]
        self.data = self._dealer(w["data"], w.get("data_key"))
        self.rng = random.Random(1)
        self.tried: Counter = Counter()
        self.answers: defaultdict[str, Counter] = defaultdict(Counter)
        self.kind_of_seq: dict[int, str] = {}
        self.seq = self.out = self.tok = self.srcloc = 0
        self._send(self.raw, "hello", [self._hello()])
        self.raw_cno = None
        deadline = time.monotonic() + 30
        while self.raw_cno is None and time.monotonic() < deadline:
            self.drain(0.1)

    def _dealer(self, endpoint: str, server_key: bytes | None = None):
        s = self.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.SNDHWM, 2000)
        S.secure_connect(s, endpoint, ("client",), server_key)
        s.connect(endpoint)
        return s

    def close(self) -> None:
        for s in (self.raw, self.hellos, self.junk, self.data):
            s.close(0)
        self.ctx.term()
        gt.disconnect()

    def _hello(self) -> bytes:
        return P.encode(P.Hello(os.getpid(), "evil", ["x" * 100] * 50, os.urandom(8)))

    def _send(self, sock, kind: str, frames: list) -> None:
        try:
            sock.send_multipart(frames, zmq.NOBLOCK)
        except zmq.Again:
            self.answers[kind]["not sent (queue full)"] += 1

    def _batch(self, kind: str, instrs: list, srclocs: list | None = None) -> None:
        self.seq += 1
        self.kind_of_seq[self.seq] = kind
        head = P.encode(P.Batch(self.seq, len(instrs), srclocs))
        self._send(self.raw, kind, [head, P.encode_body(instrs, [])])

    def attempt(self, kind: str) -> None:
        """One attempt of ``kind`` (see the module docstring)."""
        rng = self.rng
        self.tried[kind] += 1
        if kind in ("broadcast", "quota"):
            try:
                if kind == "broadcast":  # a 2**40-element view of one element, then read all
                    gt.ones(1).expand(1 << 20, 1 << 20).sum().item()
                else:  # 2048 x 2048 float32 = 16.8 MB, just over the quota
                    (gt.ones(2048, 1) + gt.ones(1, 2048)).sum().item()
                self.answers[kind]["accepted"] += 1
            except gt.GTError as exc:
                self.answers[kind][f"{type(exc).__name__}: {_label(str(exc))}"] += 1
        elif kind == "object":
            self.out += 1
            arg, attrs = rng.choice([([1.0], {"shape": [4], "dtype": "object"}),
                                     (["a string"], {"shape": [4], "dtype": "float32"}),
                                     ([[[1, 2]]], {"shape": [4], "dtype": "int64"})])  # fmt: skip
            self._batch(kind, [[O.OPCODE["full"], 1_000_000 + self.out, arg, attrs, 0]])
        elif kind == "srclocs":
            self.srcloc += 2000
            lines = [[self.srcloc + i, f"evil.py:{i} " + "x" * 300] for i in range(2000)]
            self._batch(kind, [], lines)
        elif kind == "hello":
            self._send(self.hellos, kind, [self._hello()])
        elif kind == "control":
            req = rng.choice([("config_apply", {"config": {"x": {"replicate": {}}}, "by": "A"}),
                              ("memory_set", {"settings": {"client_memory_limit": "1TB"}}),
                              ("no such request", None)])  # fmt: skip
            self._send(self.raw, kind, [P.encode(P.Control(*req))])
        elif kind == "upload":
            self.tok += 1
            self._send(self.data, kind, [P.encode(P.Upload(1 << 40 | self.tok)), bytes(256 << 10)])
        elif kind == "forged":
            v = self.victim  # B's number, as if its results came from A
            sock, msg = rng.choice([(self.junk, P.Done(v, 1, [["forged", 0, 0]], 1, 10)),
                                    (self.junk, P.Relay(v, 1, "float32", [1], None)),
                                    (self.junk, P.Data(1, "float32", [1], None)),
                                    (self.data, P.Peer(v, 1, 0, "float32", [1], None))])  # fmt: skip
            self._send(sock, kind, [P.encode(msg), b"\0\0\0\0"])
        elif kind == "garbage":
            self._send(self.junk, kind, self._garbage())

    def _garbage(self) -> list[bytes]:
        rng = self.rng
        pick = rng.randrange(4)
        if pick == 0:
            return [rng.randbytes(rng.randrange(1, 64)) for _ in range(rng.randrange(1, 4))]
        if pick == 1:
            return [P.packb({"hello": rng.random()})]
        if pick == 2:
            return [P.packb([P.VERSION + 1, P.Hello.KIND, 1, "h", [], b"t"])]
        kind = rng.choice(P.KINDS)  # a real kind, every field of the wrong type
        return [P.packb([P.VERSION, kind.KIND, *([{"x": None}] * len(kind._fields))]), b"\x93"]

    def drain(self, wait: float = 0.0) -> None:
        """Read and count every answer that has come in (waiting at most ``wait`` s first)."""
        for sock in (self.raw, self.hellos, self.junk, self.data):
            if wait and sock is self.raw:
                sock.poll(int(wait * 1000))
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                try:
                    msg = P.parse(frames[0])
                except P.ProtocolError as exc:
                    self.answers["(unparsable answers)"][str(exc)[:40]] += 1
                    continue
                self._count(sock, msg)

    def _count(self, sock, msg) -> None:
        kind = {id(self.hellos): "hello", id(self.junk): "garbage/forged",
                id(self.data): "upload/forged"}.get(id(sock), "control")  # fmt: skip
        if type(msg) is P.Welcome and sock is self.raw:
            self.raw_cno = msg.client
        elif type(msg) is P.Welcome:
            self.answers["hello"]["Welcome"] += 1
        elif type(msg) is P.Ack:
            kind = self.kind_of_seq.pop(msg.seq, "?")
            for err in msg.errors or [["(no error)"]]:
                self.answers[kind][f"Ack: {_label(str(err[0]))}"] += 1
        elif type(msg) is P.Reply:
            self.answers[kind][f"Reply ok={msg.ok}: {_label(str(msg.payload))}"] += 1
        elif type(msg) is P.Error:
            self.answers[kind][f"Error {msg.code}"] += 1
            if msg.code == P.E_UNKNOWN_CLIENT and sock is self.raw:  # dropped: come back
                self._send(self.raw, "hello", [self._hello()])
        elif type(msg) is not P.Heartbeat:
            self.answers[kind][type(msg).__name__] += 1

    def block(self, phase: str, seconds: float, rates: dict[str, float], burn: float = 0.0) -> None:
        """Attack (or idle, connected) for ``seconds``, at ``rates`` attempts per second; as a
        ``decoy``, spin ``burn`` of each tick instead (A's own CPU, without a message to GT)."""
        credit = dict.fromkeys(rates, 0.0)
        last = now = time.monotonic()
        end = now + seconds
        while now < end:
            if phase == "decoy":
                stop = time.thread_time() + burn * TICK_S
                while time.thread_time() < stop:
                    pass
            elif phase == "attack":
                for kind, rate in rates.items():  # at most one second of backlog per kind
                    credit[kind] = min(credit[kind] + rate * (now - last), max(1.0, rate))
                    while credit[kind] >= 1.0:
                        credit[kind] -= 1.0
                        self.attempt(kind)
            last = now
            self.drain()
            time.sleep(TICK_S)
            now = time.monotonic()


def _hostile(front: str, size: Size) -> int:
    a = Hostile(front)
    try:
        print("ready", flush=True)
        rates = {k: r * size.rate for k, r in RATES.items() if k in size.kinds}
        blocks = []
        burn = 0.0  # a decoy block spins as much CPU as the attack blocks used
        for phase in size.plan:
            a.block(phase, size.settle_s, rates, burn)
            before, t0, cpu0 = Counter(a.tried), time.monotonic(), time.process_time()
            a.block(phase, size.block_s, rates, burn)
            t1 = time.monotonic()
            blocks.append({"phase": phase, "t0": t0, "t1": t1, "tried": dict(a.tried - before),
                           "cpu": (time.process_time() - cpu0) / (t1 - t0)})  # fmt: skip
            if phase == "attack":
                burn = common.median([b["cpu"] for b in blocks if b["phase"] == "attack"])
        a.block("quiet", 1.0, rates)  # the last answers
        out = {"blocks": blocks, "tried": a.tried, "answers": a.answers, "victim": a.victim}
        print(json.dumps(out), flush=True)
    finally:
        a.close()
    return 0


# ============================================================================ the run
def run(size: Size) -> dict:
    """A shared cluster, B all along, A in blocks; then the cluster's state."""
    disp = a = b = None
    with tempfile.TemporaryDirectory(prefix="gt-bench-hostile-") as tmp:
        ring = S.create(f"{tmp}/keys")
        S.export(ring, "client", f"{tmp}/client")  # what each tenant holds: client keys only
        base = {**os.environ, "GT_RUNTIME_DIR": f"{tmp}/run",
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                            os.environ.get("PYTHONPATH")]))}  # fmt: skip
        os.environ[S.KEYS_ENV] = f"{tmp}/keys"  # this process: the owner, to read stats
        log = open(f"{tmp}/dispatcher.log", "w+", encoding="utf-8")  # noqa: SIM115
        try:
            disp = subprocess.Popen(
                [sys.executable, "-m", "gt", "dispatcher", "--workers", "1", "--ready-json",
                 "--client-memory-limit", QUOTA],
                stdout=subprocess.PIPE, stderr=log, text=True, env={**base, S.KEYS_ENV: f"{tmp}/keys"},
            )  # fmt: skip
            eps = json.loads(common.read_child_line(disp, 60))
            deadline = time.monotonic() + 60
            while not request(eps["control"], "stats", timeout=10)["workers"]:
                if time.monotonic() > deadline:
                    raise RuntimeError("the dispatcher's worker did not register within 60 s")
                time.sleep(0.2)
            tenant = {**base, S.KEYS_ENV: f"{tmp}/client"}
            b = _spawn(tenant, "--victim", eps["front"])
            if common.read_child_line(b, 120).strip() != "ready":
                raise RuntimeError("client B did not start")
            a = _spawn(tenant, "--hostile", eps["front"], json.dumps(size.__dict__))
            if common.read_child_line(a, 120).strip() != "ready":
                raise RuntimeError("client A did not start")
            workers = common.child_pids(disp.pid)
            cpu = common.CpuSampler({"dispatcher": disp.pid, "B": b.pid, "A": a.pid,
                                     **{f"worker {i}": p for i, p in enumerate(workers)}}).start()  # fmt: skip
            res_a = json.loads(
                common.read_child_line(a, 60 + 2 * size.blocks * (size.block_s + size.settle_s))
            )
            cpu.stop()
            b.stdin.write("stop\n")
            b.stdin.flush()
            res_b = json.loads(common.read_child_line(b, 60))
            time.sleep(1.0)  # workers report their counters twice a second
            try:
                stats = request(eps["control"], "stats", timeout=10)
            except ControlError as exc:
                stats = {"error": str(exc)}
            alive = {"dispatcher": disp.poll() is None}
            alive.update({f"worker {w['id']}": w["alive"] for w in stats.get("workers", [])})
        finally:
            common.stop_child(a)
            common.stop_child(b)
            common.stop_child(disp)
            log.seek(0)
            tail = log.read()[-3000:]
            log.close()
    return {"a": res_a, "b": res_b, "stats": stats, "alive": alive, "log": tail, "cpu": cpu}


def _med(samples: list[float]) -> float:
    return common.median(samples) if samples else float("nan")


def report(res: dict) -> list[tuple[str, str, bool]]:
    """Print the blocks and A's attempts; the checks as ``(what, numbers, passed)``."""
    steps, blocks, cpu = res["b"]["steps"], res["a"]["blocks"], res["cpu"]
    gt_procs = [n for n in cpu.pids if n == "dispatcher" or n.startswith("worker")]
    for k, blk in enumerate(blocks):
        blk["b"] = [dt for s, dt in steps if s >= blk["t0"] and s + dt <= blk["t1"]]
        blk["gt_cpu"] = sum(cpu.rate(n, blk["t0"], blk["t1"]) for n in gt_procs)
        blk["b_cpu"] = cpu.rate("B", blk["t0"], blk["t1"])
        tried = sum(blk["tried"].values())
        print(f"  block {k + 1} {blk['phase']:<6}  B median step {_med(blk['b']) * 1e3:6.2f} ms "
              f"({len(blk['b'])} steps); A: {tried} attempts "
              f"({tried / (blk['t1'] - blk['t0']):.0f}/s), its CPU {blk['cpu']:.0%}; "
              f"dispatcher + worker {blk['gt_cpu']:.0%}, B's client {blk['b_cpu']:.0%}",
              flush=True)  # fmt: skip
    by = {p: [blk for blk in blocks if blk["phase"] == p] for p in ("quiet", "attack", "decoy")}
    med = {p: _med([t for blk in bs for t in blk["b"]]) for p, bs in by.items()}
    pairs = [_med(x["b"]) / _med(q["b"]) - 1
             for x, q in zip(by["attack"], by["quiet"], strict=False)]  # fmt: skip
    change = _med(pairs)
    decoy = None
    if by["decoy"]:  # quiet attack decoy decoy attack quiet: each decoy next to an attack
        dpairs = [_med(x["b"]) / _med(d["b"]) - 1
                  for x, d in zip(by["attack"], by["decoy"], strict=False)]  # fmt: skip
        qpairs = [_med(d["b"]) / _med(q["b"]) - 1
                  for d, q in zip(by["decoy"][::2], by["quiet"][::2], strict=False)]  # fmt: skip
        decoy = (_med(dpairs), dpairs, _med(qpairs))
        print(f"  A's own CPU alone (decoy blocks: A spins what its attacks used, sends nothing): "
              f"B {decoy[2]:+.1%} against quiet; attack against decoy {decoy[0]:+.1%} (pairs "
              f"{', '.join(f'{x:+.1%}' for x in dpairs)}): what GT's handling of A costs B")  # fmt: skip
    per_step = {p: _med([blk["gt_cpu"] * (blk["t1"] - blk["t0"]) / max(1, len(blk["b"]))
                         for blk in bs]) for p, bs in by.items()}  # fmt: skip
    extra = _med(
        [x["gt_cpu"] - q["gt_cpu"] for x, q in zip(by["attack"], by["quiet"], strict=False)]
    )
    attempts = _med([sum(x["tried"].values()) / (x["t1"] - x["t0"]) for x in by["attack"]])
    print(f"  GT's own CPU (dispatcher + worker), attack vs quiet: {extra * 100:+.1f} % of a core "
          f"(median over adjacent pairs; {extra / attempts * 1e6 if attempts else float('nan'):.0f} µs "
          f"per attempt), {per_step['attack'] * 1e6:.0f} vs {per_step['quiet'] * 1e6:.0f} µs per "
          f"step of B")  # fmt: skip
    print("  A's attempts and how they were answered:")
    answers = res["a"]["answers"]
    for kind, n in res["a"]["tried"].items():
        print(f"    {kind:<9} {n:6d} tried; {dict(answers.get(kind, {})) or 'no answer'}")
    for kind, got in answers.items():  # answers on sockets that several kinds share
        if kind not in res["a"]["tried"]:
            print(f"    {kind}: {dict(got)}")
    st, alive = res["stats"], res["alive"]
    wstats = [w.get("stats") or {} for w in st.get("workers", [])]
    print(f"  dispatcher stats: bad_messages {st.get('bad_messages')}, internal_errors "
          f"{st.get('internal_errors')}; worker bad_messages "
          f"{[w.get('bad_messages') for w in wstats]}, unclaimed bytes "
          f"{[w.get('unclaimed') for w in wstats]}; alive {alive}")  # fmt: skip
    if st.get("internal_errors") or not all(alive.values()):
        print("  dispatcher log (tail):\n" + res["log"])
    b = res["b"]
    return [
        (f"B's median step, A attacking vs A quiet (change <= {TARGET:.0%})",
         f"{change:+.1%} (adjacent block pairs: {', '.join(f'{x:+.1%}' for x in pairs)}; pooled "
         f"medians {med['attack'] * 1e3:.2f} vs {med['quiet'] * 1e3:.2f} ms, "
         f"{med['attack'] / med['quiet'] - 1:+.1%})", abs(change) <= TARGET),
        ("B's results all exact, nothing lost",
         f"{len(steps)} steps, {b['wrong']} wrong, errors {dict(b['errors']) or 'none'}",
         b["wrong"] == 0 and not b["errors"] and len(steps) > 0),
        ("dispatcher and worker alive, internal_errors 0",
         f"alive {alive}, internal_errors {st.get('internal_errors')}",
         all(alive.values()) and st.get("internal_errors") == 0),
    ]  # fmt: skip


# ============================================================================ main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="4 short blocks (~20 s)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of 4 blocks (default 2)")
    p.add_argument("--rate", type=float, default=1.0, help="scale A's attempt rates (default 1)")
    p.add_argument("--kinds", default=",".join(RATES),
                   help=f"the attacks A makes (default all: {','.join(RATES)})")  # fmt: skip
    p.add_argument("--decoy", action="store_true",
                   help="add decoy blocks (A spins the CPU its attacks used and sends nothing), to "
                        "tell GT's cost from A's own; rounds of 6 blocks then")  # fmt: skip
    p.add_argument(
        "--strict",
        action="store_true",
        help="(the default now: the exit status is 1 if a check fails)",
    )
    p.add_argument("--json", metavar="PATH", help="write every sample as JSON")
    p.add_argument("--victim", nargs=1, help=argparse.SUPPRESS)
    p.add_argument("--hostile", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.victim:
        return _victim(args.victim[0])
    if args.hostile:
        return _hostile(args.hostile[0], Size(**json.loads(args.hostile[1])))
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if set(kinds) - set(RATES):
        p.error(f"unknown --kinds {sorted(set(kinds) - set(RATES))}: from {', '.join(RATES)}")
    size = (Size(blocks=4, block_s=2.0, settle_s=0.8, rate=args.rate, kinds=kinds) if args.quick
            else Size(blocks=(6 if args.decoy else 4) * args.rounds, block_s=4.0, settle_s=1.0,
                      rate=args.rate, kinds=kinds, decoy=args.decoy))  # fmt: skip
    os.environ.setdefault("GT_TIMEOUT", "120")
    info = common.machine_info()
    print("GT hostile-tenant benchmark" + (" (quick)" if args.quick else ""))
    common.print_machine(info)
    total = sum(r for k, r in RATES.items() if k in kinds) * size.rate
    print(f"\nB: 3 chained {N}^2 float32 matmuls + .item() per step, all along; A: {size.blocks} "
          f"blocks ({' '.join(size.plan)}), each measured {size.block_s:g} s after "
          f"{size.settle_s:g} s, attacking at ~{total:.0f} attempts/s; quota {QUOTA}",
          flush=True)  # fmt: skip
    load = common.OtherLoad()
    load.start()
    t_start = time.perf_counter()
    res = run(size)
    rows = report(res)
    print()
    width = max(len(r[0]) for r in rows)
    for what, numbers, ok in rows:
        print(f"{'PASS' if ok else 'FAIL'}  {what:<{width}}  {numbers}")
    other = load.share()
    print(f"\n{time.perf_counter() - t_start:.0f} s; other programs used "
          f"{'n/a' if other is None else f'{other:.0%}'} of the CPU during the run")  # fmt: skip
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": info, "size": size.__dict__, **res,
                       "checks": [{"what": w, "numbers": n, "passed": ok} for w, n, ok in rows]},
                      f, indent=1, default=str)  # fmt: skip
    ok = all(passed for *_, passed in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
