"""``gt.linalg``: PyTorch's ``torch.linalg`` on GT tensors, differentiable.

:mod:`gt.linalg.core` has the norms, products, the registry's primitives (``inv``, ``solve``,
``det``, ``slogdet``, ``cholesky``, ``solve_triangular``, ``qr``, ``eigh``, ``svd``) and what is
built on the SVD; :mod:`gt.linalg.lu` the LU factorisation with partial pivoting and what uses it;
:mod:`gt.linalg.more` ``matrix_exp``, ``cond``, ``solve_ex``, ``tensorinv``, ``tensorsolve``,
``vander`` and the Cholesky solves. Not here: complex dtypes, ``eig``/``eigvals``,
``householder_product``, the LDL factorisation.
"""

from __future__ import annotations

from gt.linalg.core import *  # noqa: F403 - the public names of each part (see their __all__)
from gt.linalg.core import __all__ as _core
from gt.linalg.lu import *  # noqa: F403
from gt.linalg.lu import __all__ as _lu
from gt.linalg.more import *  # noqa: F403
from gt.linalg.more import __all__ as _more

__all__ = [*_core, *_lu, *_more]
