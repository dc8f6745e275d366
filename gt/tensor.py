"""``gt.Tensor``: a client-side handle to an array that lives on a worker.

A tensor knows its id, shape and dtype; the data stays on the worker until a sync point
(``numpy()``, ``item()``, ``repr``, ``float()``). Every op infers the result's shape and dtype here,
queues one primitive instruction and returns at once. The ops themselves live in mixins under
``gt/ops``; this module keeps the handle, the sync points and the hot plumbing (``_binary``,
``_unary``) that every elementwise op goes through.

Tensors are values: no two tensors share memory as far as a program can observe. An in-place op
(``x += 1``, ``x[0] = 5``, ``x.zero_()``) changes ``x`` and only ``x`` -- never a tensor made from it
by slicing or reshaping, and never the tensor it was made from. (PyTorch's views share memory;
GT's tensors may live on different workers, so they do not.)
"""

from __future__ import annotations

import copy
import numbers
from threading import get_ident
from typing import Any

import numpy as np

from gt import shapes as S
from gt._dtype import BY_NAME, name_of
from gt._dtype import dtype as _DType
from gt.autograd import _mode, record
from gt.errors import DtypeError
from gt.grad_mode import INFERENCE_THREADS
from gt.ops import subclassing
from gt.ops.arith import ArithmeticOps
from gt.ops.autocast import mark_methods
from gt.ops.autograd_api import AutogradOps
from gt.ops.base import BATCHING, TensorBase, immediate
from gt.ops.compat import CompatOps
from gt.ops.composed import ComposedOps
from gt.ops.conversion import ConversionOps, host_array, numpy_operand_dtype
from gt.ops.inplace import InplaceOps, take_value
from gt.ops.layout import cloned_layout
from gt.ops.mathops import MathOps
from gt.ops.metadata import MetadataOps
from gt.ops.more_inplace import MoreInplaceOps
from gt.ops.ordering import OrderingOps
from gt.ops.reduce import ReductionOps
from gt.ops.selection import SelectionOps
from gt.ops.shaping import ShapeOps
from gt.ops.typeinfo import Size
from gt.ops.views import refuse_overlap, set_data, write_back
from gt.runtime import ops as O
from gt.runtime.client import Connection
from gt.runtime.client.signals import raise_later
from gt.runtime.ops.complexnum import complex_grad_mode
from gt.session import get_connection

_OP = O.OPCODE
_BOOL = BY_NAME["bool"]
_RESHAPE = _OP["reshape"]
_SCALARS = (int, float, bool)
_FLOATS = S.FLOAT_DTYPES
_FLOAT_SET = frozenset(_FLOATS)
_INEXACT = frozenset(S.INEXACT_DTYPES)
_COMPLEX = frozenset(S.COMPLEX_DTYPES)
#: Unary hot-path primitives that take complex numbers (``abs`` has its own path: a real result).
_COMPLEX_UNARY = frozenset(("neg", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "log1p",
                            "expm1", "copy"))  # fmt: skip
#: Binary ops that complex numbers have no meaning for (PyTorch refuses them too): orderings,
#: rounding divisions, and the special functions of real arguments.
_REAL_ONLY = frozenset(("maximum", "minimum", "lt", "le", "gt", "ge", "floor_divide",
                        "remainder", "fmod", "atan2", "gammainc", "gammaincc", "zeta", "gcd",
                        "lcm", "nextafter"))  # fmt: skip
#: Integer divisions: a zero divisor raises (PyTorch's CPU kernels raise ZeroDivisionError).
_INT_DIVISIONS = frozenset(("floor_divide", "remainder", "fmod"))
_COMPARISONS = frozenset(("lt", "le", "gt", "ge", "eq", "ne"))
#: Backward-only primitives with no derivative of their own, and the ops whose rules use them: a
#: backward pass with ``create_graph=True`` through one raises rather than return a wrong result.
_FIRST_ORDER_ONLY = {
    "cumprod_jvp": "the third derivative through prod and cumprod",
    "cumprod_grad_grad": "the third derivative through prod and cumprod",
    "standard_gamma_grad": "the second derivative through gamma samples (rsample of Gamma, Beta, "
    "Dirichlet, Chi2, StudentT)",
}


def _first_order_only(node: Any, g: Any) -> tuple:
    raise NotImplementedError(
        f"{_FIRST_ORDER_ONLY[node.op]} is not implemented in GT (a backward with "
        "create_graph=True reached it)"
    )


