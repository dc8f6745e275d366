"""More ``torch.<name>`` functions and tensor methods that real programs call: the ``sym_*``
helpers on plain numbers, ATen's ``native_*`` normalisations with their saved statistics, the flat
recurrent entry points (``torch.lstm(input, hx, params, ...)``, built on :mod:`gt.nn.recurrent`),
``empty_strided``/``empty_permuted``, ``default_generator``, the ``has_*`` build flags, an eager
``lobpcg`` and the control-flow operators ``cond`` and ``while_loop`` run eagerly; and the tensor
methods ``nonzero_static``, ``resize``/``resize_as``, ``set_``, ``as_subclass``, ``storage_type``
and the device queries (``is_mps`` ...). Each was probed against PyTorch 2.13 on the CPU.
Imported by :mod:`gt._api` only."""

from __future__ import annotations

import builtins
import math
import warnings
from typing import Any

import numpy as np

from gt import linalg as _linalg
from gt import shapes as S
from gt.factories import empty as _empty
from gt.factories import tensor as _tensor
from gt.nn import functional as F
from gt.ops import storage as _storage
from gt.ops.random import default_generator
from gt.tensor import Tensor
from gt.torch_control import _assert, cond, lobpcg, while_loop
from gt.torch_functions import nonzero_static
from gt.torch_rnn import gru, lstm, rnn_relu, rnn_tanh

# ----------------------------------------------------------------------------- sym_* helpers
_NUMBER_TYPES = (np.integer, np.floating, builtins.int, builtins.float)
_FLOAT_TYPES = (np.floating, builtins.float)


def sym_int(a: Any) -> int:
    """``int(a)`` (PyTorch's SymInt-aware cast; on plain numbers and 0-d tensors, ``int``)."""
    return builtins.int(a)


def sym_float(a: Any) -> float:
    """``float(a)``."""
    return builtins.float(a)


def _numbers(a: Any, b: Any) -> bool:
    for v in (a, b):
        if not isinstance(v, _NUMBER_TYPES):
            raise AssertionError(f"expected {_NUMBER_TYPES}, got {type(v)}")
    return isinstance(a, _FLOAT_TYPES) or isinstance(b, _FLOAT_TYPES)


def sym_max(a: Any, b: Any) -> Any:
    """``max(a, b)`` of two numbers, a float when either is one (PyTorch's promotion)."""
    return builtins.float(builtins.max(a, b)) if _numbers(a, b) else builtins.max(a, b)


def sym_min(a: Any, b: Any) -> Any:
    """``min(a, b)`` of two numbers, a float when either is one."""
    return builtins.float(builtins.min(a, b)) if _numbers(a, b) else builtins.min(a, b)


def sym_not(a: Any) -> bool:
    """``not a``."""
    return not a


def sym_sqrt(a: Any) -> float:
    """``math.sqrt(a)``."""
    return math.sqrt(a)


