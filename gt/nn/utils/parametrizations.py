"""``gt.nn.utils.parametrizations``: ``weight_norm``, ``spectral_norm`` and ``orthogonal`` as
parametrizations (:mod:`gt.nn.utils.parametrize`), with PyTorch's modules, buffers and
``state_dict`` keys:

- ``weight_norm``: ``parametrizations.weight.original0`` (the magnitude ``g``) and ``original1``
  (the direction ``v``); ``weight = g * v / ||v||``.
- ``spectral_norm``: ``parametrizations.weight.original`` and the power-method vectors
  ``parametrizations.weight.0._u`` / ``._v``; ``weight = original / sigma``, with one power
  iteration per access in training mode. ``_u``/``_v`` start from GT's random draws (not
  PyTorch's) refined by 15 power iterations: copy values into them to reproduce a PyTorch run.
- ``orthogonal``: ``"matrix_exp"``, ``"cayley"`` and ``"householder"`` maps, with or without the
  trivialization ``base``. Real dtypes only (GT has no complex tensors).

Not done: PyTorch's hook that loads an old ``weight_norm`` checkpoint (``weight_g``/``weight_v``
keys) into the new layout (GT modules have no load-state-dict hooks).
"""

from __future__ import annotations

from enum import Enum, auto

import numpy as np

