"""The CuPy test double's ``ndarray``: a NumPy array behind a wall that only CuPy's doors pass.

Refused, as real CuPy refuses them (``TypeError``):

* implicit host conversion: ``numpy.asarray(d)``, ``numpy.array(d)``, ``memoryview(d)``,
  ``numpy.frombuffer(d)`` ... (``__array__`` raises CuPy's message; there is no buffer protocol);
* a NumPy array mixed into device work: ``d + host``, ``numpy.add(d, host)``, ``d[...] = host``,
  ``cupy.concatenate([d, host])`` (CuPy's "Unsupported type <class 'numpy.ndarray'>");
* NumPy functions CuPy does not implement, called on device arrays (``__array_function__``).

Allowed, as CuPy allows them: ``float(d)``, ``int(d)``, ``bool(d)``, ``d.item()``, ``d.get()``,
``cupy.asnumpy(d)`` (explicit copies, which synchronize); NumPy ufuncs and functions that CuPy
implements, called on device arrays only (they dispatch to the device); NumPy or list *indices*.

CuPy's integer-array indexing wraps out-of-range indices around where NumPy raises, and so does
the double (``getitem``, ``setitem``, ``take``, ``ufunc.at``, ``cupyx.scatter_add``).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from . import _api, _memory, _streams

IMPLICIT = (
    "Implicit conversion to a NumPy array is not allowed. "
    "Please use `.get()` to construct a NumPy array explicitly."
)
_UNSUPPORTED_KINDS = "OUSMmV"  # object, strings, datetimes, void


def refuse_host(x: Any) -> None:
    """CuPy's refusal of a host array where device data is needed."""
    raise TypeError(f"Unsupported type {type(x)}")


def unwrap(x: Any) -> Any:
    """The NumPy value behind ``x`` for device work; host arrays are refused."""
    t = type(x)
    if t is ndarray:
        return x._a
    if t is np.ndarray:
        refuse_host(x)
    if t is list or t is tuple:
        return t(unwrap(e) for e in x)
    return x


def wrap(r: Any) -> Any:
    """Device arrays for NumPy results (a NumPy scalar becomes a 0-d array, as in CuPy)."""
    t = type(r)
    if t is np.ndarray:
        if r.dtype.kind in "OUSMV":
            raise TypeError(f"Unsupported dtype {r.dtype}")
        return _new(r)
    if isinstance(r, np.generic):
        return _new(np.asarray(r))
    if t is tuple or t is list:
        return t(wrap(e) for e in r)
    return r


#: Device arrays that own their memory, by the id of the NumPy array behind them: a view keeps a
#: reference to the one it views, as CuPy's do (so reference counts say who shares memory).
_owners: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


#: NumPy arrays counted by the memory pool, by id (so wrapping one again does not count it twice).
_counted: dict[int, weakref.ref] = {}


def _count(a: np.ndarray) -> None:
    """Count ``a`` (an array that owns its memory) as a device allocation, once."""
    key = id(a)
    ref = _counted.get(key)
    if ref is not None and ref() is a:
        return
    _memory.DEFAULT_POOL.allocated(a)  # (raises OutOfMemoryError past the pool's limit)
    _counted[key] = weakref.ref(a, lambda r, key=key: _counted.pop(key, None))


def _new(a: np.ndarray) -> ndarray:
    obj = object.__new__(ndarray)
    obj._a = a
    root = a.base
    if root is None:
        _count(a)
        obj._base = None
        _owners[id(a)] = obj
    else:
        while isinstance(root, np.ndarray) and root.base is not None and id(root) not in _owners:
            root = root.base
        obj._base = _owners.get(id(root))
    return obj


def host_index(k: Any) -> Any:
    """An index item as NumPy takes it: device arrays unwrapped; lists and NumPy arrays are
    allowed (CuPy copies them to the device)."""
    t = type(k)
    if t is ndarray:
        return k._a
    if t is list:
        return np.asarray([host_index(e) for e in k])
    return k


def wrap_key(key: Any, shape: tuple[int, ...]) -> Any:
    """``key`` with every integer index array taken modulo its axis' size (CuPy wraps out-of-range
    indices where NumPy raises)."""
    items = list(key) if type(key) is tuple else [key]
    items = [host_index(k) for k in items]
    consumed = 0
    for k in items:
        if k is None or k is Ellipsis:
            continue
        consumed += k.ndim if isinstance(k, np.ndarray) and k.dtype.kind == "b" else 1
    axis = 0
    out = []
    for k in items:
        if k is Ellipsis:
            axis += len(shape) - consumed
        elif k is None:
            pass
        elif isinstance(k, np.ndarray) and k.dtype.kind == "b":
            axis += k.ndim
        else:
            if isinstance(k, np.ndarray) and k.dtype.kind in "iu" and axis < len(shape):
                if shape[axis] > 0:
                    k = np.mod(k, shape[axis])
            axis += 1
        out.append(k)
    return tuple(out)


