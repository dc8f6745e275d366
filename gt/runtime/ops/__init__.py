"""The op registry: one entry per primitive of GT's instruction set.

Everything that knows about a primitive reads it here: the client (result shapes and dtypes, what
backward saves, the derivative, the user-facing method), the dispatcher's planner (shapes, dtypes,
the sharding family), the worker (the kernel, written once against ``xp``) and the trace (op
names). Adding a primitive means adding an :class:`~gt.runtime.ops.base.Op` to one of the family
modules below (and its tests); see the README's "Adding a primitive".

Families: :mod:`.elementwise`, :mod:`.reduce`, :mod:`.shape`, :mod:`.creation`, :mod:`.movement`,
:mod:`.mathfn` (stable math, rounding, BCE), :mod:`.scan` (products), :mod:`.sort`, :mod:`.conv`
(sliding windows), :mod:`.index` (scatter), :mod:`.integer` (bitwise ops and shifts),
:mod:`.search` (``searchsorted``), :mod:`.linalg` (inverse, solves, determinants, Cholesky),
:mod:`.linalg_decomp` (QR, eigh, SVD), :mod:`.linalg_eig` (general eigendecomposition),
:mod:`.gammafn` (lgamma, digamma, polygamma, erfinv, gamma sampling), :mod:`.trig` (inverse
trigonometric and hyperbolic functions, atan2, fmod, signbit, gcd, lcm, nextafter, frexp),
:mod:`.running` (cummax, cummin, logcumsumexp), :mod:`.special_more` (Bessel I0/I1, Hurwitz zeta,
incomplete gamma, erfcx, Bessel J/Y/K, Airy Ai, whose kernel is :mod:`.airy`), :mod:`.complexnum`
(complex parts, conjugate, argument, the real-pair views, FFTs), :mod:`.sampling`
(``multinomial``'s checked probabilities), :mod:`.pooling` (max pooling's kernels),
:mod:`.recurrent` (an LSTM layer's time loop), :mod:`.normalization` (the core of ``layer_norm``
and ``group_norm``, each way), :mod:`.gelu` (the exact ``gelu``, each way), :mod:`.padding` (``pad``'s border modes, each
way).
"""

from __future__ import annotations

from gt.runtime.ops import (
    complexnum,
    conv,
    creation,
    elementwise,
    gammafn,
    gelu,
    index,
    integer,
    linalg,
    linalg_decomp,
    linalg_eig,
    linalg_info,
    mathfn,
    movement,
    nll,
    normalization,
    padding,
    pooling,
    recurrent,
    reduce,
    running,
    sampling,
    scan,
    search,
    shape,
    sort,
    special_more,
    trig,
)
from gt.runtime.ops.base import Op, Past, sum_to


def _build(entries: list[Op]) -> tuple[tuple[Op, ...], dict[str, Op]]:
    by_code: dict[int, Op] = {}
    by_name: dict[str, Op] = {}
    for op in entries:
        if op.code in by_code:
            raise ValueError(
                f"opcode {op.code} is taken by both {by_code[op.code].name} and {op.name}"
            )
        if op.name in by_name:
            raise ValueError(f"two registry entries are named {op.name!r}")
        by_code[op.code] = op
        by_name[op.name] = op
    if sorted(by_code) != list(range(len(by_code))):
        missing = sorted(set(range(max(by_code) + 1)) - set(by_code))
        raise ValueError(f"opcodes must be dense from 0; missing {missing}")
    return tuple(by_code[c] for c in range(len(by_code))), by_name


#: Every entry, indexed by opcode.
REGISTRY, BY_NAME = _build(
    [
        *movement.ENTRIES,
        *creation.ENTRIES,
        *elementwise.ENTRIES,
        *reduce.ENTRIES,
        *shape.ENTRIES,
        *mathfn.ENTRIES,
        *scan.ENTRIES,
        *sort.ENTRIES,
        *conv.ENTRIES,
        *index.ENTRIES,
        *integer.ENTRIES,
        *search.ENTRIES,
        *linalg.ENTRIES,
        *linalg_decomp.ENTRIES,
        *gammafn.ENTRIES,
        *trig.ENTRIES,
        *running.ENTRIES,
        *special_more.ENTRIES,
        *complexnum.ENTRIES,
        *linalg_eig.ENTRIES,
        *linalg_info.ENTRIES,
        *nll.ENTRIES,
        *sampling.ENTRIES,
        *pooling.ENTRIES,
        *recurrent.ENTRIES,
        *normalization.ENTRIES,
        *gelu.ENTRIES,
        *padding.ENTRIES,
    ]
)
#: Op names by opcode (what traces carry in their header).
OPS: tuple[str, ...] = tuple(op.name for op in REGISTRY)
#: Opcode by name.
OPCODE: dict[str, int] = {op.name: op.code for op in REGISTRY}
#: Transfers and collectives: instructions the planner inserts and workers run over peer links.
COMM_OPS = frozenset(op.code for op in REGISTRY if op.kind == "comm")
SEND, RECV, BCAST, SCATTER, GATHER = (
    OPCODE[n] for n in ("send", "recv", "bcast", "scatter", "gather")
)
ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, CHUNK = (
    OPCODE[n] for n in ("all_gather", "all_reduce", "reduce_scatter", "chunk")
)


def get(name: str) -> Op:
    """The entry named ``name``.

    Raises:
        KeyError: no primitive has that name.
    """
    return BY_NAME[name]


def op_name(code: object) -> str:
    """The name of opcode ``code`` (its repr when it is not one)."""
    return OPS[code] if type(code) is int and 0 <= code < len(OPS) else repr(code)


__all__ = [
    "ALL_GATHER",
    "ALL_REDUCE",
    "BCAST",
    "BY_NAME",
    "CHUNK",
    "COMM_OPS",
    "GATHER",
    "OPCODE",
    "OPS",
    "Op",
    "Past",
    "RECV",
    "REDUCE_SCATTER",
    "REGISTRY",
    "SCATTER",
    "SEND",
    "get",
    "op_name",
    "sum_to",
]
