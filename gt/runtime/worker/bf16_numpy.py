"""bfloat16 on NumPy workers, computed as PyTorch's CPU kernels compute it.

With ``ml_dtypes`` installed NumPy holds bfloat16 arrays and its ufuncs round each result to
bfloat16, but its matmul and reductions accumulate in bfloat16 too, where PyTorch's CPU kernels
compute in float32 and round once (their "opmath" type). So, from the first bfloat16 array a
NumPy worker makes, each of its kernels given a bfloat16 argument runs on float32 copies of them,
and its float32 results are rounded to bfloat16 where the op's dtype rule says the result is
bfloat16. Until then the kernels run as they are (no cost for programs without bfloat16).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt.runtime import ops as O
from gt.runtime.ops.base import Handler


def compute_in_float32(handlers: list, bf16: Any) -> None:
    """Wrap every handler of ``handlers`` (in place, indexed by opcode) as the module says."""
    for i, op in enumerate(O.REGISTRY):
        h = handlers[i]
        if h is not None and op.dtype is not None:
            handlers[i] = _opmath(op, h, bf16)


def _opmath(op: Any, h: Handler, bf16: Any) -> Handler:
    wide = np.dtype(np.float32)
    rule = op.dtype

    def run(v: list, at: Any) -> Any:
        for a in v:
            if getattr(a, "dtype", None) == bf16:
                break
        else:
            return h(v, at)
        names = [_name(a, bf16) for a in v]
        out = h([a.astype(wide) if getattr(a, "dtype", None) == bf16 else a for a in v], at)
        if rule(names, at) != "bfloat16":
            return out
        if isinstance(out, (tuple, list)):
            return type(out)(_narrow(o, wide, bf16) for o in out)
        return _narrow(out, wide, bf16)

    return run


def _name(a: Any, bf16: Any) -> str | None:
    dt = getattr(a, "dtype", None)
    if dt is None:
        return None
    return "bfloat16" if dt == bf16 else dt.name


def _narrow(out: Any, wide: Any, bf16: Any) -> Any:
    return out.astype(bf16) if getattr(out, "dtype", None) == wide else out
