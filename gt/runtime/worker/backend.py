"""The worker's array backend: NumPy, or CuPy on a GPU (the only module that imports CuPy).

The kernels themselves are in the op registry (:mod:`gt.runtime.ops`), written once against
``xp``; :class:`Backend` binds them to one array module and moves arrays to and from the host.

Choosing: ``GT_BACKEND=numpy`` or ``cupy`` is obeyed (``cupy`` fails loudly when it cannot run);
``auto`` (the default) takes CuPy only after a tiny kernel, a reduction and a matrix product ran on
the device, and otherwise says once, on stderr, why it fell back to NumPy. Whatever CuPy wheel is
installed (``cupy-cuda12x``, ``cupy-cuda13x`` ...) is used as it is.

``GT_CUPY_DOUBLE=1`` is a test tool: ``cupy`` then means ``cupy_double``, a strict NumPy-backed
stand-in that the test suite puts on the import path (``tests/support``); it refuses what CuPy
refuses, so CI exercises the CuPy code paths without a GPU. It validates nothing about GPUs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import platform
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from gt.runtime import ops as O
from gt.runtime.ops import scatter_rows
from gt.runtime.ops.base import Handler
from gt.runtime.ops.index import scatter_add_any, sorted_scatter_extreme
from gt.runtime.worker.bf16_numpy import compute_in_float32
from gt.runtime.worker.device_monitor import nvml_uuid_at
from gt.runtime.worker.devices import (
    DeviceIdentity,
    complete_uuid,
    format_uuid,
    normalize_bus_id,
    visible_entry,
)
from gt.runtime.worker.special_functions import SPECIAL_FUNCTIONS, erf_numpy, find_special
from gt.runtime.worker.staging import HostStaging, staging_mode

#: The test suite's switch for the CuPy test double (read here and nowhere else).
CUPY_DOUBLE_ENV = "GT_CUPY_DOUBLE"
#: The double's module name (on ``PYTHONPATH`` in the tests that use it).
CUPY_DOUBLE_MODULE = "cupy_double"
BF16 = "bfloat16"

_said_fallback = False


class CupyUnavailable(RuntimeError):
    """CuPy cannot run here (not installed, no device, or a kernel failed); the message says why.

    Attributes:
        installed: whether CuPy is installed at all (a missing CuPy is the ordinary CPU case).
    """

    def __init__(self, message: str, installed: bool = True):
        super().__init__(message)
        self.installed = installed


def _import_cupy() -> tuple[ModuleType, Any]:
    """``(cupy, cupyx)`` or the test double and its ``cupyx``; ``cupyx`` may be ``None`` until
    first needed (its import is slow)."""
    if os.environ.get(CUPY_DOUBLE_ENV, "") not in ("", "0"):
        double = importlib.import_module(CUPY_DOUBLE_MODULE)
        return double, double.cupyx
    import cupy  # noqa: PLC0415 - lazy: the gpu extras are optional

    return cupy, None


def cupy_module() -> ModuleType:
    """``cupy`` (or the test double where ``GT_CUPY_DOUBLE`` asks for it).

    Raises:
        ImportError: CuPy is not installed.
    """
    return _import_cupy()[0]


def _cupyx(be: Backend) -> Any:
    if be._cupyx is None:
        import cupyx  # noqa: PLC0415 - CuPy workers only
        import cupyx.scipy.special  # noqa: F401, PLC0415 - erf lives here

        be._cupyx = cupyx
    return be._cupyx


def _device_count(cp: Any) -> tuple[int, str]:
    """CUDA devices visible to CuPy, and why there are none. Real CuPy raises
    ``CUDARuntimeError`` (no driver, no device, driver too old) where one might expect 0."""
    try:
        n = int(cp.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError, or a missing libcudart
        return 0, f"CUDA reports no usable device ({type(exc).__name__}: {exc})"
    return n, "" if n > 0 else "CUDA sees no device"


def _probe(cp: Any, index: int, *, pin: bool = False) -> None:
    """Run a tiny elementwise kernel (compiled by NVRTC), a reduction and a matrix product (cuBLAS)
    on device ``index`` and read the result back: what fails when CuPy's CUDA libraries are
    missing or do not match the driver. ``pin``: make ``index`` this thread's device for good
    (a worker's); otherwise the device that was current is made current again, which gives this
    process a context there too (CUDA 12's ``cudaSetDevice``).

    Raises:
        CupyUnavailable: any of it failed, or gave a wrong answer.
    """
    try:
        if pin:  # not ``with Device``: leaving it would make device 0 current, and so give a
            # worker of another GPU a context (memory, and a failure in exclusive-process mode)
            # on device 0
            cp.cuda.Device(index).use()
        with contextlib.nullcontext() if pin else cp.cuda.Device(index):
            x = cp.arange(4, dtype=cp.float32)
            y = x * 2 + 1  # 1 3 5 7
            m = y.reshape(2, 2)
            got = float((m @ m).sum()) + float(y.sum())  # [[10,18],[42,74]] -> 144, + 16
    except Exception as exc:
        raise CupyUnavailable(
            f"a test kernel failed on CUDA device {index}: {type(exc).__name__}: {exc}"
        ) from None
    if got != 160.0:
        raise CupyUnavailable(f"a test kernel on CUDA device {index} computed {got}, not 160")


def read_identity(cp: Any, index: int) -> DeviceIdentity:
    """Device ``index``'s name, UUID and PCI bus id, as CUDA reports them."""
    props = cp.cuda.runtime.getDeviceProperties(index)
    name = props.get("name", b"?")
    name = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
    try:
        bus = normalize_bus_id(cp.cuda.runtime.deviceGetPCIBusId(index))
    except Exception:
        bus = None
    raw = props.get("uuid")
    ident = DeviceIdentity(index, name, format_uuid(raw), bus, visible_entry(index))
    if ident.uuid is None and raw:  # cut short at a zero byte (see complete_uuid)
        nvml = None if ident.mig else nvml_uuid_at(bus)  # (the bus names a MIG's whole GPU)
        ident = dataclasses.replace(ident, uuid=complete_uuid(raw, [ident.visible, nvml]))
    return ident


def _say_fallback(reason: str) -> None:
    """Tell the user, once per process, why ``auto`` chose NumPy although CuPy is installed."""
    global _said_fallback
    if not _said_fallback:
        _said_fallback = True
        print(f"gt worker: using NumPy, not CuPy: {reason}", file=sys.stderr, flush=True)


def _bf16_dtype(xp: Any) -> Any:
    """The bfloat16 dtype if ``xp`` can compute in it (NumPy, or CuPy 14+, with ``ml_dtypes``),
    else None."""
    try:
        import ml_dtypes  # noqa: PLC0415 - optional; CuPy's own bfloat16 support needs it

        dt = np.dtype(ml_dtypes.bfloat16)
        a = xp.ones((2, 2), dtype=dt)
        if float((a @ a).astype(xp.float32).sum()) != 8.0:
            return None
        return dt
    except Exception:
        return None


class Backend:
    """An array module plus the handler table that executes primitives on it (a
    :class:`~gt.runtime.ops.base.KernelEnv` for the registry's kernels).

    Args:
        xp: ``numpy``, ``cupy`` or the CuPy test double.
        device: a description (``"cpu (x86_64)"``), or a CUDA device index to pin this process
            to (CuPy only: ``cupy.cuda.Device(device).use()``; the description and
            :attr:`identity` are then read from CUDA), or ``None``.
        name: ``"numpy"`` or ``"cupy"`` (default: from ``xp``; the double is ``"cupy"``).
        cupyx: CuPy's companion module (imported on first need when ``None``).

    Attributes:
        xp: the array module.
        name: ``"numpy"`` or ``"cupy"``.
        device: a human-readable device description (``"cuda:0 NVIDIA H200 (…)"``).
        identity: the pinned CUDA device (:class:`DeviceIdentity`), ``None`` on NumPy.
        handlers: ``handlers[opcode]`` runs one compute or create primitive (``None`` for the ops
            the worker handles itself: uploads, fetches, frees, transfers ...).
    """

    def __init__(
        self,
        xp: ModuleType,
        device: str | int | None = None,
        *,
        name: str | None = None,
        cupyx: Any = None,
    ):
        self.xp = xp
        self.name = name or ("numpy" if xp is np else "cupy")
        self._cupyx = cupyx
        self.identity: DeviceIdentity | None = None
        if isinstance(device, int) and not isinstance(device, bool):
            if self.name != "cupy":
                raise ValueError("only a CuPy backend can be pinned to a CUDA device")
            xp.cuda.Device(device).use()
            self.identity = read_identity(xp, device)
            device = self.identity.describe()
        self.device = device or (
            "cuda:?"
            if self.name == "cupy"
            else f"cpu ({platform.processor() or platform.machine()})"
        )
        self._bf16: Any = False  # not probed yet
        self._bf16_opmath = False  # NumPy's kernels not yet wrapped for bfloat16
        self._staging: Any = False  # not made yet
        self._stage_clients = False
        if self.name == "numpy":
            self.erf = erf_numpy()
            # (np.add.at's bits, 3-4x faster where indices reach rows: embeddings' gradients)
            self.scatter_add: Callable[[Any, Any, Any], None] = scatter_rows.add_at
            self.scatter_max: Callable[[Any, Any, Any], None] = np.maximum.at
            self.scatter_min: Callable[[Any, Any, Any], None] = np.minimum.at
        else:
            self.erf = lambda x: _cupyx(self).scipy.special.erf(x)
            self.scatter_add = scatter_add_any(
                self.xp, lambda a, key, v: _cupyx(self).scatter_add(a, key, v)
            )
            # (exact for every dtype, where cupyx.scatter_max/min are not)
            self.scatter_max = sorted_scatter_extreme(self.xp, "amax")
            self.scatter_min = sorted_scatter_extreme(self.xp, "amin")
        self._special: dict[str, Callable[..., Any]] = {}
        self._elementwise: dict[tuple, Any] = {}  # (elementwise_kernel)
        self.handlers: list[Handler | None] = [
            op.kernel(self) if op.kernel is not None else None for op in O.REGISTRY
        ]

    def linalg_checked(self) -> Any:
        """A context in which a factorization that fails raises ``LinAlgError`` on this backend
        (CuPy by default returns cuSOLVER's output unchecked, to spare a device sync)."""
        if self.name == "numpy":
            return contextlib.nullcontext()
        errstate = getattr(_cupyx(self), "errstate", None)
        return errstate(linalg="raise") if errstate is not None else contextlib.nullcontext()

    def elementwise_kernel(self, in_params: str, out_params: str, operation: str,
                           name: str) -> Any:  # fmt: skip
        """A CUDA elementwise kernel (``cupy.ElementwiseKernel``, made once per source) compiled
        without fused multiply-adds, so each ``*`` and ``+`` rounds as a kernel of its own would;
        ``None`` where there is none (NumPy, or a CuPy without custom kernels)."""
        key = (in_params, out_params, operation)
        kernels = self._elementwise
        k = kernels.get(key, False)
        if k is False:
            make = getattr(self.xp, "ElementwiseKernel", None) if self.name == "cupy" else None
            try:
                k = (
                    make(in_params, out_params, operation, name, options=("--fmad=false",))
                    if make
                    else None
                )
            except Exception:  # (compiled at the first call; this only checks the arguments)
                k = None
            kernels[key] = k
        return k

    def special(self, name: str) -> Callable[..., Any]:
        """Special function ``name`` of :data:`SPECIAL_FUNCTIONS` (SciPy's spelling and
        arguments); found at its first call, so no worker imports SciPy before it needs it."""
        if name not in SPECIAL_FUNCTIONS:
            raise KeyError(f"no special function {name!r} (known: {', '.join(SPECIAL_FUNCTIONS)})")

        def call(*args: Any) -> Any:
            fn = self._special.get(name)
            if fn is None:
                fn = self._special[name] = find_special(self, name, lambda: _cupyx(self))
            return fn(*args)

        return call

    # ------------------------------------------------------------------ dtypes
    @property
    def bf16(self) -> Any:
        """The bfloat16 dtype when this backend computes in it, else ``None`` (probed once)."""
        if self._bf16 is False:
            self._bf16 = _bf16_dtype(self.xp)
        return self._bf16

    def dtype(self, name: str) -> Any:
        """The array dtype for GT's dtype ``name``.

        Raises:
            TypeError: ``bfloat16`` on a backend that cannot compute in it, saying what would.
        """
        if name != BF16:
            return name
        dt = self.bf16
        if dt is None:
            if self.name == "numpy":
                why = "this worker runs NumPy without it (pip install ml_dtypes)"
            else:
                version = getattr(self.xp, "__version__", "?")
                why = f"this worker's CuPy ({version}) cannot (is ml_dtypes installed?)"
            raise TypeError(
                "bfloat16 needs the ml_dtypes package on the worker (and, on GPUs, CuPy 14 or "
                f"later with NumPy 2.1.2 or later); {why}"
            )
        if self.name == "numpy" and not self._bf16_opmath:
            self._bf16_opmath = True  # from now on, bfloat16 kernels run in float32
            compute_in_float32(self.handlers, dt)
        return dt

    # ------------------------------------------------------------------ host <-> device
    @property
    def staging(self) -> HostStaging | None:
        """The pinned staging of a CuPy worker (made at first use), ``None`` on NumPy or with
        ``GT_PINNED_STAGING=0``."""
        if self._staging is False:
            mode = staging_mode() if self.name == "cupy" else "off"
            self._staging = HostStaging(self.xp) if mode != "off" else None
            self._stage_clients = mode == "all"
        return self._staging

    @property
    def transfer_path(self) -> str:
        """How this worker's data reaches its peers: ``"host"`` (NumPy: it is there),
        ``"pinned"`` (CuPy, staged through pinned buffers) or ``"pageable"``."""
        if self.name != "cupy":
            return "host"
        return "pinned" if self.staging is not None else "pageable"

    def _stager(self, peer: bool) -> HostStaging | None:
        st = self.staging if self.name == "cupy" else None
        return st if st is not None and (peer or self._stage_clients) else None

    def to_host(self, arr: Any, peer: bool = False) -> np.ndarray:
        """Return a C-contiguous NumPy array with the same contents (a copy only where needed);
        ``peer``: for a transfer to another worker (staged through pinned memory on CuPy)."""
        if self.name == "cupy":
            st = self._stager(peer)
            if st is not None:
                return st.to_host(arr)
            return np.asarray(self.xp.asnumpy(arr), order="C")  # (asnumpy's order is C already)
        return np.asarray(arr, order="C")

    def release_staged(self) -> None:
        """Let go of the staging buffers (and the device arrays they copied) whose copies are
        done (also done at each staged transfer; the executor calls it at each slice's end, so
        they do not outlive a quiet spell)."""
        if self._staging:
            self._staging.release()

    def to_host_async(self, arr: Any) -> tuple[np.ndarray, Any]:
        """Start a host copy of ``arr`` for a peer: ``(host array, event)``, the bytes being there
        once the event is done (``None``: at once). With staging the host does not wait."""
        st = self._stager(True)
        if st is not None and arr.nbytes >= st.min_bytes:
            return st.to_host_async(arr)
        return self.to_host(arr, True), None

    def host_empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """An uninitialised host array that ``from_host(..., peer=True)`` moves fastest (pinned
        on a staging CuPy worker)."""
        st = self._stager(True)
        if st is not None and int(np.prod(shape)) * np.dtype(dtype).itemsize >= st.min_bytes:
            return st.empty(shape, dtype)
        return np.empty(shape, dtype)

    def from_host(self, arr: np.ndarray, peer: bool = False) -> Any:
        """Move a host array to the device (no copy on NumPy); ``peer``: it came from another
        worker (staged through pinned memory on CuPy)."""
        if self.name == "cupy":
            st = self._stager(peer)
            if st is not None:
                return st.from_host(arr)
            return self.xp.asarray(arr)
        return arr

    def from_frame(self, frame: Any, dtype: str, shape: tuple[int, ...]) -> Any:
        """An array of ``dtype`` and ``shape`` over a received frame's bytes (no copy on NumPy).

        Raises:
            ValueError: the frame holds another number of elements than ``shape`` needs.
            TypeError: ``dtype`` is one this backend cannot hold (bfloat16 on NumPy).
        """
        buf = frame.buffer if hasattr(frame, "buffer") else frame
        arr = np.frombuffer(buf, dtype=self.dtype(dtype))
        expect = 1
        for d in shape:
            expect *= d
        if arr.size != expect:
            raise ValueError(
                f"upload carries {arr.size} elements, shape {list(shape)} needs {expect}"
            )
        if not arr.flags.aligned:
            # (its bytes sit at an odd address in the message: NumPy's matmul leaves BLAS for
            # such arrays and rounds otherwise, so a product would depend on where it landed)
            arr = arr.copy()
        return self.from_host(arr.reshape(shape))

    # ------------------------------------------------------------------ device
    def reserved_bytes(self, used: int) -> int:
        """Bytes the allocator holds (CuPy's memory pool); equal to ``used`` on NumPy."""
        if self.name == "cupy":
            return int(self.xp.get_default_memory_pool().total_bytes())
        return used

    def synchronize(self) -> None:
        """Wait for queued device work (a no-op on NumPy)."""
        if self.name == "cupy":
            self.xp.cuda.get_current_stream().synchronize()


# ---------------------------------------------------------------------------- choosing
def cupy_backend(device: int | None = None, *, probe: bool = True) -> Backend:
    """A CuPy backend pinned to CUDA device ``device`` (default: the current one, normally 0).

    Raises:
        CupyUnavailable: CuPy is not installed, no device is visible, ``device`` is not one of
            them, or (with ``probe``) a test kernel failed.
    """
    try:
        cp, cupyx = _import_cupy()
    except ModuleNotFoundError as exc:
        if exc.name not in ("cupy", CUPY_DOUBLE_MODULE):
            raise CupyUnavailable(f"CuPy does not import: {exc}") from None
        raise CupyUnavailable(
            "CuPy is not installed (pip install 'gt-multiplex[gpu-cuda12]' or '[gpu-cuda13]', "
            "matching your driver's CUDA)",
            installed=False,
        ) from None
    except Exception as exc:  # a broken install: libraries that do not load
        raise CupyUnavailable(f"CuPy does not import: {type(exc).__name__}: {exc}") from None
    n, why = _device_count(cp)
    if n == 0:
        raise CupyUnavailable(why)
    index = 0 if device is None else device
    if not 0 <= index < n:
        raise CupyUnavailable(f"CUDA device {index} does not exist: {n} visible (0..{n - 1})")
    if probe:
        _probe(cp, index, pin=True)
    try:
        return Backend(cp, index, name="cupy", cupyx=cupyx)
    except Exception as exc:
        raise CupyUnavailable(
            f"CUDA device {index} could not be used: {type(exc).__name__}: {exc}"
        ) from None


def numpy_backend() -> Backend:
    """The NumPy backend."""
    return Backend(np)


def load_backend(prefer: str | None = None, device: int | None = None) -> Backend:
    """Pick CuPy when it is installed and runs a test kernel on a GPU, else NumPy.

    Args:
        prefer: ``"numpy"``, ``"cupy"`` or ``"auto"`` (default: ``$GT_BACKEND`` or ``auto``).
            ``"cupy"`` raises if CuPy cannot run; ``"auto"`` falls back to NumPy, saying once on
            stderr why when CuPy is installed but unusable.
        device: the CUDA device to pin to (CuPy only; default: device 0). ``auto`` with a device
            that does not exist falls back like any other failure.

    Raises:
        ValueError: an unknown ``prefer``.
        RuntimeError: ``prefer="cupy"`` and CuPy cannot run (:class:`CupyUnavailable`).
    """
    prefer = prefer or os.environ.get("GT_BACKEND", "auto")
    if prefer not in ("auto", "numpy", "cupy"):
        raise ValueError(f"GT_BACKEND must be auto, numpy or cupy, not {prefer!r}")
    if prefer == "numpy":
        return numpy_backend()
    try:
        return cupy_backend(device)
    except CupyUnavailable as exc:
        if prefer == "cupy":
            raise CupyUnavailable(f"GT_BACKEND=cupy, but {exc}") from None
        if exc.installed:  # no CuPy at all is the ordinary CPU case: nothing to say
            _say_fallback(str(exc))
        return numpy_backend()


def list_devices(prefer: str | None = None) -> list[dict[str, Any]]:
    """The CUDA devices a worker would use, as plain data (empty when it would use NumPy).

    What ``gt worker --list-devices --json`` prints, and how a local cluster counts its GPUs
    without importing CuPy into the dispatcher. Each device must pass the test kernel.
    """
    prefer = prefer or os.environ.get("GT_BACKEND", "auto")
    if prefer == "numpy":
        return []
    try:
        cp, _ = _import_cupy()
    except Exception:
        return []
    n, _why = _device_count(cp)
    out = []
    for i in range(n):
        try:
            _probe(cp, i)
            out.append(read_identity(cp, i).as_dict())
        except Exception as exc:  # (no worker will be placed there)
            print(f"gt worker: CUDA device {i} is left out: {exc}", file=sys.stderr, flush=True)
    return out


def device_count(prefer: str | None = None) -> int:
    """CUDA devices CuPy sees (no test kernel; 0 without CuPy, or with ``GT_BACKEND=numpy``)."""
    if (prefer or os.environ.get("GT_BACKEND", "auto")) == "numpy":
        return 0
    try:
        cp, _ = _import_cupy()
    except Exception:
        return 0
    return _device_count(cp)[0]
