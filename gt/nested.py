"""``gt.nested``: nested (ragged) tensors, PyTorch's ``torch.nested``, as a list of GT tensors.

A :class:`NestedTensor` holds its components, ordinary tensors of the same number of dimensions
whose sizes may differ, each on the workers; an op runs component by component, so gradients
flow into each component as into any tensor. What PyTorch 2.13 allows is followed, layout by
layout:

* ``layout=gt.strided`` (the default): ``size(i)`` of a regular dim (an irregular one raises),
  ``unbind()``, ``to_padded_tensor(padding, output_size)``, ``nested.narrow`` along dim 0,
  ``+ - * /`` with a number or a nested tensor of the same structure (a dense tensor of more
  than zero dims, another structure, ``1 - nt`` and ``1 / nt`` are refused with PyTorch's
  messages), the unary ops PyTorch's strided kernels have (``neg abs sin cos tanh sqrt relu gelu
  silu``...; ``exp``, ``log``, ``sigmoid``, ``**`` are refused as there), ``sum(-1,
  keepdim=True)`` (the last dim only, ``keepdim`` required), ``softmax``/``log_softmax`` over a
  non-batch dim, ``nt @ other_nt`` / ``bmm``, and ``gt.nn.functional.linear`` (so
  ``nn.Linear``) over a jagged batch. ``nt @ dense`` is refused as PyTorch refuses it.
* ``layout=gt.jagged``: the same, plus ``nt @ dense`` (a Linear over the jagged dim), every
  unary op, broadcasting with a dense tensor, and ``sum(-1)`` without ``keepdim``.

``nested_tensor`` copies its components (a leaf; ``requires_grad=True`` makes ``nt.grad`` a
nested tensor of the components' gradients); ``as_nested_tensor`` keeps them in the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gt.factories import full, tensor
from gt.grad_graph import label
from gt.nn import functional as _nnf
from gt.ops.functional import stack
from gt.settings import layout
from gt.tensor import Tensor

__all__ = [
    "NestedTensor",
    "as_nested_tensor",
    "jagged",
    "narrow",
    "nested_tensor",
    "to_padded_tensor",
]

#: PyTorch's ``torch.jagged`` (``torch.strided`` is :data:`gt.strided`).
jagged = layout("jagged")
_STRIDED = layout("strided")

_NOT_NESTED = (
    "Expected both self and other to be nested, but got a nested self and non-nested other"
)

#: Unary ops PyTorch's strided nested tensors have kernels for (the rest raise NotImplementedError).
_STRIDED_UNARY = frozenset(
    {"neg", "abs", "sin", "cos", "tanh", "sqrt", "relu", "gelu", "silu", "sgn", "sign", "clone"}
)


#: Elementwise unary methods a nested tensor runs on each component (``nt.exp()``, ...).
_UNARY = _STRIDED_UNARY | frozenset(
    {"exp", "log", "sigmoid", "log1p", "expm1", "rsqrt", "reciprocal", "floor", "ceil", "round",
     "trunc", "square", "erf", "exp2", "log2", "log10", "asin", "acos", "atan", "sinh", "cosh",
     "tan", "softplus", "mish", "elu", "leaky_relu", "hardtanh", "relu6"}
)  # fmt: skip


def _no_kernel(op: str) -> NotImplementedError:
    return NotImplementedError(
        f"Could not run 'aten::{op}' with arguments from the 'NestedTensorCPU' backend. This "
        "could be because the operator doesn't exist for this backend, or was omitted during "
        "the selective/custom build process (if using custom build)."
    )


class NestedTensor:
    """A batch of tensors of the same rank and different sizes (``torch.nested``'s tensor)."""

    is_nested = True
    is_sparse = False

    def __init__(self, components: Sequence[Tensor], lay: Any = _STRIDED) -> None:
        self._ts = list(components)
        self._layout = lay

    # ---------------------------------------------------------------- metadata
    layout = property(lambda self: self._layout, doc="``gt.strided`` or ``gt.jagged``.")
    dtype = property(lambda self: self._ts[0].dtype if self._ts else "float32", doc="dtype.")
    device = property(lambda self: self._ts[0].device if self._ts else None, doc="device.")
    requires_grad = property(
        lambda self: any(t.requires_grad for t in self._ts), doc="Whether any component does."
    )

    @property
    def is_leaf(self) -> bool:
        """Whether every component is a leaf."""
        return all(t.is_leaf for t in self._ts)

    @property
    def grad(self) -> NestedTensor | None:
        """The components' gradients as a nested tensor (None before any backward)."""
        if all(t.grad is None for t in self._ts):
            return None
        return NestedTensor([t.grad for t in self._ts], self._layout)

    def requires_grad_(self, requires_grad: bool = True) -> NestedTensor:
        for t in self._ts:
            t.requires_grad_(requires_grad)
        return self

    def dim(self) -> int:
        """The number of dimensions, the batch dim included."""
        return (self._ts[0].dim() if self._ts else 0) + 1

    ndim = property(dim)

    def _sizes(self, d: int) -> set[int]:
        return {int(t.shape[d - 1]) for t in self._ts}

    def size(self, dim: int | None = None) -> Any:
        """The size of a regular dim (an irregular one, or all sizes, raise as in PyTorch)."""
        if dim is None:
            raise RuntimeError(
                "Internal error: NestedTensorImpl doesn't support sizes. Please file an issue."
            )
        n = self.dim()
        if not -n <= dim < n:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
            )
        dim %= n
        if dim == 0:
            return len(self._ts)
        sizes = self._sizes(dim)
        if len(sizes) != 1:
            raise RuntimeError(f"Given dimension {dim} is irregular and does not have a size.")
        return sizes.pop()

    @property
    def shape(self) -> Any:
        return self.size()

    def numel(self) -> int:
        return sum(t.numel() for t in self._ts)

    def is_contiguous(self) -> bool:
        return True

    def _nested_tensor_size(self) -> Tensor:
        return tensor([list(t.shape) for t in self._ts], dtype="int64")

    # ---------------------------------------------------------------- components
    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        """The components (along dim 0 only)."""
        if dim != 0:
            raise RuntimeError(
                f"NestedTensor can only be unbound along dimension 0 got dimension {dim} instead."
            )
        return tuple(self._ts)

    def __getitem__(self, i: int) -> Tensor:
        if isinstance(i, int):
            return self._ts[i]
        raise NotImplementedError("GT's nested tensors index along dim 0 by an int only")

    def __len__(self) -> int:
        raise RuntimeError(
            "Internal error: NestedTensorImpl doesn't support sizes. Please file an issue."
        )

    def __iter__(self):
        return iter(self._ts)

    def to_padded_tensor(self, padding: float, output_size: Sequence[int] | None = None) -> Tensor:
        return to_padded_tensor(self, padding, output_size)

    def _map(self, fn: Callable[[Tensor], Tensor]) -> NestedTensor:
        return NestedTensor([fn(t) for t in self._ts], self._layout)

    def _unary(self, op: str, fn: Callable[[Tensor], Tensor]) -> NestedTensor:
        if self._layout == _STRIDED and op not in _STRIDED_UNARY:
            raise _no_kernel(op)
        return self._map(fn)

    # ---------------------------------------------------------------- conversions
    def detach(self) -> NestedTensor:
        return self._map(lambda t: t.detach())

    def clone(self) -> NestedTensor:
        return self._map(lambda t: t.clone())

    def to(self, *args: Any, **kwargs: Any) -> NestedTensor:
        return self._map(lambda t: t.to(*args, **kwargs))

    def float(self) -> NestedTensor:
        return self._map(lambda t: t.float())

    def double(self) -> NestedTensor:
        return self._map(lambda t: t.double())

    def cpu(self) -> NestedTensor:
        return self

    def contiguous(self) -> NestedTensor:
        return self

    # ---------------------------------------------------------------- elementwise
    def _binary(self, other: Any, op: str, fn: Callable[[Tensor, Any], Tensor]) -> NestedTensor:
        if isinstance(other, NestedTensor):
            if len(other._ts) != len(self._ts) or any(
                tuple(a.shape) != tuple(b.shape) for a, b in zip(self._ts, other._ts, strict=True)
            ):
                raise RuntimeError(f"{op} does not support broadcasting when given a NestedTensor")
            return NestedTensor(
                [fn(a, b) for a, b in zip(self._ts, other._ts, strict=True)], self._layout
            )
        if isinstance(other, Tensor) and other.dim() > 0 and self._layout == _STRIDED:
            raise RuntimeError(_NOT_NESTED)
        return self._map(lambda t: fn(t, other))

    def __add__(self, o: Any) -> NestedTensor:
        return self._binary(o, "add", lambda a, b: a + b)

    def __radd__(self, o: Any) -> NestedTensor:
        return self._binary(o, "add", lambda a, b: b + a)

    def __sub__(self, o: Any) -> NestedTensor:
        return self._binary(o, "sub", lambda a, b: a - b)

    def __rsub__(self, o: Any) -> NestedTensor:
        if self._layout == _STRIDED:
            raise _no_kernel("rsub.Scalar")
        return self._binary(o, "sub", lambda a, b: b - a)

    def __mul__(self, o: Any) -> NestedTensor:
        return self._binary(o, "mul", lambda a, b: a * b)

    def __rmul__(self, o: Any) -> NestedTensor:
        return self._binary(o, "mul", lambda a, b: b * a)

    def __truediv__(self, o: Any) -> NestedTensor:
        return self._binary(o, "div", lambda a, b: a / b)

    def __rtruediv__(self, o: Any) -> NestedTensor:
        if self._layout == _STRIDED:
            raise _no_kernel("reciprocal")
        return self._binary(o, "div", lambda a, b: b / a)

    def __pow__(self, o: Any) -> NestedTensor:
        if self._layout == _STRIDED:
            raise _no_kernel("pow.Tensor_Scalar")
        return self._binary(o, "pow", lambda a, b: a**b)

    def __neg__(self) -> NestedTensor:
        return self._unary("neg", lambda t: -t)

    add = __add__
    sub = __sub__
    mul = __mul__
    div = __truediv__

    def __getattr__(self, name: str) -> Any:
        # unary elementwise methods (nt.abs(), nt.relu(), nt.exp() ...), by the component's method
        if name not in _UNARY:
            raise AttributeError(f"'NestedTensor' object has no attribute {name!r}")
        return lambda *a, **k: self._unary(name, lambda t: getattr(t, name)(*a, **k))

    # ---------------------------------------------------------------- reductions, softmax
    def sum(self, dim: int | None = None, keepdim: bool = False, dtype: Any = None) -> Any:
        """The sum over the last dim (strided: ``keepdim=True`` required, as in PyTorch)."""
        if dim is None:
            raise _no_kernel("sum")
        n = self.dim()
        d = dim % n if -n <= dim < n else dim
        if d != n - 1:
            raise RuntimeError(
                "NestedTensor can only be reduced across the last dimension for now got "
                f"dimension {dim} instead."
            )
        if self._layout == _STRIDED:
            if not keepdim:
                raise RuntimeError("NestedTensor always requires keepdim=True for now.")
            if dtype is not None:
                raise RuntimeError("NestedTensor does not support dtype argument for now.")
        return self._map(lambda t: t.sum(-1, keepdim=keepdim, dtype=dtype))

    def _softmax_dim(self, dim: int, op: str) -> int:
        n = self.dim()
        d = dim % n
        if d == 0:
            raise RuntimeError(f"Cannot apply {op} across nested dimension 0")
        return d - 1

    def softmax(self, dim: int, dtype: Any = None) -> NestedTensor:
        d = self._softmax_dim(dim, "softmax")
        return self._map(lambda t: _nnf.softmax(t, d, dtype=dtype))

    def log_softmax(self, dim: int, dtype: Any = None) -> NestedTensor:
        d = self._softmax_dim(dim, "log_softmax")
        return self._map(lambda t: _nnf.log_softmax(t, d, dtype=dtype))

    # ---------------------------------------------------------------- products
    def __matmul__(self, other: Any) -> NestedTensor:
        if isinstance(other, NestedTensor):
            return self._binary_nested(other, lambda a, b: a @ b)
        if self._layout == _STRIDED:
            raise RuntimeError(
                "Expected both to be nested, but got a nested self and non-nested other"
            )
        return self._map(lambda t: t @ other)

    matmul = __matmul__

    def bmm(self, other: NestedTensor) -> NestedTensor:
        return self._binary_nested(other, lambda a, b: a @ b)

    def _binary_nested(self, other: NestedTensor, fn: Callable) -> NestedTensor:
        return NestedTensor(
            [fn(a, b) for a, b in zip(self._ts, other._ts, strict=True)], self._layout
        )

    def _linear(self, weight: Tensor, bias: Tensor | None) -> NestedTensor:
        last = int(self._ts[0].shape[-1]) if self._ts else 0
        if last != int(weight.shape[-1]):
            raise RuntimeError(
                "Shape mismatch for NestedTensor Linear: Expected input's (a nested tensor) "
                f"'last_dim' to equal 'weight.size(1), but got: last_dim = {last}, and "
                f"weight.size(1) = {int(weight.shape[-1])}"
            )
        return self._map(lambda t: _nnf.linear(t, weight, bias))

    # ---------------------------------------------------------------- printing
    def __repr__(self) -> str:
        # as PyTorch prints one: the components as leaves, the graph (if any) at the end
        rg = self.requires_grad
        parts = []
        for t in self._ts:
            r = repr(t.detach())
            parts.append(
                "  " + (r[:-1] + ", requires_grad=True)" if rg else r).replace("\n", "\n  ")
            )
        body = ",\n".join(parts)
        tail = ""
        if rg:
            fn = self._ts[0].grad_fn
            tail = ", requires_grad=True" if fn is None else f", grad_fn=<{type(fn).__name__}>"
        return f"nested_tensor([\n{body}\n]{tail})"

    __str__ = __repr__

    def __bool__(self) -> bool:
        raise RuntimeError("Boolean value of a NestedTensor is ambiguous")


