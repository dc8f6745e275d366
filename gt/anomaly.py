"""Anomaly detection for autograd, as ``torch.autograd.detect_anomaly`` gives it: while it is on,
every derivative rule's results are checked for NaN, and the first rule that returns one raises
``RuntimeError`` naming the rule (``Function 'LogBackward0' returned nan values in its 0th
output.``), raised at the user's ``backward()`` line.

Each check is a sync point (one small fetch per gradient), as in PyTorch, where the check also
synchronises a GPU: turn it on to debug, not to train.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

_state = {"enabled": False, "check_nan": True}


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    return _state["enabled"]


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks the gradients for NaN."""
    return _state["check_nan"]


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off (``torch.set_anomaly_enabled``)."""
    _state["enabled"], _state["check_nan"] = bool(enabled), bool(check_nan)


class _AnomalyMode:
    def __init__(self, mode: bool, check_nan: bool) -> None:
        self.prev = (_state["enabled"], _state["check_nan"])
        self.mode, self.check_nan = mode, check_nan

    def __enter__(self) -> None:
        set_anomaly_enabled(self.mode, self.check_nan)

    def __exit__(self, *exc: Any) -> None:
        set_anomaly_enabled(*self.prev)

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _AnomalyMode(self.mode, self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class detect_anomaly(_AnomalyMode):  # noqa: N801 - PyTorch's name
    """Anomaly detection on inside a ``with`` block or a decorated function."""

    def __init__(self, check_nan: bool = True) -> None:
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should "
            "only be enabled for debugging.",
            stacklevel=2,
        )
        super().__init__(True, check_nan)


class set_detect_anomaly(_AnomalyMode):  # noqa: N801 - PyTorch's name
    """Anomaly detection on or off from now on (``set_detect_anomaly(True)`` at a script's top),
    or until the end of a ``with`` block."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        super().__init__(mode, check_nan)
        set_anomaly_enabled(mode, check_nan)


def check_gradients(node: Any, in_grads: tuple) -> None:
    """Raise if a derivative rule returned NaN (only while anomaly detection checks for it)."""
    for i, g in enumerate(in_grads):
        if g is None or not hasattr(g, "isnan") or g.dtype not in _FLOATS:
            continue
        if bool(g.isnan().any().item()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


_FLOATS = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")

__all__ = ["detect_anomaly", "is_anomaly_check_nan_enabled", "is_anomaly_enabled",
           "set_anomaly_enabled", "set_detect_anomaly"]  # fmt: skip
