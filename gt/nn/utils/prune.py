"""``gt.nn.utils.prune``: PyTorch's pruning, with PyTorch's layout.

Pruning ``module.<name>`` moves the parameter to ``<name>_orig``, registers the mask as the buffer
``<name>_mask`` and makes ``<name>`` a plain attribute, ``mask * <name>_orig``, recomputed by a
forward pre-hook (the pruning method itself) before every call; pruning again combines the masks
(a :class:`PruningContainer`); :func:`remove` makes the pruned tensor the parameter again.

Amounts are an ``int`` (how many) or a fraction in ``[0, 1]`` (rounded as Python's ``round``).
``topk`` picks the smallest magnitudes (and the largest channel norms); among equal values GT
takes the lower index first, where PyTorch's choice depends on its kernel, so masks can differ
from PyTorch's on ties. The random methods draw from GT's seeded generator (``gt.manual_seed``),
not PyTorch's numbers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from gt import guards
from gt.factories import ones_like, rand, rand_like, zeros_like
from gt.nn.module import Module
from gt.nn.utils._prune_checks import (
    _channel_shape,
    _compute_norm,
    _compute_nparams_toprune,
    _validate_pruning_amount,
    _validate_pruning_amount_init,
    _validate_pruning_dim,
    _validate_structured_pruning,
)
from gt.nn.utils.convert_parameters import parameters_to_vector
from gt.tensor import Tensor

__all__ = [
    "BasePruningMethod",
    "CustomFromMask",
    "Identity",
    "L1Unstructured",
    "LnStructured",
    "PruningContainer",
    "RandomStructured",
    "RandomUnstructured",
    "custom_from_mask",
    "global_unstructured",
    "identity",
    "is_pruned",
    "l1_unstructured",
    "ln_structured",
    "random_structured",
    "random_unstructured",
    "remove",
]


def _pruning_hooks(module: Module) -> Iterable[tuple[Any, BasePruningMethod]]:
    """``(key, method)`` of the pruning methods among ``module``'s forward pre-hooks."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod):
            yield key, hook