from gt import linalg
from gt.autograd import no_grad
from gt.factories import eye, randn, tensor
from gt.nn.module import Module
from gt.nn.utils import parametrize
from gt.nn.utils.spectral_norm import default_dim, normalize
from gt.nn.utils.weight_norm import _weight_norm, norm_except_dim
from gt.ops.shaping import cat
from gt.tensor import Tensor

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ---------------------------------------------------------------------------------- orthogonal
def _is_orthogonal(q: Tensor) -> bool:
    """Whether the columns of every matrix of ``q`` are orthonormal (one sync point)."""
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * float(np.finfo(np.dtype(q.dtype)).eps)
    gram = (q.mT @ q)._host()
    return bool(np.allclose(gram, np.eye(k), atol=eps))


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q factor of ``a = QR`` (``a`` tall) with ``diag(R) >= 0``."""
    q, r = linalg.qr(a)
    return q * r.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


def _geqrf_host(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LAPACK's ``geqrf`` of each matrix of ``a`` (``m >= n``): R above the diagonal, the
    Householder vectors below, and their ``tau``."""
    a = np.array(a, dtype=np.float64, copy=True)
    *batch, m, n = a.shape
    flat = a.reshape(-1, m, n)
    taus = np.zeros((flat.shape[0], min(m, n)))
    for b in range(flat.shape[0]):
        x = flat[b]
        for j in range(min(m, n)):
            alpha, rest = x[j, j], x[j + 1 :, j]
            xnorm = np.linalg.norm(rest)
            if xnorm == 0.0:
                continue  # tau 0: H is the identity
            beta = -np.copysign(np.hypot(alpha, xnorm), alpha)
            taus[b, j] = (beta - alpha) / beta
            v = np.concatenate([[1.0], rest / (alpha - beta)])
            x[j + 1 :, j] = v[1:]
            x[j, j] = beta
            tail = x[j:, j + 1 :]
            tail -= taus[b, j] * np.outer(v, v @ tail)
    return flat.reshape(a.shape), taus.reshape(*batch, min(m, n))


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *,
                 use_trivialization: bool = True):  # fmt: skip
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def _trivialized(self) -> bool:
        return "base" in self._buffers

    def forward(self, X: Tensor) -> Tensor:  # noqa: N803 - PyTorch's name
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                pad = X.new_zeros(n, n - k).expand(*X.shape[:-2], n, n - k)
                X = cat([X, pad], dim=-1)
            A = X - X.mT
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = linalg.matrix_exp(A)
            else:
                ident = eye(n, dtype=A.dtype)
                Q = linalg.solve(ident - A * 0.5, ident + A * 0.5)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = linalg.householder_product(A, tau)
            signs = X.diagonal(dim1=-2, dim2=-1).to("int32").to(X.dtype)  # truncated, as .int()
            Q = Q * signs.unsqueeze(-2)
        if self._trivialized():
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q: Tensor) -> Tensor:  # noqa: N803 - PyTorch's name
        if tuple(Q.shape) != self.shape:
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {list(self.shape)}. "
                f"Got a tensor of shape {list(Q.shape)}."
            )
        with no_grad():
            q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if not self._trivialized():
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the Cayley "
                        "parametrizations when use_trivialization=False."
                    )
                a, tau = _geqrf_host(Q._host())
                diag = np.einsum("...ii->...i", a[..., :k, :k])
                fixed = np.sign(diag)
                fixed[tau == 0.0] *= -1
                idx = np.arange(k)
                a[..., idx, idx] = fixed
                out = tensor(a.astype(np.dtype(Q.dtype)))
                return out.mT if transpose else out
            if n == k:
                Q = _make_orthogonal(Q) if not _is_orthogonal(Q) else Q.clone()
            else:
                N = randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype)
                Q = _make_orthogonal(cat([Q, N], dim=-1))
            self.base = Q
            m = min(q_init.shape[-2], q_init.shape[-1])
            neg_id = np.zeros(q_init.shape[-2:], dtype=np.dtype(q_init.dtype))
            neg_id[np.arange(m), np.arange(m)] = -1.0
            return tensor(np.broadcast_to(neg_id, q_init.shape).copy())


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:  # fmt: skip
    """Make ``module.<name>`` (a matrix, or a batch of them) orthogonal: orthonormal columns when
    it is tall, rows when it is wide.

    Args:
        module: the module holding the tensor.
        name: the tensor's name.
        orthogonal_map: ``"matrix_exp"`` (default for square matrices), ``"cayley"`` or
            ``"householder"`` (default otherwise).
        use_trivialization: keep a ``base`` matrix (``parametrizations.<name>.0.base``) that
            the map multiplies (PyTorch's dynamic trivialization).

    Returns:
        ``module``.

    Raises:
        ValueError: no such tensor, fewer than 2 dimensions, or an unknown map.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(
            f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions."
        )
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError(
            'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
            f"Got: {orthogonal_map}"
        )
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# ---------------------------------------------------------------------------------- weight norm
class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Weight normalization (Salimans & Kingma, 2016) as a parametrization: ``module.<name>`` is
    ``g * v / ||v||``, the norm taken over every dimension but ``dim`` (``None``: over all).

    ``g`` is ``parametrizations.<name>.original0``, ``v`` is ``original1``.

    Returns:
        ``module``.
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


# ---------------------------------------------------------------------------------- spectral norm
class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12):  # fmt: skip
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but "
                f"got {dim})"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                w = self._reshape_weight_to_matrix(weight)
                h, wd = w.shape
                u = weight.new_zeros(h).normal_(0, 1)
                v = weight.new_zeros(wd).normal_(0, 1)
                self.register_buffer("_u", normalize(u, self.eps))
                self.register_buffer("_v", normalize(v, self.eps))
            self._power_method(w, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(weight_mat @ self._v, self.eps))
                self._v.copy_(normalize(weight_mat.mT @ self._u, self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return weight / weight.norm(2, 0, keepdim=True).clamp(min=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # copies, so that the next in-place update leaves this graph's saved values alone
        u, v = self._u.clone(), self._v.clone()
        sigma = u.dot(weight_mat @ v)
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:  # fmt: skip
    """Spectral normalization (Miyato et al., 2018) as a parametrization: ``module.<name>`` is the
    original divided by its estimated largest singular value (see the module docstring).

    Args:
        module: the module holding the tensor.
        name: the tensor's name.
        n_power_iterations: power-method steps per access in training mode.
        eps: the floor of the norms in the power method.
        dim: the output dimension (default 0; 1 for ``ConvTranspose1d/2d/3d``).

    Returns:
        ``module``.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = default_dim(module)
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module
