"""Chains of a replayed step's in-place updates, run a cache-sized block at a time on NumPy.

An optimizer's update is a few in-place passes over the same large tensors: SGD with momentum
is ``buf.mul_(m)``, ``buf.add_(g)``, ``p.add_(buf, alpha=-lr)``. Run one after the other, each
pass streams megabytes through the cache that the next pass reads again; run over one block of
64k elements at a time, the block stays in the cache for all of them (PyTorch's CPU kernels fuse
``add_(alpha=)`` into one pass for the same reason). Every element still goes through the same
operations in the same order, so the results are the step-by-step results bit for bit.

:func:`find_chains` picks, in a compiled plan, the runs of consecutive in-place ``mul``/``add``/
``sub``/``add_scaled`` steps that share tensors; :class:`Chain` runs one blocked when its arrays
allow it (NumPy arrays of one shape and float dtype, contiguous, large, and targets that nothing
else refers to, exactly as each step's own kernel would decide to write in place), and step by
step otherwise. Pure NumPy: no sockets.
"""

from __future__ import annotations

import numpy as np

from gt.runtime import ops as O
from gt.runtime.ops.base import private

#: Elements per block: four float32 operands of one block fit in a core's L2 cache.
BLOCK = 1 << 16
#: A chain runs blocked only over arrays of at least this many elements (below it, everything
#: stays in the cache anyway and the per-block calls would cost more than they save).
MIN_ELEMENTS = 2 * BLOCK

_KINDS = {O.OPCODE["mul"]: 0, O.OPCODE["add"]: 1, O.OPCODE["sub"]: 2, O.OPCODE["add_scaled"]: 3}
_UFUNCS = (np.multiply, np.add, np.subtract)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_ATTRS = (frozenset(("inplace",)), frozenset(("inplace", "alpha")))


def _chainable(step: tuple) -> bool:
    """Whether a compiled step is an in-place update of its first input that a chain may hold."""
    _h, idx, at, o, _drop, code, _src, own = step
    kind = _KINDS.get(code)
    if kind is None or own < 0 or len(idx) != 2 or idx[0] != o or type(at) is not dict:
        return False
    if not at.get("inplace") or frozenset(at) != _ATTRS[kind == 3]:
        return False
    return kind != 3 or type(at["alpha"]) in (float, int)


def find_chains(steps: list) -> list[tuple[int, int]]:
    """``(start, stop)`` of every run of two or more consecutive chainable steps in which each
    step updates or reads a tensor that an earlier step of the run updates (an optimizer's
    update of one parameter; a constant both use does not join two runs)."""
    runs: list[tuple[int, int]] = []
    start, targets = -1, set()
    for i, step in enumerate(steps):
        joins = _chainable(step)
        if joins and start >= 0 and targets & set(step[1]):
            targets.add(step[3])
            continue
        if start >= 0 and i - start >= 2:
            runs.append((start, i))
        start, targets = (i, {step[3]}) if joins else (-1, set())
    if start >= 0 and len(steps) - start >= 2:
        runs.append((start, len(steps)))
    return runs


class Chain:
    """One run of in-place updates (compiled steps, see :class:`gt.runtime.worker.hot.Compiled`)."""

    __slots__ = ("steps", "targets", "reads", "ops", "at")

    def __init__(self, steps: list) -> None:
        self.steps = steps
        self.at = 0  # the step running now, when the chain runs step by step
        self.targets = tuple(dict.fromkeys(s[3] for s in steps))
        self.reads = tuple(dict.fromkeys(j for s in steps for j in s[1]))
        # (ufunc kind, target register, operand register, alpha)
        self.ops = tuple(
            (_KINDS[s[5]], s[3], s[1][1], float(s[2]["alpha"]) if _KINDS[s[5]] == 3 else 0.0)
            for s in steps
        )

    def blocked(self, r: list) -> bool:
        """Run the chain a block at a time if its registers allow it; False (nothing done) if not."""
        shape = dtype = None
        for j in self.reads:
            v = r[j]
            if type(v) is np.ndarray:
                if shape is None:
                    shape, dtype = v.shape, v.dtype
                    if dtype not in _FLOATS or v.size < MIN_ELEMENTS:
                        return False
                elif v.shape != shape or v.dtype != dtype:
                    return False
                if not v.flags.c_contiguous:
                    return False
            elif j in self.targets or type(v) not in (float, int):
                return False
        v = None  # (a reference held here would make a target look shared)
        for k in self.targets:  # as each step's kernel would see it (see Compiled.run's `own`)
            x = r[k]
            r[k] = None
            ok = private(x)
            r[k] = x
            if not ok:
                return False
        x = None
        flat = {j: r[j].reshape(-1) if type(r[j]) is np.ndarray else r[j] for j in self.reads}
        n = r[self.targets[0]].size
        tmp = np.empty(min(BLOCK, n), dtype) if any(op[0] == 3 for op in self.ops) else None
        ufuncs = _UFUNCS
        for s in range(0, n, BLOCK):
            e = s + BLOCK if s + BLOCK < n else n
            for kind, t, b, alpha in self.ops:
                xc = flat[t][s:e]
                bv = flat[b]
                if type(bv) is np.ndarray:
                    bv = bv[s:e]
                if kind == 3:
                    t_ = tmp[: e - s]
                    np.multiply(bv, alpha, out=t_)
                    np.add(xc, t_, out=xc)
                else:
                    ufuncs[kind](xc, bv, out=xc)
        for step in self.steps:
            for d in step[4]:
                r[d] = None
        return True

    def stepwise(self, r: list) -> None:
        """Run the steps one by one as :meth:`Compiled.run` would (``self.at`` says which step
        raised, if one does)."""
        for k, (h, idx, at, o, drop, _code, _src, own) in enumerate(self.steps):
            self.at = k
            vals = [r[j] for j in idx]
            if own >= 0:
                r[own] = None
            r[o] = h(vals, at)
            for d in drop:
                r[d] = None
