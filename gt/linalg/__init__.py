"""``gt.linalg``: PyTorch's ``torch.linalg`` on GT tensors, differentiable.

:mod:`gt.linalg.core` has the norms, products, the registry's primitives (``inv``, ``solve``,
``det``, ``slogdet``, ``cholesky``, ``solve_triangular``, ``qr``, ``eigh``, ``svd``) and what is
built on the SVD; :mod:`gt.linalg.lu` the LU factorisation with partial pivoting and what uses it;
:mod:`gt.linalg.more` ``matrix_exp``, ``cond``, ``solve_ex``, ``tensorinv``, ``tensorsolve``,
``vander``, ``householder_product`` and the Cholesky solves; :mod:`gt.linalg.ldl` the LDL
factorisation of symmetric indefinite matrices (``ldl_factor``, ``ldl_factor_ex``, ``ldl_solve``).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from gt.errors import LinAlgError
from gt.linalg.core import *  # noqa: F403 - the public names of each part (see their __all__)
from gt.linalg.core import __all__ as _core
from gt.linalg.ldl import *  # noqa: F403
from gt.linalg.ldl import __all__ as _ldl
from gt.linalg.lu import *  # noqa: F403
from gt.linalg.lu import __all__ as _lu
from gt.linalg.more import *  # noqa: F403
from gt.linalg.more import __all__ as _more
from gt.ops.autocast import mark_namespace
from gt.ops.functions import write_out

__all__ = [*_core, *_lu, *_more, *_ldl]


# For autocast, each function is PyTorch's op of its name (gt.ops.autocast), but the composites
# whose products PyTorch casts one by one (matmul, matrix_power, multi_dot) stay unmarked.
mark_namespace(globals(), [n for n in __all__ if n not in ("matmul", "matrix_power", "multi_dot")],
               lambda n: n)  # fmt: skip


def _taking_out(fn: Any) -> Any:
    """``fn`` that also takes PyTorch's ``out=`` (a tensor, or a tuple for several results)."""

    @functools.wraps(fn)
    def call(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        return result if out is None else write_out(out, result, f"linalg.{fn.__name__}")

    return call


# (outermost, over the autocast marks, whose wrappers copy the signature without ``out``)
for _name in __all__:
    _fn = globals()[_name]
    if inspect.isfunction(_fn) and "out" not in inspect.signature(_fn).parameters:
        globals()[_name] = _taking_out(_fn)


__all__ += ["LinAlgError"]  # (torch.linalg.LinAlgError; a class, not an op to mark)