def sym_sum(*args: Any) -> Any:
    """The sum of numbers (or tensors), given as one list or as arguments: ``sum(args)``."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    return builtins.sum(args)


def sym_ite(b: Any, t: Any, f: Any) -> Any:
    """``t if b else f``; ``b`` must be a bool and ``t``, ``f`` of one type."""
    if not isinstance(b, builtins.bool):
        raise AssertionError(f"expected SymBool or bool, got {type(b)}")
    if type(t) is not type(f):
        raise AssertionError(f"type mismatch: {type(t)} vs {type(f)}")
    return t if b else f


# ----------------------------------------------------------------------------- native_* ops
def native_layer_norm(input: Any, normalized_shape: Any, weight: Any, bias: Any,  # noqa: A002
                      eps: float) -> tuple[Any, Any, Any]:  # fmt: skip
    """``(layer_norm(input), mean, rstd)``: the statistics over the last
    ``len(normalized_shape)`` dimensions, kept as size-1 dimensions."""
    shape = [builtins.int(s) for s in normalized_shape]
    k = len(shape)
    if k == 0 or list(input.shape[input.ndim - k :]) != shape or input.ndim < k:
        raise RuntimeError(
            f"Given normalized_shape={shape}, expected input with shape [*, "
            f"{', '.join(map(str, shape))}], but got input of size{list(input.shape)}"
        )
    dims = tuple(range(input.ndim - k, input.ndim))
    mean = input.mean(dims, keepdim=True)
    rstd = (input.var(dims, unbiased=False, keepdim=True) + eps).rsqrt()
    return F.layer_norm(input, shape, weight, bias, eps), mean, rstd


def native_batch_norm(input: Any, weight: Any, bias: Any, running_mean: Any,  # noqa: A002
                      running_var: Any, training: bool, momentum: float,
                      eps: float) -> tuple[Any, Any, Any]:  # fmt: skip
    """``(batch_norm(input), save_mean, save_invstd)``: the batch's per-channel mean and
    ``1/sqrt(var + eps)`` when training (the running statistics updated in place), empty
    tensors otherwise."""
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training and running_mean is not None:
        return out, input.new_empty((0,)), input.new_empty((0,))
    dims = (0, *range(2, input.ndim))
    mean = input.mean(dims)
    invstd = (input.var(dims, unbiased=False) + eps).rsqrt()
    return out, mean, invstd


def native_group_norm(input: Any, weight: Any, bias: Any, N: int, C: int, HxW: int,  # noqa: A002, N803
                      group: int, eps: float) -> tuple[Any, Any, Any]:  # fmt: skip
    """``(group_norm(input), mean, rstd)``, the statistics ``[N, group]``."""
    if C % group:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got input "
            f"of shape {list(input.shape)} and num_groups={group}"
        )
    x = input.reshape(N, group, -1)
    mean = x.mean(-1)
    rstd = (x.var(-1, unbiased=False) + eps).rsqrt()
    return F.group_norm(input, group, weight, bias, eps), mean, rstd


def native_dropout(input: Any, p: float, train: bool | None) -> tuple[Any, Any]:  # noqa: A002
    """``(output, mask)``: each element kept (mask ``True``) with probability ``1 - p`` and
    scaled by ``1/(1-p)``; with ``train=False`` the input (a copy) and an all-``True`` mask."""
    if train is not None and not train:
        return input.clone(), input.new_ones(tuple(input.shape), dtype="bool")
    if not 0.0 <= 1.0 - p <= 1.0:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={1.0 - p}")
    if p == 1.0:
        return input * 0.0, input.new_zeros(tuple(input.shape), dtype="bool")
    from gt.factories import rand  # noqa: PLC0415 - (the same module as empty)

    mask = rand(tuple(input.shape), dtype=input.dtype if input.is_floating_point() else None) >= p
    return input * mask * (1.0 / (1.0 - p)), mask


def native_norm(self: Any, p: Any = 2, dim: Any = None, keepdim: bool = False,
                dtype: Any = None) -> Any:  # fmt: skip
    """The ``p``-norm (``None``: 2) of all elements, or over ``dim``. (PyTorch's CPU build runs
    this only for sparse tensors; GT computes it for its dense ones, as ``vector_norm``.)"""
    return _linalg.vector_norm(self, 2 if p is None else p, dim, keepdim, dtype=dtype)


def native_channel_shuffle(input: Any, groups: int) -> Any:  # noqa: A002
    """``F.channel_shuffle``."""
    if input.ndim <= 2:
        raise RuntimeError(
            f"channel_shuffle expects input with > 2 dims, but got input with sizes "
            f"{list(input.shape)}"
        )
    return F.channel_shuffle(input, builtins.int(groups))


# ----------------------------------------------------------------------------- creation
def _ints(size: Any) -> list[int]:
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = size[0]
    return [builtins.int(s) for s in size]


def empty_permuted(size: Any, physical_layout: Any, *, dtype: Any = None, layout: Any = None,
                   device: Any = None, requires_grad: bool = False,
                   pin_memory: bool = False) -> Any:  # fmt: skip
    """An uninitialised (here: zero) dense tensor of shape ``size`` whose dimensions lie in
    memory in the order ``physical_layout`` (outermost first)."""
    size, order = [builtins.int(s) for s in size], [builtins.int(d) for d in physical_layout]
    if len(size) != len(order):
        raise RuntimeError(
            "Number of dimensions in size does not match the length of the physical_layout; "
            f"i.e. len(size) = {len(size)} is not equal to len(physical_layout) = {len(order)}"
        )
    if len(set(order)) != len(order):
        raise RuntimeError("Duplicate dim not allowed")
    if sorted(order) != list(range(len(size))):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-len(size)}, "
                         f"{len(size) - 1}], but got {max(order)})")  # fmt: skip
    inverse = [order.index(d) for d in range(len(order))]
    out = _empty(*[size[d] for d in order], dtype=dtype)
    if order != sorted(order):
        out = out.permute(*inverse)
    if requires_grad:
        out = out.detach().requires_grad_()
    return out


def empty_strided(size: Any, stride: Any, *, dtype: Any = None, layout: Any = None,
                  device: Any = None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Any:  # fmt: skip
    """An uninitialised (here: zero) tensor of shape ``size`` with the strides ``stride`` when
    they are those of a dense tensor in some dimension order (the strides of an existing
    tensor); GT has no storage to lay overlapping or gapped strides over, and says so."""
    size, stride = [builtins.int(s) for s in size], [builtins.int(s) for s in stride]
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality of "
                           f"strides ({len(stride)})")  # fmt: skip
    order = sorted(range(len(size)), key=lambda d: (-stride[d], d))
    expect = 1
    for d in reversed(order):
        if size[d] != 1 and stride[d] != expect:
            raise NotImplementedError(
                f"gt.empty_strided: strides {tuple(stride)} for size {tuple(size)} do not lay "
                "the tensor out densely; GT makes only dense layouts (any dimension order)"
            )
        expect *= size[d]
    out = empty_permuted(size, order, dtype=dtype, requires_grad=requires_grad)
    return out


def get_device(input: Any) -> int:  # noqa: A002
    """``input.get_device()``: -1, as for a CPU tensor."""
    if not isinstance(input, Tensor):
        raise TypeError(f"get_device(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")  # fmt: skip
    return input.get_device()


def is_storage(obj: Any) -> bool:
    """Whether ``obj`` is a storage (``x.untyped_storage()``, ``x.storage()``)."""
    return isinstance(obj, _storage.UntypedStorage)


def i0_(input: Any) -> Any:  # noqa: A002
    """``input.i0_()`` (a floating-point tensor: the result of ``i0`` is one)."""
    if not input.is_floating_point():
        from gt.ops.shaping import _SCALAR  # noqa: PLC0415

        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{_SCALAR[str.__str__(input.dtype)]}")  # fmt: skip
    return input.i0_()


def resize_as_(input: Any, the_template: Any, *, memory_format: Any = None) -> Any:  # noqa: A002
    """``input.resize_as_(the_template)``."""
    return input.resize_as_(the_template)


def init_num_threads() -> None:
    """Nothing to do: GT's workers keep their own threads."""


