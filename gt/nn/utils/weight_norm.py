"""Weight normalization with a forward pre-hook (PyTorch's older ``torch.nn.utils.weight_norm``,
deprecated there in favour of :func:`gt.nn.utils.parametrizations.weight_norm`).

``weight_norm(module)`` replaces the parameter ``weight`` by ``weight_g`` (the magnitude, one per
slice along ``dim``) and ``weight_v`` (the direction), and recomputes ``module.weight =
weight_g * weight_v / ||weight_v||`` before every forward. ``state_dict`` keys: ``weight_g``,
``weight_v``.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

from gt import guards
from gt.nn.module import Module, Parameter
from gt.tensor import Tensor

__all__ = ["WeightNorm", "norm_except_dim", "remove_weight_norm", "weight_norm"]

T = TypeVar("T", bound=Module)


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:  # noqa: A002
    """The ``pow``-norm of ``v`` over every dimension but ``dim``, kept as size-1 dimensions
    (``dim=-1``: the norm of the whole tensor, 0-d), as PyTorch's ``norm_except_dim``."""
    if dim == -1:
        return v.norm(pow)
    d = dim % v.ndim
    rest = tuple(i for i in range(v.ndim) if i != d)
    if not rest:
        return v.abs()
    return v.norm(pow, rest, keepdim=True)


def _weight_norm(v: Tensor, g: Tensor, dim: int = 0) -> Tensor:
    """``v * (g / norm_except_dim(v, 2, dim))`` (PyTorch's ``torch._weight_norm``)."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and ``<name>_v``."""

    def __init__(self, name: str, dim: int | None):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        """``g * v / ||v||`` from the module's current ``<name>_g`` and ``<name>_v``."""
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        """Reparametrize ``module.<name>`` and register the hook (see :func:`weight_norm`)."""
        warnings.warn(
            "`gt.nn.utils.weight_norm` is deprecated in favor of "
            "`gt.nn.utils.parametrizations.weight_norm`.",
            FutureWarning,
            stacklevel=3,
        )
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two weight_norm hooks on the same parameter {name}"
                )
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        """Put back a plain parameter ``<name>`` with the current value."""
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: T, name: str = "weight", dim: int | None = 0) -> T:
    """Weight normalization (Salimans & Kingma, 2016) with a hook: ``<name>`` becomes
    ``<name>_g * <name>_v / ||<name>_v||``, recomputed before each forward (deprecated in
    PyTorch: see :func:`gt.nn.utils.parametrizations.weight_norm`; warns ``FutureWarning``).

    Args:
        module: the module holding the parameter.
        name: the parameter's name.
        dim: the dimension that keeps one magnitude per slice (``None``: one for the whole
            tensor).

    Returns:
        ``module``.
    """
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: T, name: str = "weight") -> T:
    """Undo :func:`weight_norm`: ``<name>`` is a plain parameter again, with its current value.

    Raises:
        ValueError: ``module`` has no weight norm on ``name``.
    """
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            guards.bump()
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
