"""``torch.<name>`` functions with ATen's own signatures that library code calls directly: the
recurrent cells (``torch.lstm_cell`` ...), ``convolution``, ``grid_sampler`` and
``affine_grid_generator`` with integer modes, the feature and alpha dropouts, ``binomial``,
``histogramdd``, ``segment_reduce``, the older ``triangular_solve``, and the randomised
``svd_lowrank``/``pca_lowrank`` (Halko, Martinsson and Tropp's range finder, as PyTorch's; the
random matrix comes from GT's generator, so only a rank-``q`` matrix gives PyTorch's results
exactly, up to signs). Imported by :mod:`gt._api` only."""

from __future__ import annotations

import math
from typing import Any

from gt import linalg as _linalg
from gt.nn import functional as F
from gt.runtime.ops import return_types
from gt.torch_functions import bin_edges, bin_index

_builtin_range = range  # (histogramdd's argument takes the name)
_GRID_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def rnn_tanh_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None,  # noqa: A002
                  b_hh: Any = None) -> Any:  # fmt: skip
    """``tanh(input W_ih^T + b_ih + hx W_hh^T + b_hh)``."""
    return (F.linear(input, w_ih, b_ih) + F.linear(hx, w_hh, b_hh)).tanh()


def rnn_relu_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None,  # noqa: A002
                  b_hh: Any = None) -> Any:  # fmt: skip
    """``relu(input W_ih^T + b_ih + hx W_hh^T + b_hh)``."""
    return (F.linear(input, w_ih, b_ih) + F.linear(hx, w_hh, b_hh)).relu()


def lstm_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None,  # noqa: A002
              b_hh: Any = None) -> tuple[Any, Any]:  # fmt: skip
    """One LSTM step: ``(h, c)`` from ``input`` and ``hx = (h, c)`` (gates in PyTorch's order
    input, forget, cell, output)."""
    h, c = hx
    gates = F.linear(input, w_ih, b_ih) + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, 1)
    c_new = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c_new.tanh(), c_new