class _Flags:
    """CuPy's ``ndarray.flags``: contiguity and ownership only (no ``writeable``)."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, a: np.ndarray):
        self.c_contiguous = a.flags.c_contiguous
        self.f_contiguous = a.flags.f_contiguous
        self.owndata = a.flags.owndata

    def __getitem__(self, name: str) -> bool:
        return getattr(self, {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous",
                              "OWNDATA": "owndata"}.get(name, name))  # fmt: skip


class ndarray:  # noqa: N801 - CuPy's name
    """A device array of the double (NumPy underneath; see the module docstring)."""

    __slots__ = ("_a", "_base", "__weakref__")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, shape: Any, dtype: Any = float, memptr: Any = None, strides: Any = None,
                 order: str = "C"):  # fmt: skip
        if memptr is not None:  # a view over existing device memory
            self._a = _memory.view(shape, dtype, memptr, strides)
            self._base = _owners.get(id(_memory.root_of(self._a)))
            return
        self._a = np.empty(shape, dtype=dtype, order=order)
        _count(self._a)
        self._base = None
        _owners[id(self._a)] = self

    # ------------------------------------------------------------------ the wall
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(IMPLICIT)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from . import ufunc_of  # noqa: PLC0415 - the package builds the ufunc wrappers

        f = ufunc_of(ufunc)
        if f is None:
            return NotImplemented
        if "out" in kwargs:
            out = kwargs["out"]
            if len(out) != 1:
                raise ValueError("The 'out' parameter must have exactly one array value")
            kwargs["out"] = out[0]
        return (
            getattr(f, method)(*inputs, **kwargs) if method != "__call__" else f(*inputs, **kwargs)
        )

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        from . import function_of  # noqa: PLC0415

        f = function_of(func)
        if f is None:
            return NotImplemented
        return f(*args, **kwargs)

    # ------------------------------------------------------------------ attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: _Flags(self._a))

    @property
    def data(self) -> _memory.MemoryPointer:
        """Where the first element is: a pointer into the array's memory block."""
        mem = _memory.block_of(self._a)
        return _memory.MemoryPointer(mem, _memory._address(self._a) - mem.ptr)

    T = property(lambda self: _new(self._a.T))
    real = property(lambda self: _new(self._a.real))
    imag = property(lambda self: _new(self._a.imag))

    @property
    def base(self) -> ndarray | None:
        """The array this one views, or ``None`` when it owns its memory."""
        if self._a.base is None:
            return None
        return self._base if self._base is not None else _new(self._a.base)

    @property
    def device(self) -> Any:
        from .cuda import Device  # noqa: PLC0415

        return Device(0)

    # ------------------------------------------------------------------ explicit host copies
    def get(self, stream: Any = None, order: str = "C", out: np.ndarray | None = None,
            blocking: bool = True) -> np.ndarray:  # fmt: skip
        """Copy to the host (a new array, or into ``out``). With a stream and ``blocking=False``
        the copy is deferred until the stream is synchronized."""
        s = stream or _streams.current_stream()
        if out is None:
            s.flush()
            return np.array(self._a, order=order, copy=True)
        if type(out) is not np.ndarray or out.shape != self.shape or out.dtype != self.dtype:
            raise ValueError("out must be a numpy.ndarray of the same shape and dtype")
        src = self._a

        def copy() -> None:
            np.copyto(out, src)

        if blocking:
            s.flush()
            copy()
        else:
            s.defer(copy)
        return out

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        """Copy a host array in; with a non-default stream the copy is deferred (it reads ``arr``
        when the stream is synchronized, as an asynchronous copy from pinned memory does)."""
        if not isinstance(arr, np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise ValueError("Shape or dtype mismatch")
        dst = self._a
        if stream is None:
            _streams.sync_current()
            np.copyto(dst, arr)
        else:
            stream.defer(lambda: np.copyto(dst, arr))

    def item(self, *args: Any) -> Any:
        _streams.sync_current()
        return self._a.item(*args)

    def tolist(self) -> Any:
        _streams.sync_current()
        return self._a.tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __bytes__(self) -> bytes:
        return bytes(self.get())

    def __bool__(self) -> bool:
        _streams.sync_current()
        return bool(self._a)

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Any:
        for i in range(len(self._a)):
            yield wrap(self._a[i])  # (an element of a 1-d array: a 0-d array, as CuPy's)

    def __repr__(self) -> str:
        return repr(self._a)

    def __str__(self) -> str:
        return str(self._a)

    def __copy__(self) -> ndarray:
        return _new(self._a.copy())

    def __deepcopy__(self, memo: Any) -> ndarray:
        return _new(self._a.copy())

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, key: Any) -> Any:
        _streams.sync_current()
        return _new(np.asarray(self._a[wrap_key(key, self._a.shape)]))

    def __setitem__(self, key: Any, value: Any) -> None:
        _streams.sync_current()
        self._a[wrap_key(key, self._a.shape)] = unwrap(value)

    def take(self, indices: Any, axis: int | None = None, out: Any = None) -> ndarray:
        """Gather along ``axis`` (indices wrap around, as in CuPy)."""
        idx = host_index(indices)
        size = self._a.size if axis is None else self._a.shape[axis]
        if isinstance(idx, np.ndarray) and size:
            idx = np.mod(idx, size)
        elif isinstance(idx, int) and size:
            idx %= size
        return _new(np.asarray(np.take(self._a, idx, axis=axis)))

    def argsort(self, axis: int | None = -1) -> ndarray:
        """Stable, as CuPy's radix sort is (CuPy 14 adds ``kind``, which 13 lacks)."""
        _streams.sync_current()
        return _new(np.argsort(self._a, axis=axis, kind="stable"))

    def sort(self, axis: int = -1) -> None:
        """In place, stable."""
        _streams.sync_current()
        self._a.sort(axis=axis, kind="stable")

    # ------------------------------------------------------------------ every other method
    def __getattr__(self, name: str) -> Any:
        # only what every supported CuPy's ndarray has (NumPy's has more: tostring, itemset ...)
        if name.startswith("_") or not _api.has("cupy.ndarray", name):
            raise AttributeError(f"'cupy.ndarray' object has no attribute {name!r}")
        attr = getattr(self._a, name)
        if not callable(attr):
            return wrap(attr)

        def method(*args: Any, **kwargs: Any) -> Any:
            _api.check_call("cupy.ndarray", name, args, kwargs)
            _streams.sync_current()
            return wrap(attr(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()}))

        return method


