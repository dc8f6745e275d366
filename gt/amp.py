"""``gt.amp`` (also ``gt.cuda.amp``, ``gt.cpu.amp``): automatic mixed precision, as PyTorch's.

Inside ``with gt.autocast("cpu"):`` (bfloat16) or ``with gt.autocast("cuda"):`` (float16) the
ops on PyTorch's autocast lists cast their floating-point arguments: matrix products and
convolutions to the region's dtype, losses, linear algebra and FFTs to float32, ``cat`` and
``stack`` to the widest (:mod:`gt.ops.autocast` has the lists and the rules). GT's tensors live on
the cluster rather than on a PyTorch device, so a region of either device type applies to them,
with that device type's lists. Backward passes run in the dtypes their forward ops used.

:class:`GradScaler` scales losses and unscales gradients as PyTorch's does, skipping the steps
whose gradients are not finite.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from gt.ops import autocast as _policy

_DEFAULT_DTYPE = {"cuda": "float16", "cpu": "bfloat16", "hpu": "bfloat16", "xla": "bfloat16"}
_SUPPORTED = {"cpu": ("bfloat16", "float16"), "cuda": ("float16", "bfloat16")}


class autocast:  # noqa: N801 - PyTorch's name
    """A region (context manager or decorator) in which PyTorch's autocast lists apply.

    Args:
        device_type: ``"cpu"`` (PyTorch's CPU lists) or ``"cuda"`` (its CUDA lists); other
            device types are accepted and change nothing.
        dtype: the lower precision (default bfloat16 for ``"cpu"``, float16 for ``"cuda"``).
        enabled: ``False`` makes a region in which nothing is cast (inside an enabled one too).
        cache_enabled: accepted (GT does not cache the casts of weights: results are the same).
    """

    def __init__(self, device_type: str = "cuda", dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None):  # fmt: skip
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if dtype is not None:
            name = str.__str__(dtype)
        else:  # the dtype in force for the device type (set_autocast_dtype's), as PyTorch's
            now = _policy.state(device_type)
            name = now[1] if now else _DEFAULT_DTYPE.get(device_type)
        name = (name or "float16").removeprefix("torch.").removeprefix("gt.")
        supported = _SUPPORTED.get(device_type)
        if enabled and supported is not None and name not in supported:
            warnings.warn(
                f"In {device_type} autocast, but the target dtype is not supported. Disabling "
                f"autocast.\n{device_type.upper()} Autocast only supports dtypes of "
                f"{', '.join('torch.' + s for s in supported)} currently.",
                UserWarning,
                stacklevel=2,
            )
            enabled = False
        self.device_type, self.fast_dtype, self.enabled = device_type, name, bool(enabled)
        self._cache_enabled = _policy.CACHE[0] if cache_enabled is None else bool(cache_enabled)
        self._prev_cache: list[bool] = []

    def __enter__(self) -> autocast:
        _policy.enter(self.device_type, self.enabled, self.fast_dtype)
        self._prev_cache.append(_policy.CACHE[0])
        _policy.CACHE[0] = self._cache_enabled
        return self

    def __exit__(self, *exc: Any) -> None:
        _policy.leave()
        if self._prev_cache:
            _policy.CACHE[0] = self._prev_cache.pop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def in_region(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*args, **kwargs)

        return in_region


class GradScaler:
    """PyTorch's loss scaler: ``scale(loss)`` multiplies by the scale, ``unscale_`` divides the
    optimizer's gradients by it and notes whether any is not finite, ``step`` skips the
    optimizer's step then, and ``update`` halves the scale after such a step and doubles it after
    ``growth_interval`` good ones. With ``enabled=False`` every method passes its argument
    through. (Finding non-finite gradients waits for the cluster, as PyTorch's ``step`` waits for
    its device.)
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):  # fmt: skip
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval, self._growth_tracker = int(growth_interval), 0
        self._unscaled: dict[int, bool] = {}  # id(optimizer) -> found a non-finite gradient
        self._stepped: set[int] = set()

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or lists and tuples of them) times the scale (a float32 number,
        so a 0-d half loss comes back in float32, as in PyTorch)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        from gt.factories import full  # noqa: PLC0415 - factories import tensors, which import this

        return outputs * full((), self._scale, dtype="float32")

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place (once per step)."""
        if not self._enabled:
            return
        key = id(optimizer)
        if key in self._stepped:
            raise RuntimeError("unscale_() is being called after step().")
        if key in self._unscaled:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]
                 if getattr(p, "grad", None) is not None]  # fmt: skip
        inv = 1.0 / self._scale  # (a power of two by default: exact)
        finite = True
        if grads:
            from gt.ops.shaping import stack  # noqa: PLC0415

            with _policy.suspended():
                for g in grads:
                    g.mul_(inv)
                finite = bool(stack([g.isfinite().all() for g in grads]).all().item())
        self._unscaled[key] = not finite

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step(*args, **kwargs)`` on unscaled gradients, unless one is not finite
        (then nothing, and ``None`` is returned)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        key = id(optimizer)
        if key in self._stepped:
            raise RuntimeError("step() has already been called since the last update().")
        if key not in self._unscaled:
            self.unscale_(optimizer)
        self._stepped.add(key)
        if self._unscaled[key]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: Any = None) -> None:
        """Set the scale for the next step: ``new_scale`` if given, else halved after a skipped
        step or grown after ``growth_interval`` steps in a row without one."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            if not self._unscaled:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(self._unscaled.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._unscaled.clear()
        self._stepped.clear()

    def get_scale(self) -> float:
        """The scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        """Whether scaling happens."""
        return self._enabled

    def state_dict(self) -> dict:
        """PyTorch's keys (empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}  # fmt: skip

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` gave."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled "
                "instance of GradScaler."
            )
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


#: The device types PyTorch's autocast functions accept (others raise its RuntimeError).
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
                "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                "privateuseone")  # fmt: skip


def _device_type(device_type: Any) -> str:
    if not isinstance(device_type, str):
        raise TypeError(f"device_type must be a str, not {type(device_type).__name__}")
    if device_type.split(":")[0] not in DEVICE_TYPES:
        raise RuntimeError(
            f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device string: "
            f"{device_type}"
        )
    return device_type.split(":")[0]


def _dtype_name(fn: str, dtype: Any, position: int = 2) -> str:
    from gt._dtype import dtype as _dt  # noqa: PLC0415 - tiny, and only here

    if not isinstance(dtype, _dt):
        raise TypeError(f"{fn}(): argument 'dtype' (position {position}) must be torch.dtype, not "
                        f"{type(dtype).__name__}")  # fmt: skip
    return str.__str__(dtype)


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether autocast is enabled for ``device_type`` here (its innermost region, else what
    :func:`set_autocast_enabled` set)."""
    now = _policy.state(_device_type(device_type))
    return bool(now and now[0])


def set_autocast_enabled(*args: Any) -> None:
    """``set_autocast_enabled(device_type, enabled)`` (or ``(enabled)`` for ``"cuda"``): turn
    autocast on or off here, as PyTorch's global state; an open region of that device type
    restores its state when it closes."""
    if len(args) == 1:
        device_type, enabled, pos = "cuda", args[0], 1
    elif len(args) == 2:
        device_type, enabled, pos = _device_type(args[0]), args[1], 2
    else:
        raise TypeError(
            "set_autocast_enabled() received an invalid combination of arguments - got "
            f"({', '.join(type(a).__name__ for a in args)}), but expected one of:\n"
            " * (str device_type, bool enabled)\n * (bool enabled)\n"
        )
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autocast_enabled(): argument 'enabled' (position {pos}) must be "
                        f"bool, not {type(enabled).__name__}")  # fmt: skip
    _policy.set_state(device_type, _DEFAULT_DTYPE.get(device_type, "float16"), enabled=enabled)


def set_autocast_dtype(device_type: str, dtype: Any) -> None:
    """The dtype autocast lowers to for ``device_type`` (and that ``autocast(device_type)``
    regions opened from now on default to)."""
    device_type = _device_type(device_type)
    name = _dtype_name("set_autocast_dtype", dtype)
    _policy.set_state(device_type, _DEFAULT_DTYPE.get(device_type, "float16"), dtype=name)


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """``set_autocast_enabled("cpu", enabled)`` (deprecated, as in PyTorch)."""
    warnings.warn("torch.set_autocast_cpu_enabled(enabled) is deprecated. Please use "
                  "torch.set_autocast_enabled('cpu', enabled) instead.", DeprecationWarning,
                  stacklevel=2)  # fmt: skip
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool (got {type(enabled).__name__})")
    set_autocast_enabled("cpu", enabled)


def set_autocast_cpu_dtype(dtype: Any) -> None:
    """``set_autocast_dtype("cpu", dtype)`` (deprecated, as in PyTorch)."""
    warnings.warn("torch.set_autocast_cpu_dtype(dtype) is deprecated. Please use "
                  "torch.set_autocast_dtype('cpu', dtype) instead.", DeprecationWarning,
                  stacklevel=2)  # fmt: skip
    _policy.set_state("cpu", "bfloat16", dtype=_dtype_name("set_autocast_cpu_dtype", dtype, 1))


def set_autocast_gpu_dtype(dtype: Any) -> None:
    """``set_autocast_dtype("cuda", dtype)`` (deprecated, as in PyTorch)."""
    warnings.warn("torch.set_autocast_gpu_dtype(dtype) is deprecated. Please use "
                  "torch.set_autocast_dtype('cuda', dtype) instead.", DeprecationWarning,
                  stacklevel=2)  # fmt: skip
    _policy.set_state("cuda", "float16", dtype=_dtype_name("set_autocast_gpu_dtype", dtype, 1))


def is_autocast_cache_enabled() -> bool:
    """Whether autocast's cast cache is on (a region's ``cache_enabled`` while it is open; GT
    keeps no cache of cast weights, so this changes no result)."""
    return _policy.CACHE[0]


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn autocast's cast cache on or off (see :func:`is_autocast_cache_enabled`)."""
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autocast_cache_enabled(): argument 'enabled' (position 1) must be "
                        f"bool, not {type(enabled).__name__}")  # fmt: skip
    _policy.CACHE[0] = enabled


def clear_autocast_cache() -> None:
    """Empty autocast's cast cache (GT keeps none: nothing to do)."""


def is_autocast_cpu_enabled() -> bool:
    """``is_autocast_enabled("cpu")``."""
    return is_autocast_enabled("cpu")


def get_autocast_dtype(device_type: str) -> Any:
    """The dtype the innermost ``autocast`` region of ``device_type`` names (PyTorch's default
    outside one)."""
    from gt._dtype import dtype  # noqa: PLC0415 - tiny, and only here

    now = _policy.state(_device_type(device_type))
    return dtype(now[1] if now else _DEFAULT_DTYPE.get(device_type, "float16"))


def get_autocast_cpu_dtype() -> Any:
    """``get_autocast_dtype("cpu")``, under its older name (deprecated, as in PyTorch)."""
    warnings.warn(
        "torch.get_autocast_cpu_dtype() is deprecated. Please use torch.get_autocast_dtype('cpu') "
        "instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    return get_autocast_dtype("cpu")


def get_autocast_gpu_dtype() -> Any:
    """``get_autocast_dtype("cuda")``, under its older name (deprecated, as in PyTorch)."""
    warnings.warn(
        "torch.get_autocast_gpu_dtype() is deprecated. Please use torch.get_autocast_dtype('cuda') "
        "instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    return get_autocast_dtype("cuda")


def custom_fwd(fwd: Callable | None = None, *, device_type: str = "cuda",
               cast_inputs: Any = None) -> Callable:  # fmt: skip
    """``@custom_fwd`` on a custom ``Function``'s ``forward``: with ``cast_inputs`` given, inside
    an enabled region its floating-point tensor arguments are cast to that dtype and it runs with
    autocast off (as PyTorch's)."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def forward(*args: Any, **kwargs: Any) -> Any:
        if cast_inputs is None or not _policy.in_force():
            return fwd(*args, **kwargs)
        target = str.__str__(cast_inputs).removeprefix("torch.").removeprefix("gt.")
        with autocast(device_type, enabled=False):
            return fwd(*_policy.cast_all(args, target), **_policy.cast_all(kwargs, target))

    return forward


def custom_bwd(bwd: Callable | None = None, *, device_type: str = "cuda") -> Callable:
    """``@custom_bwd`` on a custom ``Function``'s ``backward`` (backward passes already run in
    their forward ops' dtypes here)."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd


class DeviceAmp:
    """``torch.cuda.amp`` and ``torch.cpu.amp``: the same, with the device type given (their
    ``autocast`` takes ``enabled`` first)."""

    def __init__(self, device_type: str):
        self.device_type = device_type
        self.custom_fwd = functools.partial(custom_fwd, device_type=device_type)
        self.custom_bwd = functools.partial(custom_bwd, device_type=device_type)

    def autocast(self, enabled: bool = True, dtype: Any = None,
                 cache_enabled: bool = True) -> autocast:  # fmt: skip
        """``autocast(self.device_type, dtype, enabled)``."""
        return autocast(self.device_type, dtype, enabled, cache_enabled)

    def GradScaler(self, *args: Any, **kwargs: Any) -> GradScaler:  # noqa: N802 - PyTorch's name
        """``GradScaler(self.device_type, ...)``."""
        return GradScaler(self.device_type, *args, **kwargs)


__all__ = ["DeviceAmp", "GradScaler", "autocast", "clear_autocast_cache", "custom_bwd",
           "custom_fwd", "get_autocast_dtype", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype",
           "is_autocast_cache_enabled", "is_autocast_cpu_enabled", "is_autocast_enabled",
           "set_autocast_cache_enabled", "set_autocast_cpu_dtype", "set_autocast_cpu_enabled",
           "set_autocast_dtype", "set_autocast_enabled", "set_autocast_gpu_dtype"]  # fmt: skip
