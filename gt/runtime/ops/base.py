"""What an op-registry entry is (:class:`Op`), and the helpers entries are written with.

An entry says everything every process needs to know about one primitive:

* the client: how to turn a call into an instruction (``api``), the result's shape and dtype
  (``shape``, ``dtype``), what backward needs (``saves``) and the derivative (``grad``);
* the dispatcher's planner: the same shape and dtype rules, whether the op creates a tensor, and
  which family of sharding rules applies (``shard``, ``partial``, ``reduce``);
* the worker: the kernel, written once against ``xp`` (NumPy or CuPy; see :class:`KernelEnv`).

Pure: nothing here imports another part of GT but :mod:`gt.shapes` and :mod:`gt.errors`, so every
process can import the registry. Derivative rules use only the methods of the tensors they are
given (no import of :mod:`gt.tensor`), so they run on the client like any user code.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from gt.errors import ShapeError

Shape = tuple[int, ...]
#: ``(input shapes, attrs) -> result shape``; an immediate's shape is ``()``.
ShapeRule = Callable[[list, Any], Shape]
#: ``(input dtypes, attrs) -> result dtype``; an immediate's dtype is ``None``.
DtypeRule = Callable[[list, Any], str]
#: ``(argument values, attrs) -> array``, made for one array backend by ``kernel(backend)``.
Handler = Callable[[list, Any], Any]


class KernelEnv(Protocol):
    """What a kernel factory is given: the array module, and the few functions that have no
    common spelling in NumPy and CuPy (found by the worker's backend, the only module that
    imports CuPy)."""

    xp: Any  # numpy or cupy
    erf: Callable[[Any], Any]  # the error function
    scatter_add: Callable[[Any, Any, Any], None]  # a[key] += v with repeated indices accumulating
    special: Callable[[str], Callable[..., Any]]  # SciPy-named special functions (gammaln ...)


#: ``(node, grad of the output) -> one gradient (or None) per input``.
GradRule = Callable[[Any, Any], tuple]

#: What an op does on a worker: ``compute`` runs its kernel, ``create`` runs its kernel with no
#: tensor inputs (the planner places the result by the signal's rule), ``io`` is handled by the
#: worker itself (upload, fetch, free ...), ``comm`` moves data between workers.
KINDS = ("compute", "create", "io", "comm")
#: Families of sharding rules (see :mod:`gt.runtime.sharding.rules`); ``None`` runs on one worker.
SHARD_FAMILIES = ("elementwise", "matmul", "reduce", "along_axis", "reshape", "transpose",
                  "expand", "getitem", "concat")  # fmt: skip
#: How partial results pass through an elementwise op: ``copy`` (any partial, unchanged),
#: ``unary`` (partial sums through an op linear in its one input; a cast only to a float dtype),
#: ``sum`` (``a + b``, ``a - b`` of two partial sums), ``mul`` (a partial sum times a replicated
#: value), ``div`` (a partial-sum numerator over a replicated value).
PARTIAL_RULES = ("copy", "unary", "sum", "mul", "div")


@dataclass(frozen=True)
class Op:
    """One primitive of the instruction set.

    Attributes:
        name: the primitive's name (also the key of the derivative and the trace's op names).
        code: its opcode on the wire; fixed, never reused.
        kind: one of :data:`KINDS`.
        arity: how many arguments (tensor ids or immediates) it takes; ``None``: any number.
        shape: the result shape rule (``None`` for ops with no result).
        dtype: the result dtype rule.
        kernel: ``kernel(env)`` returns the handler that runs it on ``env.xp`` (:class:`KernelEnv`).
        grad: the derivative rule (``None``: not differentiable, gradients stop here).
        saves: what backward needs: ``"inputs"``, ``"output"``, ``"others"`` (the inputs
            where each one's derivative reads only the other operand, ``a * b`` and ``a @ b``:
            an input is kept only when another one wants a gradient), ``"divisor"``
            (``a / b``: ``b``, and ``a`` only when ``b`` wants a gradient), or a function
            ``(inputs, output) -> tuple`` of tensors to keep.
        shard: the family of sharding rules (:data:`SHARD_FAMILIES`), ``None``: one worker.
        partial: how partial sums pass through it (:data:`PARTIAL_RULES`), ``None``: they don't.
        reduce: for reductions, how per-shard results combine (``"sum"``, ``"max"``, ``"min"``).
        methods: names of the :class:`gt.Tensor` methods (and ``gt.<name>`` functions) that ``api``
            implements, so a new primitive reaches users without editing the tensor class.
        api: ``api(x, *args, **kwargs)``: the user-facing call; validates the arguments and calls
            ``x._apply(name, inputs, attrs)`` (it may also compose other ops).
        doc: one line for the README's op table and ``help()``.
    """

    name: str
    code: int
    kind: str = "compute"
    arity: int | None = 1
    shape: ShapeRule | None = None
    dtype: DtypeRule | None = None
    kernel: Callable[[KernelEnv], Handler] | None = None
    grad: GradRule | None = None
    saves: Any = None
    shard: str | None = None
    partial: str | None = None
    reduce: str | None = None
    methods: tuple[str, ...] = ()
    api: Callable[..., Any] | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind {self.kind!r} is not one of {KINDS}")
        if self.shard is not None and self.shard not in SHARD_FAMILIES:
            raise ValueError(f"{self.name}: sharding family {self.shard!r} is unknown")
        if self.partial is not None and self.partial not in PARTIAL_RULES:
            raise ValueError(f"{self.name}: partial rule {self.partial!r} is unknown")
        if self.kind in ("compute", "create") and (self.kernel is None or self.shape is None):
            raise ValueError(f"{self.name}: a {self.kind} op needs a kernel and a shape rule")
        if self.methods and self.api is None:
            raise ValueError(f"{self.name}: methods {self.methods} need an api function")

    def saved(self, inputs: tuple, out: Any, needs: tuple = ()) -> tuple:
        """The tensors backward keeps for this op, given its inputs, output, and which inputs
        want a gradient (``needs``; all of them when not given). What is not kept (``None`` in
        its place) is neither held alive nor checked for in-place changes, as in PyTorch, where
        ``x * 2`` keeps no ``x``."""
        s = self.saves
        if s is None:
            return ()
        if s == "inputs":
            return inputs
        if s == "others" and needs:
            wanted = sum(map(bool, needs))
            return tuple([t if wanted - bool(w) > 0 else None for t, w in zip(inputs, needs)])
        if s == "divisor" and needs:
            return (inputs[0] if needs[1] else None, inputs[1])
        if s in ("others", "divisor"):
            return inputs
        if s == "output":
            return (out._alias(),)
        return tuple(s(inputs, out))


# ----------------------------------------------------------------------------- shape and dtype rules
def half_in_float32(make: Callable[[Any], Handler]) -> Callable[[Any], Handler]:
    """A kernel factory whose handler computes float16 and bfloat16 arrays in float32 and rounds
    the result once, as PyTorch's CPU and CUDA kernels do for half tensors (their "opmath"
    type), where the kernel's own steps would each round to half (``sigmoid``, ``cumprod``)."""

    def made(be: Any) -> Handler:
        h = make(be)
        wide = be.xp.float32

        def run(v: list, at: Any) -> Any:
            half = None
            for a in v:
                dt = getattr(a, "dtype", None)
                if dt is not None and dt.itemsize == 2 and dt.kind in "fV":
                    half = dt
                    break
            if half is None:
                return h(v, at)
            args = [a.astype(wide) if getattr(a, "dtype", None) == half else a for a in v]
            return h(args, at).astype(half)

        return run

    return made


