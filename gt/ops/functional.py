"""Module-level spellings of tensor methods: ``gt.exp(x)``, ``gt.sum(x, dim=1)``, ``gt.cat(...)``.

Each function calls the method of the same name on its first argument, so the two spellings can
never disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gt.ops.arith import where
from gt.ops.base import is_tensor
from gt.ops.shaping import cat, stack
from gt.runtime import ops as O

# ruff: noqa: A001 - PyTorch's names shadow builtins here on purpose


def _method(name: str) -> Callable[..., Any]:
    def fn(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002 - PyTorch's name
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``gt.{name}(x, ...)`` is ``x.{name}(...)``."
    return fn


abs = _method("abs")
exp = _method("exp")
log = _method("log")
log1p = _method("log1p")
expm1 = _method("expm1")
sqrt = _method("sqrt")
rsqrt = _method("rsqrt")
sin = _method("sin")
cos = _method("cos")
tanh = _method("tanh")
sigmoid = _method("sigmoid")
relu = _method("relu")
erf = _method("erf")
sign = _method("sign")
square = _method("square")
reciprocal = _method("reciprocal")
neg = _method("neg")
clamp = _method("clamp")
clip = _method("clip")
maximum = _method("maximum")
minimum = _method("minimum")
matmul = _method("matmul")
mm = _method("mm")
bmm = _method("bmm")
sum = _method("sum")
mean = _method("mean")
max = _method("max")
min = _method("min")
amax = _method("amax")
amin = _method("amin")
var = _method("var")
std = _method("std")
norm = _method("norm")
argmax = _method("argmax")
argmin = _method("argmin")
softmax = _method("softmax")
log_softmax = _method("log_softmax")
logsumexp = _method("logsumexp")
reshape = _method("reshape")
flatten = _method("flatten")
unflatten = _method("unflatten")
squeeze = _method("squeeze")
unsqueeze = _method("unsqueeze")
transpose = _method("transpose")
swapaxes = _method("swapaxes")
permute = _method("permute")
t = _method("t")
expand = _method("expand")
broadcast_to = _method("broadcast_to")
repeat = _method("repeat")
split = _method("split")
chunk = _method("chunk")
unbind = _method("unbind")
narrow = _method("narrow")
add = _method("add")
sub = _method("sub")
mul = _method("mul")
div = _method("div")
pow = _method("pow")
eq = _method("eq")
ne = _method("ne")
lt = _method("lt")
le = _method("le")
gt = _method("gt")
ge = _method("ge")
logical_not = _method("logical_not")
logical_and = _method("logical_and")
logical_or = _method("logical_or")
any = _method("any")
all = _method("all")
detach = _method("detach")
clone = _method("clone")
numel = _method("numel")
index_select = _method("index_select")
gather = _method("gather")
flip = _method("flip")
masked_fill = _method("masked_fill")
tril = _method("tril")
triu = _method("triu")

concatenate = cat
concat = cat

#: Primitives whose registry entries bring their own methods (``x.cumsum(d)``) get the same
#: ``gt.cumsum(x, d)`` spelling here, so a new primitive needs no edit of this module.
_REGISTRY_METHODS = sorted({m for op in O.REGISTRY for m in op.methods})
for _name in _REGISTRY_METHODS:
    globals()[_name] = _method(_name)

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
    "flip",
    "gather",
    "ge",
    "gt",
    "index_select",
    "is_tensor",
    "le",
    "log",
    "log1p",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logsumexp",
    "lt",
    "masked_fill",
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
    "tril",
    "triu",
    "unbind",
    "unflatten",
    "unsqueeze",
    "var",
    "where",
    *_REGISTRY_METHODS,
]
