"""The in-place forms of common ops: ``relu_``, ``sigmoid_``, ``lerp_``, ``scatter_`` ... (a mixin).

Each is ``apply_inplace`` around the out-of-place op (see :mod:`gt.ops.inplace`): the tensor keeps
its identity and takes the new value, recorded for autograd like any op.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt.autograd import _mode
from gt.ops.base import BATCHING, TensorBase
from gt.ops.conversion import _size
from gt.ops.inplace import apply_inplace, castable, take_value
from gt.ops.mathops import addcdiv_term, addcmul_term, lerp_term
from gt.ops.random import BAD_PROBABILITY, check_probability, checked_values, random_attrs
from gt.ops.views import regeometry

if TYPE_CHECKING:
    from gt.tensor import Tensor


def _inplace(name: str) -> Callable[..., Any]:
    """``x.<name>_(*args)``: ``x`` takes the value of ``x.<name>(*args)``."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return apply_inplace(
            self, name + "_", lambda x: castable(name + "_", getattr(x, name)(*args, **kwargs), x)
        )

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place :meth:`{name}`."
    return method


#: The dtypes whose ``addcmul_`` / ``addcdiv_`` add their term in place (half precision computes
#: in float32 and rounds once, out of place).
_IN_PLACE_TERM = ("float32", "float64")


def _inplace_add_term(name: str, term: Callable[..., Any]) -> Callable[..., Any]:
    """``x.addcmul_(t1, t2, value)`` / ``x.addcdiv_(...)``: where nothing is recorded and ``x`` is
    float32 or float64, the term computed as the out-of-place op computes it, then added with
    ``add_``, which updates ``x`` where it is (the same bits). The general way computes a new
    tensor and gives ``x`` its id: an optimizer's state would be a new tensor every step, and a
    step captured without the optimizer (:mod:`gt.hotpath`) would never see the same one twice."""
    general = _inplace(name)

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        fast = (len(args) == 2 and set(kwargs) <= {"value"} and self._vb is None
                and self.dtype in _IN_PLACE_TERM and not BATCHING)  # fmt: skip
        if fast:
            t1, t2 = args
            value = kwargs.get("value", 1)
            fast = (isinstance(t1, TensorBase) and isinstance(t2, TensorBase)
                    and isinstance(value, (int, float)) and not isinstance(value, bool)
                    and not (_mode.enabled and (self._rg or t1._rg or t2._rg)))  # fmt: skip
        if not fast:
            return general(self, *args, **kwargs)
        t = term(self, t1, t2, value)
        if t.dtype != self.dtype or S.broadcast(self.shape, t.shape, name) != tuple(self.shape):
            return general(self, *args, **kwargs)
        return self.add_(t)

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place :meth:`{name}`."
    return method


def _lerp_(self: Tensor, end: Any, weight: Any) -> Tensor:
    """In-place :meth:`lerp` (a moving average's ``avg.lerp_(x, 0.1)`` adds its term in place,
    as :func:`_inplace_add_term` does)."""
    if (isinstance(end, TensorBase) and end.dtype == self.dtype and self.dtype in _IN_PLACE_TERM
            and isinstance(weight, (int, float)) and not isinstance(weight, bool)
            and self._vb is None and not BATCHING
            and not (_mode.enabled and (self._rg or end._rg))):  # fmt: skip
        t = lerp_term(self, end, weight)
        if t is not None and S.broadcast(self.shape, t.shape, "lerp_") == tuple(self.shape):
            return self.add_(t)
    return _lerp_general(self, end, weight)


_lerp_general = _inplace("lerp")


def _inplace_bitwise(name: str) -> Callable[..., Any]:
    """``x.<name>_(other)`` and ``x &= other`` ...: ``x`` takes ``x.<name>(other)``, which must
    not need a wider category than ``x``'s dtype (as in PyTorch, ``bool &= int`` is refused)."""

    def method(self: Tensor, other: Any) -> Tensor:
        return apply_inplace(
            self, name + "_", lambda x: castable(name + "_", getattr(x, name)(other), x)
        )

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place :meth:`{name}` (also ``x op= other``)."
    return method


#: ``random_()``'s exclusive top for floats: one past ``2**mantissa bits`` (PyTorch's range).
_FLOAT_TOP = {
    "float16": 2**11 + 1,
    "bfloat16": 2**8 + 1,
    "float32": 2**24 + 1,
    "float64": 2**53 + 1,
}


def _random_top(dtype: str) -> int:
    """``random_()``'s exclusive top for ``dtype`` (int64 and uint64 stop one short of their
    largest value: the draw is made in int64)."""
    if dtype in _FLOAT_TOP:
        return _FLOAT_TOP[dtype]
    if dtype == "bool":
        return 2
    return min(int(np.iinfo(dtype).max) + 1, 2**63 - 1)


