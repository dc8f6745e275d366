"""GT's dtype objects: each is its name as a string, with PyTorch's attributes.

``x.dtype == "float32"`` and ``x.dtype == gt.float32`` both hold, a dtype is a dict key like its
name and travels on the wire as its name; ``x.dtype.is_floating_point``, ``.itemsize``,
``.is_complex``, ``.is_signed``, ``.to_real()`` and ``.to_complex()`` answer as PyTorch's do, and a
dtype prints as ``gt.float32``, in f-strings too (PyTorch's ``torch.float32``). There is one object per name, so
``x.dtype is gt.float32`` holds too. This module imports nothing: ``import gt`` makes the
constants without loading the rest of GT.
"""

from __future__ import annotations

_FLOATING = frozenset(("float16", "bfloat16", "float32", "float64"))
_COMPLEX = {"complex64": "float32", "complex128": "float64"}
_SIGNED = _FLOATING | frozenset(("int8", "int16", "int32", "int64", "complex64", "complex128"))
_ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2,
             "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16,
             "uint16": 2, "uint32": 4, "uint64": 8}  # fmt: skip


def name_of(d: str) -> str:
    """The plain name of a dtype (``"float32"``), for text that must not read ``gt.float32``."""
    return str.__str__(d)


class dtype(str):  # noqa: N801 - PyTorch's spelling: isinstance(x.dtype, gt.dtype)
    """A tensor's dtype (see the module's docstring)."""

    __slots__ = ()

    def __new__(cls, name: str) -> dtype:
        known = BY_NAME.get(name)
        if known is not None:
            return known
        if name not in _ITEMSIZE:
            raise TypeError(f"unknown dtype {name!r}")
        made = BY_NAME[name] = str.__new__(cls, name)
        return made

    @property
    def is_floating_point(self) -> bool:
        """Whether this is a real floating-point dtype."""
        return self in _FLOATING

    @property
    def is_complex(self) -> bool:
        """Whether this is a complex dtype."""
        return self in _COMPLEX

    @property
    def is_signed(self) -> bool:
        """Whether values of this dtype can be negative."""
        return self in _SIGNED

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _ITEMSIZE[self]

    def to_real(self) -> dtype:
        """The real dtype of a complex one's parts (a real dtype is its own)."""
        return dtype(_COMPLEX.get(self, name_of(self)))

    def to_complex(self) -> dtype:
        """The complex dtype whose parts are this one (complex64 for all but float64)."""
        if self in _COMPLEX:
            return self
        return dtype("complex128" if self == "float64" else "complex64")

    def __str__(self) -> str:
        return "gt." + str.__str__(self)

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        # an f-string reads as print() does ("gt.float32"), as PyTorch's "torch.float32": programs
        # print f"{y.dtype}"; text that needs the plain name uses name_of()
        return format(str(self), spec)

    def __reduce__(self) -> tuple:
        return (dtype, (str.__str__(self),))

    def __copy__(self) -> dtype:
        return self

    def __deepcopy__(self, memo: dict) -> dtype:
        return self


#: PyTorch's legacy typed constructors (``torch.FloatTensor`` ...) and their dtypes.
TYPED = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "ByteTensor": "uint8", "CharTensor": "int8",
    "ShortTensor": "int16", "IntTensor": "int32", "LongTensor": "int64", "BoolTensor": "bool",
}  # fmt: skip
_TYPED_NAME = {d: name for name, d in TYPED.items()}
_COMPLEX_TYPE_NAME = {"complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor"}


def type_name(d: str) -> str:
    """``"gt.FloatTensor"`` for float32 ...: what ``x.type()`` returns (PyTorch's
    ``"torch.FloatTensor"``; ``"gt.ComplexFloatTensor"`` for complex64, as PyTorch names it
    though it has no such constructor)."""
    d = str.__str__(d)
    name = _TYPED_NAME.get(d) or _COMPLEX_TYPE_NAME.get(d)
    return f"gt.{name}" if name else f"gt.{d}"


def dtype_of_type_name(name: str) -> str | None:
    """The dtype a legacy type name stands for (``"torch.LongTensor"``, ``"gt.FloatTensor"``,
    ``"FloatTensor"``), else ``None``."""
    last = name.rsplit(".", 1)[-1]
    return TYPED.get(last) or {v: k for k, v in _COMPLEX_TYPE_NAME.items()}.get(last)


#: The one dtype object of each name.
BY_NAME: dict[str, dtype] = {}
for _name in _ITEMSIZE:
    dtype(_name)
