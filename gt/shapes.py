"""Shape and dtype inference on the client (pure; no sockets, no arrays of real size).

The client knows every result's shape and dtype before the worker runs the op, so ops can be
fire-and-forget and errors are raised at the user's line. Rules follow PyTorch where PyTorch and
NumPy differ (type promotion of Python scalars, true division of integers).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from gt.errors import ShapeError

Shape = tuple[int, ...]

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
#: PyTorch's "limited" unsigned dtypes: made, converted, compared and combined with their own
#: dtype, floats and Python numbers; promoting them with another integer (or bool) raises.
LIMITED_UINTS = ("uint16", "uint32", "uint64")
COMPLEX_DTYPES = ("complex64", "complex128")
#: PyTorch's scalar type names for each dtype (how its messages name them).
SCALAR_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
                "int64": "Long", "float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
                "float64": "Double", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
                "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64"}  # fmt: skip
#: Floating and complex dtypes: what math functions keep (integers become float32 first).
INEXACT_DTYPES = FLOAT_DTYPES + COMPLEX_DTYPES
DEFAULT_FLOAT = "float32"
#: The real dtype of each complex one, and the complex dtype that holds each real one.
REAL_OF = {"complex64": "float32", "complex128": "float64"}
COMPLEX_OF = {"float64": "complex128", "complex128": "complex128"}

# Promotion ranks in PyTorch's order: bool < integers < floats.
_RANK = {
    "bool": 0,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "int32": 3,
    "int64": 4,
    "uint16": 2,
    "uint32": 3,
    "uint64": 4,
    "float16": 5,
    "bfloat16": 5,  # computes only on CuPy workers that support it (worker/backend.py)
    "float32": 6,
    "float64": 7,
    "complex64": 8,
    "complex128": 9,
}


def complex_of(dtype: str) -> str:
    """The complex dtype whose parts hold ``dtype`` (``complex64`` but for double precision)."""
    return COMPLEX_OF.get(dtype, "complex64")


def canonical_dtype(dtype: Any) -> str:
    """Map ``"float"``, ``np.float32``, ``gt.float32`` ... to GT's dtype name."""
    if dtype is None:
        return DEFAULT_FLOAT
    if isinstance(dtype, str):
        aliases = {
            "float": "float32",
            "double": "float64",
            "half": "float16",
            "long": "int64",
            "int": "int32",
            "short": "int16",
            "cfloat": "complex64",
            "cdouble": "complex128",
        }
        name = aliases.get(dtype, dtype)
    else:
        name = getattr(dtype, "name", None) or np.dtype(dtype).name
    if name not in _RANK:
        raise TypeError(f"unsupported dtype {dtype!r}; GT supports {', '.join(_RANK)}")
    if name == "bfloat16":
        _numpy_knows_bfloat16()
    return str.__str__(name)  # the plain name, as the wire and the rules keep it


def _numpy_knows_bfloat16() -> None:
    """Let NumPy name bfloat16 in this process (``ml_dtypes`` registers it), so fetched bfloat16
    values can be held; without ml_dtypes only the workers can hold them."""
    try:
        import ml_dtypes  # noqa: F401, PLC0415 - optional, from the gpu extras
    except ImportError:
        pass


def promote(a: str, b: str) -> str:
    """Result dtype of a binary op between two tensors (PyTorch's category rules)."""
    if a == b:
        return a
    if (a in LIMITED_UINTS or b in LIMITED_UINTS) and _RANK[a] < 5 and _RANK[b] < 5:
        names = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
                 "int64": "Long", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64"}  # fmt: skip
        raise RuntimeError(
            "Promotion for uint16, uint32, uint64 types is not supported, attempted to promote "
            f"{names[a]} and {names[b]}"
        )
    if {a, b} == {"uint8", "int8"}:  # neither holds the other: PyTorch's int16
        return "int16"
    if {a, b} == {"float16", "bfloat16"}:  # as in PyTorch: neither holds the other
        return "float32"
    if "float64" in (a, b) and "complex64" in (a, b):  # its parts must hold a double
        return "complex128"
    return a if _RANK[a] >= _RANK[b] else b


