"""Registry entries: ``pad`` in the border modes as one op each way.

``pad_border`` pads the last ``len(attrs.pads)`` dimensions of ``x`` by ``attrs.pads`` (one
``[before, after]`` pair per dimension, first padded dimension first, none negative) in
``attrs.mode``: ``"reflect"`` (PyTorch's reflection, the edge not repeated), ``"replicate"``
(the edge repeated) or ``"circular"`` (wrapping around, at most once). ``pad_border_backward``
takes the gradient of the padded result and returns ``x``'s: each border element's gradient is
added to the element it copies. The two are each other's adjoints, so each one's derivative is
the other.

Composed of border gathers and a ``cat`` per dimension, a reflection pad made two full copies
forward and about ten full-size passes back; ``pad_border`` is one copy of the body (``np.pad``,
which fills the borders by slices), its backward one copy of the body per padded dimension and
additions of the borders. Of [16, 64, 56, 56] by one on each side, through GT: 3.8-4.7 ms
forward before, 2.3-2.9 after (PyTorch 1.4-1.7); with backward 17-19 ms before, 7.0-7.9 after
(PyTorch 8.9-15).
"""

from __future__ import annotations

from typing import Any

from gt.errors import ShapeError
from gt.runtime.ops.base import Op, Shape, first_dtype

#: PyTorch's border modes and NumPy's (and CuPy's) names for them.
NUMPY_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pads(shapes: list, attrs: Any, grow: int) -> Shape:
    shape = list(shapes[0])
    pads = attrs["pads"]
    if len(pads) > len(shape):
        raise ShapeError(f"pad: {len(pads)} padded dimensions for a {len(shape)}-d tensor")
    first = len(shape) - len(pads)
    for d, (before, after) in enumerate(pads, start=first):
        shape[d] += grow * (before + after)
        if shape[d] < 0 or before < 0 or after < 0:
            raise ShapeError(f"pad: bad padding {pads} for shape {list(shapes[0])}")
    return tuple(shape)


def _k_pad_border(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        pads = at["pads"]
        widths = [(0, 0)] * (x.ndim - len(pads)) + [tuple(p) for p in pads]
        return xp.pad(x, widths, mode=NUMPY_MODES[at["mode"]])

    return h


def _fold(xp: Any, g: Any, axis: int, before: int, after: int, mode: str) -> Any:
    """``g`` along ``axis`` with the ``before`` and ``after`` border gradients added into the
    elements they copied (the body, a new array)."""
    n = g.shape[axis] - before - after

    def at(start: int, stop: int) -> tuple:
        return (slice(None),) * axis + (slice(start, stop),)

    out = g[at(before, before + n)].copy()
    if before:
        head = g[at(0, before)]
        if mode == "reflect":  # out[1..before] gets head reversed
            out[at(1, before + 1)] += xp.flip(head, axis)
        elif mode == "replicate":  # (slice by slice: a sum over a short last axis crawls)
            for k in range(before):
                out[at(0, 1)] += head[at(k, k + 1)]
        else:  # circular: the head copied the body's last ``before``
            out[at(n - before, n)] += head
    if after:
        tail = g[at(before + n, before + n + after)]
        if mode == "reflect":  # out[n-1-after .. n-2] gets tail reversed
            out[at(n - 1 - after, n - 1)] += xp.flip(tail, axis)
        elif mode == "replicate":
            for k in range(after):
                out[at(n - 1, n)] += tail[at(k, k + 1)]
        else:
            out[at(0, after)] += tail
    return out


def _k_pad_border_backward(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        g = v[0]
        pads, mode = at["pads"], at["mode"]
        first = g.ndim - len(pads)
        for d in reversed(range(len(pads))):  # (the last dimension first, as the forward)
            before, after = pads[d]
            if before or after:
                g = _fold(xp, g, first + d, before, after, mode)
        return g if g is not v[0] else g.copy()

    return h


ENTRIES = [
    Op(
        "pad_border",
        183,
        shape=lambda shapes, attrs: _pads(shapes, attrs, 1),
        dtype=first_dtype,
        kernel=_k_pad_border,
        grad=lambda n, g: (g._apply("pad_border_backward", [g], n.attrs),),
        doc="x padded by attrs.pads in attrs.mode (reflect, replicate, circular)",
    ),  # fmt: skip
    Op(
        "pad_border_backward",
        184,
        shape=lambda shapes, attrs: _pads(shapes, attrs, -1),
        dtype=first_dtype,
        kernel=_k_pad_border_backward,
        grad=lambda n, g: (g._apply("pad_border", [g], n.attrs),),
        doc="x's gradient through pad_border, given the padded result's",
    ),  # fmt: skip
]
