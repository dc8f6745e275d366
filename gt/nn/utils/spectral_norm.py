"""Spectral normalization with a forward pre-hook (PyTorch's older ``torch.nn.utils.spectral_norm``;
:func:`gt.nn.utils.parametrizations.spectral_norm` is the newer form).

``spectral_norm(module)`` moves the parameter ``weight`` to ``weight_orig``, keeps power-iteration
vectors in the buffers ``weight_u`` and ``weight_v``, and before every forward sets
``module.weight = weight_orig / sigma`` with ``sigma = u . (W v)`` the estimated largest singular
value of ``weight_orig`` seen as a matrix (``dim`` first, the rest flattened); in training mode it
first runs ``n_power_iterations`` steps of the power method, in place on the buffers.
``state_dict`` keys: ``weight_orig``, ``weight_u``, ``weight_v``.

``u`` and ``v`` start as normalized normal draws from GT's generator, which are not PyTorch's:
copy values into ``weight_u``/``weight_v`` to reproduce a PyTorch run. (PyTorch's migration of
checkpoints written before its version 1 of this hook, which had no ``weight_v``, is not done.)
"""

from __future__ import annotations

from typing import Any, TypeVar

from gt import guards
from gt.autograd import no_grad
from gt.nn.module import Module, Parameter
from gt.tensor import Tensor

__all__ = ["SpectralNorm", "remove_spectral_norm", "spectral_norm"]

T = TypeVar("T", bound=Module)

_TRANSPOSED = ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")


def normalize(x: Tensor, eps: float) -> Tensor:
    """``x / max(||x||, eps)`` for a vector (``F.normalize(x, dim=0, eps=eps)``)."""
    return x / x.norm(2).clamp(min=eps)


def default_dim(module: Module) -> int:
    """1 for the transposed convolutions (their weight is ``in x out x ...``), else 0."""
    return 1 if any(c.__name__ in _TRANSPOSED for c in type(module).__mro__) else 0


class SpectralNorm:
    """The forward pre-hook that sets ``module.<name>`` to ``<name>_orig / sigma``."""

    _version: int = 1

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12):  # fmt: skip
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        """``weight`` as a matrix: dimension ``dim`` first, the others flattened."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.ndim) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        """``<name>_orig / sigma``; with ``do_power_iteration`` the power method first updates
        ``<name>_u`` and ``<name>_v`` in place (outside autograd)."""
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        w = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(w.t() @ u, self.eps))
                    u.copy_(normalize(w @ v, self.eps))
                # copies, so that the next in-place update leaves this graph's saved values alone
                u, v = u.clone(), v.clone()
        sigma = u.dot(w @ v)
        return weight / sigma

    def remove(self, module: Module) -> None:
        """Put back a plain parameter ``<name>`` holding ``<name>_orig / sigma``."""
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int,
              eps: float) -> SpectralNorm:  # fmt: skip
        """Reparametrize ``module.<name>`` and register the hook (see :func:`spectral_norm`)."""
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two spectral_norm hooks on the same parameter {name}"
                )
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        with no_grad():
            w = fn.reshape_weight_to_matrix(weight)
            h, wd = w.shape
            u = normalize(weight.new_zeros(h).normal_(0, 1), fn.eps)
            v = normalize(weight.new_zeros(wd).normal_(0, 1), fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.data)
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module: T, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> T:  # fmt: skip
    """Spectral normalization (Miyato et al., 2018) with a hook: ``<name>`` becomes
    ``<name>_orig / sigma`` before each forward (see the module docstring).

    Args:
        module: the module holding the parameter.
        name: the parameter's name.
        n_power_iterations: power-method steps per forward in training mode.
        eps: the floor of the norms in the power method.
        dim: the output dimension (default 0; 1 for ``ConvTranspose1d/2d/3d``).

    Returns:
        ``module``.
    """
    SpectralNorm.apply(
        module, name, n_power_iterations, default_dim(module) if dim is None else dim, eps
    )
    return module


def remove_spectral_norm(module: T, name: str = "weight") -> T:
    """Undo :func:`spectral_norm`: ``<name>`` is a plain parameter with the normalized value.

    Raises:
        ValueError: ``module`` has no spectral norm on ``name``.
    """
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            guards.bump()
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
