"""``gt.nn.utils.stateless.functional_call``: call a module with other tensors in place of its
parameters and buffers (PyTorch's; :func:`gt.func.functional_call` is the same without the
deprecation warning).

The given tensors are swapped into the module by dotted name for the one call and the module's
own are put back afterwards, even when the call raises. Gradients flow to the given tensors.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gt.nn.module import Module
from gt.tensor import Tensor

__all__ = ["functional_call"]

_MISSING: Any = object()


def named_tensors(module: Module, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
    """Every parameter, then every buffer, by dotted name, with the names a shared tensor or
    module has under each of its paths (PyTorch's ``remove_duplicate=False``)."""
    for kind in ("_parameters", "_buffers"):
        yield from _walk(module, kind, prefix, set())


def _walk(module: Module, kind: str, prefix: str, path: set) -> Iterator[tuple[str, Tensor]]:
    if id(module) in path:  # a module that contains itself
        return
    for name, t in getattr(module, kind).items():
        if t is not None:
            yield prefix + name, t
    for name, child in module._modules.items():
        if child is not None:
            yield from _walk(child, kind, f"{prefix}{name}.", path | {id(module)})


def _untie(module: Module, given: dict[str, Tensor]) -> dict[str, Tensor]:
    """``given`` plus, for each tensor the module shares under several names, the given value
    under all of those names.

    Raises:
        ValueError: different values were given for names of one shared tensor.
    """
    names_of: dict[int, set[str]] = {}
    for name, t in named_tensors(module):
        names_of.setdefault(id(t), set()).add(name)
    tied = {name: names for names in names_of.values() if len(names) > 1 for name in names}
    out = dict(given)
    for name in [n for n in given if n in tied]:
        names = tied[name]
        values = {id(given[n]) for n in names if n in given}
        if len(values) > 1:
            raise ValueError(
                f"functional_call got multiple values for keys {sorted(names)}, which are tied. "
                "Consider using tie_weights=False"
            )
        for other in names:
            out[other] = given[name]
    return out


def _swap_one(module: Module, name: str, value: Any) -> Any:
    """Put ``value`` (or remove it, for ``_MISSING``) at ``name`` of ``module``; returns what was
    there (``_MISSING`` when nothing was)."""
    prefix, _, attr = name.rpartition(".")
    owner = module.get_submodule(prefix)
    for table in (owner._parameters, owner._buffers):
        if attr in table:
            old = table[attr]
            if value is _MISSING:
                del table[attr]
            else:
                table[attr] = value
            return old
    old = getattr(owner, attr) if hasattr(owner, attr) else _MISSING
    if old is not _MISSING and old is not None and not isinstance(old, Tensor):
        raise TypeError(f"attribute `{attr}`: {old} is not an instance of torch.Tensor")
    if value is not _MISSING:
        setattr(owner, attr, value)
    elif old is not _MISSING:
        delattr(owner, attr)
    return old


def _swap_all(module: Module, values: dict[str, Any]) -> dict[str, Any]:
    swapped: dict[str, Any] = {}
    try:
        for name, value in values.items():
            if value is not _MISSING and value is not None and not isinstance(value, Tensor):
                raise TypeError(f"{value} is not an instance of torch.Tensor")
            swapped[name] = _swap_one(module, name, value)
    except Exception:
        _swap_all(module, swapped)
        raise
    return swapped


@contextmanager
def reparametrize_module(module: Module, parameters_and_buffers: dict[str, Tensor],
                         tie_weights: bool = False, strict: bool = False) -> Iterator[None]:  # fmt: skip
    """Inside the block ``module`` uses ``parameters_and_buffers`` (by dotted name) in place of
    its own tensors; afterwards its own are back and ``parameters_and_buffers`` holds the tensors
    the module held at the end (the same ones, unless the call replaced them).

    Raises:
        RuntimeError: with ``strict``, names are missing or unexpected.
    """
    values = _untie(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        valid = {name for name, _ in named_tensors(module)}
        missing, unexpected = sorted(valid - set(values)), sorted(set(values) - valid)
        errors = []
        if unexpected:
            errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if errors:
            raise RuntimeError(
                f"Error(s) in reparametrizing for {module._get_name()}:\n\t" + "\n\t".join(errors)
            )
    originals: dict[str, Any] = {}
    try:
        originals = _swap_all(module, values)
        yield
    finally:
        ended = _swap_all(module, originals)
        parameters_and_buffers.update({k: ended[k] for k in parameters_and_buffers if k in ended})


def call(module: Module, parameters_and_buffers: dict[str, Tensor], args: Any = None,
         kwargs: dict[str, Any] | None = None, *, tie_weights: bool = True,
         strict: bool = False) -> Any:  # fmt: skip
    """``module(*args, **kwargs)`` with ``parameters_and_buffers`` swapped in (no warning)."""
    if not isinstance(module, Module):
        raise TypeError(f"{module} is not an instance of torch.nn.Module")
    kwargs = {} if kwargs is None else kwargs
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with reparametrize_module(module, parameters_and_buffers, tie_weights, strict):
        return module(*args, **kwargs)


def functional_call(module: Module, parameters_and_buffers: dict[str, Tensor], args: Any = None,
                    kwargs: dict[str, Any] | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:  # fmt: skip
    """Call ``module`` with ``parameters_and_buffers`` (dotted names) in place of its own
    parameters and buffers (deprecated in PyTorch in favour of ``torch.func.functional_call``;
    warns ``FutureWarning``).

    Args:
        module: the module to call.
        parameters_and_buffers: tensors by dotted name; names not given keep the module's own
            (``parametrizations.<name>.original`` reaches a parametrization's original).
        args: the positional arguments (a non-tuple is the only one).
        kwargs: the keyword arguments.
        tie_weights: a value given for one name of a shared tensor is used for all its names
            (different values for them raise ``ValueError``).
        strict: every parameter and buffer must be given, and nothing else.

    Returns:
        What the module returns.
    """
    warnings.warn(
        "`gt.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be "
        "removed in a future version of PyTorch. Please use `gt.func.functional_call` instead "
        "which is a drop-in replacement.",
        FutureWarning,
        stacklevel=2,
    )
    return call(module, parameters_and_buffers, args, kwargs,
                tie_weights=tie_weights, strict=strict)  # fmt: skip
