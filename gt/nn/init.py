"""``gt.nn.init``: in-place initializers with PyTorch's names and formulas.

``generator`` (a ``gt.Generator``) makes an initializer draw on the client from that generator's
seed stream; without it draws come from GT's global stream. The names without the trailing
underscore (``normal``, ``xavier_uniform`` ...) are PyTorch's deprecated aliases: they warn
``FutureWarning`` and call the ``_`` version.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from gt.autograd import no_grad
from gt.ops.random import next_seed
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names


def _fans(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError(
            f"fan in and fan out can not be computed for a tensor with fewer than 2 dimensions (shape {list(t.shape)})"
        )
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    """The fan of ``mode`` (``"fan_in"`` or ``"fan_out"``), PyTorch's private helper."""
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _fans(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _empty_warned(tensor: Tensor) -> bool:
    """Whether ``tensor`` has no elements (then, as PyTorch, a Kaiming init warns, does nothing)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for an activation (``"relu"``, ``"tanh"``, ``"leaky_relu"``, ...)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1  # (an int, as PyTorch's)
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is not None and (isinstance(param, bool) or not isinstance(param, (int, float))):
            raise ValueError(f"negative_slope {param} not a valid number")
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    if nonlinearity in ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
        return 1
    raise ValueError(f"unsupported nonlinearity {nonlinearity!r}")


def _host_rng(generator: Any) -> np.random.Generator:
    """A NumPy generator seeded from GT's seed stream (for initializers drawn on the client)."""
    return np.random.default_rng(next_seed() if generator is None else generator.next_seed())


def _assign(tensor: Tensor, values: np.ndarray) -> Tensor:
    with no_grad():
        return tensor.copy_(values.astype(np.dtype(tensor.dtype)))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Any = None) -> Tensor:  # fmt: skip
    """Fill with samples of the normal distribution of ``mean``/``std`` truncated to ``[a, b]``
    (absolute bounds, as in PyTorch): by its inverse CDF, so bounds far in a tail (or ``a ==
    b``) cost no more than any others, and with PyTorch's warning when the mean is more than 2
    standard deviations outside them."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)  # fmt: skip
    lo, hi = (0.5 * (1.0 + math.erf((v - mean) / (std * math.sqrt(2.0)))) for v in (a, b))
    if lo > hi:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={2 * lo - 1} > to={2 * hi - 1}")  # fmt: skip
    _assign(tensor, _host_rng(generator).uniform(2 * lo - 1, 2 * hi - 1, tensor.shape))
    with no_grad():  # erf^-1 of a uniform draw in (erf(a'), erf(b')) is the truncated normal
        tensor.erfinv_().mul_(std * math.sqrt(2.0)).add_(mean).clamp_(min=a, max=b)
    return tensor


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix scaled by ``gain`` (rows or columns orthonormal)."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:  # (nothing to fill, as PyTorch)
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _host_rng(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _assign(tensor, (gain * q).reshape(tensor.shape))


def eye_(tensor: Tensor) -> Tensor:
    """Fill a matrix with the identity."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _assign(tensor, np.eye(*tensor.shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a convolution weight so the convolution passes its input through (per group)."""
    shape = tensor.shape
    out = np.zeros(shape)
    per = shape[0] // groups
    centre = tuple(k // 2 for k in shape[2:])
    for g in range(groups):
        for d in range(min(per, shape[1])):
            out[(g * per + d, d) + centre] = 1.0
    return _assign(tensor, out)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """Fill with samples uniform in ``[a, b)``."""
    if generator is not None:
        return _assign(tensor, _host_rng(generator).uniform(a, b, tensor.shape))
    with no_grad():
        return tensor.uniform_(a, b)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    """Fill with normal samples."""
    if generator is not None:
        return _assign(tensor, _host_rng(generator).normal(mean, std, tensor.shape))
    with no_grad():
        return tensor.normal_(mean, std)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Glorot uniform: bound ``gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Glorot normal: std ``gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:  # fmt: skip
    """He uniform: bound ``gain * sqrt(3 / fan)``."""
    if _empty_warned(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:  # fmt: skip
    """He normal: std ``gain / sqrt(fan)``."""
    if _empty_warned(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None) -> Tensor:
    """Fill a matrix with normal samples of ``std``, then zero ``ceil(sparsity * rows)``
    randomly chosen elements in every column (Martens, 2010)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros_per_col = math.ceil(sparsity * rows)
    rng = _host_rng(generator)
    out = rng.normal(0.0, std, (rows, cols))
    for c in range(cols):
        out[rng.permutation(rows)[:zeros_per_col], c] = 0.0
    return _assign(tensor, out)


def _make_deprecate(meth: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """PyTorch's deprecated spelling of ``meth`` (its name without the ``_``): warns, then calls
    it."""
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(
            f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.",
            FutureWarning,
            stacklevel=2,
        )
        return meth(*args, **kwargs)

    deprecated_init.__doc__ = f"Deprecated: use :func:`{new_name}` (warns ``FutureWarning``)."
    deprecated_init.__name__ = old_name
    deprecated_init.__qualname__ = old_name
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)


#: PyTorch's private name for ``(fan_in, fan_out)`` (``torch.nn.init._calculate_fan_in_and_fan_out``),
#: which layers' ``reset_parameters`` and user code call.
_calculate_fan_in_and_fan_out = _fans


# PyTorch's private helpers that older timm and other initialisation code call
def _no_grad_uniform_(tensor: Tensor, a: float, b: float, generator: Any = None) -> Tensor:
    return uniform_(tensor, a, b, generator)


def _no_grad_normal_(tensor: Tensor, mean: float, std: float, generator: Any = None) -> Tensor:
    return normal_(tensor, mean, std, generator)


def _no_grad_trunc_normal_(tensor: Tensor, mean: float, std: float, a: float, b: float,
                           generator: Any = None) -> Tensor:  # fmt: skip
    return trunc_normal_(tensor, mean, std, a, b, generator)


def _no_grad_fill_(tensor: Tensor, val: float) -> Tensor:
    return constant_(tensor, val)


def _no_grad_zero_(tensor: Tensor) -> Tensor:
    return zeros_(tensor)
