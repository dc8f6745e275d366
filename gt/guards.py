"""Python state a captured step depends on without the step seeing it (pure).

A replay of a hot step (:mod:`gt.hotpath`) runs none of its Python, so a Python value the step
read while it was captured -- an optimizer's learning rate, whether a module is training -- would
silently stay as it was. The places that hold such values bump one version number when they
change (:class:`Hyperparameters` for optimizer parameter groups, ``Module.train``, a hook added
or removed); a captured step checks it before every replay and is captured again when it moved.
"""

from __future__ import annotations

from typing import Any

_version = 0


def version() -> int:
    """The current version of the Python state captured steps depend on."""
    return _version


def bump() -> None:
    """Say that such state changed (every captured step is captured again before its next call)."""
    global _version
    _version += 1


class Hyperparameters(dict):
    """An optimizer's parameter group: a dict that bumps :func:`version` when it changes (an LR
    scheduler setting ``group["lr"]``, ``load_state_dict`` ...)."""

    __slots__ = ()

    def __setitem__(self, key: Any, value: Any) -> None:
        if key not in self or self[key] is not value:
            bump()
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        bump()
        super().__delitem__(key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        bump()
        super().update(*args, **kwargs)

    def clear(self) -> None:
        bump()
        super().clear()

    def pop(self, *args: Any) -> Any:
        bump()
        return super().pop(*args)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            bump()
        return super().setdefault(key, default)

    def __reduce__(self) -> tuple:
        return (Hyperparameters, (dict(self),))
