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
step otherwise. On CuPy workers a chain runs as one elementwise kernel instead (:meth:`Chain.fused`, the kernel's
source from :func:`fused_source`): one pass over the arrays instead of one per step, compiled
without fused multiply-adds so every element is rounded as the steps would round it. No sockets.
"""

from __future__ import annotations

import math
from typing import Any

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


#: dtype -> (its name in a kernel's parameters, its C type in the kernel's code)
_C_TYPES = {np.dtype(np.float32): ("float32", "float"), np.dtype(np.float64): ("float64", "double")}
_C_OPS = ("*", "+", "-")


def fused_source(ops: tuple, targets: tuple, reads: tuple, scalars: frozenset,
                 types: tuple[str, str]) -> tuple[str, str, str]:  # fmt: skip
    """``(in_params, out_params, operation)`` of a CuPy elementwise kernel that runs a chain's
    ``ops`` (``(kind, target, operand, alpha)`` over registers) on every element.

    Parameters are named by position, not by register, and each ``add_scaled``'s alpha is a
    parameter (``c<k>``, a double, after the registers), so every chain of the same steps over the
    same dtype has the same source: CuPy compiles it once, not once per parameter or learning rate.
    Each register the chain reads (in ``reads``' order, position ``p``) is an input (``i<p>`` an
    array it updates, ``a<p>`` one it only reads, ``s<p>`` a number); each it updates is an output
    (``o<p>``) too, written once at the end from a local that the steps update in their order.
    ``add_scaled``'s ``x + b * alpha`` is a product then a sum, two roundings, with alpha rounded to
    the arrays' type first, as its own kernel does them.
    """
    dtype, ctype = types
    pos = {j: p for p, j in enumerate(reads)}

    def name(j: int) -> str:
        p = pos[j]
        return f"v{p}" if j in targets else f"s{p}" if j in scalars else f"a{p}"

    ins = [
        f"{dtype} {'i' if j in targets else 's' if j in scalars else 'a'}{pos[j]}" for j in reads
    ]
    body = [f"{ctype} v{pos[t]} = i{pos[t]};" for t in targets]
    k = 0
    for kind, t, b, _alpha in ops:
        v = f"v{pos[t]}"
        if kind == 3:
            ins.append(f"float64 c{k}")
            body.append(f"{v} = {v} + {name(b)} * ({ctype})c{k};")
            k += 1
        else:
            body.append(f"{v} = {v} {_C_OPS[kind]} {name(b)};")
    body += [f"o{pos[t]} = v{pos[t]};" for t in targets]
    outs = ", ".join(f"{dtype} o{pos[t]}" for t in targets)
    return ", ".join(ins), outs, " ".join(body)


class Chain:
    """One run of in-place updates (compiled steps, see :class:`gt.runtime.worker.hot.Compiled`)."""

    __slots__ = ("steps", "targets", "reads", "ops", "at", "kernel", "launches")

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
        self.kernel: Any = None  # (a backend's kernel factory, for fused(); None: not fused)
        self.launches = 0  # times it ran as one kernel (the worker's stats: hot_fused)

    def fused(self, r: list) -> bool:
        """On CuPy arrays, run the chain as one elementwise kernel where each step would have
        written in place; False (nothing done) if not."""
        make = self.kernel
        if make is None:
            return False
        shape = dtype = None
        scalars = []
        for j in self.reads:
            v = r[j]
            if type(v) in (float, int):
                if j in self.targets:
                    return False
                scalars.append(j)
                continue
            if type(v) is np.ndarray or not hasattr(v, "shape") or not hasattr(v, "flags"):
                return False
            if shape is None:
                shape, dtype = v.shape, v.dtype
                if dtype not in _C_TYPES:
                    return False
            elif v.shape != shape or v.dtype != dtype:
                return False
            if not v.flags.c_contiguous:
                return False
        if not all(math.isfinite(op[3]) for op in self.ops):
            return False
        v = None  # (a reference held here would make a target look shared)
        if not self._targets_private(r):
            return False
        ins, outs, body = fused_source(self.ops, self.targets, self.reads, frozenset(scalars),
                                       _C_TYPES[dtype])  # fmt: skip
        kernel = make(ins, outs, body, "gt_chain")
        if kernel is None:
            return False
        alphas = [op[3] for op in self.ops if op[0] == 3]
        try:
            kernel(*[r[j] for j in self.reads], *alphas, *[r[t] for t in self.targets])
        except Exception:  # it would not compile or launch here: the steps, from now on
            self.kernel = None
            return False
        self.launches += 1
        self._dropped(r)
        return True

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
        if not self._targets_private(r):
            return False
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
        self._dropped(r)
        return True

    def _targets_private(self, r: list) -> bool:
        """Whether each step's kernel would write its target in place (see ``Compiled.run``'s
        ``own``: the register is the one reference the eager path would not hold)."""
        for k in self.targets:
            x = r[k]
            r[k] = None
            ok = private(x)
            r[k] = x
            if not ok:
                return False
        return True

    def _dropped(self, r: list) -> None:
        """Drop the temporaries whose last use was in the chain."""
        for step in self.steps:
            for d in step[4]:
                r[d] = None

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