class MoreInplaceOps:
    """In-place forms of :class:`gt.Tensor` ops."""

    __slots__ = ()

    relu_ = _inplace("relu")
    sigmoid_ = _inplace("sigmoid")
    tanh_ = _inplace("tanh")
    exp_ = _inplace("exp")
    log_ = _inplace("log")
    log1p_ = _inplace("log1p")
    sqrt_ = _inplace("sqrt")
    rsqrt_ = _inplace("rsqrt")
    abs_ = _inplace("abs")
    sign_ = _inplace("sign")
    square_ = _inplace("square")
    reciprocal_ = _inplace("reciprocal")
    sin_ = _inplace("sin")
    cos_ = _inplace("cos")
    floor_ = _inplace("floor")
    ceil_ = _inplace("ceil")
    round_ = _inplace("round")
    trunc_ = _inplace("trunc")
    clamp_min_ = _inplace("clamp_min")
    clamp_max_ = _inplace("clamp_max")
    lerp_ = _lerp_
    addcmul_ = _inplace_add_term("addcmul", addcmul_term)
    addcdiv_ = _inplace_add_term("addcdiv", addcdiv_term)
    addmm_ = _inplace("addmm")
    scatter_ = _inplace("scatter")
    scatter_add_ = _inplace("scatter_add")
    scatter_reduce_ = _inplace("scatter_reduce")
    index_reduce_ = _inplace("index_reduce")
    index_add_ = _inplace("index_add")
    index_fill_ = _inplace("index_fill")
    tril_ = _inplace("tril")
    triu_ = _inplace("triu")
    cumsum_ = _inplace("cumsum")
    i0_ = _inplace("i0")
    igamma_ = _inplace("igamma")
    igammac_ = _inplace("igammac")
    nextafter_ = _inplace("nextafter")
    bitwise_not_ = _inplace("bitwise_not")
    bitwise_and_ = __iand__ = _inplace_bitwise("bitwise_and")
    bitwise_or_ = __ior__ = _inplace_bitwise("bitwise_or")
    bitwise_xor_ = __ixor__ = _inplace_bitwise("bitwise_xor")
    bitwise_left_shift_ = __ilshift__ = _inplace_bitwise("bitwise_left_shift")
    bitwise_right_shift_ = __irshift__ = _inplace_bitwise("bitwise_right_shift")

    def clip_(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - PyTorch's names
        """In-place :meth:`clamp`."""
        return self.clamp_(min, max)

    def t_(self) -> Tensor:
        """Transpose a matrix in place (the shape changes)."""
        return self._reshape_in_place(self.t())

    def unsqueeze_(self, dim: int) -> Tensor:
        """Insert a size-1 dimension, in place."""
        return self._reshape_in_place(self.unsqueeze(dim))

    def squeeze_(self, dim: Any = None) -> Tensor:
        """Remove size-1 dimensions, in place."""
        return self._reshape_in_place(self.squeeze(dim))

    def resize_(self, *size: Any, memory_format: Any = None) -> Tensor:
        """Give this tensor the shape ``size``, in place: its first elements (in row-major
        order) are kept, new ones are zeros (PyTorch leaves them uninitialised)."""
        if self.requires_grad:
            raise RuntimeError("cannot resize variables that require grad")
        from gt.ops.shaping import cat  # noqa: PLC0415 - shaping imports the tensor mixins

        shape = _size(size)
        n, flat = math.prod(shape), self.detach().reshape(-1)
        if n > flat.shape[0]:
            flat = cat([flat, flat.new_zeros((n - flat.shape[0],))])
        return self._reshape_in_place(flat[:n].reshape(shape), shared=False)

    def resize_as_(self, other: Tensor, memory_format: Any = None) -> Tensor:
        """:meth:`resize_` to ``other``'s shape."""
        return self.resize_(tuple(other.shape))

    def apply_(self, callable: Callable[[Any], Any]) -> Tensor:  # noqa: A002 - PyTorch's name
        """Replace each element ``v`` with ``callable(v)``, a Python function run on the host
        (a sync point, as in PyTorch, where it works on CPU tensors only)."""
        return self._host_map(lambda a: np.vectorize(callable, otypes=[a.dtype])(a), "apply_")

    def map_(self, tensor: Tensor, callable: Callable[[Any, Any], Any]) -> Tensor:  # noqa: A002
        """Replace each element ``v`` with ``callable(v, w)``, ``w`` the element of ``tensor``
        (broadcast to this shape) at the same place; run on the host."""
        other = np.broadcast_to(tensor._host(), tuple(self.shape))
        return self._host_map(lambda a: np.vectorize(callable, otypes=[a.dtype])(a, other), "map_")

    def _host_map(self, fn: Callable[[Any], Any], name: str) -> Tensor:
        if self.requires_grad:
            raise RuntimeError(
                f"{name}: a leaf Variable that requires grad can't be changed in place"
            )
        new = self.new_tensor(fn(self.detach().numpy()))
        self.copy_(new)
        return self

    def _reshape_in_place(self, new: Tensor, shared: bool = True) -> Tensor:
        """``self`` takes ``new``, its value seen with another shape (``shared``: a view of
        ``self``, whose value ``self`` keeps sharing with the views taken before)."""
        if new is self:
            return self
        st = new._st  # (PyTorch's strides: ``x.t_()`` is no longer contiguous)
        if not (shared and regeometry(self, new, take_value)):
            take_value(self, new if new.id is not None else new._alias())
        if shared:
            self._st = st
        return self

    def detach_(self) -> Tensor:
        """Cut this tensor out of the graph: it becomes a leaf that does not require grad."""
        self._node = None
        self._rg = False
        return self

    def bernoulli_(self, p: float = 0.5, *, generator: Any = None) -> Tensor:
        """Fill with 1 (probability ``p``) or 0, in place (``p`` outside [0, 1] raises, as in
        PyTorch: a number's at the call, a tensor's at the next sync point)."""
        if isinstance(p, TensorBase):
            p = checked_values(p, "probability", BAD_PROBABILITY)
        else:
            check_probability("bernoulli_", p)

        def draw(x: Tensor) -> Tensor:
            u = x._create("rand", [], random_attrs(x.shape, "float32", generator))
            return (u < p).to(x.dtype)

        return apply_inplace(self, "bernoulli_", draw)

    def exponential_(self, lambd: float = 1.0, *, generator: Any = None) -> Tensor:
        """Fill with exponential samples of rate ``lambd``, in place."""
        if not lambd > 0:
            raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")

        def draw(x: Tensor) -> Tensor:
            u = x._create("rand", [], random_attrs(x.shape, x.dtype, generator))
            return -((-u).log1p()) / lambd

        return apply_inplace(self, "exponential_", draw)

    def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator: Any = None) -> Tensor:
        """Fill with Cauchy samples (``median + sigma * tan(pi * (u - 1/2))``), in place."""

        def draw(x: Tensor) -> Tensor:
            u = x._create("rand", [], random_attrs(x.shape, x.dtype, generator))
            return ((u - 0.5) * math.pi).tan() * sigma + median

        return apply_inplace(self, "cauchy_", draw)

    def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator: Any = None) -> Tensor:
        """Fill with samples whose logarithm is normal (``mean``, ``std``), in place."""

        def draw(x: Tensor) -> Tensor:
            z = x._create("randn", [], random_attrs(x.shape, x.dtype, generator))
            return (z * std + mean).exp()

        return apply_inplace(self, "log_normal_", draw)

    def geometric_(self, p: float, *, generator: Any = None) -> Tensor:
        """Fill with the number of Bernoulli(``p``) trials up to the first success (1, 2, ...),
        in place."""
        if not 0 < p < 1:
            raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")

        def draw(x: Tensor) -> Tensor:
            u = x._create("rand", [], random_attrs(x.shape, "float64", generator))
            return ((-u).log1p() / math.log1p(-p)).ceil().clamp(min=1).to(x.dtype)

        return apply_inplace(self, "geometric_", draw)

    def random_(self, from_: Any = None, to: Any = None, *, generator: Any = None) -> Tensor:
        """Fill with integers uniform in ``[from_, to)``, in place; ``random_(to)`` from 0, and
        ``random_()`` over every integer the dtype holds exactly (``[0, 2**24]`` for float32, as
        PyTorch's: its mantissa's range; up to the largest value for integer dtypes)."""
        if to is None:
            low, high = 0, (_random_top(self.dtype) if from_ is None else from_)
        else:
            low, high = from_, to

        def draw(x: Tensor) -> Tensor:
            attrs = random_attrs(x.shape, "int64", generator, low=int(low), high=int(high))
            return x._create("randint", [], attrs).to(x.dtype)

        return apply_inplace(self, "random_", draw)

    def fill_diagonal_(self, fill_value: Any, wrap: bool = False) -> Tensor:
        """Set the main diagonal of a matrix to ``fill_value``, in place."""
        n = min(self.shape[0], self.shape[1]) if self.ndim >= 2 else 0
        idx = list(range(n))
        self[tuple([idx] * self.ndim)] = fill_value
        return self