def sigmoid_into(xp: Any, x: Any, out: Any) -> Any:
    """``1 / (1 + e^-x)`` of a real floating array, written into ``out`` (returned): PyTorch's CPU
    formula, in 4 passes where a split by sign took 9 (an LSTM's gates are three sigmoids a
    step). Below about -88 (float32) ``e^-x`` overflows to inf and the result is the limit, 0
    (the worker ignores floating-point warnings). ``sigmoid`` and the fused recurrent loops
    share it, so they give the same bits."""
    xp.negative(x, out=out)
    xp.exp(out, out=out)
    xp.add(out, 1, out=out)
    return xp.divide(1, out, out=out)


def same_shape(shapes: list, attrs: Any) -> Shape:
    """The first input's shape (unary elementwise ops)."""
    return shapes[0]


def equal_shapes(op: str) -> Callable[[list, Any], Shape]:
    """The shape rule of an op whose two tensor inputs have one shape, the result's (a gradient
    and the input it belongs to: ``normalize_backward``, ``gelu_backward``)."""

    def rule(shapes: list, attrs: Any) -> Shape:
        if len(shapes) > 1 and shapes[1] != shapes[0]:
            raise ShapeError(f"{op}: shapes {shapes[0]} and {shapes[1]} differ")
        return shapes[0]

    return rule


