"""``gt.return_types``: the named tuples ops return, as ``torch.return_types`` (``max``, ``min``,
``sort``, ``topk``, ``kthvalue``, ``median``, ``nanmedian``, ``mode``, ``cummax``, ``cummin``,
``aminmax``, ``frexp``, ``slogdet``, ``svd``, ``qr``, ``histogram``, ``histogramdd``,
``triangular_solve``, ``lu_unpack``, and ``linalg_*`` for ``gt.linalg``'s: ``linalg_svd``,
``linalg_eigh``, ``linalg_lu_factor_ex`` ...); defined in :mod:`gt.runtime.ops.return_types`."""

from __future__ import annotations

from gt.runtime.ops.return_types import TYPES

__all__ = sorted(TYPES)
globals().update(TYPES)  # (names such as max and min: the types, not the builtins)