def _checked_method(name: str, f: Any) -> Any:
    """Method ``f`` of the double's ndarray, taking only the arguments CuPy's ``name`` takes."""

    def method(self: ndarray, *args: Any, **kwargs: Any) -> Any:
        _api.check_call("cupy.ndarray", name, args, kwargs)
        return f(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f.__doc__
    method.__wrapped__ = f  # type: ignore[attr-defined]
    return method


for _name, _f in list(vars(ndarray).items()):
    if not _name.startswith("_") and callable(_f) and _api.has("cupy.ndarray", _name):
        setattr(ndarray, _name, _checked_method(_name, _f))


def _binary(name: str, reflected: bool = False, inplace: bool = False) -> Any:
    def op(self: ndarray, other: Any) -> Any:
        from . import ufunc_of  # noqa: PLC0415

        f = ufunc_of(getattr(np, name))
        if inplace:
            return f(self, other, out=self)
        return f(other, self) if reflected else f(self, other)

    return op


def _unary(name: str) -> Any:
    def op(self: ndarray) -> Any:
        from . import ufunc_of  # noqa: PLC0415

        return ufunc_of(getattr(np, name))(self)

    return op


_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "matmul": "matmul",
           "truediv": "true_divide", "floordiv": "floor_divide", "mod": "remainder",
           "pow": "power", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
           "lshift": "left_shift", "rshift": "right_shift"}  # fmt: skip
for _op, _uf in _BINARY.items():
    setattr(ndarray, f"__{_op}__", _binary(_uf))
    setattr(ndarray, f"__r{_op}__", _binary(_uf, reflected=True))
    setattr(ndarray, f"__i{_op}__", _binary(_uf, inplace=True))
for _op, _uf in {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
                 "eq": "equal", "ne": "not_equal"}.items():  # fmt: skip
    setattr(ndarray, f"__{_op}__", _binary(_uf))
for _op, _uf in {"neg": "negative", "pos": "positive", "abs": "absolute",
                 "invert": "invert"}.items():  # fmt: skip
    setattr(ndarray, f"__{_op}__", _unary(_uf))
ndarray.__divmod__ = lambda self, other: (self // other, self % other)  # type: ignore[attr-defined]
