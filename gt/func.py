"""``gt.func``: PyTorch's ``torch.func.functional_call`` and ``stack_module_state``.

(``grad``, ``vmap`` and the other function transforms of ``torch.func`` are not here.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gt.nn.module import Module
from gt.nn.utils.stateless import call
from gt.ops.shaping import stack
from gt.tensor import Tensor

__all__ = ["functional_call", "stack_module_state"]


def functional_call(module: Module, parameter_and_buffer_dicts: dict[str, Tensor] | Sequence[dict[str, Tensor]],
                    args: Any = None, kwargs: dict[str, Any] | None = None, *,
                    tie_weights: bool = True, strict: bool = False) -> Any:  # fmt: skip
    """Call ``module`` with the given tensors (by dotted name) in place of its own parameters and
    buffers (see :func:`gt.nn.utils.stateless.functional_call`; several dicts are merged).

    Raises:
        ValueError: a name appears in two dicts, or the argument is not a dict or a sequence of
            them.
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError(
                "Expected all elements of parameter_and_buffer_dicts to be dictionaries"
            )
        counts: dict[str, int] = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(
                f"{repeated} appeared in multiple dictionaries; behavior of functional call is "
                "ambiguous"
            )
        merged = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError(
            "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
            f"{type(parameter_and_buffer_dicts)}"
        )
    return call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)


def stack_module_state(models: Sequence[Module]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """The parameters and buffers of same-shaped ``models`` stacked along a new first dimension
    (parameters as new leaves that require grad).

    Raises:
        RuntimeError: no models, mixed training modes, mixed classes, or mixed
            ``requires_grad``.
    """
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode."
        )
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(tensors: list[Tensor], name: str) -> Tensor:
        flags = {bool(t.requires_grad) for t in tensors}
        if len(flags) > 1:
            raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
        out = stack(tensors)
        return out.detach().requires_grad_() if flags == {True} else out

    params = [dict(m.named_parameters()) for m in models]
    buffers = [dict(m.named_buffers()) for m in models]
    return (
        {k: stacked([p[k] for p in params], k) for k in params[0]},
        {k: stacked([b[k] for b in buffers], k) for k in buffers[0]},
    )
