"""PyTorch's private printing module, as notebooks and tests reach into it:
``torch._tensor_str.printoptions(precision=2)`` (a block with other print options),
``get_printoptions()`` and ``PRINT_OPTS`` (the options as attributes). The options themselves are
:func:`gt.set_printoptions`'s, kept in :mod:`gt.ops.format`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from gt.ops import format as _format
from gt.settings import set_printoptions

_NAMES = {"precision": "PRECISION", "threshold": "THRESHOLD", "edgeitems": "EDGEITEMS",
          "linewidth": "LINEWIDTH", "sci_mode": "SCI_MODE"}  # fmt: skip


def get_printoptions() -> dict[str, Any]:
    """The print options now, as :func:`gt.set_printoptions` takes them."""
    return {name: getattr(_format, attr) for name, attr in _NAMES.items()}


@contextlib.contextmanager
def printoptions(**kwargs: Any) -> Iterator[None]:
    """Print with ``kwargs`` (:func:`gt.set_printoptions`'s) inside the block; the options
    before it come back after it."""
    before = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        for name, attr in _NAMES.items():
            setattr(_format, attr, before[name])


class _PrintOptions:
    """``PRINT_OPTS.precision`` and friends: read and set the live options."""

    def __getattr__(self, name: str) -> Any:
        if name not in _NAMES:
            raise AttributeError(name)
        return getattr(_format, _NAMES[name])

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _NAMES:
            raise AttributeError(f"no print option {name!r}")
        setattr(_format, _NAMES[name], value)

    def __repr__(self) -> str:
        return (
            "PrintOptions(" + ", ".join(f"{k}={v!r}" for k, v in get_printoptions().items()) + ")"
        )


PRINT_OPTS = _PrintOptions()

__all__ = ["PRINT_OPTS", "get_printoptions", "printoptions", "set_printoptions"]
