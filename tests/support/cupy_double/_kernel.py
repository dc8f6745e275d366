"""``cupy.ElementwiseKernel`` of the CuPy test double, for the kernels GT writes.

CuPy compiles a kernel's C source at its first call; the double *interprets* it instead, and
only the statements GT's fused chains are made of (:func:`gt.runtime.worker.hot_chain.fused_source`):
a typed local copied from a parameter, ``v = v <op> x`` for ``*``, ``+`` and ``-``, ``v = v + x *
(T)c`` and ``o = v``. Anything else fails at the first call, as a source NVRTC rejects would
(``CompileException``). Every operation rounds to the locals' type, one at a time, as a kernel
compiled without fused multiply-adds does. Arrays must be device arrays of the declared dtype and
one shape; numbers are converted to the declared type, as CuPy converts scalars.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from . import _streams
from ._array import ndarray, unwrap

_C_TYPES = {"float": np.float32, "double": np.float64}
_BINARY = {"*": np.multiply, "+": np.add, "-": np.subtract}
_NAME = r"[A-Za-z_]\w*"
_DECL = re.compile(rf"(float|double) ({_NAME}) = ({_NAME})")
_SCALED = re.compile(rf"({_NAME}) = ({_NAME}) \+ ({_NAME}) \* \((float|double)\)({_NAME})")
_BIN = re.compile(rf"({_NAME}) = ({_NAME}) ([*+-]) ({_NAME})")
_COPY = re.compile(rf"({_NAME}) = ({_NAME})")


class CompileException(Exception):
    """What CuPy raises for a kernel source NVRTC cannot compile."""


def _params(text: str) -> list[tuple[np.dtype, str]]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        words = part.split()
        if len(words) != 2 or words[0] == "raw":
            raise TypeError(f"the double's ElementwiseKernel takes 'dtype name' params: {part!r}")
        out.append((np.dtype(words[0]), words[1]))
    return out


def _compile(operation: str) -> list[tuple]:
    program = []
    for stmt in filter(None, (s.strip() for s in operation.split(";"))):
        if m := _DECL.fullmatch(stmt):
            program.append(("decl", m[2], m[3], _C_TYPES[m[1]]))
        elif m := _SCALED.fullmatch(stmt):
            if m[1] != m[2]:
                raise CompileException(f"the double interprets only v = v + x * (T)c: {stmt}")
            program.append(("scaled", m[1], m[3], _C_TYPES[m[4]], m[5]))
        elif m := _BIN.fullmatch(stmt):
            if m[1] != m[2]:
                raise CompileException(f"the double interprets only v = v op x: {stmt}")
            program.append(("binary", m[1], _BINARY[m[3]], m[4]))
        elif m := _COPY.fullmatch(stmt):
            program.append(("copy", m[1], m[2]))
        else:
            raise CompileException(f"a statement the double cannot interpret: {stmt}")
    return program


class ElementwiseKernel:
    """``cupy.ElementwiseKernel(in_params, out_params, operation, name, ..., options=...)``."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str = "kernel",
                 reduce_dims: bool = True, preamble: str = "", no_return: bool = False,
                 return_tuple: bool = False, **kwargs: Any) -> None:  # fmt: skip
        self.in_params, self.out_params = _params(in_params), _params(out_params)
        self.operation, self.name = operation, name
        self.options = tuple(kwargs.get("options", ()))
        self._program: list | None = None
        self.launches = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._program is None:
            self._program = _compile(self.operation)  # (CuPy compiles at the first call)
        n_in, params = len(self.in_params), [*self.in_params, *self.out_params]
        if len(args) != len(params):
            raise TypeError(f"{self.name}: {len(params)} arguments expected, got {len(args)}")
        _streams.sync_current()
        env: dict[str, Any] = {}
        shape = None
        for (dt, name), a in zip(params, args):
            if type(a) is ndarray:
                if a.dtype != dt:
                    raise TypeError(f"{self.name}: {name} is {a.dtype}, declared {dt}")
                if shape is not None and a.shape != shape:
                    raise ValueError(f"{self.name}: shapes {shape} and {a.shape} differ")
                shape = a.shape
                env[name] = unwrap(a)
            elif isinstance(a, (int, float, np.generic)) and len(env) < n_in:
                env[name] = dt.type(a)  # (an input; an output must be an array)
            else:
                raise TypeError(f"{self.name}: {name} must be a device array or a number")
        outs = {name: env[name] for _dt, name in self.out_params}
        local: dict[str, Any] = {}

        def value(x: str) -> Any:
            return local[x] if x in local else env[x]

        for op in self._program:
            if op[0] == "decl":
                local[op[1]] = np.array(value(op[2]), dtype=op[3])  # a copy, in the local's type
            elif op[0] == "scaled":
                t, b, ctype, c = op[1], op[2], op[3], op[4]
                local[t] = local[t] + value(b) * ctype(value(c))
            elif op[0] == "binary":
                local[op[1]] = op[2](local[op[1]], value(op[3]))
            elif op[1] in outs:
                outs[op[1]][...] = value(op[2])  # written once every value is computed
            else:
                raise CompileException(f"{op[1]} is not an output of {self.name}")
        self.launches += 1
        given = args[n_in:]
        return given[0] if len(given) == 1 else given
