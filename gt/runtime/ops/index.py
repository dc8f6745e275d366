"""Registry entries: differentiable scatter.

``scatter_add`` adds ``src`` into a copy of ``x`` at an index key (repeated indices accumulate),
with the same wire keys as ``getitem``. Its derivative is ``g`` for ``x`` and ``g[key]`` for
``src``; ``gt.Tensor.scatter_add``, ``index_add`` and ``scatter_reduce(reduce="sum")`` compose it.
(``index_add``, which backward itself uses, stays non-differentiable.)
"""

from __future__ import annotations

from typing import Any

from gt.runtime.ops.base import Op, first_dtype, same_shape, sum_to
from gt.runtime.ops.shape import _k_index_add


def _d_scatter_add(n: Any, g: Any) -> tuple:
    idx = n.saved
    gx = g if n.needs(0) else None
    gs = None
    if n.needs(1):
        gs = sum_to(g._apply("getitem", [g, *idx], {"key": n.attrs["key"]}), n.shapes[1])
    return (gx, gs) + (None,) * len(idx)


ENTRIES: list[Op] = [
    Op(
        "scatter_add",
        81,
        arity=None,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_index_add,
        grad=_d_scatter_add,
        saves=lambda ins, out: ins[2:],
        doc="x with src added at x[attrs.key], differentiable; index tensors follow src",
    ),
]
