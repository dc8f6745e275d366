"""Registry entries: the negative log-likelihood of class targets, as PyTorch's ``nll_loss``.

``cross_entropy`` is ``log_softmax`` then this. Composed of tensor ops it was ten instructions
forward and a dozen backward (``ne``, ``where``, ``arange``, an indexed read, casts, products,
sums, an ``index_add`` into zeros ...), each a kernel call of a few microseconds on vectors of a
batch's length: most of a small classifier's loss time. As two primitives (the loss, and its
gradient ``nll_loss_backward``) it is two. Their arithmetic is the composition's, operation for
operation: ``-(x[i, t_i] * w_i)`` summed, over the summed weights for ``mean``.

* ``nll_loss(x [N, C], t [N] int, weight [C] or None)``; attrs ``ignore_index``, ``reduction``
  (``"mean"``, ``"sum"``, ``"none"``). A target outside ``[0, C)`` that is not ``ignore_index``
  raises ``IndexError`` (PyTorch's "Target 5 is out of bounds."); on CuPy that check reads one
  flag back (a stream synchronisation, as indexing's own bounds check).
* ``nll_loss_backward(g, t, weight)``; the same attrs and ``shape`` ``[N, C]``: the gradient with
  respect to ``x``, ``-w_i g / W`` at ``[i, t_i]`` (``W`` the summed weights for ``mean``), zero
  elsewhere. It is linear in ``g``, and its own derivative is ``nll_loss`` of the incoming
  gradient, so second derivatives (``create_graph=True``) work.
"""

from __future__ import annotations

from typing import Any

from gt.runtime.ops.base import Op, Shape, first_dtype

REDUCTIONS = ("mean", "sum", "none")


def _check_attrs(at: Any) -> tuple[int, str]:
    """``(ignore_index, reduction)``, checked where they enter the worker."""
    ii = at.get("ignore_index") if type(at) is dict else None
    red = at.get("reduction") if type(at) is dict else None
    if type(ii) is not int or red not in REDUCTIONS:
        raise ValueError(f"nll_loss takes an int ignore_index and a reduction in {REDUCTIONS}")
    return ii, red


def _loss_shape(shapes: list, attrs: Any) -> Shape:
    return (shapes[0][0],) if attrs.get("reduction") == "none" else ()


def _grad_shape(shapes: list, attrs: Any) -> Shape:
    return tuple(attrs["shape"])


def _weights(xp: Any, t: Any, w: Any, c: int, ii: int, dtype: Any,
             check: bool = True) -> tuple[Any, Any]:  # fmt: skip
    """``(safe, wt)``: targets with ignored ones as class 0, and each target's weight (0 where
    ignored). Raises IndexError for a target outside ``[0, c)`` (with ``check``: reading
    the answer waits for the device)."""
    keep = t != ii
    safe = xp.where(keep, t, 0)
    if check:
        bad = (safe < 0) | (safe >= c)
        if bool(bad.any()):
            raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds.")
    wt = keep.astype(dtype) if w is None else w[safe] * keep
    return safe, wt


def _k_nll(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x, t, w = v
        ii, red = _check_attrs(at)
        n, c = x.shape
        safe, wt = _weights(xp, t, w, c, ii, x.dtype)
        loss = -(x[xp.arange(n), safe] * wt)
        if red == "none":
            return loss
        total = loss.sum()
        return total if red == "sum" else total / wt.sum()

    return h


def _k_nll_backward(be: Any) -> Any:
    xp = be.xp
    # the forward checked these targets; on a GPU a second check would wait for the device again
    # every step (NumPy's own check costs nothing: kept there)
    check = be.name == "numpy"

    def h(v: list, at: Any) -> Any:
        g, t, w = v
        ii, red = _check_attrs(at)
        n, c = at["shape"]
        safe, wt = _weights(xp, t, w, c, ii, g.dtype, check)
        scale = g / wt.sum() if red == "mean" else g
        vals = xp.where(wt != 0, -(wt * scale), 0)  # (+0.0 in ignored rows, as PyTorch)
        out = xp.zeros((n, c), g.dtype)
        out[xp.arange(n), safe] = vals
        return out

    return h


def _saves(ins: tuple, out: Any) -> tuple:
    return tuple(a for a in ins[1:] if a is not None)


def _parts(n: Any) -> tuple[Any, Any, dict]:
    t = n.saved[0]
    w = n.saved[1] if len(n.saved) > 1 else None
    return t, w, {"ignore_index": n.attrs["ignore_index"], "reduction": n.attrs["reduction"]}


def _d_nll(n: Any, g: Any) -> tuple:
    t, w, at = _parts(n)
    gx = g._apply("nll_loss_backward", [g, t, w], {**at, "shape": list(n.shapes[0])})
    return gx, None, None


def _d_nll_backward(n: Any, gg: Any) -> tuple:
    t, w, at = _parts(n)
    return gg._apply("nll_loss", [gg, t, w], at), None, None


ENTRIES: list[Op] = [
    Op(
        "nll_loss",
        155,
        arity=3,
        shape=_loss_shape,
        dtype=first_dtype,
        kernel=_k_nll,
        grad=_d_nll,
        saves=_saves,
        doc="-x[i, t_i] w_i, summed (over the summed weights for mean); PyTorch's nll_loss",
    ),
    Op(
        "nll_loss_backward",
        156,
        arity=3,
        shape=_grad_shape,
        dtype=first_dtype,
        kernel=_k_nll_backward,
        grad=_d_nll_backward,
        saves=_saves,
        doc="nll_loss's gradient with respect to x: -w_i g / W at [i, t_i]",
    ),
]
