"""``gt.<name>(x, ...)`` made from the tensor method ``x.<name>(...)``, with what PyTorch's function
forms add: a number as the first operand where PyTorch takes one (``torch.pow(10.0, x)``,
``torch.add(1, x)``), and an ``out=`` tensor that receives the result (PyTorch's spelling, in
polyak updates and preallocated buffers)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from gt import shapes as S
from gt.autograd import _mode
from gt.ops.base import TensorBase
from gt.ops.inplace import take_value

#: Functions PyTorch also takes with a number first (its ``Scalar self`` overloads).
SCALAR_FIRST = frozenset(
    """add sub subtract mul multiply div divide true_divide pow float_power bitwise_and bitwise_or
    bitwise_xor bitwise_left_shift bitwise_right_shift remainder floor_divide xlogy""".split()
)


#: How a Python number becomes a 0-d tensor (``gt.tensor``): :mod:`gt.factories` sets it when it is
#: imported, since it imports this module (importing it from here would be a cycle).
number_tensor: Callable[[Any], Any] | None = None


def write_out(out: Any, result: Any, name: str) -> Any:
    """Copy ``result`` into ``out`` (a tensor, or a tuple of them for several results), taking its
    shape, and return ``out``, as PyTorch's ``out=`` does."""
    if isinstance(out, (tuple, list)):
        if not isinstance(result, tuple) or len(result) != len(out):
            raise TypeError(f"{name}(): out= takes {len(out)} tensors for this call's results")
        for o, r in zip(out, result):
            write_out(o, r, name)
        return out
    if not isinstance(out, TensorBase):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if _mode.enabled and (out.requires_grad or getattr(result, "requires_grad", False)):
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    if S.category(result.dtype) > S.category(out.dtype):
        raise RuntimeError(
            f"result type {result.dtype} can't be cast to the desired output type {out.dtype}"
        )
    src = result.to(out.dtype)
    if src is result:  # result may be a tensor the caller still holds: out gets its own handle
        src = result._alias()
    take_value(out, src, keep_graph=False)
    return out


#: The largest finite value of each half-precision dtype.
_HALF_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38}


def _wrapped_dtype(other: Any, value: Any) -> str:
    """The dtype of the 0-d tensor that stands for the number ``value`` in ``gt.div(value,
    other)``: the promoted one, unless ``value`` does not fit in it (``gt.div(-2, uint8_t)``,
    ``gt.float_power(2**40, half_t)``) and ``other`` has dimensions, which then decide the
    result's dtype alone: a wider one of the same kind, as PyTorch keeps a wrapped number's value."""
    dt = S.promote_scalar(other.dtype, value)
    if not other.ndim or isinstance(value, bool):
        return dt
    if dt in S.INT_RANGE and isinstance(value, int):
        lo, hi = S.INT_RANGE[dt]
        return dt if lo <= value <= hi else "int64"
    top = _HALF_MAX.get(dt)
    if top is not None and isinstance(value, (int, float)) and abs(value) > top:
        return "float32"
    return dt


def method_function(name: str, doc: str | None = None) -> Callable[..., Any]:
    """The function ``gt.<name>(input, *args, out=None, **kwargs)`` for the method ``name``."""
    scalar_first = name in SCALAR_FIRST

    def fn(input: Any, *args: Any, out: Any = None, **kwargs: Any) -> Any:  # noqa: A002
        if scalar_first and isinstance(input, np.generic):  # (gt.add(np.int32(3), x))
            input = input.item()
        if (
            scalar_first
            and not isinstance(input, TensorBase)
            and isinstance(input, (int, float, complex))
            and args
            and isinstance(args[0], TensorBase)
        ):  # a wrapped number: the tensor operand decides the dtype, as in PyTorch
            other = args[0]
            input = other.new_full((), input, dtype=_wrapped_dtype(other, input))
        elif (
            scalar_first
            and isinstance(input, (bool, int, float, complex))
            and number_tensor is not None
            and not any(isinstance(a, TensorBase) for a in args)
        ):  # two numbers: PyTorch makes the first a tensor (torch.div(16, 2) is tensor(8.))
            input = number_tensor(input)
        result = getattr(input, name)(*args, **kwargs)
        return result if out is None else write_out(out, result, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or f"``gt.{name}(x, ...)`` is ``x.{name}(...)``."
    return fn


def check_strided(layout: Any, op: str) -> None:
    """PyTorch's ``layout=`` of a factory: ``gt.strided`` (the default) is what GT makes."""
    if layout is not None and str(layout).rpartition(".")[2] != "strided":
        raise NotImplementedError(f"{op}: layout={layout} (GT's factories make strided tensors)")


def input_keyword(fn: Any) -> Any:
    """``fn`` (a ``*_like`` factory) that also takes its tensor as ``input=``, PyTorch's name."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not args and "input" in kwargs:
            args = (kwargs.pop("input"),)
        return fn(*args, **kwargs)

    return call


__all__ = [
    "SCALAR_FIRST", "check_strided", "input_keyword", "method_function", "numpy_names",
    "write_out",
]  # fmt: skip


def numpy_names(fn: Any) -> Any:
    """``fn`` (a reduction taking ``dim``/``keepdim``) that also takes NumPy's ``axis`` and
    ``keepdims``, as PyTorch's reductions do."""

    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs and ("axis" in kwargs or "keepdims" in kwargs):
            axis, keepdims = kwargs.pop("axis", None), kwargs.pop("keepdims", None)
            if axis is not None or keepdims is not None:  # (``dim`` may have come by position)
                bound = sig.bind_partial(self, *args, **kwargs)
                if axis is not None:
                    bound.arguments["dim"] = axis
                if keepdims is not None:
                    bound.arguments["keepdim"] = keepdims
                return fn(*bound.args, **bound.kwargs)
        return fn(self, *args, **kwargs)

    # (wrappers that copy a signature, as autocast's marks do, must see the two names too)
    sig = inspect.signature(fn)
    params = [  # (``dim`` may come as ``axis``: not required by name)
        q.replace(default=None) if q.name == "dim" and q.default is q.empty else q
        for q in sig.parameters.values()
    ]
    at = next((i for i, q in enumerate(params) if q.kind is q.VAR_KEYWORD), len(params))
    extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None)
             for n in ("axis", "keepdims") if n not in sig.parameters]  # fmt: skip
    call.__signature__ = sig.replace(parameters=params[:at] + extra + params[at:])  # type: ignore[attr-defined]
    return call
