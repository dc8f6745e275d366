"""The named tuples that ops return, one type per op as PyTorch's ``torch.return_types``:
``x.max(dim)`` is a ``gt.return_types.max`` (fields ``values`` and ``indices``), ``x.aminmax()`` a
``gt.return_types.aminmax`` (``min``, ``max``). They unpack, index and compare as tuples and print
as PyTorch's do, one field a line::

    gt.return_types.max(
    values=tensor([3., 2.]),
    indices=tensor([1, 0]))

Their module is :mod:`gt.return_types` (which re-exports them), so they pickle under that name.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any


def structseq(name: str, fields: list[str]) -> type:
    """A tuple type ``gt.return_types.<name>`` with named ``fields`` and PyTorch's printing."""
    base = namedtuple(name, fields)  # type: ignore[misc]

    def __repr__(self: Any) -> str:
        body = ",\n".join(f"{field}={value!r}" for field, value in zip(self._fields, self))
        return f"gt.return_types.{name}(\n{body})"

    namespace = {"__slots__": (), "__repr__": __repr__, "__module__": "gt.return_types",
                 "__qualname__": name, "__doc__": f"What ``{name}`` returns: {', '.join(fields)}."}  # fmt: skip
    return type(name, (base,), namespace)


_VALUES_INDICES = ("max", "min", "sort", "topk", "kthvalue", "median", "nanmedian", "mode",
                   "cummax", "cummin")  # fmt: skip

#: Every type, by its name (``TYPES["topk"]`` is ``gt.return_types.topk``).
TYPES: dict[str, type] = {name: structseq(name, ["values", "indices"]) for name in _VALUES_INDICES}
TYPES["aminmax"] = structseq("aminmax", ["min", "max"])

__all__ = sorted(TYPES)
globals().update(TYPES)  # (module attributes named max, min, sort ...: not the builtins)
