"""``gt.jit``: TorchScript's decorators and helpers, so scripts that use them run eagerly.

GT has no TorchScript compiler: ``gt.jit.script`` and ``gt.jit.trace`` return what they are given
(the function or module runs as plain Python, which is what TorchScript code means anyway), the
decorators ``ignore``, ``unused`` and ``export`` return the function, and ``is_scripting()`` and
``is_tracing()`` are ``False``. For a repeated step captured and replayed, see ``@gt.hot`` (or
``gt.compile``). Saving a scripted model is ``gt.save(model.state_dict(), path)``.
"""

from __future__ import annotations

from typing import Any, Final

from gt.nn.module import Module as ScriptModule

__all__ = [
    "Final",
    "ScriptModule",
    "ScriptFunction",
    "annotate",
    "export",
    "fork",
    "freeze",
    "ignore",
    "interface",
    "is_scripting",
    "is_tracing",
    "load",
    "optimize_for_inference",
    "save",
    "script",
    "trace",
    "trace_module",
    "unused",
    "wait",
]

ScriptFunction = type(lambda: None)  # what ``script(fn)`` returns here: the function itself


def script(obj: Any = None, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> Any:  # fmt: skip
    """Return ``obj`` unchanged (a function, class or ``nn.Module``); it runs eagerly."""
    return obj


def trace(func: Any, example_inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    """Return ``func`` unchanged; ``example_inputs`` and torch's other options are ignored."""
    return func


def trace_module(mod: Any, inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    """Return ``mod`` unchanged."""
    return mod


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """``@ignore`` or ``@ignore(drop=True)``: the function, unchanged."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Any) -> Any:
    """``@unused``: the function, unchanged."""
    return fn


def export(fn: Any) -> Any:
    """``@export``: the method, unchanged."""
    return fn


def interface(obj: Any) -> Any:
    """``@interface``: the class, unchanged."""
    return obj


def is_scripting() -> bool:
    """``False``: code never runs as TorchScript under GT."""
    return False


def is_tracing() -> bool:
    """``False``: code never runs under the tracer in GT."""
    return False


def annotate(the_type: Any, the_value: Any) -> Any:
    """The value (the type is only a hint for the TorchScript compiler)."""
    return the_value


def freeze(mod: Any, preserved_attrs: Any = None, optimize_numerics: bool = True) -> Any:
    """Return the module unchanged."""
    return mod


def optimize_for_inference(mod: Any, other_methods: Any = None) -> Any:
    """Return the module unchanged."""
    return mod


class Future:
    """What :func:`fork` returns: the call's result, already computed (GT ops are asynchronous
    by themselves)."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def wait(self) -> Any:
        return self._value

    def value(self) -> Any:
        return self._value

    def done(self) -> bool:
        return True


def fork(func: Any, *args: Any, **kwargs: Any) -> Future:
    """Run ``func(*args, **kwargs)`` now; :func:`wait` gives its result."""
    return Future(func(*args, **kwargs))


def wait(future: Future) -> Any:
    """The result of a :func:`fork`."""
    return future.wait()


def save(m: Any, f: Any, _extra_files: Any = None) -> None:
    """Not supported: GT has no TorchScript archives.

    Raises:
        NotImplementedError: always; save ``gt.save(model.state_dict(), path)`` instead.
    """
    raise NotImplementedError(
        "gt.jit.save: GT has no TorchScript archives; save the weights with "
        "gt.save(model.state_dict(), path) and rebuild the model with its Python class"
    )


def load(f: Any, map_location: Any = None, _extra_files: Any = None) -> Any:
    """Not supported: GT has no TorchScript archives.

    Raises:
        NotImplementedError: always; use ``model.load_state_dict(gt.load(path))`` instead.
    """
    raise NotImplementedError(
        "gt.jit.load: GT cannot load TorchScript archives; load weights saved with gt.save "
        "via model.load_state_dict(gt.load(path))"
    )
