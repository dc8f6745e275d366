"""Registry entries: matrix products, reductions and ops along one axis.

Reductions take ``attrs = {"axis": [axes] | int | None, "keepdims": bool}`` (``None`` attrs: every
axis, no kept dims). Ops along an axis (``softmax``, ``log_softmax``, ``cumsum``) take
``{"axis": int}`` and keep the shape, so a tensor sharded on another axis runs them per shard.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt import shapes as S
from gt.runtime.ops.base import Op, Past, Shape, axis_arg, first_dtype, int64_dtype, sum_to

_F32 = np.dtype(np.float32)
#: Elements of the weight below which the swapped product is no faster (its views cost more).
_SWAP_MIN = 1 << 16


def reduce_axes(attrs: Any, ndim: int) -> tuple[tuple[int, ...] | None, bool]:
    """The normalized axes (``None`` = all) and keepdims of a reduction's attributes."""
    if not attrs:
        return None, False
    axis = attrs.get("axis")
    keep = bool(attrs.get("keepdims", False))
    if axis is None:
        return None, keep
    axes = (axis,) if type(axis) is int else tuple(axis)
    return tuple(sorted({a % max(ndim, 1) for a in axes})), keep


def _reduce_shape(shapes: list, attrs: Any) -> Shape:
    axes, keep = reduce_axes(attrs, len(shapes[0]))
    return S.reduce(shapes[0], axes if shapes[0] else None, keep)


def _sum_dtype(dtypes: list, attrs: Any) -> str:
    if type(attrs) is dict and isinstance(attrs.get("dtype"), str):
        return attrs["dtype"]  # sum(dtype=torch.int16) sums (and wraps) in int16
    d = first_dtype(dtypes, attrs)
    return "int64" if d in ("bool", "int8", "uint8", "int16", "int32", *S.LIMITED_UINTS) else d


def _kept_dims(n: Any) -> tuple[tuple[int, ...] | None, bool, Shape, Shape]:
    """``(axes, keepdims, input shape, the result's shape with reduced axes kept as 1)``."""
    shape = n.shapes[0]
    axes, keep = reduce_axes(n.attrs, len(shape))
    kd = tuple(1 if axes is None or i in axes else d for i, d in enumerate(shape))
    return axes, keep, shape, kd


def _d_sum(n: Any, g: Any) -> tuple:
    axes, keep, shape, kd = _kept_dims(n)
    if not keep and shape:
        g = g.reshape(kd)
    return (g.expand(shape),)


def _d_extreme(n: Any, g: Any) -> tuple:
    """max/min over axes: the gradient is split evenly among the elements equal to the result."""
    axes, keep, shape, kd = _kept_dims(n)
    x, out = n.saved
    mask = (x == out.reshape(kd)).to(g.dtype)
    count = mask.sum(axes, keepdims=True)
    return (g.reshape(kd) * (mask / count),)


def _swaps_last_two(parent: Any) -> bool:
    """Whether an input was made by swapping its last two dimensions (``W.T`` in ``x @ W.T``)."""
    if getattr(parent, "op", None) != "transpose":
        return False
    perm = parent.attrs["perm"]
    k = len(perm)
    return k >= 2 and list(perm[:-2]) == list(range(k - 2)) and list(perm[-2:]) == [k - 1, k - 2]


def _unswapped(parent: Any, t: Any) -> Any:
    """``t.mT``, free when ``t`` was itself made by swapping the last two dimensions of a tensor."""
    # (not when saved_tensors_hooks packed the parent's saved tensors: they are not tensors then)
    if _swaps_last_two(parent) and parent.saved and parent.unpack is None:
        parent.check_versions()
        return parent.saved[0]
    return t.mT


def _d_matmul(n: Any, g: Any) -> tuple:
    # When an input is a transposed view (W.T in Linear), its gradient goes straight to the tensor
    # it was made from, already in that tensor's layout: (a.mT @ g).mT is computed as g.mT @ a. That
    # saves three instructions per layer, and a weight gradient laid out like its weight keeps the
    # optimizer's elementwise updates fast.
    a, b = n.saved
    pa, pb = n.parents
    ga = gb = None
    if n.needs(0):
        if _swaps_last_two(pa):
            ga = Past(sum_to(b @ g.mT, pa.shapes[0]))
        else:
            ga = sum_to(g @ _unswapped(pb, b), n.shapes[0])
    if n.needs(1):
        if _swaps_last_two(pb):
            gb = Past(sum_to(g.mT @ a, pb.shapes[0]))
        else:
            gb = sum_to(_unswapped(pa, a) @ g, n.shapes[1])
    return ga, gb


