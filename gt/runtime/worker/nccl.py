"""Collectives between GPU workers over NCCL (CuPy's bindings), where every participant can.

All-reduces, all-gathers, reduce-scatters and broadcasts (:data:`NCCL_CODES`). A group of workers
(the ``workers`` of a collective) uses NCCL when each of them is a CuPy worker whose CuPy has NCCL,
all of them are on one host and on distinct GPUs (NCCL refuses two ranks on one device; across
hosts its traffic would bypass GT's CURVE), and ``GT_NCCL`` is not ``0``. Otherwise its
collectives take the host-staged ZeroMQ algorithms (:mod:`gt.runtime.worker.collectives`).
The group decides once, at its first collective, over the peer links: every participant sends
every other its device key (host and GPU UUID; empty if it cannot use NCCL, and then it takes the
ring at once, without waiting for anyone). The others, seeing the same keys, decide alike; if NCCL
can serve the group, the first participant sends the rest an NCCL unique id and all of them make
the communicator.

Each collective then begins with a header from every participant to every other over the peer
links: its input's dtype and shape, or the error marker of an input that failed. Every
participant learns the same things and so decides alike: fail with the original error, take the
ZeroMQ algorithm (a dtype NCCL has no type for, inputs that disagree, or what NCCL cannot do
exactly as the ring does: uneven reduce-scatter blocks, a group not in ascending order for an
all-gather), or queue the collective on the worker's communication stream behind the compute
work that makes its input. Where the result is
used, the host waits for it as it would for the ring's last message, and at most as long
(``GT_PEER_TIMEOUT``): then the communicator is aborted rather than left blocked on a dead peer.
A background all-reduce runs on that stream meanwhile, beside the compute stream's work.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from gt.runtime.ops import ALL_GATHER, ALL_REDUCE, BCAST, REDUCE_SCATTER

#: Peer-message steps of the headers and the set-up, beyond any ring's (a ring of n: 0 .. 2n-3).
HEADER_STEP = 1 << 20
KEY_STEP, UID_STEP, MADE_STEP = HEADER_STEP + 1, HEADER_STEP + 2, HEADER_STEP + 3
#: dtype name -> the name of NCCL's type constant in ``cupy.cuda.nccl``.
NCCL_TYPES = {"int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
              "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64",
              "float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
              "bfloat16": "NCCL_BFLOAT16"}  # fmt: skip
NCCL_OPS = {"sum": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN"}
_TYPE_CODES = {name: i for i, name in enumerate(sorted(NCCL_TYPES))}
_TYPE_NAMES = {i: name for name, i in _TYPE_CODES.items()}
RING, FAIL, NCCL = "ring", "fail", "nccl"
NO_INPUT = -2  # a header's dtype code for a participant that has no input (a broadcast's receiver)
#: The collectives NCCL takes over (the others, and point-to-point transfers, stay on ZeroMQ).
NCCL_CODES = frozenset((ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BCAST))
#: The first NCCL version with a bfloat16 type (2.10.0, as ``get_version()`` codes it).
BFLOAT16_SINCE = 21000
#: Bytes in NCCL's ``ncclUniqueId``.
UNIQUE_ID_BYTES = 128


def unique_id_bytes(uid: Any) -> bytes:
    """``get_unique_id()``'s answer as the 128 bytes of NCCL's ``ncclUniqueId``: CuPy 14 returns
    them as ``bytes``; CuPy 13 as a tuple of C ``char`` values (signed on x86, 0..255 where
    ``char`` is unsigned, as on ARM)."""
    raw = bytes(uid) if isinstance(uid, (bytes, bytearray)) else bytes(int(v) & 0xFF for v in uid)
    if len(raw) != UNIQUE_ID_BYTES:
        raise ValueError(f"an NCCL unique id is {UNIQUE_ID_BYTES} bytes, not {len(raw)}")
    return raw


def make_communicator(nccl: Any, n: int, uid: bytes, rank: int) -> Any:
    """``nccl.NcclCommunicator(n, uid, rank)`` with the id in the form this CuPy takes: ``bytes``
    (CuPy 14), else a tuple of signed, then of unsigned ``char`` values (CuPy 13; Cython refuses
    the wrong form, or a value out of ``char``'s range, before NCCL is called)."""
    forms = (uid, tuple(v - 256 if v > 127 else v for v in uid), tuple(uid))
    for form in forms[:-1]:
        try:
            return nccl.NcclCommunicator(n, form, rank)
        except (TypeError, OverflowError):
            continue
    return nccl.NcclCommunicator(n, forms[-1], rank)


def load_nccl(backend: Any) -> tuple[Any, str]:
    """``(cupy.cuda.nccl, "")`` for a CuPy worker that can use it, else ``(None, why not)``."""
    if getattr(backend, "name", "") != "cupy":
        return None, "not a CuPy worker"
    if os.environ.get("GT_NCCL", "1") == "0":
        return None, "GT_NCCL=0"
    xp = backend.xp
    try:
        mod = importlib.import_module(f"{xp.__name__}.cuda.nccl")
    except ImportError:
        mod = getattr(xp.cuda, "nccl", None)
    except Exception as exc:  # a CuPy whose NCCL library does not load
        return None, f"cupy.cuda.nccl does not import: {type(exc).__name__}: {exc}"
    if mod is None or not getattr(mod, "available", True):
        return None, "this CuPy has no NCCL"
    return mod, ""


def nccl_summary(xp: Any, gpus: int) -> str:
    """One line for ``gt worker --list-devices``: how collectives between this machine's GPU
    workers would travel."""
    nccl, why = load_nccl(types.SimpleNamespace(name="cupy", xp=xp))
    if nccl is None:
        return f"collectives: ZeroMQ through pinned host memory ({why})"
    get_version = getattr(nccl, "get_version", None)
    version = ""
    if get_version is not None:
        try:
            v = int(get_version())  # e.g. 22105 for 2.21.5
            version = f" {v // 10000}.{v // 100 % 100}.{v % 100}"
        except Exception:  # a library that does not say: the line goes without it
            version = ""
    one = "; with one GPU here, workers sharing it use ZeroMQ" if gpus < 2 else ""
    return f"collectives: NCCL{version} between workers on distinct GPUs (GT_NCCL=0: ZeroMQ){one}"


class NcclLink:
    """One worker's NCCL communicators, one per group of workers, and its communication stream.

    Args:
        backend: the worker's backend.
        nccl: ``cupy.cuda.nccl`` (from :func:`load_nccl`), or ``None``: this worker cannot use
            NCCL, and says so when a group decides, so the group takes the ring.
    """

    def __init__(self, backend: Any, nccl: Any):
        self.backend = backend
        self.nccl = nccl
        self.comms: dict[tuple[int, ...], Any] = {}  # group -> communicator, or None: the ring
        self._stream: Any = None
        self.watchdog = Watchdog()
        self.unused = ""  # why the last group that tried NCCL did not get it ("": none failed)
        self._version: int | None = None

    def device_key(self) -> bytes:
        """This worker's host and GPU, as the participants compare them (empty: no NCCL here)."""
        if self.nccl is None:
            return b""
        ident = self.backend.identity
        if ident is not None and ident.mig:
            return b""  # NCCL has no transport between MIG instances
        gpu = (ident.uuid or ident.pci_bus_id or str(ident.index)) if ident is not None else ""
        if not gpu:
            gpu = f"cuda:{self.backend.xp.cuda.runtime.getDevice()}"
        return f"{socket.gethostname()}\0{gpu}".encode()

    def close(self) -> None:
        """Abort every communicator (the worker stops: destroying one would wait for its peers'
        share of pending work, for ever if a peer is gone or the GPU has failed)."""
        for group in list(self.comms):
            self._abort(group)

    def forget(self, wid: int) -> None:
        """Drop the communicators of groups with ``wid`` in them (it was restarted or left)."""
        for group in [g for g in self.comms if wid in g]:
            self._abort(group)

    def _abort(self, group: tuple[int, ...]) -> None:
        comm = self.comms.pop(group)
        if comm is not None:
            try:
                comm.abort()  # (destroy would wait for the gone peer's share of pending work)
            except Exception:  # nothing more to release
                pass

    def communicator(self, run: Any, workers: list[int]) -> Any:
        """The group's communicator (its ranks: the workers in ascending order), made at the
        group's first collective, where every participant is at once; ``None``: the ring."""
        group = tuple(sorted(workers))
        if group not in self.comms:
            self.comms[group] = self._make(run, list(group))
        return self.comms[group]

    def _make(self, run: Any, ws: list[int]) -> Any:
        # straight through the peer links, not the run: a failed input must not fail the set-up
        p, root, me, what = run.p, ws[0], run.me, "nccl setup"
        mine = self.device_key()
        for w in ws:
            if w != me:
                p.send(w, run.tag, KEY_STEP, np.frombuffer(mine, np.uint8), what, quiet=True)
        if not mine:  # the others learn from the empty key: this worker never waits here
            return None
        keys = [mine if w == me else p.recv(w, run.tag, KEY_STEP, what, quiet=True).tobytes()
                for w in ws]  # fmt: skip
        hosts = {k.split(b"\0")[0] for k in keys}
        if not (all(keys) and len(set(keys)) == len(keys) and len(hosts) == 1):
            return None  # every participant sees the same keys, so all of them take the ring
        if me == root:
            uid = unique_id_bytes(self.nccl.get_unique_id())
            for w in ws[1:]:
                p.send(w, run.tag, UID_STEP, np.frombuffer(uid, np.uint8), what, quiet=True)
        else:
            uid = p.recv(root, run.tag, UID_STEP, what, quiet=True).tobytes()
        comm = self._init(len(ws), uid, ws.index(me), p.timeout / 2)
        # NCCL's set-up fails on one machine and works on another (shared memory, network
        # interfaces): the group uses it only if it worked for every participant, else the ring
        for w in ws:
            if w != me:
                p.send(w, run.tag, MADE_STEP, np.array([comm is not None], np.uint8), what,
                       quiet=True)  # fmt: skip
        made = [comm is not None]
        made += [bool(p.recv(w, run.tag, MADE_STEP, what, quiet=True)[0]) for w in ws if w != me]
        if all(made):
            return comm
        if comm is not None:  # (else _init said why)
            comm.abort()
            self.unused = "NCCL's set-up failed on another worker of the group"
        print(f"gt worker: {self.unused}; the collectives of workers {ws} take ZeroMQ",
              file=sys.stderr, flush=True)  # fmt: skip
        return None

    def _init(self, n: int, uid: bytes, rank: int, timeout: float) -> Any:
        """``NcclCommunicator(n, uid, rank)``, or ``None`` if it failed or did not return within
        ``timeout`` seconds (NCCL's own set-up waits for every rank without a limit: a rank whose
        set-up failed would otherwise leave the others blocked; the thread is then left behind)."""
        ident, cuda = self.backend.identity, self.backend.xp.cuda
        device = ident.index if ident is not None else cuda.runtime.getDevice()  # (this thread's)
        got: dict[str, Any] = {}

        def init() -> None:
            try:
                # ``use``, not ``with``: leaving the block would make device 0 current in this
                # thread, which gives the worker a context on device 0 (CUDA 12)
                cuda.Device(device).use()
                got["comm"] = make_communicator(self.nccl, n, uid, rank)
            except Exception as exc:  # reported below, as the reason the group took the ring
                got["error"] = f"{type(exc).__name__}: {exc}"

        t = threading.Thread(target=init, name="gt-nccl-init", daemon=True)
        t.start()
        t.join(timeout)
        if "comm" in got:
            return got["comm"]
        self.unused = f"NCCL's set-up failed: {got.get('error') or f'no answer in {timeout:.0f}s'}"
        return None

    # ------------------------------------------------------------------ one collective
    @staticmethod
    def header(x: Any) -> np.ndarray:
        """``[dtype code, ndim, *shape]`` of an input; dtype code -1: a dtype NCCL lacks, -2: no
        input (a broadcast's receivers)."""
        if x is None:
            return np.array([NO_INPUT, 0], np.int64)
        return np.array([_TYPE_CODES.get(str(x.dtype), -1), x.ndim, *x.shape], np.int64)

    def send_headers(self, run: Any, x: Any, workers: list[int]) -> None:
        """Tell every other participant this input's dtype and shape (or its error: the run's
        error marker goes instead)."""
        head = self.header(x)
        for w in workers:
            if w != run.me:
                run.send(w, HEADER_STEP, head)

    def headers_missing(self, run: Any, workers: list[int]) -> bool:
        """In the background, whether a participant's header has yet to arrive."""
        return any(run.missing(w, HEADER_STEP) for w in workers if w != run.me)

    def decide(self, run: Any, code: int, x: Any, attrs: dict) -> tuple[str, list]:
        """Read the others' headers: ``(FAIL, [])`` (the run holds the error), ``(RING, [])`` or
        ``(NCCL, headers in the instruction's worker order)``, the same on every participant."""
        ws = list(attrs["workers"])
        heads = [self.header(x) if w == run.me else run.recv(w, HEADER_STEP) for w in ws]
        if run.err is not None:
            return FAIL, []
        return (NCCL, heads) if self._fits(code, heads, attrs) else (RING, [])

    def _fits(self, code: int, heads: list, attrs: dict) -> bool:
        """Whether NCCL can do this collective with these inputs exactly as the ring would."""
        ws, op = list(attrs["workers"]), attrs.get("op", "sum")
        kinds = [int(h[0]) for h in heads]
        shapes = [tuple(int(v) for v in h[2:]) for h in heads]
        if code == BCAST:  # the first worker's tensor to the others
            given, name_code = kinds[1:], kinds[0]
            if name_code < 0 or any(k != NO_INPUT for k in given):
                return False
        else:
            if len(set(kinds)) != 1 or kinds[0] < 0 or len(set(shapes)) != 1:
                return False
            name_code = kinds[0]
            if code in (ALL_REDUCE, REDUCE_SCATTER) and op not in NCCL_OPS:
                return False
            if code in (ALL_GATHER, REDUCE_SCATTER):
                axis = int(attrs["axis"])
                if ws != sorted(ws) or not 0 <= axis < len(shapes[0]):
                    return False  # NCCL's rank order is the group's ascending order
                if code == REDUCE_SCATTER:
                    sizes = [int(v) for v in attrs["sizes"]]
                    if len(set(sizes)) != 1 or sum(sizes) != shapes[0][axis]:
                        return False  # NCCL splits evenly
        name = _TYPE_NAMES[name_code]
        if name == "bfloat16" and self.nccl_version() < BFLOAT16_SINCE:
            return False  # the constant is compiled into CuPy; the NCCL it loaded may lack it
        return hasattr(self.nccl, NCCL_TYPES[name])

    def nccl_version(self) -> int:
        """The loaded NCCL's version code (``22105`` for 2.21.5; 0 if it does not say)."""
        if self._version is None:
            try:
                self._version = int(self.nccl.get_version())
            except Exception:
                self._version = 0
        return self._version

    def launch(self, code: int, comm: Any, x: Any, heads: list, attrs: dict) -> Launched:
        """Queue the collective on the communication stream, after the compute stream's work
        so far, and return what :meth:`result` needs."""
        xp = self.backend.xp
        compute = xp.cuda.get_current_stream()
        if self._stream is None:
            self._stream = xp.cuda.Stream(non_blocking=True)
        ws = list(attrs["workers"])
        group = sorted(ws)
        name = _TYPE_NAMES[int(heads[0][0])]
        dtype = getattr(self.nccl, NCCL_TYPES[name])
        stream = self._stream.ptr
        after = _as_is
        if code == BCAST:
            shape = tuple(int(v) for v in heads[0][2:])
            src = xp.ascontiguousarray(x) if x is not None else None
            out = xp.empty(shape, dtype=name if name != "bfloat16" else self.backend.bf16)
            self._stream.wait_event(compute.record())
            comm.broadcast((src if src is not None else out).data.ptr, out.data.ptr,
                           int(out.size), dtype, group.index(ws[0]), stream)  # fmt: skip
        else:
            axis = int(attrs.get("axis", 0))
            src = xp.ascontiguousarray(xp.moveaxis(x, axis, 0) if axis else x)
            n, op = len(ws), getattr(self.nccl, NCCL_OPS.get(attrs.get("op", "sum"), "NCCL_SUM"))
            self._stream.wait_event(compute.record())
            if code == ALL_REDUCE:
                out = xp.empty_like(src)
                comm.allReduce(src.data.ptr, out.data.ptr, int(src.size), dtype, op, stream)
            elif code == ALL_GATHER:
                out = xp.empty((n * src.shape[0], *src.shape[1:]), src.dtype)
                comm.allGather(src.data.ptr, out.data.ptr, int(src.size), dtype, stream)
            else:  # REDUCE_SCATTER: rank r keeps block r
                out = xp.empty((src.shape[0] // n, *src.shape[1:]), src.dtype)
                comm.reduceScatter(src.data.ptr, out.data.ptr, int(out.size), dtype, op, stream)
            if axis:
                after = _axis_back(xp, axis)
        return Launched(
            out, self._stream.record(), comm, src, after, moved_bytes(code, x, out, len(ws))
        )

    def result(self, launched: Launched, workers: list[int], timeout: float) -> Any:
        """The result of :meth:`launch`, once NCCL has finished it (the input's memory, let go
        after this, is then free to reuse).

        Raises:
            TimeoutError: it did not finish within ``timeout`` seconds (a participant died or
                stopped): the group's communicator is aborted, so nothing stays blocked, and the
                group makes a new one at its next collective.
        """
        out, done, comm = launched.out, launched.done, launched.comm
        if not done.done:
            # NCCL waits for every rank without a limit; a ring's receive gives up after
            # GT_PEER_TIMEOUT, and so does this, by aborting the communicator from the watchdog
            # (which NCCL allows from another thread) while this thread waits on the event.
            self.watchdog.arm(timeout, comm.abort)
            try:
                done.synchronize()
            except Exception as exc:
                if self.watchdog.disarm():
                    raise  # not the watchdog's doing: the device's own error
                raise self._aborted(workers, timeout, exc) from None
            if not self.watchdog.disarm():
                raise self._aborted(workers, timeout, None)
        self.backend.xp.cuda.get_current_stream().wait_event(done)
        return launched.after(out)

    def _aborted(self, workers: list[int], timeout: float, exc: Exception | None) -> TimeoutError:
        # (aborted already: nothing to destroy; the next collective of the group makes a new one)
        self.comms.pop(tuple(sorted(workers)), None)
        why = f": {type(exc).__name__}: {exc}" if exc is not None else ""
        return TimeoutError(
            f"the NCCL collective with workers {list(workers)} did not finish within "
            f"{timeout:.0f}s (GT_PEER_TIMEOUT); its communicator was aborted{why}"
        )


class Launched(NamedTuple):
    """A collective queued by :meth:`NcclLink.launch`."""

    out: Any  #: NCCL's output buffer (there once ``done`` is)
    done: Any  #: an event on the communication stream after the collective
    comm: Any  #: its communicator (aborted if it never finishes)
    src: Any  #: its input, held until then: its memory must not be reused while NCCL reads it
    after: Callable[[Any], Any]  #: the output as the instruction's result
    moved: int  #: bytes NCCL's algorithm sends (and receives) per rank


def _as_is(out: Any) -> Any:
    return out


def _axis_back(xp: Any, axis: int) -> Callable[[Any], Any]:
    """Undo moving ``axis`` to the front (NCCL concatenates and splits along the first)."""
    return lambda out: xp.ascontiguousarray(xp.moveaxis(out, 0, axis))


def moved_bytes(code: int, x: Any, out: Any, n: int) -> int:
    """Bytes each rank sends in NCCL's ring algorithms (as many arrive)."""
    if code == ALL_REDUCE:
        return 2 * (n - 1) * int(out.nbytes) // n
    if code == ALL_GATHER:
        return (n - 1) * int(out.nbytes) // n
    if code == REDUCE_SCATTER:
        return (n - 1) * int(out.nbytes)
    return int(out.nbytes)  # a broadcast: the tensor passes every rank once


class Watchdog:
    """Calls a function once a deadline passes, unless disarmed first (one deadline at a time,
    on a daemon thread started at the first :meth:`arm`)."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._armed: tuple[float, Any] | None = None
        self._fired = False
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, fire: Any) -> None:
        """Call ``fire()`` in ``seconds`` unless :meth:`disarm` comes first."""
        with self._cv:
            self._armed, self._fired = (time.monotonic() + seconds, fire), False
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="gt-nccl-watchdog",
                                                daemon=True)  # fmt: skip
                self._thread.start()
            self._cv.notify()

    def disarm(self) -> bool:
        """Cancel the deadline; ``False`` if it had already fired."""
        with self._cv:
            self._armed = None
            return not self._fired

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._armed is None:
                    self._cv.wait()
                deadline, fire = self._armed
                left = deadline - time.monotonic()
                if left > 0:
                    self._cv.wait(left)
                    continue
                self._armed, self._fired = None, True
            try:
                fire()
            except Exception:  # an abort that failed: the waiting thread still times out
                pass
