"""``gt.Tensor``: a client-side handle to an array that lives on a worker.

A tensor knows its id, shape and dtype; the data stays on the worker until a sync point
(``numpy()``, ``item()``, ``repr``, ``float()``). Every op infers the result's shape and dtype here,
queues one primitive instruction and returns at once. The ops themselves live in mixins under
``gt/ops``; this module keeps the handle, the sync points and the hot plumbing (``_binary``,
``_unary``) that every elementwise op goes through.

Tensors are values: no two tensors share memory as far as a program can observe. An in-place op
(``x += 1``, ``x[0] = 5``, ``x.zero_()``) changes ``x`` and only ``x`` -- never a tensor made from it
by slicing or reshaping, and never the tensor it was made from. (PyTorch's views share memory;
GT's tensors may live on different workers, so they do not.)
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from gt import shapes as S
from gt.autograd import _mode, backward, record
from gt.ops.arith import ArithmeticOps
from gt.ops.base import TensorBase, immediate
from gt.ops.format import tensor_repr
from gt.ops.inplace import InplaceOps, take_value
from gt.ops.reduce import ReductionOps
from gt.ops.shaping import ShapeOps
from gt.runtime import ops as O
from gt.runtime.client import Connection

_OP = O.OPCODE
_RESHAPE = _OP["reshape"]
_SCALARS = (int, float, bool)
_FLOATS = S.FLOAT_DTYPES
_FLOAT_SET = frozenset(_FLOATS)


class Tensor(TensorBase, ArithmeticOps, ReductionOps, ShapeOps, InplaceOps):
    """A tensor whose data lives on a GT worker.

    Create tensors with the factories (:func:`gt.randn`, :func:`gt.tensor`, ...), not directly.

    Attributes:
        shape: the shape, a tuple of ints.
        dtype: the dtype's name (``"float32"``, ...); compare with ``gt.float32`` and friends.
        requires_grad: whether ops on this tensor are recorded for :meth:`backward`.
        grad: the accumulated gradient (a tensor) after :meth:`backward`, or ``None``.
    """

    __slots__ = (
        "_conn",
        "id",
        "shape",
        "dtype",
        "requires_grad",
        "grad",
        "_node",
        "_version",
        "__weakref__",
    )
    __array_priority__ = 1000  # so ndarray + Tensor defers to Tensor.__radd__

    def __init__(self, conn: Connection, tid: int, shape: tuple[int, ...], dtype: str):
        self._conn = conn
        self.id = tid
        self.shape = shape
        self.dtype = dtype
        self.requires_grad = False
        self.grad = None
        self._node = None
        self._version = 0

    def __del__(self) -> None:
        tid = self.id
        if tid is not None:
            try:
                self._conn.free(tid)
            except Exception:  # interpreter shutdown: the connection may be gone already
                pass

    # ------------------------------------------------------------------ metadata
    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def dim(self) -> int:
        """Number of dimensions (PyTorch spelling)."""
        return len(self.shape)

    def size(self, dim: int | None = None) -> Any:
        """The shape, or one dimension of it."""
        if dim is None:
            return self.shape
        return self.shape[S.normalize_axis(dim, self.ndim, "size")]

    def numel(self) -> int:
        """Number of elements."""
        return S.prod(self.shape)

    def element_size(self) -> int:
        """Bytes per element."""
        return np.dtype(self.dtype).itemsize

    @property
    def device(self) -> str:
        """Where the data lives: always ``"gt"`` (placement is the cluster's business)."""
        return "gt"

    def is_floating_point(self) -> bool:
        """Whether the dtype is a floating-point type."""
        return self.dtype in _FLOATS

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Any:
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self) -> int:
        return id(self)

    # ------------------------------------------------------------------ sync points
    def numpy(self) -> np.ndarray:
        """Wait for the data and return it as a NumPy array (a sync point)."""
        return self._conn.fetch(self.id)

    def item(self) -> Any:
        """The single value of a one-element tensor as a Python number (a sync point)."""
        if self.numel() != 1:
            raise ValueError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        """The data as nested Python lists (a sync point)."""
        return self.numpy().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __index__(self) -> int:
        if self.dtype not in S.INT_DTYPES or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a.astype(dtype) if dtype is not None else a

    def __format__(self, spec: str) -> str:
        if spec and self.numel() == 1:
            return format(self.item(), spec)
        return format(str(self), spec)

    def __repr__(self) -> str:
        return tensor_repr(self)

    # ------------------------------------------------------------------ op plumbing
    def _new(self, shape: tuple[int, ...], dtype: str) -> Tensor:
        conn = self._conn
        return Tensor(conn, conn.new_id(), shape, dtype)

    def _handle(self) -> Tensor:
        """A second handle on this tensor's worker id (it owns nothing until given the id)."""
        return Tensor(self._conn, None, self.shape, self.dtype)

    def _apply(
        self, name: str, inputs: list, attrs: Any = None, shape: Any = None, grad: bool = True
    ) -> Tensor:
        """Queue primitive ``name`` of the op registry on ``inputs`` (tensors and Python numbers).

        The registry's rules give the result's shape (unless the caller computed it, ``shape``)
        and dtype; the op is recorded for autograd when it has a derivative and an input wants
        one (and ``grad``). This is the one path every op without a hand-tuned fast path takes.
        """
        op = O.BY_NAME[name]
        shapes = [t.shape if isinstance(t, TensorBase) else () for t in inputs]
        dtypes = [t.dtype if isinstance(t, TensorBase) else None for t in inputs]
        if shape is None:
            shape = op.shape(shapes, attrs)
        args = [t.id if isinstance(t, TensorBase) else immediate(t) for t in inputs]
        conn = self._conn
        out = Tensor(conn, conn.new_id(), tuple(shape), op.dtype(dtypes, attrs))
        conn.emit(op.code, out.id, args, attrs)
        if grad and op.grad is not None and _mode.enabled:
            if any(getattr(t, "requires_grad", False) for t in inputs):
                record(out, name, tuple(inputs), attrs)
        return out

    def _apply_(self, name: str, inputs: list, attrs: Any = None) -> Tensor:
        """Queue primitive ``name`` with this tensor as its output, in place (never recorded)."""
        args = [t.id if isinstance(t, TensorBase) else immediate(t) for t in inputs]
        self._conn.emit(_OP[name], self.id, args, attrs)
        self._version += 1
        return self

    def _create(self, name: str, args: list, attrs: dict) -> Tensor:
        """A tensor made by creation primitive ``name`` on this tensor's connection."""
        return create(self._conn, name, args, attrs)

    def _arange(self, n: int) -> Tensor:
        """``0 .. n-1`` (int64) on this tensor's connection."""
        return self._create("arange", [], {"start": 0, "stop": int(n), "step": 1, "dtype": "int64"})

    def new_tensor(self, data: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
        """A tensor holding a copy of ``data`` on this tensor's connection (PyTorch's spelling)."""
        if isinstance(data, TensorBase):
            out = data.detach().to(dtype) if dtype is not None else data.detach()
        else:
            out = upload(self._conn, host_array(data, dtype))
        return out.requires_grad_(True) if requires_grad else out

    def new_full(
        self, size: Any, fill_value: Any, dtype: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """A tensor of ``size`` filled with ``fill_value`` (default dtype: this tensor's)."""
        dt = S.canonical_dtype(dtype) if dtype is not None else self.dtype
        shape = (size,) if isinstance(size, int) else tuple(int(d) for d in size)
        value = (
            bool(fill_value)
            if dt == "bool"
            else (float(fill_value) if dt in _FLOAT_SET else int(fill_value))
        )
        out = self._create("full", [value], {"shape": list(shape), "dtype": dt})
        return out.requires_grad_(True) if requires_grad else out

    def new_zeros(self, *size: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
        """Zeros of ``size`` (default dtype: this tensor's)."""
        shape = size[0] if len(size) == 1 and not isinstance(size[0], int) else size
        return self.new_full(shape, 0, dtype, requires_grad)

    def new_ones(self, *size: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
        """Ones of ``size`` (default dtype: this tensor's)."""
        shape = size[0] if len(size) == 1 and not isinstance(size[0], int) else size
        return self.new_full(shape, 1, dtype, requires_grad)

    def _emit(
        self, opcode: int, args: list, shape: tuple[int, ...], dtype: str, attrs: Any = None
    ) -> Tensor:
        conn = self._conn
        out = Tensor(conn, conn.new_id(), shape, dtype)
        conn.emit(opcode, out.id, args, attrs)
        return out

    def _alias(self) -> Tensor:
        """A new, never-recorded handle on the same value (a zero-copy view on the worker)."""
        return self._emit(_RESHAPE, [self.id], self.shape, self.dtype, {"shape": list(self.shape)})

    def _binary(
        self, opcode: int, other: Any, name: str, reflected: bool = False, true_div: bool = False
    ) -> Tensor:
        """Queue ``self <op> other`` (or ``other <op> self``) with broadcasting and promotion."""
        kind = type(other)
        if kind is float or kind is int:  # the hot path: tensor <op> Python number
            dtype = self.dtype
            if dtype in _FLOAT_SET:
                imm: Any = float(other)
                a = self
            else:
                return self._binary_scalar(opcode, other, name, reflected, true_div)
            conn = self._conn
            out = Tensor(conn, conn.new_id(), a.shape, dtype)
            conn.emit(opcode, out.id, [imm, a.id] if reflected else [a.id, imm])
            if a.requires_grad and _mode.enabled:
                record(out, name, (imm, a) if reflected else (a, imm))
            return out
        if kind is Tensor or isinstance(other, Tensor):
            if other._conn is not self._conn:
                raise ValueError(f"{name}: tensors belong to different GT connections")
            shape = (
                self.shape
                if self.shape == other.shape
                else S.broadcast(self.shape, other.shape, name)
            )
            if self.dtype == other.dtype:
                dtype = self.dtype
            else:
                dtype = S.promote_operands(
                    self.dtype, len(self.shape), other.dtype, len(other.shape)
                )
            if true_div and dtype not in _FLOATS:
                dtype = S.DEFAULT_FLOAT
            a = self if self.dtype == dtype else self.to(dtype)
            b = other if other.dtype == dtype else other.to(dtype)
            conn = self._conn
            out = Tensor(conn, conn.new_id(), shape, dtype)
            conn.emit(opcode, out.id, [b.id, a.id] if reflected else [a.id, b.id])
            if (a.requires_grad or b.requires_grad) and _mode.enabled:
                record(out, name, (b, a) if reflected else (a, b))
            return out
        if isinstance(other, _SCALARS) or isinstance(other, numbers.Number):
            return self._binary_scalar(opcode, other, name, reflected, true_div)
        if isinstance(other, np.ndarray):
            return self._binary(opcode, self.new_tensor(other), name, reflected, true_div)
        return NotImplemented

    def _binary_scalar(
        self, opcode: int, other: Any, name: str, reflected: bool, true_div: bool
    ) -> Tensor:
        """``self <op> number`` for every dtype (PyTorch's promotion of Python scalars)."""
        dtype = self.dtype if self.dtype in _FLOATS else S.promote_scalar(self.dtype, other)
        if true_div and dtype not in _FLOATS:
            dtype = S.DEFAULT_FLOAT
        a = self if self.dtype == dtype else self.to(dtype)
        if dtype in _FLOATS:
            imm: Any = float(other)
        elif dtype == "bool":
            imm = bool(other)
        else:
            imm = [int(other)]
        conn = self._conn
        out = Tensor(conn, conn.new_id(), a.shape, dtype)
        conn.emit(opcode, out.id, [imm, a.id] if reflected else [a.id, imm])
        if a.requires_grad and _mode.enabled:
            record(out, name, (imm, a) if reflected else (a, imm))
        return out

    def _compare(self, opcode: int, other: Any, name: str) -> Tensor:
        """Queue an elementwise comparison; the result is a bool tensor and never requires grad."""
        with _NoRecord():
            out = self._binary(opcode, other, name)
        if out is not NotImplemented:
            out.dtype = "bool"
        return out

    def _unary(self, name: str, float_only: bool = False) -> Tensor:
        """Queue an elementwise primitive of one tensor (ints become float32 if ``float_only``)."""
        x = self.to(S.DEFAULT_FLOAT) if float_only and self.dtype not in _FLOATS else self
        conn = x._conn
        out = Tensor(conn, conn.new_id(), x.shape, x.dtype)
        conn.emit(_OP[name], out.id, [x.id])
        if x.requires_grad and _mode.enabled:
            record(out, name, (x,))
        return out

    # ------------------------------------------------------------------ dtype conversion
    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """A copy converted to a dtype (the tensor itself when it already has that dtype).

        Accepts ``to(dtype)``, ``to(dtype=...)``, ``to(other_tensor)`` and, for ported PyTorch code,
        device strings (``"cpu"``, ``"cuda"``), which change nothing.
        """
        dtype = kwargs.get("dtype")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda", "gt", "mps"):
                continue
            elif a is not None:
                dtype = a
        if dtype is None:
            return self
        dtype = S.canonical_dtype(dtype)
        if dtype == self.dtype:
            return self
        return self._apply("cast", [self], {"dtype": dtype})

    def type(self, dtype: Any = None) -> Any:
        """The dtype's name, or a copy converted to ``dtype``."""
        return self.dtype if dtype is None else self.to(dtype)

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

    def contiguous(self) -> Tensor:
        """The tensor itself (layout is the worker's business)."""
        return self

    def clone(self) -> Tensor:
        """A copy that is recorded for autograd (gradients flow back to ``self``)."""
        out = self._alias()
        if self.requires_grad and _mode.enabled:
            record(out, "copy", (self,))
        return out

    # ------------------------------------------------------------------ autograd
    @property
    def is_leaf(self) -> bool:
        """True unless this tensor was computed by a recorded op."""
        return self._node is None

    @property
    def grad_fn(self) -> Any:
        """The backward node that made this tensor, or ``None`` for leaves."""
        return self._node

    def backward(
        self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False
    ) -> None:
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires grad.

        Args:
            gradient: the gradient of some scalar with respect to ``self``; defaults to 1 for a
                one-element tensor.
            retain_graph: keep the graph so ``backward`` can run through it again.
            create_graph: not supported (no higher-order gradients).
        """
        if create_graph:
            raise NotImplementedError(
                "backward(create_graph=True): higher-order gradients are not supported"
            )
        backward(self, gradient, retain_graph)

    def detach(self) -> Tensor:
        """A tensor with the same value that is not part of any graph."""
        return self._alias()

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` on a leaf, in place; returns ``self``."""
        if requires_grad and self.dtype not in _FLOATS:
            raise TypeError(
                f"only tensors of floating point dtype can require gradients (got {self.dtype})"
            )
        if not requires_grad and self._node is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables")
        self.requires_grad = bool(requires_grad)
        return self

    @property
    def data(self) -> Tensor:
        """The value without autograd history (``x.data.numpy()`` as in the prototype)."""
        return self._alias()

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be set to a Tensor, not {type(value).__name__}")
        take_value(self, value._alias(), keep_graph=False)


class _NoRecord:
    """Turn recording off for a comparison (cheaper than no_grad's decorator machinery)."""

    __slots__ = ("prev",)

    def __enter__(self) -> None:
        self.prev = _mode.enabled
        _mode.enabled = False

    def __exit__(self, *exc: Any) -> None:
        _mode.enabled = self.prev


# Methods that op-registry entries bring (``x.cumsum(dim)``): a new primitive reaches users
# without an edit of this class.
for _op in O.REGISTRY:
    for _name in _op.methods:
        if _name in Tensor.__dict__:
            raise TypeError(f"registry op {_op.name} would replace Tensor.{_name}")
        setattr(Tensor, _name, _op.api)


def host_array(data: Any, dtype: Any = None) -> np.ndarray:
    """A C-contiguous copy of ``data`` with PyTorch's dtypes: Python floats become float32 and
    Python ints int64 (an ndarray keeps its own dtype)."""
    arr = np.array(data)
    if dtype is not None:
        arr = arr.astype(S.canonical_dtype(dtype))
    elif arr.dtype == np.float64 and not isinstance(data, np.ndarray):
        arr = arr.astype(np.float32)
    elif arr.dtype.kind in "iu" and arr.dtype != np.int32 and not isinstance(data, np.ndarray):
        arr = arr.astype(np.int64)
    return np.ascontiguousarray(arr).reshape(arr.shape)


def upload(conn: Connection, array: np.ndarray) -> Tensor:
    """A tensor holding a C-contiguous host array, uploaded on ``conn``."""
    dtype = S.canonical_dtype(array.dtype)
    if array.size == 0:  # nothing to send (and memoryview cannot cast a zero-length shape)
        shape = list(array.shape)
        out = Tensor(conn, conn.new_id(), tuple(shape), dtype)
        value = False if dtype == "bool" else (0.0 if dtype in _FLOAT_SET else [0])
        conn.emit(_OP["full"], out.id, [value], {"shape": shape, "dtype": dtype})
        return out
    out = Tensor(conn, conn.new_id(), tuple(array.shape), dtype)
    conn.upload(out.id, array)
    return out


def create(conn: Connection, name: str, args: list, attrs: dict) -> Tensor:
    """A tensor made by creation primitive ``name`` on ``conn`` (what the factories call)."""
    op = O.BY_NAME[name]
    out = Tensor(conn, conn.new_id(), op.shape([], attrs), op.dtype([], attrs))
    conn.emit(op.code, out.id, [immediate(a) for a in args], attrs)
    return out


__all__ = ["Tensor", "create", "host_array", "upload"]
