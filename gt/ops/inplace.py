"""In-place ops: ``+=``, ``add_``, ``zero_``, ``fill_``, ``copy_``, ``__setitem__`` (a mixin).

An in-place op keeps the Python object (so a model's parameters stay the same objects) and changes
its value: results computed from it earlier (and values saved for backward) keep theirs, while
the views PyTorch would share storage with follow it, and a view's change is written back into
the tensor it was taken from (:mod:`gt.ops.views`). The new value is computed like any op -- recorded for autograd when grad mode
is on -- and the tensor then takes over the result's worker id; its previous value is freed, or kept
alive by a backward node that still needs it. ``x[key] = v`` without autograd is one ``setitem``
instruction that writes into the worker's array directly when nothing else can see that array.

As in PyTorch, a leaf that requires grad cannot be changed in place while grad mode is on (use
``gt.no_grad()``, as optimizers do), and changing a tensor that a recorded op saved for backward
makes that ``backward()`` raise instead of returning wrong gradients.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt._dtype import dtype as as_dtype
from gt.autograd import _mode
from gt.errors import DtypeError, ShapeError
from gt.grad_graph import GRAD_DTYPES, label, record
from gt.indexing import bool_indices, bool_items, encode_key, plain_key
from gt.ops.arith import alpha_times, legacy_number_first, where
from gt.ops.base import BATCHING, TensorBase, refuse_outside_write
from gt.ops.random import check_std, random_attrs
from gt.ops.scaled import scaled_add, wire_alpha
from gt.ops.views import (
    is_basic_key,
    is_view_at,
    parts,
    recorded_alias,
    refuse_leaf_root,
    refuse_overlap,
    write_back,
)

if TYPE_CHECKING:
    from gt.tensor import Tensor


def take_value(dst: Tensor, src: Tensor, keep_graph: bool = True) -> None:
    """Make ``dst`` hold ``src``'s value by taking over its worker id (``src`` is left empty).

    Args:
        dst: the tensor changed in place.
        src: a freshly computed tensor that nothing else refers to.
        keep_graph: adopt ``src``'s autograd history (``False``: ``dst`` keeps its own flags).
    """
    if BATCHING:
        refuse_outside_write(dst)
    old = dst.id
    dst.id = src.id
    src.id = None
    if old is not None:
        dst._conn.free(old)
    dst.shape = src.shape
    dst.dtype = src.dtype
    dst._version += 1
    if keep_graph and _mode.enabled:
        before = dst._node
        dst._node = src._node
        dst._rg = src._rg
        outv = dst._node.outv if dst._node is not None else None
        if outv is not None and outv[0]() is src:  # (x.sigmoid_(): its output is x from now on)
            dst._node.outv = (weakref.ref(dst), dst._version)
        if before is not None and before.retain is not None and dst._node is not None:
            if before.retain() is dst:  # retain_grad() follows the tensor to its new value
                before.retain, dst._node.retain = None, before.retain
    write_back(dst, take_value)


def _broadcasts_to(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    try:
        return S.broadcast(src, dst) == dst
    except ShapeError:
        return False


#: PyTorch's node names for a tensor overwritten by a value independent of it.
_OVERWRITE_NODES = {"zero_": "ZeroBackward0", "fill_": "FillBackward2", "copy_": "CopyBackwards",
                    "uniform_": "UniformBackward0", "normal_": "NormalBackward0",
                    "random_": "RandomBackward0", "bernoulli_": "BernoulliBackward2"}  # fmt: skip
#: In-place ops PyTorch allows on a view that sees an element twice (setitem checks its part).
_ALLOWED_ON_OVERLAP = frozenset({"fill_", "zero_", "setitem"})


def _node_name(name: str) -> str:
    """PyTorch's node name of an in-place fill with no gradient of its own (``exponential_``:
    ``ExponentialBackward0``)."""
    return "".join(p.capitalize() for p in name.strip("_").split("_")) + "Backward0"


#: PyTorch's refusal of an in-place change, in grad mode, of a view taken under ``no_grad``.
NOGRAD_VIEW_CHANGED = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
    "your code by moving both the view and the inplace either both inside the no_grad block (if "
    "you don't want the inplace to be tracked) or both outside (if you want the inplace to be "
    "tracked)."
)


def _check_leaf(x: Tensor, name: str) -> None:
    if _mode.enabled and x.requires_grad and x._node is None:
        if getattr(x, "_nograd_view", False):
            raise RuntimeError(NOGRAD_VIEW_CHANGED)
        raise RuntimeError(
            f"{name}: a leaf Variable that requires grad is being used in an in-place operation "
            "(wrap it in `with gt.no_grad():`)"
        )


def apply_inplace(x: Tensor, name: str, compute: Callable[[Tensor], Tensor]) -> Tensor:
    """Replace ``x``'s value with ``compute(old_x)``, recorded for autograd like any op.

    ``compute`` receives a separate handle on ``x``'s current value (so a backward node that saves
    it keeps the old value) and must return a tensor of ``x``'s shape.
    """
    if BATCHING:
        refuse_outside_write(x)
    if x._vb is not None and name not in _ALLOWED_ON_OVERLAP:
        refuse_overlap(x, None, name)
    if not _mode.enabled:  # nothing is recorded: compute from x itself, then take the result over
        new = compute(x)
        if new.shape != x.shape:
            raise ShapeError(
                f"{name}: output with shape {list(x.shape)} doesn't match the broadcast shape {list(new.shape)}"
            )
        if new.dtype != x.dtype:
            new = new.to(x.dtype)
        take_value(x, new if new is not x else x._alias())
        return x
    _check_leaf(x, name)
    if x._vb is not None:
        refuse_leaf_root(x)
    old = x._handle()
    old.id = x.id  # both refer to the value while compute runs (it may read x itself)
    old._rg, old._node, old._version = x._rg, x._node, x._version
    try:
        new = compute(old)
        if new.shape != x.shape:
            raise ShapeError(
                f"{name}: output with shape {list(x.shape)} doesn't match the broadcast shape {list(new.shape)}"
            )
        if new.dtype != old.dtype:
            new = new.to(old.dtype)
        if new.id == old.id:  # compute returned the handle itself: nothing changes
            new = recorded_alias(old)  # (with its history: x stays in the graph)
        elif old._rg and not new._rg and new.dtype in GRAD_DTYPES:
            # overwritten by a value that does not depend on it (``y.zero_()``, ``fill_``, a
            # constant ``copy_``, a random fill): still in the graph, as PyTorch's, its old
            # history getting zeros
            record(new, "mul", (old, 0.0), None, saved=(None, 0.0))
            label(new, _OVERWRITE_NODES.get(name) or _node_name(name))
    except BaseException:
        old.id = None  # x still owns its value
        raise
    x.id = None  # the handle owns the old value now (a backward node may keep it)
    take_value(x, new)
    return x


def castable(name: str, new: Tensor, x: Tensor) -> Tensor:
    """``new``, the value an in-place op computed for ``x``, if ``x``'s dtype can hold its kind
    (PyTorch refuses a float result into an integer tensor, a complex one into a real tensor, a
    number into a bool tensor: ``int_tensor.sqrt_()`` raises rather than truncate)."""
    if S.category(new.dtype) > S.category(x.dtype):
        raise DtypeError(
            f"{name}: result type {as_dtype(new.dtype)} can't be cast to the desired output type "
            f"{as_dtype(x.dtype)}"
        )
    return new


def _direct(x: Tensor, name: str, other: Any) -> Tensor | None:
    """``x op= other`` as one instruction that updates the worker's array in place when it can.

    Only when nothing is recorded (grad mode off, or neither operand requires grad) and ``other``
    is a number or a tensor that needs no broadcasting of ``x``; returns ``None`` otherwise.
    """
    other_grad = getattr(other, "requires_grad", False)
    if _mode.enabled and (x.requires_grad or other_grad):
        return None
    if isinstance(other, TensorBase):
        if other._conn is not x._conn:
            return None
        arg: Any = other if other.dtype == x.dtype else other.to(x.dtype)
    elif isinstance(other, (bool, int, float, np.number)) and not isinstance(
        other, np.complexfloating
    ):
        if x.dtype in S.INEXACT_DTYPES:
            arg = float(other)
        elif x.dtype == "bool":
            return None
        else:
            arg = S.wrap_int(int(other), x.dtype)  # (as ``x + other`` takes it: uint8 += 300)
    else:
        return None
    if name == "div" and x.dtype not in S.INEXACT_DTYPES:
        return None
    return x._apply_(name, [x, arg], {"inplace": True})


def _scaled_(x: Tensor, other: Tensor, alpha: float, name: str) -> Tensor:
    """``x += alpha * other`` as one ``add_scaled`` (see :func:`gt.ops.arith.scaled_add`): written
    into the worker's array when nothing is recorded and ``other`` does not broadcast ``x``."""
    recorded = _mode.enabled and (x.requires_grad or other.requires_grad)
    if not recorded and other.shape == x.shape:
        x._apply_("add_scaled", [x, other], {"alpha": alpha, "inplace": True})
    else:
        node = "SubBackward0" if name == "sub_" else "AddBackward0"
        apply_inplace(
            x, name, lambda v: label(v._apply("add_scaled", [v, other], {"alpha": alpha}), node)
        )
    return x