class Tensor(
    TensorBase,
    MetadataOps,
    AutogradOps,
    ArithmeticOps,
    MathOps,
    ReductionOps,
    ShapeOps,
    InplaceOps,
    MoreInplaceOps,
    ConversionOps,
    OrderingOps,
    SelectionOps,
    ComposedOps,
    CompatOps,
):
    """A tensor whose data lives on a GT worker.

    Create tensors with the factories (:func:`gt.randn`, :func:`gt.tensor`, ...). PyTorch's legacy
    constructor works too: ``gt.Tensor([1, 2])`` (float32 data), ``gt.Tensor(2, 3)`` (a shape).

    Attributes:
        shape: the shape, a :class:`gt.Size` (a tuple of ints).
        dtype: a :class:`gt.dtype` (``gt.float32`` ...), which is its name as a string too.
        requires_grad: whether ops on this tensor are recorded for :meth:`backward`.
        grad: the accumulated gradient (a tensor) after :meth:`backward`, or ``None``.
    """

    __slots__ = (
        "_conn",
        "id",
        "shape",
        "dtype",
        "_rg",  # requires_grad (a property, so that setting it can be checked)
        "_grad",  # grad (a property, so that reading a non-leaf's can warn)
        "_node",
        "_version",
        "_inf",  # set (True) only on tensors made inside inference_mode
        "_st",  # set only on tensors whose PyTorch strides are not row-major (gt.ops.layout)
        "_vb",  # set only on views that write back into their base (gt.ops.views)
        "_vs",  # set only on tensors that views were taken of: weak refs to them (gt.ops.views)
        "__weakref__",
        "__dict__",  # users' own attributes (p._no_weight_decay = True), as PyTorch's tensors take
    )
    __array_priority__ = 1000  # so ndarray + Tensor defers to Tensor.__radd__

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A program's subclass: its methods go through ``__torch_function__`` (their tensor
        results are of the subclass, as PyTorch's; see :mod:`gt.ops.subclassing`)."""
        super().__init_subclass__(**kwargs)
        subclassing.wrap_subclass(cls, Tensor)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        """PyTorch's default: run ``func`` and give its tensor results this class."""
        return subclassing.default_torch_function(cls, func, types, args, kwargs, Tensor)

    _proxy = False  # a handle on another tensor's value (DataView), held strongly by its views

    def __init__(
        self,
        conn: Any = None,
        tid: Any = None,
        shape: Any = None,
        dtype: Any = None,
        *more: Any,
    ):
        kind = type(dtype)
        if kind is not _DType:
            if kind is not str:  # PyTorch's legacy constructor, not GT's own calls
                self._legacy_init(conn, tid, shape, dtype, *more)
                return
            dtype = BY_NAME.get(dtype, dtype)  # the one gt.dtype object of that name
        self._conn = conn
        self.id = tid
        # a gt.Size, as PyTorch's x.shape (printed torch.Size([2, 3]), with numel())
        self.shape = shape if shape.__class__ is Size or shape is None else Size(shape)
        self.dtype = dtype
        self._rg = False
        self._grad = None
        self._node = None
        self._version = 0
        self._st = self._vb = self._vs = None  # (an unset slot raises when read, which is slow)
        if INFERENCE_THREADS and get_ident() in INFERENCE_THREADS:
            self._inf = True
        if BATCHING and tid is not None:  # vmap's batched run needs every shape (func_batching)
            BATCHING[0][tid] = (self.shape, dtype)

    def _legacy_init(self, *args: Any) -> None:
        """``Tensor(data)`` (the default dtype) or ``Tensor(*sizes)`` (uninitialised: zeros in
        GT)."""
        args = tuple(a for a in args if a is not None)
        conn = get_connection()
        if (
            not args
            or isinstance(args[0], Size)
            or all(isinstance(a, (int, np.integer)) for a in args)
        ):
            shape = (
                (0,)
                if not args
                else tuple(int(d) for d in (args[0] if isinstance(args[0], Size) else args))
            )
            made = create(conn, "full", [0.0], {"shape": list(shape), "dtype": S.DEFAULT_FLOAT})
        else:
            data = args[0]
            arr = data._host() if isinstance(data, TensorBase) else data
            made = upload(conn, host_array(arr, S.DEFAULT_FLOAT))
        self._conn, self.id, self.shape, self.dtype = conn, made.id, made.shape, made.dtype
        made.id = None
        self._rg, self._grad, self._node, self._version = False, None, None, 0
        self._st = self._vb = self._vs = None

    def __del__(self) -> None:
        try:
            tid = self.id
            if tid is not None:
                self._conn.free(tid)
        except Exception:  # half-built, or interpreter shutdown: nothing (left) to free
            pass
        except (KeyboardInterrupt, SystemExit) as exc:
            # A signal's handler ran inside this finalizer (Ctrl-C, a SIGTERM handler calling
            # sys.exit): Python would print what it raised and drop it, and the program would go
            # on. Raise it again in the main thread, at its next bytecode outside a finalizer.
            raise_later(exc)

    # ------------------------------------------------------------------ copying and pickling
    def __deepcopy__(self, memo: dict) -> Tensor:
        """A copy with its own value, ``requires_grad`` and ``grad`` (graph leaves only; a
        ``Parameter``'s copy has no ``grad``, as PyTorch's)."""
        if self._node is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                "protocol at the moment.  If you were attempting to deepcopy a module, this may "
                "be because of a torch.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001"
            )
        out = self._alias()
        cls = Tensor if isinstance(self, DataView) else type(self)
        if cls is not Tensor:
            out.__class__ = cls  # (subclasses such as Parameter add no slots)
        out._rg = self._rg
        cloned_layout(self, out, None)  # (PyTorch's copy is a clone: the same strides)
        memo[id(self)] = out
        if self._grad is not None and cls is Tensor:  # (a Parameter's copy has none, as PyTorch's)
            out.grad = copy.deepcopy(self._grad, memo)
        if cls is Tensor and self.__dict__:  # (PyTorch's Parameter copies leave them behind)
            out.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return out

    def __reduce_ex__(self, protocol: Any) -> tuple:
        """Pickle as the data (a sync point), dtype, shape, class and ``requires_grad``; unpickling
        uploads the data to the current connection."""
        cls = Tensor if isinstance(self, DataView) else type(self)
        data = np.ascontiguousarray(self._host()).tobytes()
        dtype = name_of(self.dtype)  # the name: files stay readable by plain unpicklers' rules
        args = (cls, data, dtype, tuple(self.shape), bool(self._rg))
        return (rebuild_tensor, args, self.__dict__) if self.__dict__ else (rebuild_tensor, args)

    # ------------------------------------------------------------------ op plumbing
    def _new(self, shape: tuple[int, ...], dtype: str) -> Tensor:
        conn = self._conn
        return Tensor(conn, conn.new_id(), shape, dtype)

    def _handle(self) -> Tensor:
        """A second handle on this tensor's worker id (it owns nothing until given the id)."""
        return Tensor(self._conn, None, self.shape, self.dtype)

    def _apply(
        self, name: str, inputs: list, attrs: Any = None, shape: Any = None, grad: bool = True
    ) -> Tensor:
        """Queue primitive ``name`` of the op registry on ``inputs`` (tensors and Python numbers).

        The registry's rules give the result's shape (unless the caller computed it, ``shape``)
        and dtype; the op is recorded for autograd when it has a derivative and an input wants
        one (and ``grad``). This is the one path every op without a hand-tuned fast path takes.
        """
        op = O.BY_NAME[name]
        shapes = [t.shape if isinstance(t, TensorBase) else () for t in inputs]
        dtypes = [t.dtype if isinstance(t, TensorBase) else None for t in inputs]
        if shape is None:
            shape = op.shape(shapes, attrs)
        args = [t.id if isinstance(t, TensorBase) else immediate(t) for t in inputs]
        conn = self._conn
        dtype = op.dtype(dtypes, attrs)
        if (dtype in _COMPLEX or dtypes[0] in _COMPLEX) and grad and _mode.enabled:
            if op.grad is not None and any(isinstance(t, TensorBase) and t._rg for t in inputs):
                complex_grad_mode(name)  # refuses before the op is sent, at the user's line
        out = Tensor(conn, conn.new_id(), tuple(shape), dtype)
        conn.emit(op.code, out.id, args, attrs)
        if grad and _mode.enabled:
            if op.grad is not None:
                if any(isinstance(t, TensorBase) and t._rg for t in inputs):
                    record(out, name, tuple(inputs), attrs)
            elif name in _FIRST_ORDER_ONLY and any(
                isinstance(t, TensorBase) and t._rg for t in inputs
            ):
                # (recorded with a rule that raises: only a derivative that reaches it fails, so
                # transforms that record every pass, as a Hessian of a product, still work)
                record(out, name, tuple(inputs), attrs, saved=())
                out._node.rule = _first_order_only
        return out

    def _apply_(self, name: str, inputs: list, attrs: Any = None) -> Tensor:
        """Queue primitive ``name`` with this tensor as its output, in place (never recorded)."""
        if self._vb is not None and name != "setitem":  # (setitem checks the part it writes)
            refuse_overlap(self)
        args = [t.id if isinstance(t, TensorBase) else immediate(t) for t in inputs]
        self._conn.emit(_OP[name], self.id, args, attrs)
        self._version += 1
        write_back(self, take_value)
        return self

    def _create(self, name: str, args: list, attrs: dict) -> Tensor:
        """A tensor made by creation primitive ``name`` on this tensor's connection."""
        return create(self._conn, name, args, attrs)

    def _arange(self, n: int) -> Tensor:
        """``0 .. n-1`` (int64) on this tensor's connection."""
        return self._create("arange", [], {"start": 0, "stop": int(n), "step": 1, "dtype": "int64"})

    def _upload(self, array: np.ndarray) -> Tensor:
        """A tensor holding a C-contiguous host array, on this tensor's connection."""
        return upload(self._conn, array)

    def _emit(
        self, opcode: int, args: list, shape: tuple[int, ...], dtype: str, attrs: Any = None
    ) -> Tensor:
        conn = self._conn
        out = Tensor(conn, conn.new_id(), shape, dtype)
        conn.emit(opcode, out.id, args, attrs)
        return out

    def _alias(self) -> Tensor:
        """A new, never-recorded handle on the same value (a zero-copy view on the worker)."""
        return self._emit(_RESHAPE, [self.id], self.shape, self.dtype, {"shape": list(self.shape)})

    def _binary(
        self, opcode: int, other: Any, name: str, reflected: bool = False, true_div: bool = False
    ) -> Tensor:
        """Queue ``self <op> other`` (or ``other <op> self``) with broadcasting and promotion."""
        kind = type(other)
        if kind is float or kind is int:  # the hot path: tensor <op> Python number
            dtype = self.dtype
            if dtype in _FLOAT_SET:
                imm: Any = float(other)
                a = self
            else:
                return self._binary_scalar(opcode, other, name, reflected, true_div)
            conn = self._conn
            out = Tensor(conn, conn.new_id(), a.shape, dtype)
            conn.emit(opcode, out.id, [imm, a.id] if reflected else [a.id, imm])
            if a._rg and _mode.enabled:
                record(out, name, (imm, a) if reflected else (a, imm))
            return out
        if kind is Tensor or isinstance(other, Tensor):
            if other._conn is not self._conn:
                raise ValueError(f"{name}: tensors belong to different GT connections")
            shape = (
                self.shape
                if self.shape == other.shape
                else S.broadcast(self.shape, other.shape, name)
            )
            if self.dtype == other.dtype:
                dtype = self.dtype
            else:
                dtype = S.promote_operands(
                    self.dtype, len(self.shape), other.dtype, len(other.shape)
                )
            if dtype in _COMPLEX and name in _REAL_ONLY:
                raise TypeError(f"{name} is not supported for complex tensors")
            if true_div and dtype not in _INEXACT:
                dtype = S.DEFAULT_FLOAT
            if name == "sub" and _BOOL in (self.dtype, other.dtype):
                _refuse_bool_sub(both=self.dtype == other.dtype)
            a = self if self.dtype == dtype else self.to(dtype)
            b = other if other.dtype == dtype else other.to(dtype)
            conn = self._conn
            out = Tensor(conn, conn.new_id(), shape, dtype)
            conn.emit(opcode, out.id, [b.id, a.id] if reflected else [a.id, b.id])
            if (a._rg or b._rg) and _mode.enabled:
                record(out, name, (b, a) if reflected else (a, b))
            return out
        if isinstance(other, _SCALARS) or isinstance(other, numbers.Number):
            return self._binary_scalar(opcode, other, name, reflected, true_div)
        if isinstance(other, np.bool_):  # (not a numbers.Number: NumPy would take the operator)
            return self._binary_scalar(opcode, bool(other), name, reflected, true_div)
        if isinstance(other, np.ndarray):
            arr = host_array(other)
            want = None if name in _COMPARISONS else numpy_operand_dtype(self.dtype, arr, true_div)
            a = self if want is None or want == self.dtype else self.to(want)
            b = self._upload(arr if want is None or want == arr.dtype.name else arr.astype(want))
            return a._binary(opcode, b, name, reflected, true_div)
        return NotImplemented

    def _binary_scalar(
        self, opcode: int, other: Any, name: str, reflected: bool, true_div: bool
    ) -> Tensor:
        """``self <op> number`` for every dtype (PyTorch's promotion of Python scalars)."""
        dtype = S.promote_scalar(self.dtype, other)
        if true_div and dtype not in _INEXACT:
            dtype = S.DEFAULT_FLOAT
        if name == "sub" and self.dtype == _BOOL:
            _refuse_bool_sub(both=isinstance(other, (bool, np.bool_)))
        if dtype in _COMPLEX:
            if name in _REAL_ONLY:
                raise TypeError(f"{name} is not supported for complex tensors")
            if isinstance(other, (complex, np.complexfloating)):  # (no complex immediates: 0-d)
                num = self._upload(np.array(other, dtype=dtype))
                return self.to(dtype)._binary(opcode, num, name, reflected, true_div)
        a = self if self.dtype == dtype else self.to(dtype)
        if dtype in _INEXACT:
            imm: Any = float(other)
        elif dtype == "bool":
            imm = bool(other)
        elif name == "pow":  # (an exponent is not cast to the tensor's dtype)
            imm = [S.python_int(int(other))]
        else:
            imm = [S.wrap_int(int(other), dtype)]  # PyTorch casts the number: uint8 + 300 adds 44
            if imm[0] == 0 and not reflected and name in _INT_DIVISIONS:
                raise RuntimeError(f"{name}: ZeroDivisionError (an integer divided by zero)")
        conn = self._conn
        out = Tensor(conn, conn.new_id(), a.shape, dtype)
        conn.emit(opcode, out.id, [imm, a.id] if reflected else [a.id, imm])
        if a._rg and _mode.enabled:
            record(out, name, (imm, a) if reflected else (a, imm))
        return out

    def _compare(self, opcode: int, other: Any, name: str) -> Tensor:
        """Queue an elementwise comparison; the result is a bool tensor and never requires grad."""
        with _NoRecord():
            out = self._binary(opcode, other, name)
        if out is not NotImplemented:
            out.dtype = _BOOL
        return out

    def _unary(self, name: str, float_only: bool = False) -> Tensor:
        """Queue an elementwise primitive of one tensor (ints become float32 if ``float_only``)."""
        x = self.to(S.DEFAULT_FLOAT) if float_only and self.dtype not in _INEXACT else self
        if x.dtype in _COMPLEX and name not in _COMPLEX_UNARY:
            raise TypeError(f"{name} is not supported for complex tensors")
        conn = x._conn
        out = Tensor(conn, conn.new_id(), x.shape, x.dtype)
        conn.emit(_OP[name], out.id, [x.id])
        if x._rg and _mode.enabled:
            record(out, name, (x,))
        return out

    # ------------------------------------------------------------------ autograd
    def clone(self, *, memory_format: Any = None) -> Tensor:
        """A copy that is recorded for autograd (gradients flow back to ``self``); its strides are
        ``self``'s where PyTorch keeps them (a dense layout), or ``memory_format``'s."""
        out = self._alias()
        if self._rg and _mode.enabled:
            record(out, "copy", (self,))
        return cloned_layout(self, out, memory_format)

    @property
    def data(self) -> Tensor:
        """This tensor's value without autograd history, *sharing* it as in PyTorch.

        ``p.data.fill_(0)``, ``p.data.add_(g, alpha=-lr)`` and ``p.data[0] = 1`` change ``p``;
        the view also sees later changes of ``p`` (see :class:`DataView`; slices, reshapes and
        ``detach()`` share too, see :mod:`gt.ops.views`).
        """
        return DataView(self)

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be set to a Tensor, not {type(value).__name__}")
        set_data(self, value, take_value)  # (shared with ``value`` from now on, as in PyTorch)


