"""Dtype conversion, devices and ``new_*`` constructors (a :class:`Tensor` mixin).

Devices are accepted for ported PyTorch code and change nothing: where a tensor's data lives is
the cluster's business (see :class:`gt.ops.device.device`).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt._dtype import dtype_of_type_name, type_name
from gt.grad_graph import label
from gt.ops.base import TensorBase
from gt.ops.device import device as Device
from gt.ops.layout import formatted

if TYPE_CHECKING:
    from gt.tensor import Tensor

#: Every tensor's ``device`` (see :attr:`ConversionOps.device`).
_CPU = Device("cpu")
_FLOATS = frozenset(S.FLOAT_DTYPES)
_DEVICE_NAMES = ("cpu", "cuda", "gt", "mps", "meta")


def numpy_operand_dtype(dtype: Any, arr: np.ndarray, true_div: bool) -> str | None:
    """The dtype of ``tensor <op> ndarray`` as PyTorch gives it: its operators leave an ndarray
    operand to NumPy (the tensor seen through ``__array__``, the result wrapped back), so NumPy's
    promotion decides (float32 with an int64 array, or with a 0-d float64 one, makes float64).
    None where that is not a GT dtype (GT's own promotion then applies)."""
    try:
        out = np.result_type(np.dtype(str.__str__(dtype)), arr.dtype)
    except TypeError:
        return None
    if true_div and out.kind in "biu":  # (NumPy's true division of integers gives float64)
        out = np.dtype(np.float64)
    name = out.name
    return name if name in S.INEXACT_DTYPES or name in S.INT_DTYPES or name == "bool" else None


def host_array(data: Any, dtype: Any = None) -> np.ndarray:
    """A C-contiguous copy of ``data`` with PyTorch's dtypes: Python floats become the default
    dtype (float32), complex numbers its complex partner and ints int64 (an ndarray keeps its own
    dtype, and so does a NumPy scalar: ``np.float64(0.5)`` alone or in a list makes float64, as in
    PyTorch)."""
    try:
        arr = np.array(data)
    except ValueError:
        ragged = _ragged(data)
        if ragged is None:
            raise
        raise ValueError(ragged) from None
    own = isinstance(data, (np.ndarray, np.generic)) or _all_numpy(data)
    if dtype is not None:
        dtype = S.canonical_dtype(dtype)
        if not own and dtype in S.INT_RANGE and arr.dtype.kind in "iu" and arr.size:
            for v in (int(arr.min()), int(arr.max())):  # Python ints must fit, as in PyTorch
                S.fill_int(v, dtype, type_name=dtype)
        with np.errstate(over="ignore"):  # (1e20 as float16 is inf, silently, as in PyTorch)
            arr = arr.astype(dtype)
    elif arr.dtype == np.float64 and not own and not _holds_double(data):
        with np.errstate(over="ignore"):  # (1e300 as float32 is inf, silently, as in PyTorch)
            arr = arr.astype(S.DEFAULT_FLOAT)  # (gt.set_default_dtype's; float32 at start)
    elif arr.dtype == np.complex128 and not own:
        with np.errstate(over="ignore"):
            arr = arr.astype(S.complex_of(S.DEFAULT_FLOAT))
    elif arr.dtype.kind in "iu" and arr.dtype != np.int32 and not own:
        arr = arr.astype(np.int64)
    if not arr.dtype.isnative:  # (a big-endian array: its values, in this machine's order)
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return np.ascontiguousarray(arr).reshape(arr.shape)


def _ragged(data: Any) -> str | None:
    """PyTorch's message for nested lists of uneven lengths (``[[1, 2], [3]]``), where NumPy's
    speaks of "an inhomogeneous shape"; ``None`` if the lists are even."""
    shape = []
    first = data
    while isinstance(first, (list, tuple)):
        shape.append(len(first))
        if not first:
            break
        first = first[0]

    def walk(seq: Any, dim: int) -> str | None:
        if dim >= len(shape):
            return None
        if not isinstance(seq, (list, tuple)):
            return None
        if len(seq) != shape[dim]:
            return f"expected sequence of length {shape[dim]} at dim {dim} (got {len(seq)})"
        for item in seq:
            found = walk(item, dim + 1)
            if found:
                return found
        return None

    return walk(data, 0)


def _all_numpy(data: Any) -> bool:
    """Whether a (nested) list holds NumPy scalars and arrays only: PyTorch keeps their dtype
    (``tensor([np.uint8(1)])`` is uint8), as for an array."""
    if not isinstance(data, (list, tuple)) or not data:
        return False
    return all(
        _all_numpy(v) if isinstance(v, (list, tuple)) else isinstance(v, (np.generic, np.ndarray))
        for v in data
    )


def _holds_double(data: Any) -> bool:
    """Whether a (nested) list holds a NumPy float64 or a float64 array, which PyTorch keeps
    double where Python floats become the default dtype."""
    if not isinstance(data, (list, tuple)):
        return False
    for v in data:
        if isinstance(v, (list, tuple)):
            if _holds_double(v):
                return True
        elif isinstance(v, (np.float64, np.ndarray)) and v.dtype == np.float64:
            return True
    return False


def is_device(a: Any) -> bool:
    """Whether ``a`` names a device (``"cuda:0"``, ``gt.device("cpu")``) rather than a dtype."""
    if isinstance(a, Device):
        return True
    return isinstance(a, str) and a.split(":")[0] in _DEVICE_NAMES


#: What PyTorch's ``new_*`` take besides the size and dtype (placement: nothing to do in GT).
_PLACEMENT_KEYWORDS = frozenset({"device", "layout", "pin_memory", "memory_format"})


def _size_keyword(size: tuple, kw: dict, op: str) -> tuple:
    """``size`` given by position, or as ``size=`` (an unknown keyword raises, as in PyTorch)."""
    if "size" in kw:
        if size:
            raise TypeError(f"{op}() got multiple values for argument 'size'")
        size = (kw.pop("size"),)
    for name in kw:
        if name not in _PLACEMENT_KEYWORDS:
            raise TypeError(f"{op}() got an unexpected keyword argument '{name}'")
    return size


def _size(size: tuple) -> tuple[int, ...]:
    shape = size[0] if len(size) == 1 and not isinstance(size[0], int) else size
    return tuple(int(d) for d in shape)


class ConversionOps:
    """Dtype conversion and ``new_*`` constructors of :class:`gt.Tensor`."""

    __slots__ = ()

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """A copy converted to a dtype (the tensor itself when it already has that dtype, unless
        ``copy=True``).

        Accepts ``to(dtype)``, ``to(dtype=...)``, ``to(other_tensor)`` and, for ported PyTorch code,
        devices (``"cuda"``, ``gt.device("cpu")``, ``device=...``, ``non_blocking=``), which change
        nothing.
        """
        dtype = kwargs.get("dtype")
        fmt = kwargs.get("memory_format")
        if fmt is not None:
            out = self.to(*args, **{k: v for k, v in kwargs.items() if k != "memory_format"})
            return formatted(out, fmt)
        flags = [a for a in args if isinstance(a, bool)]  # to(dtype, non_blocking, copy)
        copy = bool(kwargs.get("copy", flags[1] if len(flags) > 1 else False))
        for a in args:
            if isinstance(a, TensorBase):
                dtype = a.dtype
            elif is_device(a) or isinstance(a, bool):
                continue
            elif a is not None:
                dtype = a
        if dtype is None:
            return self.clone() if copy else self
        dtype = S.canonical_dtype(dtype)
        if dtype == self.dtype:
            return self.clone() if copy else self
        if self.dtype in S.COMPLEX_DTYPES and dtype not in S.COMPLEX_DTYPES and dtype != "bool":
            warnings.warn(
                "Casting complex values to real discards the imaginary part", stacklevel=2
            )
        return self._apply("cast", [self], {"dtype": dtype})

    def type(self, dtype: Any = None) -> Any:
        """The legacy type name (``"gt.FloatTensor"``, as PyTorch's ``"torch.FloatTensor"``), or
        a copy converted to ``dtype`` (a dtype, a typed constructor such as ``gt.LongTensor``,
        or a type name)."""
        if dtype is None:
            return type_name(self.dtype)
        if isinstance(dtype, type) and hasattr(dtype, "dtype"):
            return self.to(dtype.dtype)
        if isinstance(dtype, str) and (named := dtype_of_type_name(dtype)):
            return self.to(named)
        return self.to(dtype)

    def type_as(self, other: Tensor) -> Tensor:
        """A copy converted to ``other``'s dtype."""
        return self.to(other.dtype)

    def float(self) -> Tensor:
        """Convert to float32."""
        return self.to("float32")

    def double(self) -> Tensor:
        """Convert to float64."""
        return self.to("float64")

    def half(self) -> Tensor:
        """Convert to float16."""
        return self.to("float16")

    def long(self) -> Tensor:
        """Convert to int64."""
        return self.to("int64")

    def int(self) -> Tensor:
        """Convert to int32."""
        return self.to("int32")

    def bool(self) -> Tensor:
        """Convert to bool."""
        return self.to("bool")

    def cpu(self) -> Tensor:
        """The tensor itself (for ported PyTorch code: data moves only at sync points)."""
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> Tensor:
        """The tensor itself (placement on GPUs is the cluster's business)."""
        return self

    def contiguous(self, memory_format: Any = None) -> Tensor:
        """The tensor itself when PyTorch's would be contiguous (in ``memory_format``), else a
        handle on the same value that reports so (see :mod:`gt.ops.layout`; the worker's own
        layout is its business)."""
        out = formatted(self, "contiguous_format" if memory_format is None else memory_format)
        return out if out is self else label(out, "CloneBackward0")

    def pin_memory(self) -> Tensor:
        """The tensor itself."""
        return self

    @property
    def device(self) -> Device:
        """``cpu``, as PyTorch code asks: the program sees a CPU-only PyTorch
        (``gt.cuda.is_available()`` is False, ``is_cpu`` True) while the cluster decides where
        the data lives (a worker's GPU or its CPU). So ``x.device.type == "cpu"`` checks,
        ``autocast(device_type=x.device.type)`` and ``x.to(x.device)`` behave as on PyTorch's
        CPU."""
        return _CPU

    @property
    def is_cuda(self) -> bool:
        """False: GT tensors are not CUDA tensors of this process (workers may run on GPUs)."""
        return False

    # ------------------------------------------------------------------ new_* constructors
    def new_tensor(
        self, data: Any, dtype: Any = None, requires_grad: bool = False, **_: Any
    ) -> Tensor:
        """A copy of ``data`` on this tensor's connection, with this tensor's dtype by default."""
        dt = self.dtype if dtype is None else dtype  # PyTorch: this tensor's dtype by default
        if isinstance(data, TensorBase):
            out = data.detach().to(dt)
        else:
            out = self._upload(host_array(data, dt))
        return out.requires_grad_(True) if requires_grad else out

    def new_full(
        self, size: Any, fill_value: Any, dtype: Any = None, requires_grad: bool = False, **_: Any
    ) -> Tensor:
        """A tensor of ``size`` filled with ``fill_value`` (default dtype: this tensor's)."""
        dt = S.canonical_dtype(dtype) if dtype is not None else self.dtype
        shape = (size,) if isinstance(size, int) else tuple(int(d) for d in size)
        if dt in S.COMPLEX_DTYPES:
            v = complex(fill_value)
            if v.imag:  # (no complex immediates on the wire: the two parts, joined)
                real = self.new_full(shape, v.real, S.REAL_OF[dt])
                out = real._apply("complex", [real, self.new_full(shape, v.imag, S.REAL_OF[dt])])
                return out.requires_grad_(True) if requires_grad else out
            value: Any = v.real
        elif dt == "bool":
            value = bool(fill_value)
        elif dt in _FLOATS:
            value = float(fill_value)
        else:
            value = S.fill_int(int(fill_value), dt)
        out = self._create("full", [value], {"shape": list(shape), "dtype": dt})
        return out.requires_grad_(True) if requires_grad else out

    def new_zeros(
        self, *size: Any, dtype: Any = None, requires_grad: bool = False, **kw: Any
    ) -> Tensor:
        """Zeros of ``size`` (default dtype: this tensor's)."""
        return self.new_full(_size(_size_keyword(size, kw, "new_zeros")), 0, dtype, requires_grad)

    def new_ones(
        self, *size: Any, dtype: Any = None, requires_grad: bool = False, **kw: Any
    ) -> Tensor:
        """Ones of ``size`` (default dtype: this tensor's)."""
        return self.new_full(_size(_size_keyword(size, kw, "new_ones")), 1, dtype, requires_grad)

    def new_empty(
        self, *size: Any, dtype: Any = None, requires_grad: bool = False, **kw: Any
    ) -> Tensor:
        """An uninitialised tensor of ``size`` (GT fills it with zeros)."""
        return self.new_full(_size(_size_keyword(size, kw, "new_empty")), 0, dtype, requires_grad)

    def new(self, *args: Any, **kwargs: Any) -> Tensor:
        """The legacy constructor: ``x.new(2, 3)`` or ``x.new(gt.Size(...))`` an uninitialised
        tensor of that size, ``x.new([1, 2])`` one of that data, ``x.new()`` an empty one; all
        in ``x``'s dtype."""
        from gt.ops.typeinfo import Size  # noqa: PLC0415 - typeinfo imports the tensor class

        if not args:
            return self.new_full((0,), 0)
        if (len(args) == 1 and isinstance(args[0], Size)) or all(type(a) is int for a in args):
            return self.new_full(_size(args), 0)
        if len(args) > 1:
            raise TypeError("new(): give sizes as ints, or one sequence of data")
        return self.new_tensor(args[0], dtype=self.dtype)

    def new_empty_strided(
        self, size: Any, stride: Any, *, dtype: Any = None, requires_grad: bool = False, **_: Any
    ) -> Tensor:
        """:meth:`new_empty` of ``size`` (the strides are the worker's: GT's tensors are dense)."""
        return self.new_full(_size((size,)), 0, dtype, requires_grad)