def _as_component(t: Any, dtype: Any) -> Tensor:
    if isinstance(t, Tensor):
        return t if dtype is None else t.to(dtype)
    return tensor(t, dtype=dtype)


def _check(ts: list[Tensor], lay: Any) -> None:
    if lay not in (_STRIDED, jagged):
        raise RuntimeError(f"Specified layout is unsupported for nested tensors: {lay}")
    for i, t in enumerate(ts[1:], 1):
        if t.dim() != ts[0].dim():
            raise RuntimeError(
                "All Tensors given to nested_tensor must have the same dimension. Found "
                f"dimension {t.dim()} for Tensor at index {i} and dimension {ts[0].dim()} for "
                "Tensor at index 0."
            )


def nested_tensor(
    tensor_list: Sequence[Any],
    *,
    dtype: Any = None,
    layout: Any = None,  # noqa: A002 - PyTorch's name
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> NestedTensor:
    """A nested tensor of copies of ``tensor_list``'s tensors (or nested lists), a leaf."""
    lay = _STRIDED if layout is None else layout
    ts = [_as_component(t, dtype).detach().clone() for t in tensor_list]
    _check(ts, lay)
    if requires_grad:
        for t in ts:
            t.requires_grad_()
    return NestedTensor(ts, lay)


def as_nested_tensor(
    ts: Any, dtype: Any = None, device: Any = None, layout: Any = None
) -> NestedTensor:
    """A nested tensor of ``ts``'s tensors, kept in the autograd graph."""
    if isinstance(ts, NestedTensor):
        return ts if dtype is None else ts.to(dtype)
    lay = _STRIDED if layout is None else layout
    comps = [_as_component(t, dtype) for t in ts]
    _check(comps, lay)
    return NestedTensor(comps, lay)


def to_padded_tensor(
    input: NestedTensor,  # noqa: A002 - PyTorch's name
    padding: float,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """A dense tensor of the components, each padded with ``padding`` to the largest size (or to
    ``output_size``, the batch dim included)."""
    ts = input._ts
    nd = input.dim()
    big = [max(int(t.shape[d]) for t in ts) if ts else 0 for d in range(nd - 1)]
    if output_size is not None:
        output_size = [int(s) for s in output_size]
        if len(output_size) != nd:
            raise RuntimeError(
                "Length of output_size does not match NestedTensor dims. Broadcasting is not "
                "supported."
            )
        if output_size[0] < len(ts) or any(
            o < b for o, b in zip(output_size[1:], big, strict=True)
        ):
            raise RuntimeError(
                "Value in output_size is less than NestedTensor padded size. Truncation is not "
                "supported."
            )
        batch, big = output_size[0], output_size[1:]
    else:
        batch = len(ts)
    rows = []
    for t in ts:
        pad: list[int] = []
        for d in reversed(range(nd - 1)):
            pad += [0, big[d] - int(t.shape[d])]
        rows.append(_nnf.pad(t, pad, value=padding) if any(pad) else t)
    dtype = input.dtype
    rows += [full(tuple(big), padding, dtype=dtype)] * (batch - len(ts))
    return label(stack(rows), "ToPaddedTensorBackward0")


def narrow(
    tensor: NestedTensor,  # noqa: A002 - PyTorch's name
    dim: int,
    start: int,
    length: int,
    layout: Any = None,  # noqa: A002
) -> NestedTensor:
    """Components ``start`` to ``start + length`` (dim 0 only, as PyTorch's strided layout)."""
    if dim != 0:
        raise RuntimeError(f"narrow(): only dim=0 supported for nested tensors, but got: {dim}")
    return NestedTensor(tensor._ts[start : start + length], tensor._layout)
