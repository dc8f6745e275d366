"""Module-level spellings of tensor methods: ``gt.exp(x)``, ``gt.sum(x, dim=1)``, ``gt.cat(...)``.

Each function calls the method of the same name on its first argument, so the two spellings can
never disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gt import shapes as S
from gt.grad_graph import label, labels
from gt.ops.autocast import autocast_op
from gt.ops.base import is_tensor
from gt.ops.einsum import einsum
from gt.ops.functions import method_function, write_out
from gt.ops.mathops import where_or_nonzero as where
from gt.ops.search import bucketize, searchsorted
from gt.ops.shaping import cat as _cat
from gt.ops.shaping import stack as _stack
from gt.ops.typeinfo import Size
from gt.runtime import ops as O

# ruff: noqa: A001 - PyTorch's names shadow builtins here on purpose


def _method(name: str) -> Callable[..., Any]:
    return method_function(name)


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


def split(tensor: Any, split_size_or_sections: Any, dim: int = 0) -> tuple:
    """``gt.split(x, sizes, dim)`` is ``x.split(sizes, dim)`` (PyTorch's keyword names)."""
    return tensor.split(split_size_or_sections, dim)


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
logical_xor = _method("logical_xor")
bitwise_and = _method("bitwise_and")
bitwise_or = _method("bitwise_or")
bitwise_xor = _method("bitwise_xor")
bitwise_not = _method("bitwise_not")
bitwise_left_shift = _method("bitwise_left_shift")
bitwise_right_shift = _method("bitwise_right_shift")
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

floor = _method("floor")
ceil = _method("ceil")
round = _method("round")
trunc = _method("trunc")
fix = _method("fix")
frac = _method("frac")
log2 = _method("log2")
log10 = _method("log10")
exp2 = _method("exp2")
sinh = _method("sinh")
cosh = _method("cosh")
tan = _method("tan")
logaddexp = _method("logaddexp")
logit = _method("logit")
isnan = _method("isnan")
isinf = _method("isinf")
isfinite = _method("isfinite")
isclose = _method("isclose")
allclose = _method("allclose")
equal = _method("equal")
lerp = _method("lerp")
addcmul = _method("addcmul")
addcdiv = _method("addcdiv")
addmm = _method("addmm")
outer = _method("outer")
ger = _method("ger")
dot = _method("dot")
diag = _method("diag")
diagonal = _method("diagonal")
trace = _method("trace")
sort = _method("sort")
argsort = _method("argsort")
msort = _method("msort")
topk = _method("topk")
kthvalue = _method("kthvalue")
median = _method("median")
prod = _method("prod")
cumprod = _method("cumprod")
roll = _method("roll")


def repeat_interleave(input: Any, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Any:  # fmt: skip
    """Repeat each element of ``input`` ``repeats`` times along ``dim`` (see
    :meth:`Tensor.repeat_interleave`); with ``input`` alone, a 1-d tensor of counts, the indices
    ``0 .. len-1`` each repeated its count (PyTorch's one-argument form)."""
    if repeats is None:
        from gt.factories import arange  # noqa: PLC0415 - the factories import the tensor layers

        return arange(input.shape[0], dtype="int64").repeat_interleave(input, 0)
    return input.repeat_interleave(repeats, dim, output_size=output_size)


scatter = _method("scatter")
scatter_add = _method("scatter_add")
scatter_reduce = _method("scatter_reduce")
index_reduce = _method("index_reduce")
index_add = _method("index_add")
index_fill = _method("index_fill")
take_along_dim = _method("take_along_dim")
nonzero = _method("nonzero")
argwhere = _method("argwhere")
count_nonzero = _method("count_nonzero")
masked_select = _method("masked_select")
multinomial = _method("multinomial")
quantile = _method("quantile")
nanquantile = _method("nanquantile")
unique = _method("unique")
is_floating_point = _method("is_floating_point")


def broadcast_tensors(*tensors: Any) -> tuple:
    """The tensors expanded to their common broadcast shape."""
    shape: tuple = ()
    for t in tensors:
        shape = S.broadcast(shape, t.shape, "broadcast_tensors")
    return tuple(t.expand(shape) for t in tensors)


def broadcast_shapes(*shapes: Any) -> Any:
    """The shape (a ``Size``) that ``shapes`` broadcast to."""
    out: tuple = ()
    for s in shapes:
        out = S.broadcast(out, (s,) if isinstance(s, int) else tuple(s), "broadcast_shapes")
    return Size(out)


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple:
    """Coordinate grids from 1-d tensors (``indexing="ij"``, or ``"xy"`` for the first two swapped)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', not {indexing!r}")
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = t.shape[0]
        out.append(t.reshape(view).expand(shape))
    if swap:  # grids made for (y, x, ...): hand them back in the order given
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def _cdist_node(x1: Any, x2: Any, p: float = 2.0,
                compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> str:  # fmt: skip
    """PyTorch's node for ``cdist``'s result (Euclidean distances of more than 25 rows go through
    its matrix-product formula, which ends in a view)."""
    by_mm = compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == "use_mm_for_euclid_dist_if_necessary"
        and (x1.shape[-2] > 25 or x2.shape[-2] > 25)
    )
    return "ViewBackward0" if p == 2 and by_mm else "CdistBackward0"


@autocast_op("cdist")
@labels(_cdist_node)
def cdist(x1: Any, x2: Any, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Any:  # fmt: skip
    """Pairwise ``p``-norm distances between the rows of ``x1`` and ``x2``, from the differences
    (PyTorch's ``donot_use_mm_for_euclid_dist``: exact where its matrix-product shortcut rounds;
    ``compute_mode`` is accepted, and every mode computes this way)."""
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return diff.norm(p, dim=-1)


def tensordot(a: Any, b: Any, dims: Any = 2) -> Any:
    """Sum over the last ``dims`` dimensions of ``a`` and the first of ``b`` (or given lists)."""
    dims = S.as_index(dims)  # (a NumPy int, a 0-d tensor)
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = (list(d) if not isinstance(d, int) else [d] for d in dims)
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    # negative dims count from the end, as in PyTorch (``dims=([-1], [0])`` chains TT cores)
    da = [S.normalize_axis(int(d), a.ndim, "tensordot") for d in da]
    db = [S.normalize_axis(int(d), b.ndim, "tensordot") for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j] and 1 not in (a.shape[i], b.shape[j]):  # (1: summed over)
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {a.shape[i]} in dim "
                f"{i} and second has size {b.shape[j]} in dim {j}"
            )
    letters = "abcdefghijklmnopqrstuvwxyz"
    ta = list(letters[: a.ndim])
    tb = list(letters[a.ndim : a.ndim + b.ndim])
    for i, j in zip(da, db):
        tb[j] = ta[i]
    out = [c for i, c in enumerate(ta) if i not in da] + [
        c for j, c in enumerate(tb) if j not in db
    ]
    out = einsum(f"{''.join(ta)},{''.join(tb)}->{''.join(out)}", a, b)
    return label(out, "ViewBackward0") if out is not a and out is not b else out


def cat(tensors: Any, dim: int = 0, *, axis: int | None = None, out: Any = None) -> Any:
    """Concatenate tensors along an existing dimension (dtypes are promoted; into ``out`` when
    given). Raises ``ShapeError`` for an empty list or shapes that differ outside ``dim``."""
    result = _cat(tensors, dim, axis=axis)
    return result if out is None else write_out(out, result, "cat")


def stack(tensors: Any, dim: int = 0, *, axis: int | None = None, out: Any = None) -> Any:
    """Join tensors of one shape along a new dimension ``dim`` (into ``out`` when given)."""
    result = _stack(tensors, dim, axis=axis)
    return result if out is None else write_out(out, result, "stack")


concatenate = cat
concat = cat

#: Primitives whose registry entries bring their own methods (``x.cumsum(d)``) get the same
#: ``gt.cumsum(x, d)`` spelling here, so a new primitive needs no edit of this module.
_REGISTRY_METHODS = sorted({m for op in O.REGISTRY for m in op.methods})
for _name in _REGISTRY_METHODS:
    globals()[_name] = _method(_name)


def polygamma(n: int, input: Any) -> Any:  # noqa: A002 - PyTorch's name
    """The ``n``-th derivative of ``digamma`` at ``input`` (PyTorch's argument order)."""
    return input.polygamma(n)


def mvlgamma(input: Any, p: int) -> Any:  # noqa: A002 - PyTorch's name
    """The multivariate log-gamma function of dimension ``p`` (:meth:`gt.Tensor.mvlgamma`)."""
    return input.mvlgamma(p)


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
    "broadcast_shapes",
    "broadcast_tensors",
    "cdist",
    "einsum",
    "is_floating_point",
    "meshgrid",
    "tensordot",
    "floor",
    "ceil",
    "round",
    "trunc",
    "fix",
    "frac",
    "log2",
    "log10",
    "exp2",
    "sinh",
    "cosh",
    "tan",
    "logaddexp",
    "logit",
    "isnan",
    "isinf",
    "isfinite",
    "isclose",
    "allclose",
    "equal",
    "lerp",
    "addcmul",
    "addcdiv",
    "addmm",
    "outer",
    "ger",
    "dot",
    "diag",
    "diagonal",
    "trace",
    "sort",
    "argsort",
    "msort",
    "topk",
    "kthvalue",
    "median",
    "prod",
    "cumprod",
    "roll",
    "repeat_interleave",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index_reduce",
    "index_add",
    "index_fill",
    "take_along_dim",
    "nonzero",
    "argwhere",
    "count_nonzero",
    "masked_select",
    "multinomial",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "searchsorted",
    "bucketize",
    "quantile",
    "nanquantile",
    "unique",
    "mvlgamma",
    *_REGISTRY_METHODS,
]