def _refuse_bool_sub(both: bool = True) -> None:
    if both:
        raise DtypeError(
            "sub: subtraction, the `-` operator, with two bool tensors is not supported; use the "
            "`^` or logical_xor() operator instead"
        )
    raise DtypeError(
        "sub: subtraction, the `-` operator, with a bool tensor is not supported; to invert a "
        "mask use the `~` or logical_not() operator instead"
    )


class _NoRecord:
    """Turn recording off for a comparison (cheaper than no_grad's decorator machinery)."""

    __slots__ = ("prev",)

    def __enter__(self) -> None:
        self.prev = _mode.enabled
        _mode.enabled = False

    def __exit__(self, *exc: Any) -> None:
        _mode.enabled = self.prev


class DataView(Tensor):
    """What ``t.data`` returns: a handle on ``t``'s current value, outside autograd.

    It reads (and in-place ops through it replace) the value of its owner, whatever worker id
    that value has now, so ``p.data.add_(...)`` updates the parameter ``p``. It owns nothing (its
    ``__del__`` frees nothing), never requires grad, and keeps its own version counter: as in
    PyTorch, changes made through ``.data`` are invisible to autograd's in-place checks.
    """

    __slots__ = ("_owner",)
    _proxy = True

    def __init__(self, owner: Tensor):
        while isinstance(owner, DataView):
            owner = owner._owner
        self._owner = owner
        self._conn = owner._conn
        self._rg = False
        self._grad = None
        self._node = None
        self._version = 0
        self._vb = self._vs = None

    def __del__(self) -> None:
        pass  # the owner frees the value

    @property  # type: ignore[override]
    def _st(self) -> Any:  # (the owner's strides: ``x.t().data`` is no contiguous tensor)
        return self._owner._st

    @_st.setter
    def _st(self, value: Any) -> None:
        self._owner._st = value

    @property  # type: ignore[override]
    def id(self) -> Any:
        return self._owner.id

    @id.setter
    def id(self, value: Any) -> None:
        self._owner.id = value

    @property  # type: ignore[override]
    def shape(self) -> tuple[int, ...]:
        return self._owner.shape

    @shape.setter
    def shape(self, value: tuple[int, ...]) -> None:
        self._owner.shape = value

    @property  # type: ignore[override]
    def dtype(self) -> str:
        return self._owner.dtype

    @dtype.setter
    def dtype(self, value: str) -> None:
        self._owner.dtype = value


