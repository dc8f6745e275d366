"""``gt.testing``: ``assert_close``, the deprecated ``assert_allclose`` and ``make_tensor``, as in
``torch.testing``.

Comparisons fetch both sides to NumPy (a sync point) and compare there, with PyTorch's default
tolerances per dtype and its failure messages. Tensors, NumPy arrays, Python numbers, sequences
and mappings (compared item by item) are accepted; like PyTorch, a tensor is not compared with a
list or a number. GT has no layouts other than strided, and its tensors are always contiguous, so
``check_layout`` and ``check_stride`` never find a difference.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gt import factories
from gt._dtype import name_of
from gt.ops.base import TensorBase
from gt.ops.typeinfo import finfo, iinfo

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

#: (rtol, atol) per dtype; every other dtype (integers, bool) compares exactly.
_DEFAULT_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}
_ALLCLOSE_TOLERANCES = {"float16": (1e-3, 1e-3), "float32": (1e-4, 1e-5), "float64": (1e-5, 1e-8)}
_INTEGRAL = ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")


class _Mismatch(AssertionError):
    """A failed comparison; ``path`` is where in the inputs (``[1]['a']``) it happened."""

    def __init__(self, message: str, path: str = "", exc: type[Exception] = AssertionError):
        super().__init__(message)
        self.message, self.path, self.exc = message, path, exc


def _dtype_name(x: Any) -> str:
    return str(getattr(x, "dtype", x)).removeprefix("torch.").removeprefix("gt.")


def _tolerances(dtypes: list[str], table: dict) -> tuple[float, float]:
    pairs = [table.get(d, (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, complex, np.number)) and not isinstance(x, bool)


def _is_tensor_like(x: Any) -> bool:
    return isinstance(x, (TensorBase, np.ndarray))


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Any = None,
) -> None:
    """Assert that ``actual`` and ``expected`` are close: ``|a - e| <= atol + rtol * |e|``.

    Args:
        actual: a tensor, NumPy array, number, or a sequence / mapping of them.
        expected: the same structure.
        allow_subclasses: accepted (GT has one tensor type).
        rtol: relative tolerance; with ``atol`` both or neither. Default: by dtype (float32
            ``1.3e-6``, float64 ``1e-7``, float16 ``1e-3``, bfloat16 ``1.6e-2``, integers 0).
        atol: absolute tolerance (float32 ``1e-5``, float64 ``1e-7``, float16 ``1e-5``).
        equal_nan: whether two NaNs count as equal.
        check_device: tensors must be on the same device.
        check_dtype: tensors must have the same dtype.
        check_layout: accepted (GT tensors are strided).
        check_stride: accepted (GT tensors are contiguous).
        msg: replaces the message on failure (a string, or a callable given the message).

    Raises:
        AssertionError: the inputs differ (the message says where and by how much).
        TypeError: inputs that cannot be compared (a tensor and a list, say).
        ValueError: only one of ``rtol`` and ``atol`` was given.
    """
    if (rtol is None) != (atol is None):
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
            f"{'rtol' if rtol is None else 'atol'}."
        )
    opts = {"rtol": rtol, "atol": atol, "equal_nan": equal_nan, "check_device": check_device,
            "check_dtype": check_dtype}  # fmt: skip
    try:
        _compare(actual, expected, "", opts)
    except _Mismatch as m:
        text = m.message
        if m.path:
            text += f"\n\nThe failure occurred for item {m.path}"
        if msg is not None:
            text = msg(text) if callable(msg) else str(msg)
        raise m.exc(text) from None


def _compare(actual: Any, expected: Any, path: str, opts: dict) -> None:
    if _is_tensor_like(actual) and _is_tensor_like(expected):
        _compare_tensors(actual, expected, path, opts)
    elif isinstance(actual, bool) and isinstance(expected, bool):
        if actual != expected:
            raise _Mismatch(f"Booleans mismatch: {actual} is not {expected}", path)
    elif _is_number(actual) and _is_number(expected):
        _compare_numbers(actual, expected, path, opts)
    elif actual is None and expected is None:
        return
    elif isinstance(actual, Mapping) and isinstance(expected, Mapping):
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        if missing or extra:
            raise _Mismatch(
                "The keys of the mappings do not match:\n"
                + (f"Missing keys in the actual mapping: {sorted(missing, key=repr)}\n" if missing else "")
                + (f"Additional keys in the actual mapping: {sorted(extra, key=repr)}" if extra else ""),
                path,
            )  # fmt: skip
        for k in expected:
            _compare(actual[k], expected[k], f"{path}[{k!r}]", opts)
    elif _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Mismatch(
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", path
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, f"{path}[{i}]", opts)
    else:
        raise _Mismatch(
            f"No comparison pair was able to handle inputs of type {type(actual)} and "
            f"{type(expected)}.",
            path,
            TypeError,
        )


def _is_sequence(x: Any) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes))


def _values(x: Any) -> np.ndarray:
    if isinstance(x, TensorBase):
        return np.asarray(x.detach().numpy())
    return np.asarray(x)


def _compare_tensors(actual: Any, expected: Any, path: str, opts: dict) -> None:
    if tuple(actual.shape) != tuple(expected.shape):
        raise _Mismatch(
            f"The values for attribute 'shape' do not match: {_size(actual.shape)} != "
            f"{_size(expected.shape)}.",
            path,
        )
    both = isinstance(actual, TensorBase) and isinstance(expected, TensorBase)
    if opts["check_device"] and both and str(actual.device) != str(expected.device):
        raise _Mismatch(
            f"The values for attribute 'device' do not match: {actual.device} != "
            f"{expected.device}.",
            path,
        )
    da, de = _dtype_name(actual), _dtype_name(expected)
    if opts["check_dtype"] and da != de:
        raise _Mismatch(
            f"The values for attribute 'dtype' do not match: {_pretty(da)} != {_pretty(de)}.",
            path,
        )
    rtol, atol = opts["rtol"], opts["atol"]
    if rtol is None:
        rtol, atol = _tolerances([da, de], _DEFAULT_TOLERANCES)
    a, e = _values(actual), _values(expected)
    if a.ndim == 0:  # a 0-dim tensor is reported like a number
        _compare_numbers(a.item(), e.item(), path, {**opts, "rtol": rtol, "atol": atol}, da, de)
        return
    ok, abs_diff, rel_diff = _close(a, e, rtol, atol, opts["equal_nan"])
    if ok.all():
        return
    exact = rtol == 0 and atol == 0
    n_bad, n = int((~ok).sum()), ok.size
    lines = [
        f"Tensor-likes are not {'equal' if exact else 'close'}!",
        "",
        f"Mismatched elements: {n_bad} / {n} ({100 * n_bad / n:.1f}%)",
    ]
    integral = da in _INTEGRAL and de in _INTEGRAL
    for label, diff, tol in (("absolute", abs_diff, atol), ("relative", rel_diff, rtol)):
        masked = np.where(ok, -np.inf, diff)  # only the mismatched elements
        idx = np.unravel_index(int(np.argmax(np.nan_to_num(masked, nan=np.inf))), a.shape)
        value = masked[idx]
        shown = int(value) if label == "absolute" and integral else float(value)
        line = f"Greatest {label} difference: {shown} at index {tuple(int(i) for i in idx)}"
        lines.append(line if exact else f"{line} (up to {tol} allowed)")
    raise _Mismatch("\n".join(lines), path)


def _close(a: np.ndarray, e: np.ndarray, rtol: float, atol: float, equal_nan: bool):
    """Per element: close or not, the absolute and the relative difference."""
    if a.dtype == np.bool_:
        a = a.astype(np.int64)
    if e.dtype == np.bool_:
        e = e.astype(np.int64)
    common = np.result_type(a, e)  # differences in the inputs' precision, as PyTorch has them
    if not np.issubdtype(common, np.inexact):
        common = np.float64
    a64, e64 = a.astype(common), e.astype(common)
    with np.errstate(all="ignore"):
        abs_diff = np.abs(a64 - e64)
        rel_diff = abs_diff / np.abs(e64)
        ok = abs_diff <= atol + rtol * np.abs(e64)
        ok |= a64 == e64  # equal infinities
        if equal_nan:
            ok |= np.isnan(a64) & np.isnan(e64)
    return ok, abs_diff, rel_diff


def _compare_numbers(
    actual: Any, expected: Any, path: str, opts: dict, da: str | None = None, de: str | None = None
) -> None:
    rtol, atol = opts["rtol"], opts["atol"]
    if rtol is None:
        dt = [_number_dtype(actual) if da is None else da,
              _number_dtype(expected) if de is None else de]  # fmt: skip
        rtol, atol = _tolerances(dt, _DEFAULT_TOLERANCES)
    a, e = complex(actual) if isinstance(actual, complex) else actual, expected
    if isinstance(a, bool):
        a = int(a)
    if isinstance(e, bool):
        e = int(e)
    if _numbers_close(a, e, rtol, atol, opts["equal_nan"]):
        return
    exact = rtol == 0 and atol == 0
    abs_diff = abs(a - e)
    rel_diff = abs_diff / abs(e) if e != 0 else (math.nan if abs_diff != abs_diff else math.inf)
    lines = [
        f"Scalars are not {'equal' if exact else 'close'}!",
        "",
        f"Expected {expected} but got {actual}.",
        f"Absolute difference: {abs_diff}" + ("" if exact else f" (up to {atol} allowed)"),
        f"Relative difference: {rel_diff}" + ("" if exact else f" (up to {rtol} allowed)"),
    ]
    raise _Mismatch("\n".join(lines), path)


def _number_dtype(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, (int, np.integer)):
        return "int64"
    if isinstance(x, (complex, np.complexfloating)):
        return "complex128"
    return "float64"


def _numbers_close(a: Any, e: Any, rtol: float, atol: float, equal_nan: bool) -> bool:
    if a == e:
        return True
    if equal_nan and a != a and e != e:
        return True
    return bool(abs(a - e) <= atol + rtol * abs(e))


def _pretty(dtype: str) -> str:
    return f"torch.{name_of(dtype)}"


def _size(shape: Any) -> str:
    return f"torch.Size({list(shape)})"


def assert_allclose(
    actual: Any,
    expected: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = True,
    msg: str = "",
) -> None:
    """Deprecated (as in PyTorch): :func:`assert_close` with looser tolerances, NaNs equal and
    dtypes not checked; non-tensors are made tensors first."""
    warnings.warn(
        "`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a "
        "future release. Please use `torch.testing.assert_close()` instead.",
        FutureWarning,
        stacklevel=2,
    )
    if not isinstance(actual, TensorBase):
        actual = factories.tensor(actual)
    if not isinstance(expected, TensorBase):
        expected = factories.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = _tolerances([_dtype_name(actual), _dtype_name(expected)], _ALLCLOSE_TOLERANCES)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=False,
                 msg=msg or None)  # fmt: skip


def make_tensor(
    *shape: Any,
    dtype: Any,
    device: Any = None,
    low: float | None = None,
    high: float | None = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format: Any = None,
) -> Any:
    """A tensor of ``shape`` with values drawn uniformly from ``[low, high)``.

    Defaults as in PyTorch: bool ``[0, 2)``, unsigned integers ``[0, 10)``, signed integers
    ``[-9, 10)``, floating types ``[-9, 9)``; ``low``/``high`` are clamped to the dtype's range.
    ``noncontiguous`` takes every other element of a twice-as-wide tensor (the values are then
    those of a strided view, though GT stores them contiguously); ``exclude_zero`` replaces zeros
    with 1 (integers) or the dtype's smallest normal number.

    Raises:
        ValueError: ``requires_grad`` for an integral dtype, ``low >= high`` or a NaN bound.
        TypeError: a dtype GT does not have.
    """
    dtype = _dtype_name(dtype)
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(
            "The parameters `noncontiguous` and `memory_format` are mutually exclusive"
        )
    if requires_grad and dtype in _INTEGRAL:
        raise ValueError(
            f"`requires_grad=True` is not supported for boolean and integral dtypes, but got "
            f"dtype={_pretty(dtype)}"
        )
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = (*shape[:-1], 2 * shape[-1])
    kw = {} if device is None else {"device": device}
    if dtype == "bool":
        low, high = _low_high(low, high, 0, 2, 0, 2, integral=True)
        result = factories.randint(low, high, shape, dtype=dtype, **kw)
    elif dtype in _INTEGRAL:
        info = iinfo(dtype)
        low, high = _low_high(low, high, info.min, info.max + (dtype != "int64"), -9, 10,
                              integral=True)  # fmt: skip
        result = factories.randint(low, high, shape, dtype=dtype, **kw)
    elif dtype in ("float16", "float32", "float64"):
        info = finfo(dtype)
        low, high = _low_high(low, high, info.min, info.max, -9, 9, integral=False)
        result = factories.empty(shape, dtype=dtype, **kw)
        if high - low >= info.max:
            result.uniform_(low / 2, high / 2).mul_(2)
        else:
            result.uniform_(low, high)
    else:
        raise TypeError(
            f"The requested dtype '{_pretty(dtype)}' is not supported by make_tensor()."
        )
    if noncontiguous:
        result = result[..., 1::2]
    if exclude_zero:
        result[result == 0] = 1 if dtype in _INTEGRAL else finfo(dtype).tiny
    if dtype not in _INTEGRAL:
        result.requires_grad = requires_grad
    return result


def _low_high(
    low: float | None,
    high: float | None,
    lowest: float,
    highest: float,
    default_low: float,
    default_high: float,
    *,
    integral: bool,
) -> tuple[float, float]:
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low == high and not integral:
        warnings.warn(
            "Passing `low==high` to `make_tensor` for floating types is deprecated; use "
            "`gt.full(...)` instead.",
            FutureWarning,
            stacklevel=3,
        )
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest:
        raise ValueError(
            f"The value interval specified [{low}, {high}) is out of the dtype's range"
        )
    low, high = min(max(low, lowest), highest), min(max(high, lowest), highest)
    if integral:
        return math.ceil(low), math.ceil(high)
    return low, high