def matmul_numpy(a: Any, b: Any) -> Any:
    """``a @ b`` on NumPy, with ``x @ W.T`` (a Linear layer's product) computed as ``(W @ x.T).T``
    for float32 when ``x`` has at least 2 and fewer rows than ``W`` and ``W`` is large.

    Both are one GEMM call with the operands swapped and other transpose flags; OpenBLAS packs a
    transposed right operand with a short left one slowly, and the swapped call took 0.5-0.8x the
    time for batches of 8-64 (``benchmarks/bench_cpu_kernels.py``). On Intel CPUs OpenBLAS's
    kernels then form every element as the same dot product in the same order (equal bit for bit);
    on AMD's (Zen) they do not, so the swap is taken only where a probe at first use found the bits
    equal (:func:`_swap_keeps_bits`). The result is a transposed view (an F-ordered array), which
    every kernel reads as it reads any transposed tensor.
    """
    if (
        a.dtype is _F32
        and b.dtype is _F32
        and a.ndim == 2
        and b.ndim == 2
        and 1 < a.shape[0] < b.shape[1]
        and b.size >= _SWAP_MIN
        and b.flags.f_contiguous
        and a.flags.c_contiguous
        and not b.flags.c_contiguous
        and (_SWAP_OK if _SWAP_OK is not None else _swap_keeps_bits())
    ):
        return (b.T @ a.T).T
    if (
        a.ndim == 2
        and b.ndim == 3
        and a.dtype == b.dtype
        and a.dtype.kind == "f"
        and b.shape[0] >= _FOLD_MIN_BATCH
        and a.shape[0] >= 4 * b.shape[1]
        and a.shape[0] * b.shape[0] * b.shape[2] >= _FOLD_MIN_OUT
    ):
        return _folded(a, b)
    return a @ b


#: A weight's transpose times a batch of gradients is folded into one GEMM from this batch size
#: and this many result elements (:func:`_folded`).
_FOLD_MIN_BATCH, _FOLD_MIN_OUT = 4, 1 << 18


def _folded(a: Any, b: Any) -> Any:
    """``a @ b`` for a 2-d ``a [M, K]`` and a batch ``b [N, K, L]`` whose products are much
    larger than ``b`` (a convolution's column gradient, ``W.T @ g``): one GEMM over the batch
    folded into the columns, with the batch innermost. The result is a view ``[N, M, L]`` of an
    ``[M, L, N]`` array, the layout ``col2im`` adds fastest (whole rows of windows times the batch
    per step instead of one window row per sample: 2.4x on a ResNet block's, perf probe Dec 7);
    reordering ``b`` first costs what ``b`` is, a fraction of the result."""
    n, k, length = b.shape
    rows = np.ascontiguousarray(b.transpose(1, 2, 0)).reshape(k, length * n)
    return (a @ rows).reshape(a.shape[0], length, n).transpose(2, 0, 1)


_SWAP_OK: bool | None = None


def _swap_keeps_bits() -> bool:
    """Whether this machine's BLAS gives ``(W @ x.T).T`` the bits of ``x @ W.T`` (probed once, on
    shapes that differ where the kernels differ: some 10 ms)."""
    global _SWAP_OK
    rng = np.random.default_rng(0)
    ok = True
    for rows, inner, out in ((8, 784, 512), (64, 784, 512), (16, 256, 256), (256, 128, 4096)):
        x = rng.standard_normal((rows, inner), dtype=np.float32)
        w = rng.standard_normal((out, inner), dtype=np.float32)
        ok = ok and bool(np.array_equal((w @ x.T).T, x @ w.T))
    _SWAP_OK = ok
    return ok


def _k_matmul(be: Any) -> Any:
    xp = be.xp
    if be.name == "numpy":
        return lambda v, at: matmul_numpy(v[0], v[1])
    return lambda v, at: xp.matmul(v[0], v[1])


