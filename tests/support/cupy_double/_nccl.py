"""``cupy.cuda.nccl`` of the CuPy test double: communicators whose ranks are threads or processes
of this machine.

Like NCCL, a collective is queued on the stream it is given and happens when that stream's work
runs (here: when the stream is synchronized, or another stream waits for an event recorded after
it); ranks meet in files under ``$CUPY_DOUBLE_NCCL_DIR`` (default: the temp dir), one folder per
unique id, so threads of a test and worker processes alike can be ranks. As NCCL does, it refuses
two ranks on one device and buffers that are not device memory of the right size, and a rank that
waits more than ``$CUPY_DOUBLE_NCCL_TIMEOUT`` seconds (default 60) for the others raises instead
of hanging the test (NCCL would hang). ``$CUPY_DOUBLE_NCCL_FAIL_DEVICE``: making a communicator on
that device fails, as NCCL's set-up does on a machine it cannot use. ``$CUPY_DOUBLE_NCCL_API``:
``14`` (default) hands the unique id over as ``bytes``, as CuPy 14 does; ``13`` and
``13-unsigned`` as CuPy 13's tuple of signed (x86) or unsigned (ARM) ``char`` values.
``$CUPY_DOUBLE_NCCL_VERSION``: what ``get_version()`` says (default 22105).
"""

from __future__ import annotations

import ctypes
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from . import _memory, _streams

available = True

NCCL_INT8, NCCL_UINT8, NCCL_INT32, NCCL_UINT32, NCCL_INT64, NCCL_UINT64 = 0, 1, 2, 3, 4, 5
NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64, NCCL_BFLOAT16 = 6, 7, 8, 9
NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN = 0, 1, 2, 3
_TYPES = {NCCL_INT8: np.int8, NCCL_UINT8: np.uint8, NCCL_INT32: np.int32,
          NCCL_UINT32: np.uint32, NCCL_INT64: np.int64, NCCL_UINT64: np.uint64,
          NCCL_FLOAT16: np.float16, NCCL_FLOAT32: np.float32, NCCL_FLOAT64: np.float64}  # fmt: skip
_REDUCE = {NCCL_SUM: np.add, NCCL_PROD: np.multiply, NCCL_MAX: np.maximum, NCCL_MIN: np.minimum}
_made = threading.local()


class NcclError(RuntimeError):
    """What CuPy raises for a failed NCCL call."""


def _dir() -> Path:
    return (
        Path(os.environ.get("CUPY_DOUBLE_NCCL_DIR") or tempfile.gettempdir()) / "cupy-double-nccl"
    )


def _timeout() -> float:
    return float(os.environ.get("CUPY_DOUBLE_NCCL_TIMEOUT", "60"))


def _api() -> str:
    """Which CuPy's NCCL API the double has: ``14`` (the default; the id is ``bytes``), ``13``
    (a tuple of signed ``char`` values, as on x86) or ``13-unsigned`` (as on ARM)."""
    return os.environ.get("CUPY_DOUBLE_NCCL_API", "14")


def get_version() -> int:
    """NCCL's version code (``$CUPY_DOUBLE_NCCL_VERSION``, default 22105: NCCL 2.21.5)."""
    return int(os.environ.get("CUPY_DOUBLE_NCCL_VERSION", "22105"))


def get_unique_id() -> bytes | tuple[int, ...]:
    """NCCL's 128-byte ``ncclUniqueId`` as CuPy returns it: ``bytes`` since CuPy 14, a tuple of C
    ``char`` values before."""
    raw = os.urandom(128)
    api = _api()
    if api == "14":
        return raw
    return tuple(int(v) for v in np.frombuffer(raw, np.int8 if api == "13" else np.uint8))


def _id_bytes(commId: object) -> bytes:  # noqa: N803 - CuPy's name
    """The id as the constructor of this API takes it (Cython's checks: the type, then each
    value's range as a C ``char``), as bytes."""
    api = _api()
    want = bytes if api == "14" else tuple
    if type(commId) is not want:
        raise TypeError(f"Argument 'commId' has incorrect type (expected {want.__name__}, "
                        f"got {type(commId).__name__})")  # fmt: skip
    if api == "14":
        return commId
    lo, hi = (-128, 127) if api == "13" else (0, 255)
    if any(not lo <= v <= hi for v in commId):
        raise OverflowError("value too large to convert to char")
    return bytes(v & 0xFF for v in commId)


def groupStart() -> None:  # noqa: N802 - NCCL's name
    """Accepted (the double runs each call on its own)."""


def groupEnd() -> None:  # noqa: N802
    """Accepted."""


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)  # whole or absent: a reader never sees half a file


def _wait_all(paths: list[Path], what: str, aborted=lambda: False) -> list[bytes]:
    deadline = time.monotonic() + _timeout()
    while not all(p.exists() for p in paths):
        if aborted():
            raise NcclError("ncclRemoteError: the communicator was aborted")
        if time.monotonic() > deadline:
            raise NcclError(f"ncclInternalError: the double waited {_timeout():.0f}s for {what}")
        time.sleep(0.001)
    return [p.read_bytes() for p in paths]


def _op(op: int) -> np.ufunc:
    if op not in _REDUCE:
        raise NcclError("ncclInvalidArgument: op")
    return _REDUCE[op]