def gru_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None,  # noqa: A002
             b_hh: Any = None) -> Any:  # fmt: skip
    """One GRU step (gates in PyTorch's order reset, update, new; the reset gate applied to the
    hidden state's projection, as PyTorch's cell does)."""
    gi, gh = F.linear(input, w_ih, b_ih), F.linear(hx, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r, z = (i_r + h_r).sigmoid(), (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return n + z * (hx - n)


def convolution(input: Any, weight: Any, bias: Any, stride: Any, padding: Any,  # noqa: A002
                dilation: Any, transposed: bool, output_padding: Any, groups: int) -> Any:  # fmt: skip
    """ATen's convolution: ``conv{1,2,3}d`` or ``conv_transpose{1,2,3}d`` by ``input``'s rank."""
    d = input.ndim - 2
    if d not in (1, 2, 3):
        raise ValueError(f"convolution: expected a 3-, 4- or 5-d input, not {input.ndim}-d")
    if transposed:
        fn = getattr(F, f"conv_transpose{d}d")
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return getattr(F, f"conv{d}d")(input, weight, bias, stride, padding, dilation, groups)


def grid_sampler(input: Any, grid: Any, interpolation_mode: int, padding_mode: int,  # noqa: A002
                 align_corners: bool) -> Any:  # fmt: skip
    """``F.grid_sample`` with ATen's integer modes (0 bilinear, 1 nearest, 2 bicubic; padding 0
    zeros, 1 border, 2 reflection)."""
    return F.grid_sample(input, grid, mode=_GRID_MODES[int(interpolation_mode)],
                         padding_mode=_GRID_PADDING[int(padding_mode)],
                         align_corners=bool(align_corners))  # fmt: skip


def affine_grid_generator(theta: Any, size: Any, align_corners: bool) -> Any:
    """``F.affine_grid(theta, size, align_corners)``."""
    return F.affine_grid(theta, list(size), align_corners=bool(align_corners))


def feature_dropout(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """Zero whole channels (dimension 1) with probability ``p`` in training, scaling the rest."""
    if not train or p == 0:
        return input
    keep = input.new_empty(tuple(input.shape[:2]) + (1,) * (input.ndim - 2)).bernoulli_(1 - p)
    return input * keep / (1 - p)


def feature_dropout_(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """In-place :func:`feature_dropout`."""
    return input.copy_(feature_dropout(input, p, train)) if train and p else input


def alpha_dropout_(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """In-place ``F.alpha_dropout``."""
    return input.copy_(F.alpha_dropout(input, p, train)) if train and p else input


def feature_alpha_dropout_(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """In-place ``F.feature_alpha_dropout``."""
    return input.copy_(F.feature_alpha_dropout(input, p, train)) if train and p else input


def binomial(count: Any, prob: Any, generator: Any = None) -> Any:
    """Binomial samples: successes in ``count`` trials of probability ``prob`` (elementwise)."""
    from gt.distributions import Binomial  # noqa: PLC0415 - distributions import the tensor

    return Binomial(total_count=count, probs=prob).sample()


HistogramddResult = return_types.histogramdd  # (as PyTorch's torch.return_types)


def histogramdd(input: Any, bins: Any = 10, *, range: Any = None, weight: Any = None,  # noqa: A002
                density: bool = False) -> HistogramddResult:  # fmt: skip
    """The ``D``-dimensional histogram of the points ``input`` (``(..., D)``): ``bins`` an int,
    one int per dimension or one edge tensor per dimension; ``range`` ``[lo0, hi0, lo1, ...]``
    (the data's, one sync point, when not given). Each bin is closed on the left, the last one
    on both sides; points outside are not counted."""
    d = input.shape[-1]
    pts = input.reshape(-1, d)
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    if len(per_dim) != d:
        raise ValueError(f"histogramdd: {len(per_dim)} bin specifications for {d} dimensions")
    if range is None and not all(hasattr(b, "shape") for b in per_dim) and not pts.shape[0]:
        lows, highs = [0.0] * d, [1.0] * d  # (no points: PyTorch's range is [0, 1])
    elif range is None and not all(hasattr(b, "shape") for b in per_dim):
        lows, highs = pts.min(dim=0).values.tolist(), pts.max(dim=0).values.tolist()
    elif range is not None:
        lows, highs = [float(v) for v in range[0::2]], [float(v) for v in range[1::2]]
    edges, flat, inside, size = [], None, None, 1
    for k in reversed(_builtin_range(d)):
        if hasattr(per_dim[k], "shape"):
            e = per_dim[k].to(input.dtype)
        else:
            e = bin_edges(lows[k], highs[k], int(per_dim[k]), input.dtype)
        idx, ok = bin_index(pts[:, k], e)
        flat = idx * size if flat is None else flat + idx * size
        inside = ok if inside is None else inside & ok
        edges.insert(0, e)
        size *= e.shape[0] - 1
    w = inside.to(input.dtype) if weight is None else weight.reshape(-1) * inside.to(input.dtype)
    shape = tuple(e.shape[0] - 1 for e in edges)
    hist = pts.new_zeros((size,)).scatter_add(0, flat, w).reshape(shape)
    if density:
        volume = None
        for k, e in enumerate(edges):
            width = e.diff().reshape([-1 if j == k else 1 for j in _builtin_range(d)])
            volume = width if volume is None else volume * width
        hist = hist / (hist.sum() * volume)
    return HistogramddResult(hist, tuple(edges))


def segment_reduce(data: Any, reduce: str, *, lengths: Any = None, indices: Any = None,
                   offsets: Any = None, axis: int = 0, unsafe: bool = False,
                   initial: Any = None) -> Any:  # fmt: skip
    """Reduce consecutive segments of ``data`` along ``axis`` (``sum mean max min prod``), their
    sizes given by ``lengths`` or ``offsets`` (1-d). An empty segment gives ``initial`` when it
    is given, else the reduction's identity (NaN for ``mean``); ``initial`` takes part in every
    segment. Differentiable as PyTorch's (tied maxima share their gradient)."""
    from gt.factories import arange, tensor  # noqa: PLC0415 - factories import the tensor
    from gt.ops.arith import where  # noqa: PLC0415

    if reduce not in ("sum", "mean", "max", "min", "prod"):
        raise ValueError(
            f"segment_reduce: reduce must be sum, mean, max, min or prod, not {reduce!r}"
        )
    if indices is not None:
        raise NotImplementedError("segment_reduce: indices is not supported (as in PyTorch)")
    if (lengths is None) == (offsets is None):
        raise ValueError("segment_reduce: give exactly one of lengths and offsets")
    sizes = lengths if lengths is not None else offsets.diff()
    sizes = sizes if hasattr(sizes, "shape") else tensor(list(sizes))
    if sizes.ndim != 1:
        raise NotImplementedError("segment_reduce: only 1-d lengths or offsets are supported")
    axis = axis % data.ndim
    n = sizes.shape[0]
    if not unsafe and int(sizes.sum().item()) != data.shape[axis]:
        raise ValueError(f"segment_reduce: the segments cover {int(sizes.sum().item())} entries, "
                         f"not the {data.shape[axis]} of dimension {axis}")  # fmt: skip
    ids = arange(n).repeat_interleave(sizes.to("int64"))
    view = [1] * data.ndim
    view[axis] = -1
    index = ids.reshape(view).expand(tuple(data.shape))
    out_shape = list(data.shape)
    out_shape[axis] = n
    count = sizes.to(data.dtype).reshape(view)
    if reduce in ("sum", "mean"):
        out = data.new_zeros(tuple(out_shape)).scatter_reduce(axis, index, data, "sum")
        if initial is not None:
            out = out + initial
        if reduce == "mean":
            out = out / count
            if initial is not None:
                out = where(count == 0, out.new_full((), float(initial)), out)
        return out
    if reduce == "prod":
        out = data.new_ones(tuple(out_shape)).scatter_reduce(axis, index, data, "prod")
        return out if initial is None else out * initial
    start = _lowest(data) if reduce == "max" else _highest(data)
    out = data.new_full(tuple(out_shape), start)
    out = out.scatter_reduce(axis, index, data, "amax" if reduce == "max" else "amin")
    if initial is None:
        return out
    return out.clamp(min=initial) if reduce == "max" else out.clamp(max=initial)


def _lowest(t: Any) -> Any:
    """The identity of a maximum in ``t``'s dtype."""
    from gt.ops.typeinfo import iinfo  # noqa: PLC0415

    if t.dtype == "bool":
        return False
    return -math.inf if t.is_floating_point() else iinfo(t.dtype).min


def _highest(t: Any) -> Any:
    """The identity of a minimum in ``t``'s dtype."""
    from gt.ops.typeinfo import iinfo  # noqa: PLC0415

    if t.dtype == "bool":
        return True
    return math.inf if t.is_floating_point() else iinfo(t.dtype).max


TriangularSolveResult = return_types.triangular_solve


def triangular_solve(b: Any, A: Any, upper: bool = True, transpose: bool = False,  # noqa: N803
                     unitriangular: bool = False) -> TriangularSolveResult:  # fmt: skip
    """The older ``torch.triangular_solve``: ``X`` with ``op(T) X = b``, ``T`` the upper (or
    lower) triangle of ``A`` (unit diagonal with ``unitriangular``), ``op`` a transpose with
    ``transpose``; returned with a copy of ``A``, as PyTorch does."""
    tri = A.triu() if upper else A.tril()
    if transpose:
        tri, upper = tri.mT, not upper
    x = _linalg.solve_triangular(tri, b, upper=upper, unitriangular=unitriangular)
    return TriangularSolveResult(x, A.clone())


def _range_basis(a: Any, q: int, niter: int) -> Any:
    """An orthonormal basis of (approximately) ``a``'s range: ``q`` columns."""
    r = a.new_empty((a.shape[-1], q)).normal_()
    basis = _linalg.qr(a @ r).Q
    for _ in range(niter):
        basis = _linalg.qr(a.mT @ basis).Q
        basis = _linalg.qr(a @ basis).Q
    return basis


def svd_lowrank(A: Any, q: int | None = 6, niter: int = 2, M: Any = None) -> tuple[Any, Any, Any]:  # noqa: N803
    """``(U, S, V)`` of a rank-``q`` approximation of ``A - M`` (``A ~ U diag(S) V^T``)."""
    q = 6 if q is None else int(q)
    a = A if M is None else A - M
    m, n = a.shape[-2:]
    if m < n or n > q:  # the basis of the transpose keeps the small matrix q wide
        basis = _range_basis(a.mT, q, niter)
        u, s, vh = _linalg.svd(a @ basis, full_matrices=False)
        return u, s, basis @ vh.mT
    basis = _range_basis(a, q, niter)
    u, s, vh = _linalg.svd(basis.mT @ a, full_matrices=False)
    return basis @ u, s, vh.mT


def pca_lowrank(A: Any, q: int | None = None, center: bool = True,  # noqa: N803
                niter: int = 2) -> tuple[Any, Any, Any]:  # fmt: skip
    """Principal components of ``A``'s rows: :func:`svd_lowrank` of the centred matrix
    (``q`` defaults to ``min(6, m, n)``)."""
    m, n = A.shape[-2:]
    q = min(6, m, n) if q is None else int(q)
    a = A - A.mean(dim=-2, keepdim=True) if center else A
    return svd_lowrank(a, q, niter=niter)


__all__ = ["affine_grid_generator", "alpha_dropout_", "binomial", "convolution",
           "feature_alpha_dropout_", "feature_dropout", "feature_dropout_", "grid_sampler",
           "gru_cell", "histogramdd", "lstm_cell", "pca_lowrank", "rnn_relu_cell", "rnn_tanh_cell",
           "segment_reduce", "svd_lowrank", "triangular_solve"]  # fmt: skip


def _tensor_methods() -> None:
    """``b.triangular_solve(A)``: PyTorch's tensors have it as a method."""
    from gt.ops.autocast import mark_methods  # noqa: PLC0415
    from gt.tensor import Tensor  # noqa: PLC0415

    for name, fn in (("triangular_solve", triangular_solve),):
        if name in Tensor.__dict__:
            raise TypeError(f"gt.torch_native would replace Tensor.{name}")
        setattr(Tensor, name, fn)
    mark_methods(Tensor)


_tensor_methods()