def rebuild_tensor(cls: type, data: bytes, dtype: str, shape: tuple, requires_grad: bool) -> Tensor:
    """Unpickle a tensor: upload ``data`` to the current connection as an instance of ``cls``."""
    arr = np.frombuffer(data, dtype=S.canonical_dtype(dtype)).reshape(shape).copy()
    t = upload(get_connection(), arr)
    if cls is not Tensor:
        t.__class__ = cls  # Parameter and other slot-less subclasses
    t._rg = bool(requires_grad)
    return t


# Methods that op-registry entries bring (``x.cumsum(dim)``): a new primitive reaches users
# without an edit of this class.
for _op in O.REGISTRY:
    for _name in _op.methods:
        if _name in Tensor.__dict__:
            raise TypeError(f"registry op {_op.name} would replace Tensor.{_name}")
        setattr(Tensor, _name, _op.api)
mark_methods(Tensor)  # PyTorch's autocast lists (gt.ops.autocast); modules adding methods do too


def upload(conn: Connection, array: np.ndarray) -> Tensor:
    """A tensor holding a C-contiguous host array, uploaded on ``conn``."""
    dtype = S.canonical_dtype(array.dtype)
    if array.size == 0:  # nothing to send (and memoryview cannot cast a zero-length shape)
        shape = list(array.shape)
        out = Tensor(conn, conn.new_id(), tuple(shape), dtype)
        value = False if dtype == "bool" else (0.0 if dtype in _FLOAT_SET else [0])
        conn.emit(_OP["full"], out.id, [value], {"shape": shape, "dtype": dtype})
        return out
    out = Tensor(conn, conn.new_id(), tuple(array.shape), dtype)
    conn.upload(out.id, array)
    return out


def create(conn: Connection, name: str, args: list, attrs: dict) -> Tensor:
    """A tensor made by creation primitive ``name`` on ``conn`` (what the factories call)."""
    op = O.BY_NAME[name]
    out = Tensor(conn, conn.new_id(), op.shape([], attrs), op.dtype([], attrs))
    conn.emit(op.code, out.id, [immediate(a) for a in args], attrs)
    return out


__all__ = ["DataView", "Tensor", "create", "host_array", "rebuild_tensor", "upload"]