def _k_reduce(fn: str) -> Any:
    def make(be: Any) -> Any:
        xp = be.xp
        f = getattr(xp, fn)

        def h(v: list, at: Any) -> Any:
            if at is None:
                return xp.asarray(f(v[0]))
            return xp.asarray(
                f(v[0], axis=axis_arg(at.get("axis")), keepdims=at.get("keepdims", False))
            )

        return h

    return make


def _k_sum(be: Any) -> Any:
    """Sums in ``attrs["dtype"]`` when given (a wrapping int16 sum), else bool and integers
    narrower than int64 in int64 as PyTorch does (NumPy would sum uint8 in uint64)."""
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        dt = at.get("dtype") if at else None
        back = None
        if dt is None:
            if x.dtype.kind in "biu" and x.dtype != xp.int64:
                dt = "int64"
            elif x.dtype.itemsize == 2 and x.dtype.kind in "fV":  # half: float32, rounded once
                dt, back = xp.float32, x.dtype
        if at is None or ("axis" not in at and "keepdims" not in at):
            r = xp.sum(x, dtype=dt)
        else:
            axis, keep = axis_arg(at.get("axis")), at.get("keepdims", False)
            r = xp.sum(x, axis=axis, keepdims=keep, dtype=dt)
        return xp.asarray(r if back is None else r.astype(back))

    return h


def _k_argreduce(fn: str) -> Any:
    def make(be: Any) -> Any:
        xp = be.xp
        f = getattr(xp, fn)

        def h(v: list, at: Any) -> Any:
            at = at or {}
            r = f(v[0], axis=at.get("axis"), keepdims=at.get("keepdims", False))
            return xp.asarray(r).astype(xp.int64, copy=False)

        return h

    return make


