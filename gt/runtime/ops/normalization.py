"""Registry entries: the core of ``layer_norm`` and ``group_norm`` as one op each way.

``normalize`` takes a real floating tensor and returns ``(x - mean) / sqrt(var + eps)`` along
``attrs["axis"]`` (the biased variance); ``normalize_backward`` takes the gradient of that result
and ``x`` and returns ``x``'s gradient. Composed of primitives, a layer norm cost 12 instructions
forward and about 20 back: on small tensors that per-instruction cost was most of the time (a
``[8, 16, 256]`` layer norm with its backward took 1.0-1.5 ms, 0.45-0.58 ms now); on large ones
the memory passes are what they were, now in one handler each way.

The forward kernel rounds as the composition it replaces, op for op (``sum / n`` means; with
``attrs["shift"]``, the mean of :func:`gt.ops.reduce.centered`, which keeps a constant row's
deviations exactly 0), so results are what GT gave before, bit for bit. The backward kernel
recomputes the statistics from ``x`` (an op has one output, so the forward cannot hand them on)
and applies ``rstd * (g - mean(g) - xhat * mean(g * xhat))``.
"""

from __future__ import annotations

from typing import Any

from gt.runtime.ops.base import Op, equal_shapes, first_dtype, same_shape


def _moments(xp: Any, x: Any, axis: int, eps: float, shift: bool) -> tuple[Any, Any]:
    """``x``'s deviations from its mean along ``axis`` (a new array) and ``1 / sqrt(var + eps)``
    (kept dims), rounded as the composition ``layer_norm``/``group_norm`` were built from."""
    n = x.shape[axis]
    if shift:  # (centered(): the data summed less their first element)
        first = xp.take(x, [0], axis=axis)
        d = x - first
        mu = first + xp.sum(d, axis=axis, keepdims=True) / n
        xp.subtract(x, mu, out=d)
    else:
        d = x - xp.sum(x, axis=axis, keepdims=True) / n
    sq = d * d
    var = xp.sum(sq, axis=axis, keepdims=True) / n
    return d, 1.0 / xp.sqrt(var + eps)


def _k_normalize(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        d, rstd = _moments(xp, v[0], at["axis"], at["eps"], at.get("shift", False))
        d *= rstd
        return d

    return h


def _k_normalize_backward(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        g, x = v
        axis = at["axis"]
        n = x.shape[axis]
        xhat, rstd = _moments(xp, x, axis, at["eps"], at.get("shift", False))
        xhat *= rstd
        mean_g = xp.sum(g, axis=axis, keepdims=True) / n
        t = g * xhat
        mean_gx = xp.sum(t, axis=axis, keepdims=True) / n
        xp.multiply(xhat, mean_gx, out=xhat)
        xp.subtract(g, mean_g, out=t)
        t -= xhat
        t *= rstd
        return t

    return h


def _d_normalize(n: Any, g: Any) -> tuple:
    """The derivative, composed of differentiable ops (a recorded backward differentiates it
    again); the client sends ``normalize_backward`` instead when nothing records it."""
    (x,) = n.saved
    return (normalize_grad(g, x, n.attrs),)


def normalize_grad(g: Any, x: Any, attrs: dict) -> Any:
    """``x``'s gradient given the gradient ``g`` of ``normalize(x)``, as differentiable ops."""
    axis = attrs["axis"]
    d = x - x.mean(axis, keepdims=True)
    rstd = ((d * d).mean(axis, keepdims=True) + attrs["eps"]).rsqrt()
    xhat = d * rstd
    inner = g - g.mean(axis, keepdims=True) - xhat * (g * xhat).mean(axis, keepdims=True)
    return inner * rstd


ENTRIES = [
    Op(
        "normalize",
        179,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_normalize,
        grad=_d_normalize,
        saves="inputs",
        shard="along_axis",
        doc="(x - mean) / sqrt(var + eps) along attrs.axis (layer_norm's and group_norm's core)",
    ),  # fmt: skip
    Op(
        "normalize_backward",
        180,
        arity=2,
        shape=equal_shapes("normalize_backward"),
        dtype=first_dtype,
        kernel=_k_normalize_backward,
        shard="along_axis",
        doc="x's gradient through normalize, given the result's gradient and x",
    ),  # fmt: skip
]
