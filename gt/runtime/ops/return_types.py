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

#: The other types: each op's name in ``torch.return_types`` (``linalg_`` for ``torch.linalg``'s
#: ops) and its fields, as PyTorch's.
_OTHERS = {
    "aminmax": ["min", "max"],
    "frexp": ["mantissa", "exponent"],
    "geqrf": ["a", "tau"],
    "histogram": ["hist", "bin_edges"],
    "histogramdd": ["hist", "bin_edges"],
    "lu_unpack": ["P", "L", "U"],
    "qr": ["Q", "R"],
    "slogdet": ["sign", "logabsdet"],
    "svd": ["U", "S", "V"],
    "triangular_solve": ["solution", "cloned_coefficient"],
    "linalg_cholesky_ex": ["L", "info"],
    "linalg_eig": ["eigenvalues", "eigenvectors"],
    "linalg_eigh": ["eigenvalues", "eigenvectors"],
    "linalg_inv_ex": ["inverse", "info"],
    "linalg_ldl_factor": ["LD", "pivots"],
    "linalg_ldl_factor_ex": ["LD", "pivots", "info"],
    "linalg_lstsq": ["solution", "residuals", "rank", "singular_values"],
    "linalg_lu": ["P", "L", "U"],
    "linalg_lu_factor": ["LU", "pivots"],
    "linalg_lu_factor_ex": ["LU", "pivots", "info"],
    "linalg_qr": ["Q", "R"],
    "linalg_slogdet": ["sign", "logabsdet"],
    "linalg_solve_ex": ["result", "info"],
    "linalg_svd": ["U", "S", "Vh"],
}

#: Every type, by its name (``TYPES["topk"]`` is ``gt.return_types.topk``).
TYPES: dict[str, type] = {name: structseq(name, ["values", "indices"]) for name in _VALUES_INDICES}
TYPES.update({name: structseq(name, fields) for name, fields in _OTHERS.items()})

__all__ = sorted(TYPES)
globals().update(TYPES)  # (module attributes named max, min, sort ...: not the builtins)