def promote_scalar(dtype: str, value: Any) -> str:
    """Result dtype of ``tensor <op> python_scalar``: the scalar only moves the category up.

    A NumPy scalar counts as the Python number of its kind, as in PyTorch (``np.float32(0.5)``
    times an int64 tensor is float32, ``np.int32(3)`` keeps it int64)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, complex):
        if dtype in COMPLEX_DTYPES:
            return dtype
        return complex_of(dtype if dtype in FLOAT_DTYPES else DEFAULT_FLOAT)
    if isinstance(value, bool) or dtype in INEXACT_DTYPES:
        return dtype
    if isinstance(value, float):
        return DEFAULT_FLOAT
    if isinstance(value, int):
        return "int64" if dtype == "bool" else dtype
    raise TypeError(f"unsupported scalar {value!r}")


#: Each integer dtype's range, and the C type PyTorch names in its overflow errors.
INT_RANGE = {d: (int(np.iinfo(d).min), int(np.iinfo(d).max)) for d in INT_DTYPES}
_C_TYPE = {"int32": "int", **{d: f"{d}_t" for d in INT_DTYPES if d != "int32"}}


def python_int(value: int) -> int:
    """``value`` if PyTorch can hold it as a scalar at all (a signed or an unsigned 64-bit int)."""
    if value >= 1 << 64:
        raise RuntimeError("int too big to convert")
    if value < -(1 << 63):
        raise RuntimeError("can't convert negative int to unsigned")
    return value


def wrap_int(value: int, dtype: str) -> int:
    """A Python int as an integer ``dtype`` holds it after a C cast, in two's complement: how
    PyTorch takes the number of ``tensor <op> number`` (``uint8 + 300`` adds 44, ``uint8 + -1``
    adds 255, ``int32 * 2654435761`` multiplies by -1640531535). Other dtypes take it as it is."""
    if dtype not in INT_RANGE:
        return value
    lo, hi = INT_RANGE[dtype]
    return (python_int(value) - lo) % (hi - lo + 1) + lo


def fill_int(value: int, dtype: str, type_name: str | None = None) -> int:
    """A fill value (``fill_``, ``full``, ``masked_fill``, ``where``, ``clamp``, ``x[i] = v``,
    an ``alpha``) for an integer ``dtype``, checked as PyTorch checks it: it must fit, except
    that a negative one may wrap into an unsigned dtype (``uint8`` takes -255 to 255).

    Args:
        type_name: the dtype's name in the error (default: the C type, as PyTorch's kernels say).

    Raises:
        RuntimeError: it does not fit (PyTorch's message).
    """
    if dtype not in INT_RANGE:  # (a complex tensor's zeros, say)
        return value
    lo, hi = INT_RANGE[dtype]
    if python_int(value) > hi or value < (-hi if lo == 0 else lo):
        name = type_name or _C_TYPE[dtype]
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    return wrap_int(value, dtype)


def broadcast(a: Shape, b: Shape, op: str = "op") -> Shape:
    """NumPy/PyTorch broadcasting of two shapes.

    Raises:
        ShapeError: with PyTorch's wording, naming the dimension that disagrees.
    """
    if a == b:
        return a
    la, lb = len(a), len(b)
    if la > lb and a[la - lb :] == b:  # the common cases: a bias, a scalar, a row
        return a
    if lb > la and b[lb - la :] == a:
        return b
    n = max(la, lb)
    pa = (1,) * (n - len(a)) + a
    pb = (1,) * (n - len(b)) + b
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ShapeError(
                f"{op}: the size of tensor a ({x}) must match the size of tensor b ({y}) at "
                f"non-singleton dimension {i} (shapes {list(a)} and {list(b)})"
            )
    return tuple(out)


def matmul(a: Shape, b: Shape) -> Shape:
    """Result shape of ``a @ b`` with batch broadcasting, or :class:`ShapeError`."""
    if len(a) == 0 or len(b) == 0:
        raise ShapeError(
            f"matmul: both arguments need at least 1 dimension, got shapes {list(a)} and {list(b)}"
        )
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeError(
            f"matmul: shapes {list(a)} and {list(b)} cannot be multiplied ({a2[-1]} != {b2[-2]})"
        )
    batch = broadcast(a2[:-2], b2[:-2], "matmul")
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def as_index(v: Any) -> Any:
    """``v`` as a Python int when it is an integer of another kind that PyTorch reads as one (a
    NumPy integer, a one-element integer tensor: what ``operator.index`` takes), else ``v``."""
    if v is None or type(v) is int or isinstance(v, (bool, float, tuple, list, str)):
        return v
    try:
        return operator.index(v)
    except TypeError:
        return v


def normalize_axis(axis: int, ndim: int, op: str = "op") -> int:
    """Turn a possibly negative axis into ``0..ndim-1`` or raise IndexError like PyTorch (an
    axis may be anything with ``__index__``: a NumPy integer or a 0-d integer tensor)."""
    if type(axis) is not int:
        axis = operator.index(axis)
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise IndexError(
            f"{op}: dimension out of range (expected to be in range of [{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {axis})"
        )
    return axis % max(ndim, 1)


def normalize_axes(axis: Any, ndim: int, op: str = "op") -> tuple[int, ...] | None:
    """Normalize ``None``, an int or a sequence of ints into a sorted tuple (``None`` = all)."""
    if axis is None:
        return None
    if not isinstance(axis, int) and getattr(axis, "ndim", None) == 0:
        axis = operator.index(axis)  # (a 0-d integer tensor or array: its number)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    norm = tuple(sorted({normalize_axis(a, ndim, op) for a in axes}))
    if len(norm) != len(axes):
        raise ShapeError(f"{op}: repeated dimension in {list(axes)}")
    return norm


def reduction_axes(axis: Any, ndim: int, op: str = "op") -> tuple[int, ...] | None:
    """A reduction's ``dim`` as :func:`normalize_axes` reads it, except that an empty one
    (``dim=()``, ``dim=[]``) reduces every dimension, as in PyTorch, and so does ``dim=0`` or
    ``-1`` of a 0-d tensor."""
    axes = normalize_axes(axis, ndim, op)
    return None if axes == () or (axes is not None and ndim == 0) else axes


def reduce(shape: Shape, axes: tuple[int, ...] | None, keepdims: bool) -> Shape:
    """Result shape of a reduction over ``axes`` (``None`` = every axis)."""
    if axes is None:
        return (1,) * len(shape) if keepdims else ()
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reshape(shape: Shape, new: Sequence[int]) -> Shape:
    """Resolve one ``-1`` in ``new`` and check the element count matches."""
    new = tuple(int(d) for d in new)
    size = prod(shape)
    if new.count(-1) > 1:
        raise ShapeError(
            f"reshape: only one dimension can be inferred (-1) in shape {list(new)} (input shape {list(shape)})"
        )
    if -1 in new:
        rest = prod(d for d in new if d != -1)
        if rest == 0 or size % rest:
            raise ShapeError(
                f"reshape: shape {list(new)} is invalid for input of size {size} (shape {list(shape)})"
            )
        new = tuple(size // rest if d == -1 else d for d in new)
    if any(d < 0 for d in new) or prod(new) != size:
        raise ShapeError(
            f"reshape: shape {list(new)} is invalid for input of size {size} (shape {list(shape)})"
        )
    return new


def expand(shape: Shape, new: Sequence[int]) -> Shape:
    """Result of ``expand``/``broadcast_to``: ``-1`` keeps a dimension; singletons stretch."""
    new = tuple(int(d) for d in new)
    if len(new) < len(shape):
        raise ShapeError(
            f"expand: the number of sizes provided ({len(new)}) must be greater or equal to the number of dimensions in the tensor ({len(shape)})"
        )
    pad = (1,) * (len(new) - len(shape)) + shape
    out = []
    for i, (have, want) in enumerate(zip(pad, new)):
        if want == -1:
            if i < len(new) - len(shape):
                raise ShapeError("expand: -1 is not allowed in a leading, non-existing dimension")
            out.append(have)
        elif have == want or have == 1:
            out.append(want)
        else:
            raise ShapeError(
                f"expand: the expanded size of the tensor ({want}) must match the existing size ({have}) at non-singleton dimension {i}; target sizes {list(new)}, tensor sizes {list(shape)}"
            )
    return tuple(out)


def prod(xs: Any) -> int:
    """Product of ints (1 for an empty sequence)."""
    p = 1
    for x in xs:
        p *= x
    return p


def index_shape(shape: Shape, key: tuple, op: str = "getitem") -> Shape:
    """Result shape of ``x[key]`` computed on a zero-byte stand-in array.

    ``key`` may hold ints, slices, None, Ellipsis and integer arrays (NumPy arrays standing in for
    index tensors: only their shape matters, and their values are checked where known).
    """
    dummy = np.broadcast_to(np.empty((), dtype=np.int8), shape)
    try:
        for k in key:  # (a basic key, the common case, in one cheap pass)
            kind = type(k)
            if not (kind is int or kind is slice or k is None or k is Ellipsis):
                break
        else:
            return dummy[key].shape
        split = split_int_indices(key)
        if split is not None:
            return _indexed_shape(dummy[split[0]], split[1])
        return _indexed_shape(dummy, key)
    except IndexError as exc:
        raise IndexError(f"{op}: {exc} (tensor of shape {list(shape)})") from None


#: Index arrays of more elements than this get their result shape by NumPy's rules written out:
#: indexing even a zero-byte array allocates the result and walks every index (a gather with a
#: [100000, 128] index spent 65 ms of the client's time on it).
LARGE_INDEX = 4096


def index_stand_in(shape: Shape) -> np.ndarray:
    """A zero integer array of ``shape`` that holds one element (an index tensor's stand-in:
    only its shape counts)."""
    return np.broadcast_to(np.zeros((), dtype=np.int64), tuple(shape))


def _indexed_shape(dummy: np.ndarray, key: tuple) -> Shape:
    """``dummy[key].shape``; a key with large integer arrays (and no bools, ints or lists) by the
    rules, each array's values checked as NumPy checks them unless it is a stand-in."""
    items = key if isinstance(key, tuple) else (key,)
    arrays = [k for k in items if isinstance(k, np.ndarray)]
    if sum(a.size for a in arrays) <= LARGE_INDEX or any(
        a.dtype.kind not in "iu" or a.ndim == 0 for a in arrays
    ):
        return dummy[key].shape
    if any(not (k is None or k is Ellipsis or type(k) is slice or isinstance(k, np.ndarray))
           for k in items):  # fmt: skip
        return dummy[key].shape
    try:
        block = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        return dummy[key].shape  # (NumPy's own message)
    used = sum(1 for k in items if k is not None and k is not Ellipsis)
    if used > dummy.ndim or sum(k is Ellipsis for k in items) > 1:
        return dummy[key].shape
    before: list[int] = []  # (output dims of the items before the first array, and after)
    after: list[int] = []
    places: list[int] = []
    dim = 0
    for pos, k in enumerate(items):
        out = before if not places else after
        if k is None:
            out.append(1)
        elif k is Ellipsis:
            width = dummy.ndim - used
            out.extend(dummy.shape[dim : dim + width])
            dim += width
        elif type(k) is slice:
            out.append(len(range(*k.indices(dummy.shape[dim]))))
            dim += 1
        else:
            _check_bounds(k, dim, dummy.shape[dim])
            places.append(pos)
            dim += 1
    rest = list(dummy.shape[dim:])
    if places == list(range(places[0], places[-1] + 1)):  # together: the block where they are
        return (*before, *block, *after, *rest)
    return (*block, *before, *after, *rest)  # apart: NumPy puts the block first


def _check_bounds(a: np.ndarray, axis: int, n: int) -> None:
    """NumPy's ``IndexError`` for an index array with a value outside ``[-n, n)``."""
    if not any(a.strides):  # (a stand-in, or one value repeated: read it once)
        a = a.reshape(-1)[:1]
    if a.size and (int(a.min()) < -n or int(a.max()) >= n):
        flat = a.reshape(-1)
        bad = int(flat[np.argmax((flat < -n) | (flat >= n))])
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")


def split_int_indices(key: tuple) -> tuple[tuple, tuple] | None:
    """PyTorch's order for a key that mixes integers with advanced indices.

    PyTorch applies the integers (and 0-d integer tensors) of a key first, as selects, and only
    then the advanced indices (int lists, index tensors, masks) to what is left; NumPy counts an
    integer as one more advanced index. They differ when a slice separates the two:
    ``x[0, :, [1, 3]]`` of a ``(2, K, H, W)`` tensor is ``(K, 2, W)`` in PyTorch, where NumPy moves
    the broadcast dimension first, ``(2, K, W)``. Returns ``(ints, rest)``, a basic key that applies
    only the integers (a view) and the key for what it leaves, so that ``a[ints][rest]`` is
    PyTorch's ``a[key]``; ``None`` where the key has no integer next to an advanced index.
    """

    def is_int(k: Any) -> bool:
        if isinstance(k, bool):
            return False
        if isinstance(k, (int, np.integer)):
            return True
        return (
            getattr(k, "ndim", None) == 0
            and getattr(k, "dtype", None) is not None
            and (np.dtype(k.dtype).kind in "iu")
        )

    def is_advanced(k: Any) -> bool:
        return not is_int(k) and getattr(k, "ndim", None) is not None

    for k in key:  # (the common case, a basic key, in one cheap pass)
        kind = type(k)
        if not (kind is int or kind is slice or k is None or k is Ellipsis):
            break
    else:
        return None
    if not any(is_int(k) for k in key) or not any(is_advanced(k) for k in key):
        return None
    ints: list = []
    rest: list = []
    for k in key:
        if is_int(k):
            ints.append(int(k))
        elif k is None:
            rest.append(k)
        elif k is Ellipsis:
            ints.append(k)
            rest.append(k)
        else:
            kind = np.dtype(k.dtype).kind if getattr(k, "dtype", None) is not None else ""
            ints.extend([slice(None)] * (k.ndim if kind == "b" else 1))
            rest.append(k)
    return tuple(ints), tuple(rest)


def category(dtype: str) -> int:
    """0 for bool, 1 for integers, 2 for floats, 3 for complex (PyTorch's promotion categories)."""
    if dtype in FLOAT_DTYPES:
        return 2
    return 3 if dtype in COMPLEX_DTYPES else (0 if dtype == "bool" else 1)


def promote_operands(a: str, a_ndim: int, b: str, b_ndim: int) -> str:
    """Result dtype of a binary op between tensors, with PyTorch's rule for 0-d tensors.

    A 0-d tensor next to a tensor with dimensions only decides the dtype when it is of a higher
    category (``float32[3] + float64[]`` stays float32; ``int64[3] + float64[]`` is float64).
    """
    if a == b:
        return a
    if (a_ndim == 0) != (b_ndim == 0):
        dim_t, zero_t = (b, a) if a_ndim == 0 else (a, b)
        if category(zero_t) <= category(dim_t):
            return dim_t
        if zero_t in COMPLEX_DTYPES and dim_t in FLOAT_DTYPES:  # the complex of the float
            return complex_of(dim_t)  # (float32[3] + complex128[] is complex64)
        return zero_t
    return promote(a, b)


def concat(shapes: Sequence[Shape], axis: int, op: str = "cat") -> Shape:
    """Result shape of concatenating ``shapes`` along ``axis`` (already normalized).

    Raises:
        ShapeError: the tensors differ in rank, or in a size other than ``axis``.
    """
    first = shapes[0]
    total = 0
    for i, s in enumerate(shapes):
        if len(s) != len(first):
            raise ShapeError(
                f"{op}: tensors must have the same number of dimensions: got {len(first)} and "
                f"{len(s)} (shapes {list(first)} and {list(s)} for tensor number 0 and {i})"
            )
        for d, (x, y) in enumerate(zip(first, s)):
            if d != axis and x != y:
                raise ShapeError(
                    f"{op}: sizes of tensors must match except in dimension {axis}. Expected size "
                    f"{x} but got size {y} for tensor number {i} in the list (shapes {list(first)} "
                    f"and {list(s)})"
                )
        total += s[axis]
    return first[:axis] + (total,) + first[axis + 1 :]