def _k_log_softmax(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x, axis = v[0], at["axis"]
        s = x - x.max(axis=axis, keepdims=True)
        return s - xp.log(xp.exp(s).sum(axis=axis, keepdims=True))

    return h


def _k_softmax(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x, axis = v[0], at["axis"]
        # PyTorch's CPU kernel: exp(x - max), then times 1 / sum (one exp, no log: two passes
        # fewer than exp(log_softmax))
        m = x.max(axis=axis, keepdims=True)
        safe = at.get("safe", False)
        if safe:  # (attention's: a row with nothing to attend to, all -inf, gives zeros)
            m[m == -xp.inf] = 0
        e = x - m
        xp.exp(e, out=e)
        r = 1 / e.sum(axis=axis, keepdims=True)
        if safe:
            r[r == xp.inf] = 0
        e *= r
        return e

    return h


def _d_softmax(n: Any, g: Any) -> tuple:
    y = n.saved[0]
    return (y * (g - (g * y).sum(n.attrs["axis"], keepdims=True)),)


def _d_log_softmax(n: Any, g: Any) -> tuple:
    out = n.saved[0]
    return (g - out.exp() * g.sum(n.attrs["axis"], keepdims=True),)


def _same_shape_axis(shapes: list, attrs: Any) -> Shape:
    shape = shapes[0]
    S.normalize_axis(attrs["axis"], len(shape), "axis")
    return shape


# ----------------------------------------------------------------------------- cumsum
def _k_cumsum(be: Any) -> Any:
    xp, cpu = be.xp, be.name == "numpy"

    def h(v: list, at: Any) -> Any:
        x, dt = v[0], at.get("dtype")
        if x.ndim == 0:  # (NumPy's cumsum of a 0-d array is 1-d; the client said 0-d)
            return h([x.reshape(1)], at).reshape(())
        if dt is None and x.dtype.itemsize == 2 and x.dtype.kind in "fV":
            # half: running totals kept in float32, each rounded once (as PyTorch on the CPU)
            return xp.cumsum(x, axis=at["axis"], dtype=xp.float32).astype(x.dtype)
        if cpu and dt is None and x.dtype in (xp.float32, xp.complex64):
            # single: running totals kept in double, each rounded once (as PyTorch on the CPU,
            # whose float32 phase = cumsum(2 pi f0 / sr) does not drift over long signals; its
            # CUDA kernels scan in float, as CuPy's do)
            wide = xp.float64 if x.dtype == xp.float32 else xp.complex128
            return xp.cumsum(x, axis=at["axis"], dtype=wide).astype(x.dtype)
        return xp.cumsum(x, axis=at["axis"], dtype=dt)

    return h


def _d_cumsum(n: Any, g: Any) -> tuple:
    # d(out_j)/d(x_i) = 1 for j >= i: the gradient is g summed from the right, a running sum of
    # the flipped g. (Not the total minus the running sum from the left: with g of a wide range,
    # as a cumsum-and-exp parallel scan gives, that subtraction cancels and keeps only rounding.)
    ax = n.attrs["axis"]
    return (g.flip(ax).cumsum(ax).flip(ax),)


def _cumsum_api(x: Any, dim: int, *, dtype: Any = None) -> Any:
    """Running sums along ``dim`` (integer and bool inputs sum in int64, as in PyTorch)."""
    ax = S.normalize_axis(dim, x.ndim, "cumsum")
    attrs: dict = {"axis": ax}
    if dtype is not None:
        x = x.to(dtype)  # and summed in it: cumsum(dtype=torch.int16) wraps in int16
        if x.dtype not in S.INEXACT_DTYPES and x.dtype != "int64":
            attrs["dtype"] = str.__str__(x.dtype)  # (NumPy would widen small ints)
    elif x.dtype not in S.INEXACT_DTYPES and x.dtype != "int64":
        attrs["dtype"] = "int64"
    return x._apply("cumsum", [x], attrs)


ENTRIES: list[Op] = [
    Op(
        "matmul",
        35,
        arity=2,
        shape=lambda s, a: S.matmul(s[0], s[1]),
        dtype=first_dtype,
        kernel=_k_matmul,
        grad=_d_matmul,
        saves="others",
        shard="matmul",
        doc="a @ b with batch broadcasting (both at least 2-d)",
    ),  # fmt: skip
    Op(
        "sum",
        36,
        shape=_reduce_shape,
        dtype=_sum_dtype,
        kernel=_k_sum,
        grad=_d_sum,
        shard="reduce",
        reduce="sum",
        doc="sum over attrs.axis",
    ),  # fmt: skip
    Op(
        "max",
        37,
        shape=_reduce_shape,
        dtype=first_dtype,
        kernel=_k_reduce("max"),
        grad=_d_extreme,
        saves=lambda ins, out: (ins[0], out._alias()),
        shard="reduce",
        reduce="max",
        doc="largest value over attrs.axis (ties share the gradient)",
    ),  # fmt: skip
    Op(
        "min",
        38,
        shape=_reduce_shape,
        dtype=first_dtype,
        kernel=_k_reduce("min"),
        grad=_d_extreme,
        saves=lambda ins, out: (ins[0], out._alias()),
        shard="reduce",
        reduce="min",
        doc="smallest value over attrs.axis (ties share the gradient)",
    ),  # fmt: skip
    Op(
        "argmax",
        39,
        shape=_reduce_shape,
        dtype=int64_dtype,
        kernel=_k_argreduce("argmax"),
        shard="reduce",
        doc="index of the largest value",
    ),  # fmt: skip
    Op(
        "argmin",
        40,
        shape=_reduce_shape,
        dtype=int64_dtype,
        kernel=_k_argreduce("argmin"),
        shard="reduce",
        doc="index of the smallest value",
    ),  # fmt: skip
    Op(
        "log_softmax",
        65,
        shape=_same_shape_axis,
        dtype=first_dtype,
        kernel=_k_log_softmax,
        grad=_d_log_softmax,
        saves="output",
        shard="along_axis",
        doc="log(softmax(x)) along attrs.axis, stable",
    ),  # fmt: skip
    Op(
        "softmax",
        178,
        shape=_same_shape_axis,
        dtype=first_dtype,
        kernel=_k_softmax,
        grad=_d_softmax,
        saves="output",
        shard="along_axis",
        doc="softmax(x) along attrs.axis: exp(x - max) / sum, stable (attrs.safe: an all -inf row gives 0s)",
    ),  # fmt: skip
    Op(
        "cumsum",
        66,
        shape=_same_shape_axis,
        dtype=first_dtype,
        kernel=_k_cumsum,
        grad=_d_cumsum,
        shard="along_axis",
        methods=("cumsum",),
        api=_cumsum_api,
        doc="running sums along attrs.axis",
    ),  # fmt: skip
]
