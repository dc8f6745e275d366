"""What the layers' ``reset_parameters()`` do: draw their parameters again as their constructors
did (PyTorch's default initialization), in place and outside autograd, so that a model's
re-initialization loop (``for m in model.modules(): if hasattr(m, "reset_parameters"): ...``)
works on GT's layers as on PyTorch's."""

from __future__ import annotations

from typing import Any

from gt.autograd import no_grad


def redraw(module: Any, names: tuple[str, ...], bound: float) -> None:
    """Each parameter ``names`` of ``module`` (those that exist) uniform in ``±bound``."""
    with no_grad():
        for name in names:
            p = getattr(module, name, None)
            if p is not None:
                p.uniform_(-bound, bound)


def refill(module: Any, ones: tuple[str, ...] = (), zeros: tuple[str, ...] = ()) -> None:
    """The parameters (or buffers) ``ones`` set to 1 and ``zeros`` to 0, those that exist."""
    with no_grad():
        for names, value in ((ones, 1), (zeros, 0)):
            for name in names:
                p = getattr(module, name, None)
                if p is not None:
                    p.fill_(value)


def redraw_rows(module: Any) -> None:
    """An embedding's table: standard normal, its ``padding_idx`` row zero."""
    with no_grad():
        module.weight.normal_()
        if module.padding_idx is not None:
            module.weight[module.padding_idx] = 0.0


__all__ = ["redraw", "redraw_rows", "refill"]
