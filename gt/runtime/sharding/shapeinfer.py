"""Result shapes and dtypes of primitive instructions, as the dispatcher's planner sees them.

The client already knows every shape, but only the ids travel on the wire; the planner needs the
shapes to split tensors, so it infers them again from the inputs' shapes and the attributes. Any
instruction it cannot read (a malformed one, an op it does not know) gets shape ``None``, which
the planner treats as "keep it on one worker": the worker reports the real error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from gt import shapes as S
from gt.runtime import protocol as P

Shape = tuple[int, ...]

_BINARY = frozenset(
    P.OPCODE[n]
    for n in (
        "add", "sub", "mul", "div", "pow", "maximum", "minimum", "lt", "le", "gt", "ge", "eq", "ne",
        "floor_divide", "remainder", "where", "clip",
    )
)  # fmt: skip
_UNARY = frozenset(
    P.OPCODE[n]
    for n in (
        "neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "sign", "cast",
        "copy", "logical_not", "erf",
    )
)  # fmt: skip
_BOOL_OUT = frozenset(P.OPCODE[n] for n in ("lt", "le", "gt", "ge", "eq", "ne", "logical_not"))
_CREATE = frozenset(P.OPCODE[n] for n in ("full", "randn", "rand", "randint", "upload", "place"))
_REDUCE = frozenset(P.OPCODE[n] for n in ("sum", "max", "min", "argmax", "argmin"))
_OP = P.OPCODE

ITEMSIZE = {
    "float16": 2,
    "float32": 4,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "bool": 1,
    "uint8": 1,
    "int8": 1,
}


def _tensor_shapes(args: list, shapes: dict[int, Shape | None]) -> list[Shape | None]:
    return [shapes.get(a) if type(a) is int else () for a in args]


def reduce_axes(attrs: Any, ndim: int) -> tuple[tuple[int, ...] | None, bool]:
    """The normalized axes (``None`` = all) and keepdims of a reduction's attributes."""
    if not attrs:
        return None, False
    axis = attrs.get("axis")
    keep = bool(attrs.get("keepdims", False))
    if axis is None:
        return None, keep
    axes = (axis,) if type(axis) is int else tuple(axis)
    return tuple(sorted({a % max(ndim, 1) for a in axes})), keep


def key_items(key: list, tensor_shapes: list[Shape | None]) -> tuple | None:
    """A NumPy index standing in for a wire key (index tensors become zero arrays of their shape)."""
    out: list = []
    for item in key:
        tag = item[0]
        if tag == "s":
            out.append(slice(item[1], item[2], item[3]))
        elif tag == "i":
            out.append(int(item[1]))
        elif tag == "n":
            out.append(None)
        elif tag == "e":
            out.append(Ellipsis)
        elif tag == "l":
            out.append(np.asarray(item[1], dtype=np.int64))
        elif tag == "t":
            shp = tensor_shapes[item[1]]
            if shp is None:
                return None
            out.append(np.zeros(shp, dtype=np.int64))
        else:
            return None
    return tuple(out)


def infer(code: int, args: list, attrs: Any, shapes: dict[int, Shape | None]) -> Shape | None:
    """The result shape of one instruction, or ``None`` when it cannot be known here."""
    try:
        return _infer(code, args, attrs, shapes)
    except Exception:  # a malformed or failing instruction: the worker will say what is wrong
        return None


def _infer(code: int, args: list, attrs: Any, shapes: dict[int, Shape | None]) -> Shape | None:
    if code in _UNARY:
        return shapes.get(args[0]) if type(args[0]) is int else None
    ins = _tensor_shapes(args, shapes)
    if any(s is None for s in ins):
        return None
    if code in _BINARY:
        out: Shape = ()
        for s in ins:
            out = S.broadcast(out, s)
        return out
    if code in _CREATE:
        return tuple(int(d) for d in attrs["shape"])
    if code == _OP["matmul"]:
        return S.matmul(ins[0], ins[1])
    if code in _REDUCE:
        axes, keep = reduce_axes(attrs, len(ins[0]))
        return S.reduce(ins[0], axes, keep)
    if code == _OP["reshape"]:
        return S.reshape(ins[0], attrs["shape"])
    if code == _OP["transpose"]:
        return tuple(ins[0][p] for p in attrs["perm"])
    if code == _OP["expand"]:
        return S.expand(ins[0], attrs["shape"])
    if code == _OP["getitem"]:
        key = key_items(attrs["key"], ins[1:])
        return None if key is None else S.index_shape(ins[0], key)
    if code in (_OP["setitem"], _OP["index_add"]):
        return ins[0]
    if code == _OP["concat"]:
        return S.concat(ins, attrs["axis"] % len(ins[0]))
    if code == _OP["arange"]:
        return (max(0, math.ceil((attrs["stop"] - attrs["start"]) / attrs["step"])),)
    if code == _OP["eye"]:
        return (int(attrs["n"]), int(attrs["m"] if attrs.get("m") is not None else attrs["n"]))
    return None


def infer_dtype(code: int, args: list, attrs: Any, dtype_of: Callable[[int], str | None]) -> str:
    """The result dtype as far as the planner cares (for byte counts); a best guess."""
    if type(attrs) is dict and type(attrs.get("dtype")) is str:
        return attrs["dtype"]
    if code in _BOOL_OUT:
        return "bool"
    if code in (_OP["argmax"], _OP["argmin"]):
        return "int64"
    for a in args:
        if type(a) is int:
            d = dtype_of(a)
            if d is not None:
                return d
    return "float32"


def nbytes(shape: Shape | None, dtype: str) -> int:
    """Bytes of a tensor (0 when the shape is unknown)."""
    return 0 if shape is None else S.prod(shape) * ITEMSIZE.get(dtype, 4)
