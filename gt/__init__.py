"""GT: eager, PyTorch-like tensors that run on a shared cluster of workers.

``import gt`` does no work; the first op connects to ``$GT_DISPATCHER`` or starts a local
dispatcher with ``$GT_WORKERS`` workers (default 1) in the background.

The user API (:mod:`gt._api`: tensors, factories, ``nn``, ``optim``, ...) is imported the first
time a program asks for one of its names, all of it at once, so ``gt.ones`` and everything else
behave as if imported eagerly. Processes that never touch it (the dispatcher, the workers, the
``gt`` command's monitor and trace tools) start about a quarter of a second sooner for it.
"""

from __future__ import annotations

import importlib as _importlib
import math as _math
import os as _os
import sys as _sys
import threading as _threading
import types as _types
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what editors and type checkers see: the whole API, as if imported here
    from gt._api import *  # noqa: F403
    from gt._api import __all__ as _api_all

    __all__ = [*_api_all, "bool", "e", "inf", "nan", "pi"]

from gt._dtype import dtype  # isinstance(d, gt.dtype); a dtype is its name as a str

float16 = dtype("float16")
float32 = dtype("float32")
float64 = dtype("float64")
int32 = dtype("int32")
int64 = dtype("int64")
bool_ = dtype("bool")
uint8 = dtype("uint8")
uint16 = dtype("uint16")  # (PyTorch's limited unsigned dtypes: see gt.shapes.promote)
uint32 = dtype("uint32")
uint64 = dtype("uint64")
int8 = dtype("int8")
int16 = dtype("int16")
short = int16
bfloat16 = dtype("bfloat16")
complex64 = dtype("complex64")
complex128 = dtype("complex128")
cfloat = complex64
cdouble = complex128
float = float32  # noqa: A001 - PyTorch spells these as module attributes too
double = float64
long = int64
half = float16
int = int32  # noqa: A001
bool = bool_  # noqa: A001

inf = _math.inf
nan = _math.nan
pi = _math.pi
e = _math.e

from gt.torch_version import __version__ as __version__  # noqa: E402 - a TorchVersion

#: Submodules, by name: ``gt.X`` for one of them imports just that module.
_SUBMODULES = frozenset(
    name.removesuffix(".py")
    for name in _os.listdir(_os.path.dirname(__file__))
    if not name.startswith("_") and (name.endswith(".py") or "." not in name)
) | {"_tensor_str"}  # (a private module of PyTorch's that programs reach into)
_loaded = False
_loading = False  # (only ever True inside the lock, for the thread that loads)
_lock = _threading.RLock()


def _load_api() -> None:
    """Import the user API and put its names here (once). Another thread asking meanwhile waits
    for it; the loading thread itself, asking again while the API imports, finds nothing (as
    with any module that is still being imported)."""
    global _loaded, _loading
    if _loaded:
        return
    with _lock:
        if _loaded or _loading:
            return
        _loading = True
        try:
            from gt import _api

            g = globals()
            g.update(
                (k, v)
                for k, v in vars(_api).items()
                if not k.startswith("_") or k.startswith("_foreach_") or k in _UNDERSCORED
            )
            g["__all__"] = [*_api.__all__, "bool", "e", "inf", "nan", "pi"]
            _loaded = True
        finally:
            _loading = False


#: PyTorch's public names that start with an underscore (``torch._assert``).
_UNDERSCORED = frozenset(("_assert",))


def __getattr__(name: str):
    # ``tensor`` is both a submodule (the Tensor class) and the factory ``gt.tensor(data)``;
    # as attribute it has always been the factory.
    if name in _SUBMODULES and name != "tensor":
        return _importlib.import_module(f"gt.{name}")
    if name.startswith("__") and name != "__all__":
        raise AttributeError(f"module 'gt' has no attribute {name!r}")
    _load_api()
    try:
        return globals()[name]
    except KeyError:
        raise AttributeError(f"module 'gt' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    _load_api()
    return sorted(globals())


class _Package(_types.ModuleType):
    """:mod:`gt`'s own module type: keeps ``gt.tensor`` the factory when the submodule of that
    name is imported (the import system binds every submodule on its package)."""

    def __setattr__(self, name: str, value) -> None:
        if name == "tensor" and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
