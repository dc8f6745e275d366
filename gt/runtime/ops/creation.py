"""Registry entries: tensors made on the worker from attributes alone (no tensor inputs).

Random tensors are drawn from the seed the client put in ``attrs`` (see ``gt.manual_seed``), so the
values do not depend on which worker, or how many, make them.
"""

from __future__ import annotations

import math
from typing import Any

from gt.runtime.ops.base import Op, Shape, attr_shape, first_dtype


def _arange_shape(shapes: list, attrs: Any) -> Shape:
    return (max(0, math.ceil((attrs["stop"] - attrs["start"]) / attrs["step"])),)


def _eye_shape(shapes: list, attrs: Any) -> Shape:
    m = attrs.get("m")
    return (int(attrs["n"]), int(attrs["n"] if m is None else m))


def _k_full(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.full(tuple(at["shape"]), v[0], dtype=at["dtype"])


def _k_arange(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.arange(at["start"], at["stop"], at["step"], dtype=at["dtype"])


def _k_eye(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.eye(at["n"], at["m"], dtype=at["dtype"])


def _k_random(draw: str) -> Any:
    def make(be: Any) -> Any:
        xp = be.xp

        def h(v: list, at: dict) -> Any:
            rng = xp.random.default_rng(at["seed"])
            shape = tuple(at["shape"])
            if draw == "integers":
                r = rng.integers(at["low"], at["high"], size=shape)
            else:
                r = getattr(rng, draw)(shape, dtype=xp.float64)
            return r.astype(at["dtype"], copy=False)

        return h

    return make


def _create(name: str, code: int, kernel: Any, shape: Any = attr_shape, arity: int = 0,
            doc: str = "") -> Op:  # fmt: skip
    return Op(name, code, kind="create", arity=arity, shape=shape, dtype=first_dtype,
              kernel=kernel, doc=doc)  # fmt: skip


ENTRIES: list[Op] = [
    _create("full", 2, _k_full, arity=1, doc="attrs.shape filled with the immediate argument"),
    _create("arange", 3, _k_arange, _arange_shape, doc="attrs.start:stop:step"),
    _create("eye", 4, _k_eye, _eye_shape, doc="identity of attrs.n rows, attrs.m columns"),
    _create("randn", 5, _k_random("standard_normal"), doc="standard normal, from attrs.seed"),
    _create("rand", 6, _k_random("random"), doc="uniform in [0, 1), from attrs.seed"),
    _create("randint", 7, _k_random("integers"), doc="integers in [attrs.low, attrs.high)"),
]
