"""What the op mixins need to know about :class:`gt.Tensor` without importing it.

:class:`TensorBase` is the first base class of ``gt.Tensor``: the mixins in this package recognise
tensors with ``isinstance(x, TensorBase)`` and make new ones through the tensor's own methods
(``_apply``, ``_create``, ``new_tensor`` ...), so nothing here imports :mod:`gt.tensor` (which
imports these mixins).
"""

from __future__ import annotations

from typing import Any


class TensorBase:
    """The base class of every ``gt.Tensor`` (and of nothing else)."""

    __slots__ = ()


def is_tensor(x: Any) -> bool:
    """Whether ``x`` is a ``gt.Tensor`` (PyTorch's ``torch.is_tensor``)."""
    return isinstance(x, TensorBase)


def as_float(x: Any) -> Any:
    """Tensor ``x``, or ``x`` as the default float dtype (float32) when it holds integers or
    bools (what math functions of integers compute in, as in PyTorch)."""
    from gt import shapes as S  # noqa: PLC0415 - keep this leaf module free of imports

    return x if x.dtype in S.FLOAT_DTYPES else x.to(S.DEFAULT_FLOAT)


def immediate(v: Any) -> Any:
    """A Python number as an instruction argument (a bare int would be a tensor id: ``[v]``).

    A NumPy number (or 0-d array) gives its Python value. Anything else is refused here, at the
    user's call, with a ``TypeError`` as PyTorch's: on the wire it would fail the whole batch at
    some later flush (an array cannot be encoded; a worker takes only numbers).
    """
    t = type(v)
    if t is int:
        return [v]
    if t is float or t is bool or v is None:
        return v
    if t is list and len(v) == 1 and type(v[0]) is int:  # (already an immediate)
        return v
    if t.__module__ == "numpy" and getattr(v, "ndim", None) == 0 and v.dtype.kind in "biuf":
        return immediate(v.item())
    raise TypeError(
        f"an op's argument is a {t.__module__}.{t.__qualname__}: GT's ops take tensors and "
        "Python numbers (gt.as_tensor makes a tensor of an array)"
    )


_HALF = ("float16", "bfloat16")
_WIDE = ("float32", "float64", "complex64", "complex128")


def in_float32(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` computed in float32 and rounded once, when its floating-point tensor
    arguments are all of one half dtype (float16 or bfloat16): PyTorch's CPU kernels for products,
    convolutions and attention accumulate in float32 and round their result once, where GT's
    composite of several ops would round after each. Otherwise just ``fn(*args)``."""
    half = None
    for a in args:
        if isinstance(a, TensorBase):
            dt = a.dtype
            if dt in _WIDE or (half is not None and dt in _HALF and dt != half):
                return fn(*args)
            if dt in _HALF:
                half = dt
    if half is None:
        return fn(*args)
    wide = (a.float() if isinstance(a, TensorBase) and a.dtype == half else a for a in args)
    return fn(*wide).to(half)


#: While ``gt.func.vmap`` runs a function batched (:mod:`gt.func_batching`): one dict, every
#: tensor made meanwhile by id -> ``(shape, dtype)``. Empty otherwise (one cheap test per tensor).
BATCHING: list = []


class Unbatchable(Exception):
    """What ``vmap``'s batched run cannot do (it runs the function once per entry instead)."""


def refuse_outside_write(t: Any) -> None:
    """Under ``vmap``'s batched run, refuse (before it happens) a change of a tensor made outside
    the function: done once for the whole batch it would be wrong, and the per-entry run redoes
    it."""
    tid = getattr(t, "id", None)
    if BATCHING and tid is not None and tid not in BATCHING[0]:
        raise Unbatchable("a tensor made outside the function is changed in place")


def zero_dim_as_one(method: Any) -> Any:
    """``method(self, dim, index, *rest)`` of a 0-d tensor run on it as one element, as PyTorch
    runs ``index_fill``/``index_add``/``index_copy`` of a 0-d tensor (a 0-d source too)."""

    def run(self: Any, dim: Any, index: Any, *rest: Any, **kw: Any) -> Any:
        if self.ndim != 0:
            return method(self, dim, index, *rest, **kw)
        rest = tuple(r.reshape(1) if isinstance(r, TensorBase) and r.ndim == 0 else r for r in rest)
        return method(self.reshape(1), dim, index.reshape(-1), *rest, **kw).reshape(())

    run.__name__, run.__doc__, run.__qualname__ = (
        method.__name__,
        method.__doc__,
        method.__qualname__,
    )
    return run
