"""Shape queries and sync points of :class:`gt.Tensor` (a mixin).

The sync points (``numpy()``, ``item()``, ``tolist()``, ``float()``, ``bool()``, ``repr`` ...) are
where the client waits for a worker; everything else here is answered from the client's metadata.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt.ops.format import tensor_repr
from gt.ops.typeinfo import Size

if TYPE_CHECKING:
    pass

_FLOATS = S.FLOAT_DTYPES


class MetadataOps:
    """Metadata and sync points of :class:`gt.Tensor`."""

    __slots__ = ()

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def dim(self) -> int:
        """Number of dimensions (PyTorch spelling)."""
        return len(self.shape)

    def size(self, dim: int | None = None) -> Any:
        """The shape (a :class:`gt.Size`), or one dimension of it."""
        if dim is None:
            return Size(self.shape)
        return self.shape[S.normalize_axis(dim, self.ndim, "size")]

    def numel(self) -> int:
        """Number of elements."""
        return S.prod(self.shape)

    nelement = numel

    def ndimension(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def element_size(self) -> int:
        """Bytes per element."""
        return np.dtype(self.dtype).itemsize

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

    def __reversed__(self) -> Any:
        """``reversed(x)``: ``x.flip(0)``, as PyTorch's (a 0-d tensor as it is)."""
        return self.flip(0) if self.shape else self

    def __contains__(self, element: Any) -> bool:
        """``element in x``: whether any element equals it (a sync point), as in PyTorch; Python
        would otherwise iterate the first dimension and compare whole rows."""
        if not (
            hasattr(element, "_conn") or isinstance(element, (int, float, complex, np.generic))
        ):
            raise RuntimeError(
                "Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                f"{type(element)}."
            )
        return bool((self == element).any().item())

    def __hash__(self) -> int:
        return id(self)

    # ------------------------------------------------------------------ sync points
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """Wait for the data and return it as a NumPy array (a sync point; always a copy). As
        PyTorch's, it refuses a tensor that requires grad unless ``force=True``."""
        if self._rg and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        return self._conn.fetch(self.id)

    def _host(self) -> np.ndarray:
        """The data as a NumPy array, for GT's own sync points (no requires-grad check)."""
        return self._conn.fetch(self.id)

    def item(self) -> Any:
        """The single value of a one-element tensor as a Python number (a sync point)."""
        if self.numel() != 1:
            raise RuntimeError(
                f"a Tensor with {self.numel()} elements cannot be converted to Scalar"
            )
        return self._host().reshape(()).item()

    def tolist(self) -> Any:
        """The data as nested Python lists (a sync point)."""
        return self._host().tolist()

    def _number(self) -> Any:
        """The single value, for ``float()``/``int()``/``complex()`` (PyTorch's ValueError for
        more elements: an ``except ValueError`` around them catches it there too)."""
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __float__(self) -> float:
        if self._rg:  # (PyTorch's warning, for float() alone)
            warnings.warn(
                "Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
                "behavior.\nConsider using tensor.detach() first.",
                stacklevel=2,
            )
        value = self._number()
        if isinstance(value, complex):  # (Python's TypeError would escape ``except RuntimeError``)
            if value.imag:
                raise RuntimeError("value cannot be converted to type double without overflow")
            value = value.real  # (PyTorch converts a complex number with no imaginary part)
        return float(value)

    def __complex__(self) -> complex:
        return complex(self._number())

    def __int__(self) -> int:
        value = self._number()
        if isinstance(value, complex):
            if value.imag:
                raise RuntimeError("value cannot be converted to type int64_t without overflow")
            value = value.real
        return int(value)

    def __bool__(self) -> bool:
        if self.numel() != 1:
            what = "more than one value" if self.numel() else "no values"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return bool(self.item())

    def __index__(self) -> int:
        if (self.dtype not in S.INT_DTYPES and self.dtype != "bool") or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a.astype(dtype) if dtype is not None else a

    def __array_wrap__(self, array: Any, context: Any = None, return_scalar: bool = False) -> Any:
        """What a NumPy function of a tensor returns (``np.exp(x)``, ``np.argmax(x)``): a tensor,
        as PyTorch's (bool results as uint8, its quirk); an array GT has no dtype for as it is."""
        arr = np.asarray(array)
        if arr.dtype == np.bool_:
            arr = arr.astype(np.uint8)
        if arr.dtype.kind not in "biufc":
            return array
        return self._upload(np.ascontiguousarray(arr).reshape(arr.shape))  # (0-d stays 0-d)

    def __format__(self, spec: str) -> str:
        # PyTorch's rule: a 0-dim plain tensor formats as its Python number (f"loss {loss}" reads
        # "loss 0.25", with or without a spec); anything else (a Parameter, a user's subclass, a
        # 1-element vector) formats as its repr, and a spec for it is a TypeError (object's).
        # GT's own Tensor, ``.data`` view and Buffer are PyTorch's plain tensors.
        cls = type(self)
        if self.dim() == 0 and cls.__name__ != "Parameter" and cls.__module__.startswith("gt."):
            return format(self.detach().item(), spec)
        return object.__format__(self, spec)

    def __repr__(self) -> str:
        text = tensor_repr(self)
        cls = type(self)  # (a program's subclass prints its name, as PyTorch's: ``MyT([1., 2.])``)
        if not (cls.__module__ + ".").startswith("gt.") and text.startswith("tensor("):
            text = cls.__name__ + text[len("tensor") :]
        return text
