"""``gt.Tensor``: a client-side handle to an array that lives on a worker.

A tensor knows its id, shape and dtype; the data stays on the worker until a sync point
(``numpy()``, ``item()``, ``repr``, ``float()``). Every op infers the result's shape and dtype here,
queues one primitive instruction and returns at once.
"""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from gt import shapes as S
from gt.errors import ShapeError
from gt.runtime import protocol as P
from gt.runtime.client import Connection
from gt.session import get_connection

_OP = P.OPCODE
_ADD, _SUB, _MUL, _DIV, _POW = _OP["add"], _OP["sub"], _OP["mul"], _OP["div"], _OP["pow"]
_SCALARS = (int, float, bool)


class Tensor:
    """A tensor whose data lives on a GT worker.

    Create tensors with the factories (:func:`gt.randn`, :func:`gt.tensor`, ...), not directly.
    """

    __slots__ = ("_conn", "id", "shape", "dtype", "__weakref__")
    __array_priority__ = 1000  # so ndarray + Tensor defers to Tensor.__radd__

    def __init__(self, conn: Connection, tid: int, shape: tuple[int, ...], dtype: str):
        self._conn = conn
        self.id = tid
        self.shape = shape
        self.dtype = dtype

    def __del__(self) -> None:
        try:
            self._conn.free(self.id)
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

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

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

    def __repr__(self) -> str:
        data = self.numpy()
        body = np.array2string(
            data, precision=4, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3
        )
        extra = ""
        if self.dtype not in ("float32", "int64", "bool"):
            extra = f", dtype=gt.{self.dtype}"
        return f"tensor({body}{extra})"

    # ------------------------------------------------------------------ op plumbing
    def _new(self, shape: tuple[int, ...], dtype: str) -> Tensor:
        conn = self._conn
        return Tensor(conn, conn.new_id(), shape, dtype)

    def _emit(self, opcode: int, args: list, shape: tuple[int, ...], dtype: str, attrs: Any = None) -> Tensor:
        out = self._new(shape, dtype)
        self._conn.emit(opcode, out.id, args, attrs)
        return out

    def to(self, dtype: Any) -> Tensor:
        """A copy converted to ``dtype`` (the tensor itself when it already has that dtype)."""
        dtype = S.canonical_dtype(dtype)
        if dtype == self.dtype:
            return self
        return self._emit(_OP["cast"], [self.id], self.shape, dtype, {"dtype": dtype})

    def float(self) -> Tensor:
        """Convert to float32."""
        return self.to("float32")

    def double(self) -> Tensor:
        """Convert to float64."""
        return self.to("float64")

    def long(self) -> Tensor:
        """Convert to int64."""
        return self.to("int64")

    def int(self) -> Tensor:
        """Convert to int32."""
        return self.to("int32")

    def bool(self) -> Tensor:
        """Convert to bool."""
        return self.to("bool")

    # ------------------------------------------------------------------ elementwise
    def _binary(self, opcode: int, other: Any, name: str, reflected: bool = False, true_div: bool = False) -> Tensor:
        if type(other) is Tensor:
            if other._conn is not self._conn:
                raise ValueError(f"{name}: tensors belong to different GT connections")
            shape = self.shape if self.shape == other.shape else S.broadcast(self.shape, other.shape, name)
            dtype = self.dtype if self.dtype == other.dtype else S.promote(self.dtype, other.dtype)
            if true_div and dtype not in S.FLOAT_DTYPES:
                dtype = S.DEFAULT_FLOAT
            a = self if self.dtype == dtype else self.to(dtype)
            b = other if other.dtype == dtype else other.to(dtype)
            args = [b.id, a.id] if reflected else [a.id, b.id]
        elif isinstance(other, _SCALARS) or isinstance(other, numbers.Number):
            dtype = self.dtype if self.dtype in S.FLOAT_DTYPES else S.promote_scalar(self.dtype, other)
            if true_div and dtype not in S.FLOAT_DTYPES:
                dtype = S.DEFAULT_FLOAT
            a = self if self.dtype == dtype else self.to(dtype)
            shape = self.shape
            imm: Any = float(other) if dtype in S.FLOAT_DTYPES else ([int(other)] if not isinstance(other, bool) or dtype != "bool" else bool(other))
            args = [imm, a.id] if reflected else [a.id, imm]
        elif isinstance(other, np.ndarray):
            from gt.factories import tensor  # noqa: PLC0415 - avoid an import cycle

            return self._binary(opcode, tensor(other), name, reflected, true_div)
        else:
            return NotImplemented
        return self._emit(opcode, args, shape, dtype)

    def _compare(self, opcode: int, other: Any, name: str) -> Tensor:
        out = self._binary(opcode, other, name)
        if out is NotImplemented:
            return out
        out.dtype = "bool"
        return out

    def __add__(self, o: Any) -> Tensor:
        return self._binary(_ADD, o, "add")

    def __radd__(self, o: Any) -> Tensor:
        return self._binary(_ADD, o, "add", reflected=True)

    def __sub__(self, o: Any) -> Tensor:
        return self._binary(_SUB, o, "sub")

    def __rsub__(self, o: Any) -> Tensor:
        return self._binary(_SUB, o, "sub", reflected=True)

    def __mul__(self, o: Any) -> Tensor:
        return self._binary(_MUL, o, "mul")

    def __rmul__(self, o: Any) -> Tensor:
        return self._binary(_MUL, o, "mul", reflected=True)

    def __truediv__(self, o: Any) -> Tensor:
        return self._binary(_DIV, o, "div", true_div=True)

    def __rtruediv__(self, o: Any) -> Tensor:
        return self._binary(_DIV, o, "div", reflected=True, true_div=True)

    def __pow__(self, o: Any) -> Tensor:
        return self._binary(_POW, o, "pow")

    def __rpow__(self, o: Any) -> Tensor:
        return self._binary(_POW, o, "pow", reflected=True)

    def __lt__(self, o: Any) -> Tensor:
        return self._compare(_OP["lt"], o, "lt")

    def __le__(self, o: Any) -> Tensor:
        return self._compare(_OP["le"], o, "le")

    def __gt__(self, o: Any) -> Tensor:
        return self._compare(_OP["gt"], o, "gt")

    def __ge__(self, o: Any) -> Tensor:
        return self._compare(_OP["ge"], o, "ge")

    def __eq__(self, o: Any) -> Tensor:  # type: ignore[override]
        return self._compare(_OP["eq"], o, "eq")

    def __ne__(self, o: Any) -> Tensor:  # type: ignore[override]
        return self._compare(_OP["ne"], o, "ne")

    def _unary(self, name: str, float_only: bool = False) -> Tensor:
        x = self.to(S.DEFAULT_FLOAT) if float_only and self.dtype not in S.FLOAT_DTYPES else self
        return x._emit(_OP[name], [x.id], x.shape, x.dtype)

    def __neg__(self) -> Tensor:
        return self._unary("neg")

    def __abs__(self) -> Tensor:
        return self._unary("abs")

    def abs(self) -> Tensor:
        """Elementwise absolute value."""
        return self._unary("abs")

    def exp(self) -> Tensor:
        """Elementwise exponential."""
        return self._unary("exp", True)

    def log(self) -> Tensor:
        """Elementwise natural logarithm."""
        return self._unary("log", True)

    def sqrt(self) -> Tensor:
        """Elementwise square root."""
        return self._unary("sqrt", True)

    def sin(self) -> Tensor:
        """Elementwise sine."""
        return self._unary("sin", True)

    def cos(self) -> Tensor:
        """Elementwise cosine."""
        return self._unary("cos", True)

    def tanh(self) -> Tensor:
        """Elementwise hyperbolic tangent."""
        return self._unary("tanh", True)

    def sigmoid(self) -> Tensor:
        """Elementwise logistic sigmoid."""
        return self._unary("sigmoid", True)

    def relu(self) -> Tensor:
        """Elementwise max(x, 0)."""
        return self._unary("relu")

    # ------------------------------------------------------------------ linear algebra, reductions
    def __matmul__(self, other: Tensor) -> Tensor:
        if not isinstance(other, Tensor):
            return NotImplemented
        shape = S.matmul(self.shape, other.shape)
        dtype = S.promote(self.dtype, other.dtype)
        a, b = self.to(dtype), other.to(dtype)
        return self._emit(_OP["matmul"], [a.id, b.id], shape, dtype)

    def __rmatmul__(self, other: Any) -> Tensor:
        if isinstance(other, np.ndarray):
            from gt.factories import tensor  # noqa: PLC0415

            return tensor(other) @ self
        return NotImplemented

    def matmul(self, other: Tensor) -> Tensor:
        """Matrix product with batch broadcasting (``self @ other``)."""
        return self @ other

    def _reduce(self, name: str, axis: Any, keepdims: bool, dtype: str | None = None) -> Tensor:
        axes = S.normalize_axes(axis, self.ndim, name)
        if name in ("max", "min") and self.numel() == 0:
            raise RuntimeError(f"{name}: cannot reduce an empty tensor of shape {list(self.shape)}")
        shape = S.reduce(self.shape, axes, keepdims)
        attrs = None if axes is None and not keepdims else {"axis": list(axes) if axes is not None else None, "keepdims": keepdims}
        return self._emit(_OP[name], [self.id], shape, dtype or self.dtype, attrs)

    def sum(self, axis: Any = None, keepdims: bool = False, *, dim: Any = None, keepdim: bool | None = None) -> Tensor:
        """Sum over ``axis`` (int, tuple or None for all); ``dim``/``keepdim`` are aliases."""
        axis = dim if dim is not None else axis
        keepdims = keepdim if keepdim is not None else keepdims
        dtype = "int64" if self.dtype in ("bool", "int8", "uint8", "int32") else self.dtype
        return self._reduce("sum", axis, keepdims, dtype)

    def mean(self, axis: Any = None, keepdims: bool = False, *, dim: Any = None, keepdim: bool | None = None) -> Tensor:
        """Mean over ``axis``; integer inputs are averaged in float32."""
        axis = dim if dim is not None else axis
        keepdims = keepdim if keepdim is not None else keepdims
        x = self if self.dtype in S.FLOAT_DTYPES else self.to(S.DEFAULT_FLOAT)
        axes = S.normalize_axes(axis, x.ndim, "mean")
        n = x.numel() if axes is None else S.prod(x.shape[a] for a in axes)
        return x.sum(axis, keepdims) * (1.0 / n if n else float("nan"))

    # ------------------------------------------------------------------ shape
    def reshape(self, *shape: Any) -> Tensor:
        """A tensor with the same data and a new shape (one ``-1`` is inferred)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        new = S.reshape(self.shape, shape)
        if new == self.shape:
            return self
        return self._emit(_OP["reshape"], [self.id], new, self.dtype, {"shape": list(new)})

    view = reshape

    def transpose(self, dim0: int = -2, dim1: int = -1) -> Tensor:
        """Swap two dimensions (with no arguments: the last two)."""
        if self.ndim < 2:
            return self
        d0 = S.normalize_axis(dim0, self.ndim, "transpose")
        d1 = S.normalize_axis(dim1, self.ndim, "transpose")
        perm = list(range(self.ndim))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return self.permute(*perm)

    def permute(self, *dims: Any) -> Tensor:
        """Reorder dimensions."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        perm = [S.normalize_axis(d, self.ndim, "permute") for d in dims]
        if sorted(perm) != list(range(self.ndim)):
            raise ShapeError(f"permute: dims {list(dims)} are not a permutation of {self.ndim} dimensions")
        shape = tuple(self.shape[p] for p in perm)
        return self._emit(_OP["transpose"], [self.id], shape, self.dtype, {"perm": perm})

    @property
    def T(self) -> Tensor:
        """All dimensions reversed (the transpose of a matrix)."""
        return self.permute(*reversed(range(self.ndim))) if self.ndim >= 2 else self

    def __getitem__(self, key: Any) -> Tensor:
        from gt.indexing import encode_key  # noqa: PLC0415

        wire, tensors, shape = encode_key(self, key)
        return self._emit(_OP["getitem"], [self.id, *(t.id for t in tensors)], shape, self.dtype, {"key": wire})


__all__ = ["Tensor", "get_connection"]