class BasePruningMethod(ABC):
    """Base class of the pruning methods: ``compute_mask`` says what to keep; ``apply`` prunes a
    module's tensor; the instance is the forward pre-hook that recomputes it."""

    _tensor_name: str | None = None
    PRUNING_TYPE: str = "unstructured"

    def __call__(self, module: Module, inputs: Any) -> None:
        """Recompute ``module.<name>`` from ``<name>_orig`` and ``<name>_mask``."""
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The new mask (same shape as ``t``), on top of ``default_mask``."""

    def apply_mask(self, module: Module) -> Tensor:
        """``<name>_mask * <name>_orig`` (differentiable in ``<name>_orig``)."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module: Module, name: str, *args: Any, importance_scores: Tensor | None = None,
              **kwargs: Any) -> BasePruningMethod:  # fmt: skip
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)`` (combined with an earlier pruning
        of the same tensor); the masks are computed from ``importance_scores`` (default: the
        tensor itself). Returns the method (or container) registered as the hook."""
        old_method, found = None, []
        for key, hook in _pruning_hooks(module):
            if hook._tensor_name == name:
                old_method = hook
                found.append(key)
        if len(found) > 1:
            raise AssertionError(
                f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
                f"{module}. Use a PruningContainer."
            )
        for key in found:
            del module._forward_pre_hooks[key]
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old_method is not None:
            if isinstance(old_method, PruningContainer):
                old_method.add_pruning_method(method)
                method = old_method
            else:
                container = PruningContainer(old_method)
                container.add_pruning_method(method)
                method = container

        orig = getattr(module, name)
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(orig.shape):
                raise AssertionError(
                    f"importance_scores should have the same shape as parameter {name} of "
                    f"{module}, got {tuple(importance_scores.shape)} vs {tuple(orig.shape)}"
                )
        else:
            importance_scores = orig
        if not isinstance(method, PruningContainer):
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            mask = method.compute_mask(importance_scores.detach(), default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if not isinstance(method, PruningContainer):
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:  # fmt: skip
        """``t`` times the mask computed from ``importance_scores`` (default ``t``)."""
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(t.shape):
                raise AssertionError(
                    "importance_scores should have the same shape as tensor t, got "
                    f"{tuple(importance_scores.shape)} vs {tuple(t.shape)}"
                )
        else:
            importance_scores = t
        default_mask = default_mask if default_mask is not None else ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module: Module) -> None:
        """Make the pruned tensor ``module.<name>``'s parameter again (drops ``_orig``/``_mask``)."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        name = self._tensor_name
        weight = self.apply_mask(module)
        if name in module.__dict__:
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        orig.data = weight.detach()
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        module._non_persistent_buffers_set.discard(name + "_mask")
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """The pruning methods applied, in turn, to one tensor; each new one prunes what is left."""

    def __init__(self, *args: Any) -> None:
        self._pruning_methods: tuple[BasePruningMethod, ...] = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod | None) -> None:
        """Append ``method`` (it must act on this container's tensor).

        Raises:
            TypeError: ``method`` is not a pruning method.
            ValueError: it acts on another tensor.
        """
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(
                "Can only add pruning methods acting on the parameter named "
                f"'{self._tensor_name}' to PruningContainer {self}. "
                f"Found '{method._tensor_name}'"
            )
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self) -> Any:
        return iter(self._pruning_methods)

    def __getitem__(self, idx: Any) -> Any:
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The last method's mask, computed on the part of ``t`` still unpruned (unstructured: the
        kept entries; structured: the channels along ``dim`` not yet all zero; global: all)."""
        method = self._pruning_methods[-1]
        mask = default_mask
        new_mask = mask.to(dtype=t.dtype)
        if method.PRUNING_TYPE == "unstructured":
            slc: Any = mask == 1
        elif method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError(
                    'Pruning methods of PRUNING_TYPE "structured" need to have the attribute '
                    "`dim` defined."
                )
            n_dims = t.dim()
            dim = method.dim + n_dims if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {n_dims}")
            keep_channel = mask.sum(dim=[d for d in range(n_dims) if d != dim]) != 0
            slc = [slice(None)] * n_dims
            slc[dim] = keep_channel
            slc = tuple(slc)
        elif method.PRUNING_TYPE == "global":
            slc = tuple([slice(None)] * len(t.shape))
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE}")
        partial_mask = method.compute_mask(t[slc], default_mask=mask[slc])
        new_mask[slc] = partial_mask.to(dtype=new_mask.dtype)
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing (the mask is all ones)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Module, name: str) -> BasePruningMethod:  # type: ignore[override]
        """Prune ``module.<name>`` with the identity."""
        return super().apply(module, name)


class _Unstructured(BasePruningMethod):
    """Prune the ``amount`` entries that :meth:`_pruned_first` ranks highest."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: int | float) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def _pruned_first(self, t: Tensor, k: int) -> Tensor:
        raise NotImplementedError

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        size = t.nelement()
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        mask = default_mask.clone()
        if k != 0:
            idx = self._pruned_first(t, k)
            mask = mask.reshape(-1).index_fill(0, idx, 0).reshape(tuple(t.shape))
        return mask