#: PyTorch's build flags, as GT's workers have them: LAPACK and FFTs through NumPy, no MKL or
#: OpenMP of GT's own.
has_lapack = True
has_spectral = True
has_mkl = False
has_openmp = False


# ----------------------------------------------------------------------------- tensor methods
def _resize(self: Any, *sizes: Any) -> Any:
    """The deprecated out-of-place ``resize``: a view of the same number of elements (PyTorch's
    ``Resize`` function, which warns and refuses other sizes)."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return _resized(self, sizes)


def _resize_as(self: Any, tensor: Any) -> Any:
    """The deprecated out-of-place ``resize_as``: :meth:`resize` to ``tensor``'s shape."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return _resized(self, tuple(tensor.shape))


def _resized(self: Any, sizes: tuple) -> Any:
    numel: Any = 1
    for s in sizes:
        numel = numel * s  # (PyTorch's reduce(mul): a tuple argument stays a tuple, and fails)
    if numel != self.numel():
        raise RuntimeError(
            f"requested resize to {'x'.join(map(str, sizes))} ({numel} elements in total), but "
            f"the given tensor has a size of {'x'.join(map(str, self.shape))} ({self.numel()} "
            "elements). autograd's resize can only change the shape of a given tensor, while "
            "preserving the number of elements. "
        )
    return self.reshape(*sizes)


#: The C++ type names PyTorch's ``set_`` names dtypes by.
_C_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int", "int16": "short int",
            "int8": "signed char", "uint8": "unsigned char", "bool": "bool",
            "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}  # fmt: skip


def _set_(self: Any, source: Any = None, storage_offset: Any = None, size: Any = None,
          stride: Any = None) -> Any:  # fmt: skip
    """``x.set_(y)``: ``x`` shares ``y``'s elements from now on (same shape, strides and
    storage: a change through either shows in the other), as PyTorch's; ``x.set_()`` makes it
    empty. The storage forms (``set_(storage)``, ``set_(source, offset, size, stride)``) lay a
    tensor over raw storage, which GT's values on the workers do not have, and raise."""
    if self.requires_grad and self.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")  # fmt: skip
    if source is None:
        self.data = self.new_empty((0,))
        return self
    if not isinstance(source, Tensor) or storage_offset is not None or size is not None:
        raise NotImplementedError(
            "gt: Tensor.set_(source) takes a tensor; the forms set_(storage) and "
            "set_(source, storage_offset, size, stride) need raw storage, which GT does not have"
        )
    if source.dtype != self.dtype:
        raise RuntimeError(
            f"Could not set tensor of type {_C_TYPES.get(str.__str__(source.dtype), source.dtype)} "
            f"to a tensor of type {_C_TYPES.get(str.__str__(self.dtype), self.dtype)}"
        )
    self.data = source
    self._st = source._st  # (its strides too: ``x.set_(y.t())``)
    return self


def _chalf(self: Any, memory_format: Any = None) -> Any:
    """complex32, which GT does not have: raises, naming the dtypes it has."""
    from gt.shapes import canonical_dtype  # noqa: PLC0415

    return self.to(canonical_dtype("complex32"))


