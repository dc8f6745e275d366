"""Registry entries: sliding windows (``im2col``) and their adjoint (``col2im``).

``im2col`` is PyTorch's ``F.unfold``: ``[N, C, H, W]`` becomes ``[N, C*kh*kw, L]``, one column per
window position, so a convolution is one matmul and a pooling one reduction (``gt.nn.functional``
composes them). ``col2im`` is ``F.fold``, which adds every column back into its window; each is the
other's derivative. Attributes (all pairs): ``kernel``, ``dilation``, ``padding``, ``stride``;
``im2col`` takes ``pad_value`` (``-inf`` for max pooling), ``col2im`` the ``output_size``.

The kernels loop over the ``kh*kw`` window offsets and move whole strided slices, so the work per
offset is one vectorised copy on NumPy or CuPy.
"""

from __future__ import annotations

from typing import Any

from gt.errors import ShapeError
from gt.runtime.ops.base import Op, Shape, first_dtype


def out_size(size: int, k: int, d: int, p: int, s: int) -> int:
    """Number of window positions along one spatial dimension."""
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _geometry(at: Any) -> tuple[tuple[int, int], ...]:
    return tuple(tuple(int(v) for v in at[k]) for k in ("kernel", "dilation", "padding", "stride"))


def _im2col_shape(shapes: list, attrs: Any) -> Shape:
    shape = shapes[0]
    if len(shape) != 4:
        raise ShapeError(f"im2col: expected a 4-d input [N, C, H, W], got shape {list(shape)}")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _geometry(attrs)
    n, c, h, w = shape
    oh, ow = out_size(h, kh, dh, ph, sh), out_size(w, kw, dw, pw, sw)
    if oh <= 0 or ow <= 0:
        raise ShapeError(
            f"im2col: a kernel of {kh}x{kw} (dilation {dh}x{dw}, padding {ph}x{pw}) does not fit "
            f"an input of {h}x{w}"
        )
    return (n, c * kh * kw, oh * ow)


def _col2im_shape(shapes: list, attrs: Any) -> Shape:
    shape = shapes[0]
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _geometry(attrs)
    h, w = (int(v) for v in attrs["output_size"])
    oh, ow = out_size(h, kh, dh, ph, sh), out_size(w, kw, dw, pw, sw)
    if len(shape) != 3 or shape[1] % (kh * kw) or shape[2] != oh * ow:
        raise ShapeError(
            f"col2im: expected an input [N, C*{kh * kw}, {oh * ow}] for output size {[h, w]}, "
            f"got shape {list(shape)}"
        )
    return (shape[0], shape[1] // (kh * kw), h, w)


def _windows(h: int, w: int, at: Any) -> Any:
    """Per window offset ``(i, j)``: the slices of the padded input that it reads."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _geometry(at)
    oh, ow = out_size(h, kh, dh, ph, sh), out_size(w, kw, dw, pw, sw)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            yield i, j, rows, cols


def _k_im2col(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        n, c, hh, ww = x.shape
        (kh, kw), _, (ph, pw), _ = _geometry(at)
        if ph or pw:
            padded = xp.full((n, c, hh + 2 * ph, ww + 2 * pw), at.get("pad_value", 0.0), x.dtype)
            padded[:, :, ph : ph + hh, pw : pw + ww] = x
        else:
            padded = x
        _, _, oh_ow = _im2col_shape([x.shape], at)
        cols = None
        for i, j, rows, cs in _windows(hh, ww, at):
            part = padded[:, :, rows, cs]
            if cols is None:
                cols = xp.empty((n, c, kh, kw) + part.shape[2:], dtype=x.dtype)
            cols[:, :, i, j] = part
        return cols.reshape(n, c * kh * kw, oh_ow)

    return h


def _k_col2im(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _geometry(at)
        hh, ww = (int(s) for s in at["output_size"])
        n, ckk, _ = x.shape
        c = ckk // (kh * kw)
        oh, ow = out_size(hh, kh, dh, ph, sh), out_size(ww, kw, dw, pw, sw)
        cols = x.reshape(n, c, kh, kw, oh, ow)
        out = xp.zeros((n, c, hh + 2 * ph, ww + 2 * pw), dtype=x.dtype)
        for i, j, rows, cs in _windows(hh, ww, at):
            out[:, :, rows, cs] += cols[:, :, i, j]
        return xp.ascontiguousarray(out[:, :, ph : ph + hh, pw : pw + ww])

    return h


def _geometry_attrs(at: Any) -> dict:
    return {k: at[k] for k in ("kernel", "dilation", "padding", "stride")}


def _d_im2col(n: Any, g: Any) -> tuple:
    attrs = {**_geometry_attrs(n.attrs), "output_size": list(n.shapes[0][2:])}
    return (g._apply("col2im", [g], attrs),)


def _d_col2im(n: Any, g: Any) -> tuple:
    return (g._apply("im2col", [g], _geometry_attrs(n.attrs)),)


ENTRIES: list[Op] = [
    Op(
        "im2col",
        79,
        shape=_im2col_shape,
        dtype=first_dtype,
        kernel=_k_im2col,
        grad=_d_im2col,
        doc="sliding windows of [N, C, H, W] as columns [N, C*kh*kw, L] (F.unfold)",
    ),
    Op(
        "col2im",
        80,
        shape=_col2im_shape,
        dtype=first_dtype,
        kernel=_k_col2im,
        grad=_d_col2im,
        doc="columns [N, C*kh*kw, L] summed back into [N, C, H, W] (F.fold)",
    ),
]