class RandomUnstructured(_Unstructured):
    """Prune ``amount`` entries chosen at random (GT's seeded generator)."""

    def _pruned_first(self, t: Tensor, k: int) -> Tensor:
        prob = rand_like(t, dtype="float32")  # (GT's numbers, not PyTorch's)
        return prob.reshape(-1).topk(k).indices

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float) -> BasePruningMethod:  # type: ignore[override]
        """Prune ``module.<name>`` at random."""
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Prune the ``amount`` entries of smallest magnitude."""

    def _pruned_first(self, t: Tensor, k: int) -> Tensor:
        return t.abs().reshape(-1).topk(k, largest=False).indices

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float,
              importance_scores: Tensor | None = None) -> BasePruningMethod:  # type: ignore[override]  # fmt: skip
        """Prune ``module.<name>`` by magnitude (of ``importance_scores`` if given)."""
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prune ``amount`` whole channels along ``dim``, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: int | float, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        if k == 0:
            return default_mask
        prob = rand(size)
        threshold = prob.kthvalue(k).values
        dim = self.dim % t.dim()
        keep = (prob > threshold).to(dtype=t.dtype).reshape(_channel_shape(t, dim))
        mask = zeros_like(t) + keep
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float, dim: int = -1) -> BasePruningMethod:  # type: ignore[override]  # fmt: skip
        """Prune random channels of ``module.<name>`` along ``dim``."""
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prune the ``amount`` channels along ``dim`` of smallest ``L_n`` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: int | float, n: Any, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        if k == 0:
            return default_mask
        dim = self.dim % t.dim()
        norm = _compute_norm(t, self.n, dim)
        idx = norm.topk(size - k, largest=True).indices
        mask = zeros_like(t).index_fill(dim, idx, 1)
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float, n: Any, dim: int,
              importance_scores: Tensor | None = None) -> BasePruningMethod:  # type: ignore[override]  # fmt: skip
        """Prune the channels of ``module.<name>`` of smallest norm along ``dim``."""
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)  # fmt: skip


class CustomFromMask(BasePruningMethod):
    """Prune with a given mask (multiplied into the current one)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise AssertionError(
                f"default_mask shape {tuple(default_mask.shape)} must match self.mask shape "
                f"{tuple(self.mask.shape)}"
            )
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, mask: Tensor) -> BasePruningMethod:  # type: ignore[override]
        """Prune ``module.<name>`` with ``mask``."""
        return super().apply(module, name, mask=mask)


def identity(module: Module, name: str) -> Module:
    """Reparametrize ``module.<name>`` with an all-ones mask; returns ``module``."""
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount: int | float) -> Module:
    """Prune ``amount`` random entries of ``module.<name>``; returns ``module``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount: int | float,
                    importance_scores: Tensor | None = None) -> Module:  # fmt: skip
    """Prune the ``amount`` entries of ``module.<name>`` of smallest magnitude; returns
    ``module``."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount: int | float, dim: int) -> Module:
    """Prune ``amount`` random channels of ``module.<name>`` along ``dim``; returns ``module``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount: int | float, n: Any, dim: int,
                  importance_scores: Tensor | None = None) -> Module:  # fmt: skip
    """Prune the ``amount`` channels of ``module.<name>`` along ``dim`` of smallest ``L_n`` norm;
    returns ``module``."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters: Iterable[tuple[Module, str]], pruning_method: type,
                        importance_scores: dict | None = None, **kwargs: Any) -> None:  # fmt: skip
    """Prune the ``(module, name)`` tensors together, as one vector, with ``pruning_method``
    (an unstructured method class, built with ``**kwargs``); each gets a
    :class:`CustomFromMask`.

    Raises:
        TypeError: ``parameters`` is not iterable, ``importance_scores`` not a dict, or the
            method is not unstructured.
    """
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector(
        [importance_scores.get((m, n), getattr(m, n)).detach() for m, n in parameters]
    )
    default_mask = parameters_to_vector([_mask_or_ones(m, n) for m, n in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(
            'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
            f"{pruning_method} of type {method.PRUNING_TYPE}"
        )
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)
    pointer = 0
    for module, name in parameters:
        param = getattr(module, name)
        n = param.numel()
        custom_from_mask(module, name, mask=final_mask[pointer : pointer + n].reshape(param.shape))
        pointer += n


def _mask_or_ones(module: Module, name: str) -> Tensor:
    if name + "_mask" in module._buffers:
        return module._buffers[name + "_mask"]
    return ones_like(getattr(module, name))


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    """Prune ``module.<name>`` with ``mask``; returns ``module``."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module: Module, name: str) -> Module:
    """Make ``module.<name>`` a plain parameter again, holding the pruned values.

    Raises:
        ValueError: ``module.<name>`` is not pruned.
    """
    for key, hook in _pruning_hooks(module):
        if hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            guards.bump()  # a captured step (gt.hot) that ran with the hook is captured again
            return module
    raise ValueError(
        f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed"
    )


def is_pruned(module: Module) -> bool:
    """Whether ``module`` or a submodule has a pruning hook."""
    return any(
        isinstance(hook, BasePruningMethod)
        for _, sub in module.named_modules()
        for hook in sub._forward_pre_hooks.values()
    )
