"""The ``where`` primitive's kernel: NumPy's ``where``, and for the masking it does most (a
gradient kept where a mask holds, 0 elsewhere) an exact bitwise AND, several times faster."""

from __future__ import annotations

from typing import Any

import numpy as np

_SAME_SIZE_INT = {2: np.int16, 4: np.int32, 8: np.int64}


def k_where(be: Any) -> Any:
    """``where(c, a, b)``'s kernel (``attrs.dtype``: the result's, when given)."""
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        c, a, b = v
        if (
            xp is np
            and type(b) is float
            and b == 0.0
            and type(a) is np.ndarray
            and a.dtype.kind == "f"
            and type(c) is np.ndarray
            and c.dtype == np.bool_
        ):
            # Masking (relu's gradient, ...): clearing the bits where the mask is False is several
            # times faster than np.where and exact (a product with the mask would turn a negative
            # into -0.0 and an inf into nan there).
            bits = _SAME_SIZE_INT.get(a.dtype.itemsize)
            if bits is not None:
                # the mask in the values' layout: a mask taken of a transposed result (a Linear
                # layer's, see matmul_numpy) would make the AND walk one of them across rows,
                # which costs more than reordering the one-byte mask first
                if c.shape == a.shape and c.ndim > 1:
                    if a.flags.c_contiguous and not c.flags.c_contiguous:
                        c = np.ascontiguousarray(c)
                    elif a.flags.f_contiguous and not c.flags.f_contiguous:
                        c = np.asfortranarray(c)
                keep = c.astype(bits)
                np.negative(keep, out=keep)  # all ones where True
                r = (a.view(bits) & keep).view(a.dtype)
                return r.astype(at["dtype"], copy=False) if at else r
        r = xp.where(c, a, b)
        return r.astype(at["dtype"], copy=False) if at else r

    return h
