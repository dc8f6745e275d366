"""Module-level spellings of tensor methods: ``gt.exp(x)``, ``gt.sum(x, dim=1)``, ``gt.cat(...)``.

Each function calls the method of the same name on its first argument, so the two spellings can
never disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gt.ops.arith import where
from gt.ops.shaping import cat, stack

if TYPE_CHECKING:
    from gt.tensor import Tensor

# ruff: noqa: A001, A002 - PyTorch's names shadow builtins here on purpose


def abs(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.abs(x, ...)`` is ``x.abs(...)``."""
    return input.abs(*args, **kwargs)


def exp(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.exp(x, ...)`` is ``x.exp(...)``."""
    return input.exp(*args, **kwargs)


def log(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.log(x, ...)`` is ``x.log(...)``."""
    return input.log(*args, **kwargs)


def log1p(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.log1p(x, ...)`` is ``x.log1p(...)``."""
    return input.log1p(*args, **kwargs)


def expm1(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.expm1(x, ...)`` is ``x.expm1(...)``."""
    return input.expm1(*args, **kwargs)


def sqrt(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.sqrt(x, ...)`` is ``x.sqrt(...)``."""
    return input.sqrt(*args, **kwargs)


def rsqrt(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.rsqrt(x, ...)`` is ``x.rsqrt(...)``."""
    return input.rsqrt(*args, **kwargs)


def sin(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.sin(x, ...)`` is ``x.sin(...)``."""
    return input.sin(*args, **kwargs)


def cos(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.cos(x, ...)`` is ``x.cos(...)``."""
    return input.cos(*args, **kwargs)


def tanh(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.tanh(x, ...)`` is ``x.tanh(...)``."""
    return input.tanh(*args, **kwargs)


def sigmoid(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.sigmoid(x, ...)`` is ``x.sigmoid(...)``."""
    return input.sigmoid(*args, **kwargs)


def relu(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.relu(x, ...)`` is ``x.relu(...)``."""
    return input.relu(*args, **kwargs)


def erf(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.erf(x, ...)`` is ``x.erf(...)``."""
    return input.erf(*args, **kwargs)


def sign(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.sign(x, ...)`` is ``x.sign(...)``."""
    return input.sign(*args, **kwargs)


def square(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.square(x, ...)`` is ``x.square(...)``."""
    return input.square(*args, **kwargs)


def reciprocal(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.reciprocal(x, ...)`` is ``x.reciprocal(...)``."""
    return input.reciprocal(*args, **kwargs)


def neg(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.neg(x, ...)`` is ``x.neg(...)``."""
    return input.neg(*args, **kwargs)


def clamp(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.clamp(x, ...)`` is ``x.clamp(...)``."""
    return input.clamp(*args, **kwargs)


def clip(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.clip(x, ...)`` is ``x.clip(...)``."""
    return input.clip(*args, **kwargs)


def maximum(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.maximum(x, ...)`` is ``x.maximum(...)``."""
    return input.maximum(*args, **kwargs)


def minimum(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.minimum(x, ...)`` is ``x.minimum(...)``."""
    return input.minimum(*args, **kwargs)


def matmul(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.matmul(x, ...)`` is ``x.matmul(...)``."""
    return input.matmul(*args, **kwargs)


def mm(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.mm(x, ...)`` is ``x.mm(...)``."""
    return input.mm(*args, **kwargs)


def bmm(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.bmm(x, ...)`` is ``x.bmm(...)``."""
    return input.bmm(*args, **kwargs)


def sum(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.sum(x, ...)`` is ``x.sum(...)``."""
    return input.sum(*args, **kwargs)


def mean(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.mean(x, ...)`` is ``x.mean(...)``."""
    return input.mean(*args, **kwargs)


def max(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.max(x, ...)`` is ``x.max(...)``."""
    return input.max(*args, **kwargs)


def min(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.min(x, ...)`` is ``x.min(...)``."""
    return input.min(*args, **kwargs)


def amax(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.amax(x, ...)`` is ``x.amax(...)``."""
    return input.amax(*args, **kwargs)


def amin(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.amin(x, ...)`` is ``x.amin(...)``."""
    return input.amin(*args, **kwargs)


def var(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.var(x, ...)`` is ``x.var(...)``."""
    return input.var(*args, **kwargs)


def std(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.std(x, ...)`` is ``x.std(...)``."""
    return input.std(*args, **kwargs)


def norm(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.norm(x, ...)`` is ``x.norm(...)``."""
    return input.norm(*args, **kwargs)


def argmax(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.argmax(x, ...)`` is ``x.argmax(...)``."""
    return input.argmax(*args, **kwargs)


def argmin(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.argmin(x, ...)`` is ``x.argmin(...)``."""
    return input.argmin(*args, **kwargs)


def softmax(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.softmax(x, ...)`` is ``x.softmax(...)``."""
    return input.softmax(*args, **kwargs)


def log_softmax(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.log_softmax(x, ...)`` is ``x.log_softmax(...)``."""
    return input.log_softmax(*args, **kwargs)


def logsumexp(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.logsumexp(x, ...)`` is ``x.logsumexp(...)``."""
    return input.logsumexp(*args, **kwargs)


def reshape(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.reshape(x, ...)`` is ``x.reshape(...)``."""
    return input.reshape(*args, **kwargs)


def flatten(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.flatten(x, ...)`` is ``x.flatten(...)``."""
    return input.flatten(*args, **kwargs)


def unflatten(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.unflatten(x, ...)`` is ``x.unflatten(...)``."""
    return input.unflatten(*args, **kwargs)


def squeeze(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.squeeze(x, ...)`` is ``x.squeeze(...)``."""
    return input.squeeze(*args, **kwargs)


def unsqueeze(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.unsqueeze(x, ...)`` is ``x.unsqueeze(...)``."""
    return input.unsqueeze(*args, **kwargs)


def transpose(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.transpose(x, ...)`` is ``x.transpose(...)``."""
    return input.transpose(*args, **kwargs)


def swapaxes(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.swapaxes(x, ...)`` is ``x.swapaxes(...)``."""
    return input.swapaxes(*args, **kwargs)


def permute(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.permute(x, ...)`` is ``x.permute(...)``."""
    return input.permute(*args, **kwargs)


def t(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.t(x, ...)`` is ``x.t(...)``."""
    return input.t(*args, **kwargs)


def expand(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.expand(x, ...)`` is ``x.expand(...)``."""
    return input.expand(*args, **kwargs)


def broadcast_to(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.broadcast_to(x, ...)`` is ``x.broadcast_to(...)``."""
    return input.broadcast_to(*args, **kwargs)


def repeat(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.repeat(x, ...)`` is ``x.repeat(...)``."""
    return input.repeat(*args, **kwargs)


def split(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.split(x, ...)`` is ``x.split(...)``."""
    return input.split(*args, **kwargs)


def chunk(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.chunk(x, ...)`` is ``x.chunk(...)``."""
    return input.chunk(*args, **kwargs)


def unbind(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.unbind(x, ...)`` is ``x.unbind(...)``."""
    return input.unbind(*args, **kwargs)


def narrow(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.narrow(x, ...)`` is ``x.narrow(...)``."""
    return input.narrow(*args, **kwargs)


def add(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.add(x, ...)`` is ``x.add(...)``."""
    return input.add(*args, **kwargs)


def sub(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.sub(x, ...)`` is ``x.sub(...)``."""
    return input.sub(*args, **kwargs)


def mul(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.mul(x, ...)`` is ``x.mul(...)``."""
    return input.mul(*args, **kwargs)


def div(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.div(x, ...)`` is ``x.div(...)``."""
    return input.div(*args, **kwargs)


def pow(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.pow(x, ...)`` is ``x.pow(...)``."""
    return input.pow(*args, **kwargs)


def eq(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.eq(x, ...)`` is ``x.eq(...)``."""
    return input.eq(*args, **kwargs)


def ne(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.ne(x, ...)`` is ``x.ne(...)``."""
    return input.ne(*args, **kwargs)


def lt(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.lt(x, ...)`` is ``x.lt(...)``."""
    return input.lt(*args, **kwargs)


def le(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.le(x, ...)`` is ``x.le(...)``."""
    return input.le(*args, **kwargs)


def gt(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.gt(x, ...)`` is ``x.gt(...)``."""
    return input.gt(*args, **kwargs)


def ge(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.ge(x, ...)`` is ``x.ge(...)``."""
    return input.ge(*args, **kwargs)


def logical_not(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.logical_not(x, ...)`` is ``x.logical_not(...)``."""
    return input.logical_not(*args, **kwargs)


def logical_and(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.logical_and(x, ...)`` is ``x.logical_and(...)``."""
    return input.logical_and(*args, **kwargs)


def logical_or(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.logical_or(x, ...)`` is ``x.logical_or(...)``."""
    return input.logical_or(*args, **kwargs)


def any(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.any(x, ...)`` is ``x.any(...)``."""
    return input.any(*args, **kwargs)


def all(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.all(x, ...)`` is ``x.all(...)``."""
    return input.all(*args, **kwargs)


def detach(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.detach(x, ...)`` is ``x.detach(...)``."""
    return input.detach(*args, **kwargs)


def clone(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.clone(x, ...)`` is ``x.clone(...)``."""
    return input.clone(*args, **kwargs)


def numel(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``gt.numel(x, ...)`` is ``x.numel(...)``."""
    return input.numel(*args, **kwargs)


concatenate = cat
concat = cat

__all__ = [
    "abs",
    "add",
    "all",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "bmm",
    "broadcast_to",
    "cat",
    "chunk",
    "clamp",
    "clip",
    "clone",
    "concat",
    "concatenate",
    "cos",
    "detach",
    "div",
    "eq",
    "erf",
    "exp",
    "expand",
    "expm1",
    "flatten",
    "ge",
    "gt",
    "le",
    "log",
    "log1p",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logsumexp",
    "lt",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mm",
    "mul",
    "narrow",
    "ne",
    "neg",
    "norm",
    "numel",
    "permute",
    "pow",
    "reciprocal",
    "relu",
    "repeat",
    "reshape",
    "rsqrt",
    "sigmoid",
    "sign",
    "sin",
    "softmax",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "std",
    "sub",
    "sum",
    "swapaxes",
    "t",
    "tanh",
    "transpose",
    "unbind",
    "unflatten",
    "unsqueeze",
    "var",
    "where",
]
