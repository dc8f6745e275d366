"""PyTorch's other spellings of GT's ops, dtype predicates, and the missing in-place ``op_`` forms
(a :class:`Tensor` mixin, the base of :class:`gt.ops.compat.CompatOps`).

Aliases: ``divide`` (with ``rounding_mode="trunc"`` too), ``multiply``, ``subtract``,
``negative``/``positive``, ``greater``/``less``/``greater_equal``/``less_equal``/``not_equal``,
``absolute``, ``swapdims``, ``ravel``, ``adjoint``/``H``/``mH``, ``floor_divide``, ``remainder``,
``xlogy``. Predicates and conversions: ``is_signed``, ``is_complex``, ``is_nonzero``,
``is_same_size``, ``is_contiguous``, ``nbytes``, ``itemsize``, ``bfloat16``/``byte``/``char``/
``short``.

Every in-place form is :func:`inplace_of`: ``x.<name>_(*args)`` takes the value of
``x.<name>(*args)`` through ``apply_inplace`` (so version counters, leaf checks and recording are
those of every other in-place op), cast to ``x``'s dtype; a result of a wider dtype category than
``x``'s (a float result into an integer tensor) is refused, as in PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gt import shapes as S
from gt.errors import ShapeError
from gt.ops import layout, storage
from gt.ops.arith import where
from gt.ops.base import TensorBase
from gt.ops.inplace import apply_inplace, castable

if TYPE_CHECKING:
    from gt.tensor import Tensor


def inplace_of(name: str) -> Callable[..., Any]:
    """The method ``<name>_``: ``x`` takes the value of ``x.<name>(*args, **kwargs)`` in place.

    Raises (from the method):
        TypeError: the result's dtype category is wider than ``x``'s (``int.sin_()``).
        ShapeError: the result does not have ``x``'s shape (it would broadcast ``x``).
    """

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return apply_inplace(
            self, name + "_", lambda x: castable(name + "_", getattr(x, name)(*args, **kwargs), x)
        )

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place :meth:`{name}`."
    return method


#: The methods whose in-place forms are made by :func:`inplace_of` (each exists out of place).
INPLACE_NAMES = (
    "acos", "asin", "atan", "acosh", "asinh", "atanh", "arccos", "arcsin", "arctan", "arccosh",
    "arcsinh", "arctanh", "atan2", "arctan2", "cosh", "sinh", "tan", "erf", "erfc", "erfinv",
    "exp2", "expm1", "lgamma", "digamma", "polygamma", "log2", "log10", "logit", "sinc", "hypot",
    "copysign", "fmod", "remainder", "floor_divide", "gcd", "lcm", "ldexp", "xlogy", "deg2rad",
    "rad2deg", "nan_to_num", "frac", "heaviside", "logical_and", "logical_or", "logical_xor",
    "logical_not", "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less",
    "less_equal", "not_equal", "renorm", "cumprod", "mvlgamma", "sgn", "index_copy",
    "masked_scatter", "index_put", "put", "addmv", "addr", "addbmm", "baddbmm",
)  # fmt: skip


class CompatInplaceOps:
    """PyTorch's aliases, dtype predicates and in-place forms of :class:`gt.Tensor`."""

    __slots__ = ()

    # ------------------------------------------------------------------ aliases
    def divide(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """``self / other``; ``rounding_mode`` ``"floor"`` rounds down, ``"trunc"`` toward zero
        (an integer result for integer operands, as in PyTorch)."""
        if rounding_mode != "trunc":
            return self.div(other, rounding_mode=rounding_mode)
        down = self // other
        if down.dtype in S.FLOAT_DTYPES:
            return (self / other).trunc().to(down.dtype)
        # integers: floor division, moved up by one where the exact quotient is negative
        rest = (self.to(down.dtype) if self.dtype == "bool" else self) - down * other
        neg = (self < 0) != (other < 0)
        return down + ((rest != 0) & neg).to(down.dtype)

    def true_divide_(self, other: Any) -> Tensor:
        """In-place ``self / other`` (a float tensor)."""
        return self.div_(other)

    def divide_(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """In-place :meth:`divide`."""
        if rounding_mode is None:
            return self.div_(other)
        return inplace_of("divide")(self, other, rounding_mode=rounding_mode)

    def multiply(self, other: Any) -> Tensor:
        """``self * other``."""
        return self * other

    def multiply_(self, other: Any) -> Tensor:
        """``self *= other``."""
        return self.mul_(other)

    def subtract(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """``self - alpha * other``."""
        return self.sub(other, alpha)

    def subtract_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """``self -= alpha * other``."""
        return self.sub_(other, alpha)

    def negative(self) -> Tensor:
        """``-self``."""
        return -self

    def negative_(self) -> Tensor:
        """Negate in place."""
        return self.neg_()

    def positive(self) -> Tensor:
        """``self`` itself (refused for bool tensors, as PyTorch's ``+``)."""
        if self.dtype == "bool":
            raise TypeError("The `+` operator, on a bool tensor is not supported.")
        return self

    def greater(self, other: Any) -> Tensor:
        """Elementwise ``>``."""
        return self > other

    def greater_equal(self, other: Any) -> Tensor:
        """Elementwise ``>=``."""
        return self >= other

    def less(self, other: Any) -> Tensor:
        """Elementwise ``<``."""
        return self < other

    def less_equal(self, other: Any) -> Tensor:
        """Elementwise ``<=``."""
        return self <= other

    def not_equal(self, other: Any) -> Tensor:
        """Elementwise ``!=``."""
        return self != other

    def absolute(self) -> Tensor:
        """Elementwise absolute value."""
        return self.abs()

    def absolute_(self) -> Tensor:
        """In-place :meth:`absolute`."""
        return self.abs_()

    def fix_(self) -> Tensor:
        """Round toward zero, in place."""
        return self.trunc_()

    def floor_divide(self, other: Any) -> Tensor:
        """``self // other``: the quotient rounded down."""
        return self // other

    def remainder(self, other: Any) -> Tensor:
        """``self % other``: the remainder with the sign of ``other`` (Python's)."""
        return self % other

    def xlogy(self, other: Any) -> Tensor:
        """``self * log(other)``, 0 where ``self == 0`` (NaN where ``other`` is NaN); its
        derivative in ``self`` is ``log(other)`` even where ``self`` is 0 (0 where also
        ``other <= 0``), as PyTorch's."""
        if not isinstance(other, TensorBase):
            x = self if self.dtype in S.FLOAT_DTYPES else self.to(S.DEFAULT_FLOAT)
            other = x.new_full((), other)
        return self * where((self == 0) & (other <= 0), 1, other).log()

    def float_power_(self, exponent: Any) -> Tensor:
        """In-place :meth:`float_power` (only for float64 tensors, as in PyTorch)."""
        if self.dtype != "float64":
            raise TypeError(
                f"the base given to float_power_ has dtype {self.dtype} but the operation's "
                "result requires dtype float64"
            )
        return inplace_of("float_power")(self, exponent)

    def swapdims(self, dim0: int, dim1: int) -> Tensor:
        """Swap two dimensions (:meth:`transpose`)."""
        return self.transpose(dim0, dim1)

    def transpose_(self, dim0: int, dim1: int) -> Tensor:
        """Swap two dimensions, in place (the shape changes)."""
        return self._reshape_in_place(self.transpose(dim0, dim1))

    swapdims_ = swapaxes_ = transpose_

    def ravel(self) -> Tensor:
        """The elements as a contiguous 1-d tensor: a view of a contiguous tensor, else a copy
        (as PyTorch's; ``reshape(-1)`` of ``x[:, ::2]`` is a view, which wrote through to ``x``)."""
        return self.contiguous().reshape(-1)

    def adjoint(self) -> Tensor:
        """The conjugate transpose of each matrix (the last two dimensions swapped)."""
        if self.ndim < 2:
            raise ShapeError(
                "tensor.adjoint() is only supported on matrices or batches of matrices. "
                f"Got {self.ndim}-D tensor."
            )
        return self.transpose(-2, -1).conj()

    @property
    def mH(self) -> Tensor:  # noqa: N802 - PyTorch's name
        """:meth:`adjoint`: each matrix conjugated and transposed."""
        if self.ndim < 2:
            raise ShapeError(
                "tensor.mH is only supported on matrices or batches of matrices. "
                f"Got {self.ndim}-D tensor."
            )
        return self.transpose(-2, -1).conj()

    @property
    def H(self) -> Tensor:  # noqa: N802 - PyTorch's name
        """The conjugate transpose of a matrix; a 0-d tensor is returned as it is."""
        if self.ndim not in (0, 2):
            raise ShapeError(
                f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor."
            )
        return self if self.ndim == 0 else self.transpose(0, 1).conj()

    # ------------------------------------------------------------------ predicates and dtypes
    def is_signed(self) -> bool:
        """Whether the dtype holds negative numbers (all but ``uint8`` and ``bool``)."""
        return self.dtype not in ("uint8", "bool")

    def is_complex(self) -> bool:
        """Whether the dtype is complex (``complex64``, ``complex128``)."""
        return self.dtype in S.COMPLEX_DTYPES

    def is_nonzero(self) -> bool:
        """Whether the single element is nonzero (a sync point)."""
        n = self.numel()
        if n != 1:
            what = "no values" if n == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return bool(self.item())

    def is_same_size(self, other: Tensor) -> bool:
        """Whether ``other`` has this shape."""
        return tuple(self.shape) == tuple(other.shape)

    def is_contiguous(self, memory_format: Any = None) -> bool:
        """Whether PyTorch's tensor would be contiguous (in ``memory_format``): False for the
        views ``permute``/``transpose``/``expand`` make and after ``to(memory_format=...)``;
        see :mod:`gt.ops.layout` (the worker's own layout is its business)."""
        return layout.is_contiguous(self, memory_format)

    def stride(self, dim: int | None = None) -> Any:
        """The strides (in elements) PyTorch's tensor would have (see :meth:`is_contiguous`)."""
        strides = layout.strides_of(self)
        return strides if dim is None else strides[S.normalize_axis(dim, self.ndim, "stride")]

    def dim_order(self, *, ambiguity_check: Any = False) -> tuple[int, ...]:
        """The dimensions from the outermost in memory to the innermost (by :meth:`stride`)."""
        strides = self.stride()
        return tuple(sorted(range(self.ndim), key=lambda d: -strides[d]))

    def unsafe_chunk(self, chunks: int, dim: int = 0) -> tuple:
        """:meth:`chunk` (GT's pieces are never unsafe to use)."""
        return self.chunk(chunks, dim)

    def unsafe_split(self, split_size: Any, dim: int = 0) -> tuple:
        """:meth:`split`."""
        return self.split(split_size, dim)

    def unsafe_split_with_sizes(self, split_sizes: Any, dim: int = 0) -> tuple:
        """:meth:`split` at the given sizes."""
        return self.split(list(split_sizes), dim)

    def storage_offset(self) -> int:
        """Where this tensor starts in its storage, in elements: 0 but for views (``x[2:]``
        starts ``2 * x.stride(0)`` in; see :mod:`gt.ops.storage`)."""
        return storage.placement(self)[1]

    def data_ptr(self) -> int:
        """A made-up address (GT's data lives on a worker) that compares as PyTorch's does: equal
        for a tensor and the views that start where it does, distinct for unrelated tensors;
        0 for an empty tensor."""
        return storage.data_ptr(self)

    def untyped_storage(self) -> storage.UntypedStorage:
        """The storage this tensor is in (shared by its views): ``data_ptr()``, ``nbytes()``."""
        return storage.UntypedStorage(storage.placement(self)[0])

    def storage(self) -> storage.TypedStorage:
        """:meth:`untyped_storage` counted in elements of this tensor's dtype."""
        return storage.TypedStorage(storage.placement(self)[0])

    @property
    def _base(self) -> Tensor | None:
        """The tensor this view was taken from (``None`` unless this is a view)."""
        return storage.base_of(self)

    def _is_view(self) -> bool:
        return storage.base_of(self) is not None

    def is_set_to(self, tensor: Tensor) -> bool:
        """Whether both are the same elements of the same storage (same start, shape, strides)."""
        a, b = storage.placement(self), storage.placement(tensor)
        same = self.shape == tensor.shape and self.dtype == tensor.dtype
        return same and a[0] is b[0] and a[1:] == b[1:]

    def to_sparse(self, sparse_dim: int | None = None, *, layout: Any = None) -> Any:
        """This tensor's nonzero entries as a sparse COO tensor (:mod:`gt.sparse`; a sync point),
        or, with ``layout=gt.sparse_csr``, a CSR matrix."""
        from gt.sparse import to_sparse  # noqa: PLC0415 - gt.sparse builds on Tensor

        if layout == "sparse_csr":
            return self.to_sparse_csr()
        return to_sparse(self, sparse_dim)

    def to_sparse_csr(self, dense_dim: int | None = None) -> Any:
        """This matrix's nonzero entries as a sparse CSR matrix (:mod:`gt.sparse_csr`; a sync
        point)."""
        from gt.sparse_csr import to_sparse_csr  # noqa: PLC0415 - it builds on Tensor

        if dense_dim:
            raise NotImplementedError("gt.sparse_csr: CSR matrices with dense dimensions")
        return to_sparse_csr(self)

    def to_dense(self, dtype: Any = None) -> Tensor:
        """Itself (a dense tensor), converted to ``dtype`` if given."""
        return self if dtype is None else self.to(dtype)

    def get_device(self) -> int:
        """-1, as for a CPU tensor: this process holds no device memory of it."""
        return -1

    is_cpu = property(lambda self: True, doc="True: not a CUDA tensor of this process.")
    is_sparse = property(lambda self: False, doc="False: GT's tensors are dense.")
    is_sparse_csr = property(lambda self: False, doc="False: GT's tensors are dense.")
    is_quantized = property(lambda self: False, doc="False: no quantized dtypes in GT.")
    is_meta = property(lambda self: False, doc="False: every GT tensor holds data.")
    is_nested = property(lambda self: False, doc="False: no nested tensors in GT.")
    is_mkldnn = property(lambda self: False, doc="False.")

    def is_inference(self) -> bool:
        """Whether this tensor was made inside ``inference_mode``."""
        return getattr(self, "_inf", False)

    @property
    def layout(self) -> Any:
        """``gt.strided``: GT's tensors are dense."""
        from gt.settings import strided  # noqa: PLC0415 - the user API imports this layer

        return strided

    def is_neg(self) -> bool:
        """False: GT has no lazily negated tensors."""
        return False

    def is_pinned(self) -> bool:
        """False (host pinning is the workers' business)."""
        return False

    def is_shared(self) -> bool:
        """False."""
        return False

    def share_memory_(self) -> Tensor:
        """The tensor itself (it lives on a worker that every process of the program reaches)."""
        return self

    def record_stream(self, stream: Any) -> None:
        """Accepted: streams are the workers' business."""

    def cfloat(self) -> Tensor:
        """This tensor as complex64."""
        return self.to("complex64")

    def cdouble(self) -> Tensor:
        """This tensor as complex128."""
        return self.to("complex128")

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.element_size()

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (``numel() * itemsize``)."""
        return self.numel() * self.element_size()

    def bfloat16(self) -> Tensor:
        """Convert to bfloat16."""
        return self.to("bfloat16")

    def byte(self) -> Tensor:
        """Convert to uint8."""
        return self.to("uint8")

    def char(self) -> Tensor:
        """Convert to int8."""
        return self.to("int8")

    def short(self) -> Tensor:
        """This tensor as int16."""
        return self.to("int16")


for _name in INPLACE_NAMES:
    setattr(CompatInplaceOps, _name + "_", inplace_of(_name))
# ``x //= y`` and ``x %= y`` change x (without them Python rebinds x to a new tensor)
CompatInplaceOps.__ifloordiv__ = CompatInplaceOps.floor_divide_
CompatInplaceOps.__imod__ = CompatInplaceOps.remainder_


def is_inference(input: Any) -> bool:  # noqa: A002 - PyTorch's name
    """``gt.is_inference(x)``: whether ``x`` was made inside ``inference_mode``."""
    return input.is_inference()
