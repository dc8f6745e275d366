"""The worker's op table, written once against ``xp`` (CuPy on a GPU, NumPy otherwise).

This is the only module that imports CuPy, and only when asked to. Each handler takes the resolved
argument list (arrays and immediates) and the instruction's attribute dict, and returns a new array.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from gt.runtime import protocol as P

Handler = Callable[[list, Any], Any]


class Backend:
    """An array module plus the handler table that executes primitives on it.

    Attributes:
        xp: ``numpy`` or ``cupy``.
        name: ``"numpy"`` or ``"cupy"``.
        device: a human-readable device description.
        handlers: ``handlers[opcode]`` executes one primitive (``None`` for ops the worker
            handles itself, such as ``upload`` and ``fetch``).
    """

    def __init__(self, xp: ModuleType, device: str):
        self.xp = xp
        self.name = xp.__name__
        self.device = device
        self.handlers: list[Handler | None] = [None] * len(P.OPS)
        for name, fn in _make_handlers(xp).items():
            self.handlers[P.OPCODE[name]] = fn

    def to_host(self, arr: Any) -> np.ndarray:
        """Return a C-contiguous NumPy array with the same contents (a copy only where needed)."""
        if self.name == "cupy":
            return self.xp.asnumpy(arr)
        return np.asarray(arr, order="C")

    def from_host(self, arr: np.ndarray) -> Any:
        """Move a host array to the device (no copy on NumPy)."""
        if self.name == "cupy":
            return self.xp.asarray(arr)
        return arr

    def reserved_bytes(self, used: int) -> int:
        """Bytes the allocator holds (CuPy's memory pool); equal to ``used`` on NumPy."""
        if self.name == "cupy":
            return int(self.xp.get_default_memory_pool().total_bytes())
        return used

    def synchronize(self) -> None:
        """Wait for queued device work (a no-op on NumPy)."""
        if self.name == "cupy":
            self.xp.cuda.get_current_stream().synchronize()


def load_backend(prefer: str | None = None) -> Backend:
    """Pick CuPy when a GPU and CuPy are present, else NumPy.

    Args:
        prefer: ``"numpy"``, ``"cupy"`` or ``"auto"`` (default: ``$GT_BACKEND`` or ``auto``).
            ``"cupy"`` raises if CuPy or a GPU is missing; ``"auto"`` falls back quietly.
    """
    prefer = prefer or os.environ.get("GT_BACKEND", "auto")
    if prefer not in ("auto", "numpy", "cupy"):
        raise ValueError(f"GT_BACKEND must be auto, numpy or cupy, not {prefer!r}")
    if prefer in ("auto", "cupy"):
        try:
            import cupy  # noqa: PLC0415 - lazy: the gpu extra is optional

            n = cupy.cuda.runtime.getDeviceCount()
            if n > 0:
                dev = cupy.cuda.Device()
                props = cupy.cuda.runtime.getDeviceProperties(dev.id)
                name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
                return Backend(cupy, f"{name} (cuda:{dev.id})")
            if prefer == "cupy":
                raise RuntimeError("GT_BACKEND=cupy but no CUDA device is visible")
        except ImportError:
            if prefer == "cupy":
                raise RuntimeError(
                    "GT_BACKEND=cupy but CuPy is not installed (pip install 'gt-multiplex[gpu]')"
                ) from None
        except Exception:
            if prefer == "cupy":
                raise
    import platform

    return Backend(np, f"cpu ({platform.processor() or platform.machine()})")


def build_key(key: list, tensors: list) -> tuple:
    """Turn a wire index key into a Python index tuple.

    Items: ``["i", n]`` int, ``["s", start, stop, step]`` slice, ``["n"]`` None, ``["e"]`` Ellipsis,
    ``["l", [ints]]`` an int list, ``["t", k]`` the k-th index tensor in ``tensors``.
    """
    out = []
    for item in key:
        tag = item[0]
        if tag == "s":
            out.append(slice(item[1], item[2], item[3]))
        elif tag == "i":
            out.append(item[1])
        elif tag == "n":
            out.append(None)
        elif tag == "e":
            out.append(Ellipsis)
        elif tag == "l":
            out.append(np.asarray(item[1], dtype=np.int64))
        elif tag == "t":
            out.append(tensors[item[1]])
        else:
            raise ValueError(f"bad index item {item!r}")
    return tuple(out)


def _has_advanced(key: list) -> bool:
    return any(item[0] in ("l", "t") for item in key)


# References to an array that nothing else holds, as counted inside private() after the handler
# took it out of its argument list: the worker's table entry, the handler's local name, private()'s
# parameter and getrefcount's own argument.
_PRIVATE_REFS = 4


def private(x: Any) -> bool:
    """Whether ``x`` may be written in place: it owns its memory, is writeable, and no other
    table entry, view or saved handle refers to it (NumPy views hold a reference to their base)."""
    if getattr(x, "base", None) is not None:
        return False
    if not getattr(getattr(x, "flags", None), "writeable", True):
        return False
    return sys.getrefcount(x) <= _PRIVATE_REFS  # (a live flags object would count too)


def _erf_fn(xp: ModuleType) -> Callable:
    """``erf`` for the array module: SciPy's / CuPy's when present, else the exact ``math.erf``."""
    if xp is np:
        try:
            from scipy.special import erf  # noqa: PLC0415 - optional

            return erf
        except ImportError:
            vec = np.vectorize(math.erf, otypes=[np.float64])
            return lambda x: vec(x).astype(x.dtype, copy=False)
    try:  # pragma: no cover - needs a GPU
        from cupyx.scipy.special import erf  # noqa: PLC0415

        return erf
    except ImportError:  # pragma: no cover
        return lambda x: xp.asarray(_erf_fn(np)(xp.asnumpy(x)))


def _make_handlers(xp: ModuleType) -> dict[str, Handler]:
    """Build the handler table for one array module."""

    def _axis(a: Any) -> Any:
        return tuple(a) if type(a) is list else a

    def binary(fn: Callable) -> Handler:
        def h(v: list, at: Any) -> Any:
            if at is None:
                return fn(v[0], v[1])
            # {"inplace": True}: the client wrote x op= y (out id == x's id, same dtype and shape).
            x = v.pop(0)
            return fn(x, v[0], out=x) if private(x) else fn(x, v[0])

        return h

    def unary(fn: Callable) -> Handler:
        return lambda v, at: fn(v[0])

    def full(v: list, at: dict) -> Any:
        return xp.full(tuple(at["shape"]), v[0], dtype=at["dtype"])

    def arange(v: list, at: dict) -> Any:
        return xp.arange(at["start"], at["stop"], at["step"], dtype=at["dtype"])

    def eye(v: list, at: dict) -> Any:
        return xp.eye(at["n"], at["m"], dtype=at["dtype"])

    def _rng(at: dict) -> Any:
        return xp.random.default_rng(at["seed"])

    def randn(v: list, at: dict) -> Any:
        r = _rng(at).standard_normal(tuple(at["shape"]), dtype=xp.float64)
        return r.astype(at["dtype"], copy=False)

    def rand(v: list, at: dict) -> Any:
        r = _rng(at).random(tuple(at["shape"]), dtype=xp.float64)
        return r.astype(at["dtype"], copy=False)

    def randint(v: list, at: dict) -> Any:
        r = _rng(at).integers(at["low"], at["high"], size=tuple(at["shape"]))
        return r.astype(at["dtype"], copy=False)

    def relu(v: list, at: Any) -> Any:
        x = v[0]
        return xp.maximum(x, xp.zeros((), dtype=x.dtype))

    def sigmoid(v: list, at: Any) -> Any:
        x = v[0]
        # Split by sign so neither branch overflows in exp.
        e = xp.exp(-xp.abs(x))
        return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)

    def power(v: list, at: Any) -> Any:
        a, b = v
        r = xp.power(a, b)
        return r

    def reduce(fn: Callable) -> Handler:
        def h(v: list, at: dict | None) -> Any:
            if at is None:
                return xp.asarray(fn(v[0]))
            return xp.asarray(
                fn(v[0], axis=_axis(at.get("axis")), keepdims=at.get("keepdims", False))
            )

        return h

    def argreduce(fn: Callable) -> Handler:
        def h(v: list, at: dict | None) -> Any:
            at = at or {}
            r = fn(v[0], axis=at.get("axis"), keepdims=at.get("keepdims", False))
            return xp.asarray(r).astype(xp.int64, copy=False)

        return h

    def getitem(v: list, at: dict) -> Any:
        return v[0][build_key(at["key"], v[1:])]

    def setitem(v: list, at: dict) -> Any:
        # Write into the array only when the client asked for it (out id == input id) and no other
        # tensor can observe it; otherwise work on a copy, so tensors never share values.
        x = v.pop(0)  # so the argument list no longer refers to it
        if not (at.get("inplace") and private(x)):
            x = x.copy()
        x[build_key(at["key"], v[1:])] = v[0]
        return x

    def index_add(v: list, at: dict) -> Any:
        out = v.pop(0)
        if not (at.get("inplace") and private(out)):
            out = out.copy()
        key = build_key(at["key"], v[1:])
        if not _has_advanced(at["key"]):
            out[key] += v[0]  # basic indexing selects each element once
        elif xp is np:
            np.add.at(out, key, v[0])
        else:  # pragma: no cover - needs a GPU; CuPy spells it cupyx.scatter_add
            import cupyx  # noqa: PLC0415

            cupyx.scatter_add(out, key, v[0])
        return out

    def where(v: list, at: Any) -> Any:
        c, a, b = v
        if (
            xp is np
            and type(b) is float
            and b == 0.0
            and type(a) is np.ndarray
            and a.dtype.kind == "f"
        ):
            # Masking (relu's gradient, ...): a product with the mask is several times faster than
            # np.where, and the same unless a holds inf/nan where the mask is False.
            if np.isfinite(a).all():
                r = a * c
                return r.astype(at["dtype"], copy=False) if at else r
        r = xp.where(c, a, b)
        return r.astype(at["dtype"], copy=False) if at else r

    erf = _erf_fn(xp)

    def log_softmax(v: list, at: dict) -> Any:
        x, axis = v[0], at["axis"]
        s = x - x.max(axis=axis, keepdims=True)
        return s - xp.log(xp.exp(s).sum(axis=axis, keepdims=True))

    table: dict[str, Handler] = {
        "full": full,
        "arange": arange,
        "eye": eye,
        "randn": randn,
        "rand": rand,
        "randint": randint,
        "copy": lambda v, at: xp.array(v[0], copy=True),
        "add": binary(xp.add),
        "sub": binary(xp.subtract),
        "mul": binary(xp.multiply),
        "div": binary(xp.true_divide),
        "pow": power,
        "maximum": binary(xp.maximum),
        "minimum": binary(xp.minimum),
        "lt": binary(xp.less),
        "le": binary(xp.less_equal),
        "gt": binary(xp.greater),
        "ge": binary(xp.greater_equal),
        "eq": binary(xp.equal),
        "ne": binary(xp.not_equal),
        "floor_divide": binary(xp.floor_divide),
        "remainder": binary(xp.remainder),
        "where": where,
        "neg": unary(xp.negative),
        "abs": unary(xp.abs),
        "exp": unary(xp.exp),
        "log": unary(xp.log),
        "sqrt": unary(xp.sqrt),
        "sin": unary(xp.sin),
        "cos": unary(xp.cos),
        "tanh": unary(xp.tanh),
        "sigmoid": sigmoid,
        "relu": relu,
        "sign": unary(xp.sign),
        "logical_not": unary(xp.logical_not),
        "cast": lambda v, at: v[0].astype(at["dtype"]),
        "clip": lambda v, at: xp.clip(v[0], v[1], v[2]),
        "matmul": binary(xp.matmul),
        "sum": reduce(xp.sum),
        "max": reduce(xp.max),
        "min": reduce(xp.min),
        "argmax": argreduce(xp.argmax),
        "argmin": argreduce(xp.argmin),
        "reshape": lambda v, at: xp.reshape(v[0], tuple(at["shape"])),
        "transpose": lambda v, at: xp.transpose(v[0], tuple(at["perm"])),
        "expand": lambda v, at: xp.broadcast_to(v[0], tuple(at["shape"])),
        "getitem": getitem,
        "setitem": setitem,
        "concat": lambda v, at: xp.concatenate(v, axis=at["axis"]),
        "index_add": index_add,
        "erf": lambda v, at: erf(v[0]),
        "log_softmax": log_softmax,
    }
    return table
