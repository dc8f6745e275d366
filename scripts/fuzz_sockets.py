"""Fuzz every socket of a live local cluster while a legitimate client checks its results.

Run ``python scripts/fuzz_sockets.py [--messages N] [--seed S]``: a cluster of two workers and a
recorder; then, for each socket -- the dispatcher's front, back and control, a worker's data socket
(as a stranger, and as a "peer" named like a worker), and the event bus -- N messages that are
garbage, random msgpack, or real GT headers with fields of the wrong type, bodies of random
instructions, and event batches with random fields. Meanwhile a client computes and checks exact
results. At the end every process must be alive, the dispatcher must have counted bad input and
logged no bug of its own (``internal_errors``), and the recorder must still be recording.

``tests/integration/test_fuzz.py`` runs a small form of it on every CI run.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack
import zmq

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.trace import events as E


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A random msgpack-able value, with the edge cases parsers trip on."""
    pick = rng.randrange(12 if depth < 3 else 8)
    if pick == 0:
        return rng.choice([0, -1, 1, 2**31, -(2**63), 2**64 - 1, 7])
    if pick == 1:
        return rng.choice([0.0, -0.0, 1e308, float("inf"), float("nan"), 3.5])
    if pick == 2:
        return rng.choice(["", "float32", "object", "x" * rng.randrange(200), "\u2603"])
    if pick == 3:
        return rng.randbytes(rng.randrange(40))
    if pick == 4:
        return None
    if pick == 5:
        return rng.random() < 0.5
    if pick == 6:
        return rng.randrange(-5, 70)  # plausible opcodes, ids, kinds
    if pick == 7:
        return []
    if pick in (8, 9):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(6))]
    return {_key(rng): _value(rng, depth + 1) for _ in range(rng.randrange(5))}


def _key(rng: random.Random) -> Any:
    return rng.choice(["shape", "dtype", "axis", "key", "ids", "tok", "buf", "seed", "n", "m",
                       "perm", "peer", "tag", "workers", 0, 1, "x"])  # fmt: skip


def _instruction(rng: random.Random) -> list:
    """A random instruction, often nearly right."""
    ins = [rng.randrange(-2, len(O.REGISTRY) + 3), rng.randrange(-3, 50),
           [_value(rng, 2) for _ in range(rng.randrange(4))],
           rng.choice([None, {}, {k: _value(rng, 2) for k in rng.sample(
               ["shape", "dtype", "axis", "keepdims", "key", "perm", "seed", "ids"], 3)}]),
           rng.randrange(5)]  # fmt: skip
    if rng.random() < 0.2:
        ins[rng.randrange(5)] = _value(rng, 1)
    return ins


def _header(rng: random.Random) -> bytes:
    """A GT header of a random kind, with some fields of the wrong type (or count)."""
    kind = rng.choice(P.KINDS)
    fields = [_value(rng, 1) for _ in kind._fields]
    if rng.random() < 0.3:
        fields = fields[: rng.randrange(len(fields) + 1)] + [_value(rng)] * rng.randrange(2)
    version = P.VERSION if rng.random() < 0.9 else _value(rng)
    return msgpack.packb([version, kind.KIND, *fields], use_bin_type=True)


def _body(rng: random.Random) -> bytes:
    shape = rng.random()
    if shape < 0.7:
        ins = [_instruction(rng) for _ in range(rng.randrange(1, 8))]
        frees = [rng.randrange(-2, 40) for _ in range(rng.randrange(3))]
        return msgpack.packb([ins, frees], use_bin_type=True)
    return msgpack.packb(_value(rng), use_bin_type=True)


def gt_message(rng: random.Random) -> list[bytes]:
    """One fuzzed message for a GT socket."""
    r = rng.random()
    if r < 0.15:
        return [rng.randbytes(rng.randrange(64)) for _ in range(rng.randrange(1, 4))]
    if r < 0.3:
        return [msgpack.packb(_value(rng), use_bin_type=True)]
    frames = [_header(rng)]
    if rng.random() < 0.6:
        frames.append(_body(rng))
        frames += [rng.randbytes(rng.randrange(256)) for _ in range(rng.randrange(3))]
    return frames


def event_message(rng: random.Random) -> list[bytes]:
    """One fuzzed event batch for the bus."""
    if rng.random() < 0.2:
        return [rng.choice([E.TOPIC, b"x"]), rng.randbytes(rng.randrange(80))]
    kind = rng.choice([*E.KINDS, "nope"])
    fields = {k: _value(rng, 1) for k in E.FIELDS.get(kind, ("a",)) if rng.random() < 0.8}
    source = rng.choice(["worker:0", "worker:1", "client:1", "dispatcher", _value(rng)])
    batch = [source, rng.choice([0, 1, 10**6, -1]), [[kind, rng.randrange(-1, 10**12), fields]]]
    return [E.TOPIC, msgpack.packb(batch, use_bin_type=True)]