def _result_dtype(x: Tensor, other: Any, name: str, true_div: bool = False) -> None:
    if hasattr(other, "dtype") and hasattr(other, "_conn"):
        dt = S.promote_operands(x.dtype, x.ndim, other.dtype, other.ndim)
        if other.shape != x.shape:
            shape = S.broadcast(x.shape, other.shape, name)
            if shape != x.shape:
                raise ShapeError(
                    f"{name}: output with shape {list(x.shape)} doesn't match the broadcast shape {list(shape)}"
                )
    elif isinstance(other, (int, float, bool, complex, np.number)):
        dt = S.promote_scalar(
            x.dtype, complex(other) if isinstance(other, np.complexfloating) else other
        )
    else:
        return
    if true_div and dt not in S.INEXACT_DTYPES:
        dt = S.DEFAULT_FLOAT
    if S.category(dt) > S.category(x.dtype):
        raise DtypeError(
            f"{name}: result type {as_dtype(dt)} can't be cast to the desired output type {x.dtype}"
        )


class InplaceOps:
    """In-place ops of :class:`gt.Tensor`."""

    __slots__ = ()

    def add_(self, other: Any, alpha: Any = 1) -> Tensor:
        """``self += alpha * other`` in place (also the deprecated ``add_(alpha, other)``)."""
        if legacy_number_first("add_", other, alpha):
            other, alpha = alpha * other, 1
        _result_dtype(self, other, "add_")
        if scaled_add(self, other, alpha):
            return _scaled_(self, other, wire_alpha(self, alpha), "add_")
        other = other if alpha == 1 else alpha_times(self, other, alpha)
        if _direct(self, "add", other) is None:
            apply_inplace(self, "add_", lambda x: x + other)
        return self

    def sub_(self, other: Any, alpha: Any = 1) -> Tensor:
        """``self -= alpha * other`` in place (also the deprecated ``sub_(alpha, other)``)."""
        if legacy_number_first("sub_", other, alpha):
            other, alpha = alpha * other, 1
        _result_dtype(self, other, "sub_")
        if scaled_add(self, other, alpha):
            return _scaled_(self, other, -wire_alpha(self, alpha), "sub_")
        other = other if alpha == 1 else alpha_times(self, other, alpha)
        if _direct(self, "sub", other) is None:
            apply_inplace(self, "sub_", lambda x: x - other)
        return self

    def mul_(self, other: Any) -> Tensor:
        """``self *= other`` in place."""
        _result_dtype(self, other, "mul_")
        if _direct(self, "mul", other) is None:
            apply_inplace(self, "mul_", lambda x: x * other)
        return self

    def div_(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """``self /= other`` in place (``rounding_mode`` as in :meth:`div`)."""
        if rounding_mode is not None:
            return self.divide_(other, rounding_mode=rounding_mode)
        _result_dtype(self, other, "div_", true_div=True)
        if _direct(self, "div", other) is None:
            apply_inplace(self, "div_", lambda x: x / other)
        return self

    def pow_(self, exponent: Any) -> Tensor:
        """``self **= exponent`` in place."""
        _result_dtype(self, exponent, "pow_")
        return apply_inplace(self, "pow_", lambda x: x**exponent)

    def __iadd__(self, other: Any) -> Tensor:
        return self.add_(other)

    def __isub__(self, other: Any) -> Tensor:
        return self.sub_(other)

    def __imul__(self, other: Any) -> Tensor:
        return self.mul_(other)

    def __itruediv__(self, other: Any) -> Tensor:
        return self.div_(other)

    def __ipow__(self, other: Any) -> Tensor:
        return self.pow_(other)

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - PyTorch's names
        """Clamp in place."""
        if (self.dtype in S.FLOAT_DTYPES and (min is not None or max is not None)
                and all(b is None or (isinstance(b, (int, float)) and not isinstance(b, bool))
                        for b in (min, max))
                and self._vb is None and not BATCHING
                and not (_mode.enabled and self._rg)):  # fmt: skip
            # nothing to record: the result takes the tensor's own id (Rprop's step sizes stay
            # the tensors a captured step reads)
            lo, hi = (None if b is None else float(b) for b in (min, max))
            return self._apply_("clip", [self, lo, hi], {"inplace": True})
        return apply_inplace(self, "clamp_", lambda x: castable("clamp_", x.clamp(min, max), x))

    def neg_(self) -> Tensor:
        """Negate in place."""
        return apply_inplace(self, "neg_", lambda x: -x)

    def zero_(self) -> Tensor:
        """Set every element to zero, in place."""
        if self._vb is None and not BATCHING and not (_mode.enabled and self._rg):
            # nothing to record: written into the worker's array, so the tensor keeps its id
            # (``zero_grad(set_to_none=False)``: the gradients a captured step reads stay put)
            self._setitem(Ellipsis, 0)
            return self
        return apply_inplace(self, "zero_", lambda x: x.new_full(x.shape, 0))

    def fill_(self, value: Any) -> Tensor:
        """Set every element to ``value``, in place."""
        if isinstance(value, TensorBase):
            return self.copy_(value.reshape(()) if value.numel() == 1 else value)
        return apply_inplace(self, "fill_", lambda x: x.new_full(x.shape, value))

    def copy_(self, src: Any) -> Tensor:
        """Copy ``src``'s values (broadcast to this shape, cast to this dtype) into ``self``."""
        if not isinstance(src, TensorBase):
            src = self.new_tensor(np.asarray(src))
        if src.shape != self.shape and not _broadcasts_to(src.shape, self.shape):
            raise ShapeError(
                f"copy_: source of shape {list(src.shape)} cannot be broadcast to {list(self.shape)}"
            )
        dtype = self.dtype
        if (src.dtype == dtype and src.shape == self.shape and self._vb is None
                and src._conn is self._conn and not BATCHING
                and not (_mode.enabled and (self._rg or src._rg))):  # fmt: skip
            # nothing to record: written into the worker's array, so the tensor keeps its id
            # (a parameter or optimizer state copied into outside a captured step stays the
            # tensor the step reads)
            self._setitem(Ellipsis, src)
            return self
        return apply_inplace(self, "copy_", lambda x: src.to(dtype).expand(x.shape).clone())

    def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> Tensor:
        """Fill with samples uniform in ``[a, b)``, in place (from ``generator``'s stream when
        given)."""

        def draw(x: Tensor) -> Tensor:
            return x._create("rand", [], random_attrs(x.shape, x.dtype, generator)) * (b - a) + a

        return apply_inplace(self, "uniform_", draw)

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Tensor:
        """Fill with normal samples, in place (from ``generator``'s stream when given)."""
        check_std(std)

        def draw(x: Tensor) -> Tensor:
            return x._create("randn", [], random_attrs(x.shape, x.dtype, generator)) * std + mean

        return apply_inplace(self, "normal_", draw)

    def masked_fill_(self, mask: Tensor, value: Any) -> Tensor:
        """In-place :meth:`masked_fill`."""
        return apply_inplace(self, "masked_fill_", lambda x: x.masked_fill(mask, value))

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, TensorBase) and key.dtype == "uint8" and key.shape == self.shape:
            raise RuntimeError(  # (PyTorch's x[mask] = v is masked_fill_, which refuses it)
                "masked_fill_ only supports boolean masks, but got mask with dtype unsigned char"
            )
        if type(key) is bool or (
            isinstance(key, TensorBase) and key.dtype == "bool" and key.ndim == 0
        ):  # x[True] = v writes all of x (through its new first dimension), x[False] nothing
            if not bool(key):  # (a 0-d mask's value: a sync point)
                return
            if (
                isinstance(value, TensorBase)
                and value.ndim == self.ndim + 1
                and value.shape[0] == 1
            ):
                value = value[0]
            key = Ellipsis
        key = plain_key(key)
        two = bool_items(key)
        if two is not None:  # (a view with the bools' new dimensions, then an advanced index)
            self[two[0]][bool_indices(self, two[1])] = value
            return
        if isinstance(value, TensorBase) and value._vb is not None and is_view_at(self, key, value):
            return  # (the second half of ``x[key] += v``: the view already wrote itself back)
        owner = self._owner if self._proxy else self
        if owner._vs and owner._vb is None and is_basic_key(key):
            parts.append((owner, key))  # (its views of other parts need not follow)
            try:
                self._setitem(key, value)
            finally:
                parts.pop()
        else:
            self._setitem(key, value)

    def _setitem(self, key: Any, value: Any, index_op: str | None = None) -> None:
        """``self[key] = value``; ``index_op``: the op whose index tensors must lie in
        ``[0, size)`` (PyTorch's ``scatter``, ``index_copy``: the worker raises with its message
        where ``x[t] = v`` wraps a negative index around)."""
        if self._vb is not None:
            refuse_overlap(self, key, None if is_basic_key(key) else "index_put_")
            refuse_leaf_root(self)
        if isinstance(value, np.ndarray):
            value = self.new_tensor(value)
        if isinstance(value, TensorBase) and value._conn is not self._conn:
            raise ValueError("setitem: tensors belong to different GT connections")
        if isinstance(key, TensorBase) and key.dtype == "bool" and key.shape == self.shape:
            # x[mask] = v with a full-shape mask needs no sync: it is a where().
            if not (isinstance(value, TensorBase) and value.numel() != 1):
                v = value.reshape(()) if isinstance(value, TensorBase) else value
                _check_leaf(self, "setitem")
                apply_inplace(self, "setitem",
                              lambda x: label(where(key, v, x), "IndexPutBackward0"))  # fmt: skip
                return
            # else: the masked elements are filled in order, which needs the real indices
        wire, tensors, shape = encode_key(self, key, "setitem")
        value = _setitem_value(self, value, shape)
        _check_leaf(self, "setitem")
        attrs = {"key": wire} if index_op is None else {"key": wire, "index_op": index_op}
        if not (_mode.enabled and (self.requires_grad or getattr(value, "requires_grad", False))):
            # Nothing to record: one instruction that writes into the worker's array.
            self._apply_("setitem", [self, value, *tensors], {**attrs, "inplace": True})
            return
        apply_inplace(self, "setitem", lambda x: x._apply("setitem", [x, value, *tensors], attrs))