def _device_buffer(ptr: int, nbytes: int, what: str) -> np.ndarray:
    """The bytes at a device address, checked against the double's pool."""
    if nbytes and not _memory.is_device_address(ptr, nbytes):
        raise NcclError(
            f"ncclInvalidArgument: {what} {ptr:#x} is not device memory of {nbytes} bytes"
        )
    return (
        np.frombuffer((ctypes.c_char * nbytes).from_address(ptr), np.uint8)
        if nbytes
        else np.empty(0, np.uint8)
    )


class NcclCommunicator:
    """``NcclCommunicator(ndev, commId, rank)``: blocks until all ``ndev`` ranks have joined."""

    def __init__(self, ndev: int, commId: bytes | tuple, rank: int):  # noqa: N803 - CuPy's names
        uid = _id_bytes(commId)
        if len(uid) != 128 or not 0 <= rank < ndev:
            raise NcclError("ncclInvalidArgument: bad unique id or rank")
        self._ndev, self._rank, self._seq = int(ndev), int(rank), 0
        self._aborted = False
        self._dir = _dir() / uid.hex()[:32]
        self._dir.mkdir(parents=True, exist_ok=True)
        device = _streams_device()
        if str(device) == os.environ.get("CUPY_DOUBLE_NCCL_FAIL_DEVICE"):  # a broken machine
            raise NcclError("ncclSystemError: System call (e.g. socket, malloc) or external "
                            "library call failed or device error (the double's knob)")  # fmt: skip
        _write(self._dir / f"join.{rank}", f"{os.uname().nodename}/{device}".encode())
        joined = _wait_all([self._dir / f"join.{r}" for r in range(ndev)], "the ranks to join")
        if len(set(joined)) != len(joined):
            raise NcclError("ncclInvalidUsage: Duplicate GPU detected (two ranks on one device)")
        self.device_id = device

    def rank_id(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._ndev

    def allReduce(self, sendbuf: int, recvbuf: int, count: int, datatype: int, op: int,  # noqa: N802
                  stream: int) -> None:  # fmt: skip
        """Queue an all-reduce of ``count`` elements on the stream whose pointer is ``stream``."""
        reduce = _op(op)
        self._queue(sendbuf, recvbuf, count, count, datatype, stream,
                    lambda parts: reduce.reduce(np.stack(parts), axis=0))  # fmt: skip

    def allGather(self, sendbuf: int, recvbuf: int, count: int, datatype: int,  # noqa: N802
                  stream: int) -> None:  # fmt: skip
        """Queue an all-gather: every rank's ``count`` elements, in rank order, to every rank."""
        self._queue(sendbuf, recvbuf, count, count * self._ndev, datatype, stream, np.concatenate)

    def reduceScatter(self, sendbuf: int, recvbuf: int, recvcount: int, datatype: int,  # noqa: N802
                      op: int, stream: int) -> None:  # fmt: skip
        """Queue a reduce-scatter: rank r gets the r-th ``recvcount`` elements of the reduction."""
        reduce, r, k = _op(op), self._rank, int(recvcount)
        self._queue(sendbuf, recvbuf, k * self._ndev, k, datatype, stream,
                    lambda parts: reduce.reduce(np.stack(parts), axis=0)[r * k:(r + 1) * k])  # fmt: skip

    def broadcast(self, sendbuff: int, recvbuff: int, count: int, datatype: int, root: int,
                  stream: int) -> None:  # fmt: skip
        """Queue a broadcast of the root's ``count`` elements (the others' send buffers are
        not read)."""
        if not 0 <= root < self._ndev:
            raise NcclError("ncclInvalidArgument: root")
        sent = count if self._rank == root else 0
        self._queue(sendbuff, recvbuff, sent, count, datatype, stream, lambda parts: parts[root])

    def _queue(self, sendbuf: int, recvbuf: int, n_send: int, n_recv: int, datatype: int,
               stream: int, combine) -> None:  # fmt: skip
        if datatype not in _TYPES:
            raise NcclError("ncclInvalidArgument: datatype")
        dtype = np.dtype(_TYPES[datatype])
        src = _device_buffer(int(sendbuf), int(n_send) * dtype.itemsize, "sendbuff")
        dst = _device_buffer(int(recvbuf), int(n_recv) * dtype.itemsize, "recvbuff")
        seq, self._seq = self._seq, self._seq + 1
        here = self._dir / f"{seq}.{self._rank}"

        def run() -> None:
            _write(here, src.tobytes())
            paths = [self._dir / f"{seq}.{r}" for r in range(self._ndev)]
            parts = _wait_all(paths, f"collective {seq}", lambda: self._aborted)
            got = np.asarray(combine([np.frombuffer(b, dtype) for b in parts]), dtype)
            if got.nbytes != dst.nbytes:
                raise NcclError("ncclInvalidUsage: the ranks' counts disagree")
            dst[:] = got.view(np.uint8)

        _stream_at(int(stream)).defer(run)

    def destroy(self) -> None:
        """Accepted (the files stay in the temp dir)."""

    def abort(self) -> None:
        """What NCCL allows from another thread: a collective waiting for the others gives up."""
        self._aborted = True


def _streams_device() -> int:
    from .cuda import runtime  # (the runtime module imports this one)

    return runtime.getDevice()


def _stream_at(ptr: int) -> _streams.Stream:
    if ptr == 0:
        return _streams.NULL
    for s in list(_streams._all):
        if s.ptr == ptr:
            return s
    raise NcclError(f"ncclInvalidArgument: no stream at {ptr:#x}")