@dataclass
class Report:
    """What a fuzzing run sent and found."""

    sent: dict[str, int] = field(default_factory=dict)
    checks: int = 0  # exact results the legitimate client verified
    bad_messages: int = 0
    internal_errors: int = 0
    worker_bad_messages: int = 0
    alive: dict[str, bool] = field(default_factory=dict)


def fuzz(messages: int, seed: int = 0, log: Callable[[str], None] = lambda s: None) -> Report:
    """Fuzz a fresh local cluster; see the module docstring."""
    import numpy as np

    import gt
    from gt.runtime.control import request
    from gt.runtime.launch import LocalCluster, RecorderProcess

    rng = random.Random(seed)
    rep = Report()
    ctx = zmq.Context.instance()
    with LocalCluster(workers=2) as cluster, _tempdir() as tmp:
        recorder = RecorderProcess(cluster.address, f"{tmp}/fuzz.gtrace")
        conn = gt.connect(cluster.address, timeout=60)
        try:
            eps = cluster.endpoints
            data = conn.workers[0]["data"]
            targets = {
                "front": (eps["front"], zmq.DEALER, None, gt_message),
                "back": (eps["back"], zmq.DEALER, None, gt_message),
                "control": (eps["control"], zmq.DEALER, None, gt_message),
                "worker data": (data, zmq.DEALER, None, gt_message),
                "peer": (data, zmq.DEALER, b"w1", gt_message),
                "events": (eps["events_in"], zmq.PUSH, None, event_message),
            }
            x = gt.zeros(8)
            for name, (ep, kind, ident, make) in targets.items():
                s = ctx.socket(kind)
                # (messages still queued when it closes are delivered, not dropped: with a linger
                # of 0, a busy dispatcher read fewer of them, and the counts below came up short)
                s.setsockopt(zmq.LINGER, 10_000)
                s.setsockopt(zmq.SNDHWM, 0)
                if ident is not None:
                    s.setsockopt(zmq.IDENTITY, ident)
                s.connect(ep)
                try:
                    for i in range(messages):
                        s.send_multipart(make(rng))
                        if i % 500 == 499:  # the legitimate client, exact throughout
                            x = x + 1
                            np.testing.assert_array_equal(x.numpy(), np.full(8, rep.checks + 1))
                            rep.checks += 1
                finally:
                    s.close()
                rep.sent[name] = messages
                log(f"{name}: {messages} messages")
            x = x + 1
            np.testing.assert_array_equal(x.numpy(), np.full(8, rep.checks + 1))
            rep.checks += 1
            # Workers report their counters twice a second, and they and the dispatcher may still
            # be reading their sockets: wait until the counts have stopped growing for a second
            # (or 30 s passed).
            deadline, last, still_since = time.monotonic() + 30, -1, time.monotonic()
            while True:
                stats = request(cluster.address, "stats", timeout=10)
                counted = stats["bad_messages"] + sum(
                    (w.get("stats") or {}).get("bad_messages", 0) for w in stats["workers"]
                )
                now = time.monotonic()
                if counted != last:
                    last, still_since = counted, now
                if (counted and now - still_since > 1.0) or now > deadline:
                    break
                time.sleep(0.2)
            rep.bad_messages = stats["bad_messages"]
            rep.internal_errors = stats["internal_errors"]
            rep.worker_bad_messages = sum(
                (w.get("stats") or {}).get("bad_messages", 0) for w in stats["workers"]
            )
            rep.alive = {f"worker {w['id']}": w["alive"] for w in stats["workers"]}
        finally:
            gt.disconnect()
            rep.alive["recorder"] = recorder.proc.poll() is None
            rep.alive["dispatcher"] = cluster.proc.poll() is None
            recorder.stop()
    return rep


def _tempdir() -> Any:
    import tempfile

    return tempfile.TemporaryDirectory()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=100_000, help="per socket (default 100000)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    t0 = time.monotonic()
    rep = fuzz(args.messages, args.seed, log=lambda s: print(s, flush=True))
    print(f"sent {sum(rep.sent.values()):,} messages in {time.monotonic() - t0:.0f} s: {rep.sent}")
    print(f"legitimate results checked exactly: {rep.checks}")
    print(f"dispatcher: {rep.bad_messages:,} bad messages counted, {rep.internal_errors} internal "
          f"errors; workers: {rep.worker_bad_messages:,} bad data-socket messages")  # fmt: skip
    print(f"alive: {rep.alive}")
    ok = all(rep.alive.values()) and rep.internal_errors == 0 and rep.bad_messages > 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Report", "fuzz"]