def _setitem_value(x: Tensor, value: Any, shape: tuple[int, ...]) -> Any:
    """``value`` checked for ``x[key] = value`` (``shape``: the indexed part's) and cast to x's
    dtype: a tensor, or a Python number of the right kind."""
    if isinstance(value, TensorBase):
        while value.ndim > len(shape) and value.shape[0] == 1:  # PyTorch drops leading 1s first
            value = value.reshape(value.shape[1:])
        if value.shape != shape and not _broadcasts_to(value.shape, shape):
            raise ShapeError(
                f"setitem: shape mismatch: value tensor of shape {list(value.shape)} cannot be "
                f"broadcast to indexing result of shape {list(shape)}"
            )
        # PyTorch casts the value to the tensor's dtype (a float into ints truncates), but a
        # complex value into a real tensor would lose its imaginary part: refused
        if value.dtype in S.COMPLEX_DTYPES and x.dtype not in S.COMPLEX_DTYPES:
            raise TypeError(
                f"setitem: value of dtype {value.dtype} can't be cast to the tensor's dtype {x.dtype}"
            )
        return value.to(x.dtype)
    if isinstance(value, (int, float, bool, complex, np.number)):
        if isinstance(value, np.complexfloating):
            value = complex(value)
        if isinstance(value, complex):  # (complex numbers travel as 0-d tensors)
            if x.dtype not in S.COMPLEX_DTYPES:
                raise TypeError(
                    f"setitem: value {value!r} can't be cast to the tensor's dtype {x.dtype}"
                )
            return x._upload(np.array(value, dtype=x.dtype))
        if x.dtype in S.INEXACT_DTYPES:
            return float(value)
        if x.dtype == "bool":
            return bool(value)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"setitem: cannot convert float {value} to integer")
        return S.fill_int(int(value), x.dtype)
    raise TypeError(f"setitem: can't assign a {type(value).__name__} to a tensor")