def _as_subclass(self: Any, cls: type) -> Any:
    """This tensor as an instance of ``cls`` (a subclass of :class:`gt.Tensor` without slots of
    its own), sharing its value and its place in the autograd graph."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from Tensor "
                        "is not possible. Make sure your class inherits from Tensor.")  # fmt: skip
    out = self.view(self.shape)  # (a new tensor: ``view_as(self)`` gives ``self`` back)
    if cls is not type(out):
        out.__class__ = cls
    return out


_STORAGE_TYPES: dict[str, type] = {}


def _storage_type(self: Any) -> type:
    """The legacy typed storage class of this dtype (``gt.FloatStorage`` ...)."""
    from gt.ops.shaping import _SCALAR  # noqa: PLC0415

    name = f"{_SCALAR[str.__str__(self.dtype)]}Storage"
    if name not in _STORAGE_TYPES:
        _STORAGE_TYPES[name] = type(name, (_storage.TypedStorage,), {"__module__": "gt"})
    return _STORAGE_TYPES[name]


_SCALAR_NAMES = S.SCALAR_NAMES


def hash_tensor(input: Any, dim: Any = (), *, keepdim: bool = False, mode: int = 0) -> Any:  # noqa: A002
    """PyTorch's ``hash_tensor`` (mode 0): the XOR of the elements' bit patterns over ``dim``
    (all of them when empty), each element widened first to float64 (floating dtypes) or int64
    (integers and bool); a uint64 tensor. Computed on the client (a sync point)."""
    if mode != 0:
        raise RuntimeError(f"Unknown hash_tensor mode: {mode}")
    name = str.__str__(input.dtype)
    if name in ("complex64", "complex128", "uint16", "uint32", "uint64"):
        raise NotImplementedError(f"\"xor_sum_cpu\" not implemented for '{_SCALAR_NAMES[name]}'")
    dims = () if dim is None else (dim,) if isinstance(dim, builtins.int) else tuple(dim)
    n = input.ndim
    axes = []
    for d in dims:
        if not -max(n, 1) <= d < max(n, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-max(n, 1)}, "
                             f"{max(n, 1) - 1}], but got {d})")  # fmt: skip
        axes.append(d % max(n, 1))
    if not axes and input.numel() == 0:
        raise RuntimeError("hash_tensor: Expected reduction dim to be specified for input.numel() "
                           "== 0. Specify the reduction dim with the 'dim' argument.")  # fmt: skip
    for d in axes:
        if n and input.shape[d] == 0:
            raise IndexError(f"hash_tensor: Expected reduction dim {d} to have non-zero size.")
    a = np.asarray(input.detach().numpy())
    wide = a.astype(np.float64) if input.is_floating_point() else a.astype(np.int64)
    bits = wide.view(np.uint64).reshape(a.shape)
    axis = tuple(axes) if axes and n else None
    out = np.bitwise_xor.reduce(bits, axis=axis, keepdims=builtins.bool(keepdim) and n > 0)
    if out.ndim == 0 and keepdim and axis is None and n:
        out = out.reshape((1,) * n)
    return _tensor(np.asarray(out, dtype=np.uint64), dtype="uint64")


def _tensor_methods() -> None:
    methods = {
        "nonzero_static": nonzero_static,
        "hash_tensor": hash_tensor,
        "resize": _resize,
        "resize_as": _resize_as,
        "set_": _set_,
        "chalf": _chalf,
        "as_subclass": _as_subclass,
        "const_data_ptr": lambda self: self.data_ptr(),
        "storage_type": _storage_type,
        "output_nr": property(lambda self: 0, doc="0: each GT op's result is its node's output."),
    }
    for dev in ("mps", "xpu", "ipu", "xla", "vulkan", "maia", "mtia"):
        methods[f"is_{dev}"] = property(lambda self: False, doc=f"False: not a {dev} tensor.")
    for name, fn in methods.items():
        if hasattr(Tensor, name):
            raise TypeError(f"gt.torch_level would replace Tensor.{name}")
        setattr(Tensor, name, fn)


_tensor_methods()


__all__ = ["_assert", "cond", "default_generator", "empty_permuted", "empty_strided", "get_device", "gru", "hash_tensor",
           "has_lapack", "has_mkl", "has_openmp", "has_spectral", "i0_", "init_num_threads",
           "is_storage", "lobpcg", "lstm", "native_batch_norm", "native_channel_shuffle",
           "native_dropout", "native_group_norm", "native_layer_norm", "native_norm",
           "resize_as_", "rnn_relu", "rnn_tanh", "sym_float", "sym_int", "sym_ite", "sym_max",
           "sym_min", "sym_not", "sym_sqrt", "sym_sum", "while_loop"]  # fmt: skip