def first_dtype(dtypes: list, attrs: Any) -> str:
    """``attrs["dtype"]`` when given, else the first tensor input's dtype (float32 if none)."""
    if type(attrs) is dict and isinstance(attrs.get("dtype"), str):
        return attrs["dtype"]
    for d in dtypes:
        if d is not None:
            return d
    return "float32"


def bool_dtype(dtypes: list, attrs: Any) -> str:
    """Comparisons and logical ops make bools."""
    return "bool"


def int64_dtype(dtypes: list, attrs: Any) -> str:
    """Index-valued results (argmax ...)."""
    return "int64"


def attr_shape(shapes: list, attrs: Any) -> Shape:
    """``attrs["shape"]`` (creation ops, reshape, expand)."""
    return tuple(int(d) for d in attrs["shape"])


def real_float(x: Any, op: str) -> Any:
    """``x`` as a floating tensor for a function of real arguments: integers become float32;
    complex tensors are refused, as PyTorch refuses them."""
    if x.is_floating_point():
        return x
    if x.is_complex():
        raise TypeError(f"{op} is not supported for complex tensors")
    return x.float()


# ----------------------------------------------------------------------------- derivative helpers
class Past:
    """What a rule returns for an input made by a layout-only op (a transpose) when it computed the
    gradient of that op's own input directly; the engine delivers it there and skips the op's rule.
    """

    __slots__ = ("grad",)

    def __init__(self, grad: Any):
        self.grad = grad


def dense_layout(shape: Shape, strides: tuple) -> tuple | None:
    """``strides`` where they lay ``shape`` out densely and without overlap in another order than
    row-major (the layout PyTorch gives a gradient of a tensor with those strides), else ``None``
    (row-major, or not dense: a gradient is then row-major)."""
    dims = sorted((s, d) for s, d in zip(strides, shape) if d != 1)
    step = 1
    for s, d in dims:
        if s != step:
            return None
        step *= d
    rows, step = [], 1
    for d in reversed(shape):
        rows.append(step)
        step *= max(int(d), 1)
    return None if tuple(strides) == tuple(reversed(rows)) else tuple(strides)


def sum_to(g: Any, shape: Shape) -> Any:
    """Sum a broadcast gradient back down to ``shape`` (the inverse of broadcasting)."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1
    )
    if axes:
        g = g.sum(axes, keepdims=True)
    return g.reshape(shape)


def unbroadcast(n: Any, i: int, g: Any) -> Any:
    """The gradient for input ``i`` of node ``n`` (summed to its shape), or ``None`` if unwanted."""
    return sum_to(g, n.shapes[i]) if n.needs(i) else None


# ----------------------------------------------------------------------------- kernel helpers
def axis_arg(a: Any) -> Any:
    """A wire axis (int, list or None) as NumPy wants it."""
    return tuple(a) if type(a) is list else a


# References to an array that nothing else holds, as counted inside private() after the handler
# took it out of its argument list: the worker's table entry, the handler's local name, private()'s
# parameter and getrefcount's own argument.
_PRIVATE_REFS = 4


def private(x: Any) -> bool:
    """Whether ``x`` may be written in place: it owns its memory, is writeable, and no other
    table entry, view or saved handle refers to it (NumPy views hold a reference to their base)."""
    if getattr(x, "base", None) is not None:
        return False
    if not getattr(getattr(x, "flags", None), "writeable", True):
        return False
    return sys.getrefcount(x) <= _PRIVATE_REFS  # (a live flags object would count too)


def build_key(key: list, tensors: list) -> tuple:
    """Turn a wire index key into a Python index tuple.

    Items: ``["i", n]`` int, ``["s", start, stop, step]`` slice, ``["n"]`` None, ``["e"]`` Ellipsis,
    ``["l", [ints]]`` an int list, ``["t", k]`` the k-th index tensor in ``tensors``.
    """
    out = []
    for item in key:
        tag = item[0]
        if tag == "s":
            out.append(slice(item[1], item[2], item[3]))
        elif tag == "i":
            out.append(item[1])
        elif tag == "n":
            out.append(None)
        elif tag == "e":
            out.append(Ellipsis)
        elif tag == "l":
            out.append(np.asarray(item[1], dtype=np.int64))
        elif tag == "t":
            out.append(tensors[item[1]])
        else:
            raise ValueError(f"bad index item {item!r}")
    return tuple(out)


def has_advanced(key: list) -> bool:
    """Whether a wire key holds an int list or an index tensor (NumPy's advanced indexing)."""
    return any(item[0] in ("l", "t") for item in key)
