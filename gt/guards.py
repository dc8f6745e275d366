"""Python state a captured step depends on without the step seeing it (pure).

A replay of a hot step (:mod:`gt.hotpath`) runs none of its Python, so a Python value the step
read while it was captured -- an optimizer's learning rate, whether a module is training -- would
silently stay as it was. The places that hold such values bump one version number when they
change (:class:`Hyperparameters` for optimizer parameter groups, ``Module.train``, a hook added
or removed); a captured step checks it before every replay and is captured again when it moved.

A learning rate that a scheduler changes every step would then never replay. So once a group's
rate has changed, GT's SGD and Adam family read it, while a call is being recorded, through
:func:`gt.optim._options.group_lr`: a float64 0-d tensor on the worker that holds the group's rate
(:attr:`Hyperparameters.lr_on_worker`). The captured step reads that tensor, and a new rate is
written into it (one small instruction before the next replay) instead of bumping the version.
Any other read of ``group["lr"]`` while a call is recorded (a custom optimizer, a step that
computes with the rate) bakes the number into that capture (:attr:`Hyperparameters.lr_baked`), so
the next new rate bumps the version as before; a rate no recorded call has read bumps nothing.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_version = 0
#: Calls of hot functions being recorded now (:mod:`gt.hotpath`): while above 0, reading a
#: group's ``"lr"`` bakes it (see the module docstring).
recording = 0
#: Makes the float64 0-d tensor that holds a rate (set by :mod:`gt.optim._options`, which may
#: make tensors; this module may not).
make_rate: Callable[[float], Any] | None = None
#: Why the call being recorded cannot be replayed, once it set a hyperparameter (a scheduler
#: stepped inside it: a replay runs no Python, so the value would stop changing).
written: str | None = None
WRITTEN = ("it sets an optimizer's hyperparameter (a scheduler's step inside it?): a replay runs "
           "no Python, so the value would stop changing; step the scheduler outside it")  # fmt: skip


def read_rates(groups: Iterable[Any]) -> None:
    """The rates of ``groups`` were read another way than ``group["lr"]`` (a scheduler's
    ``get_last_lr()``): inside a recorded call, the capture holds them as numbers."""
    if recording:
        for g in groups:
            if isinstance(g, Hyperparameters):
                g.lr_baked = True


def _number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def version() -> int:
    """The current version of the Python state captured steps depend on."""
    return _version


def bump() -> None:
    """Say that such state changed (every captured step is captured again before its next call)."""
    global _version
    _version += 1


class Hyperparameters(dict):
    """An optimizer's parameter group: a dict that bumps :func:`version` when it changes (an LR
    scheduler setting ``group["lr"]``, ``load_state_dict`` ...), or, for a learning rate that a
    captured step reads on the worker, writes the new rate there."""

    __slots__ = ("lr_on_worker", "lr_varies", "lr_baked")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The float64 0-d tensor that captured steps read the rate from (``None``: none yet).
        self.lr_on_worker: Any = None
        #: The rate has changed since the group was made: captures from now on read it on the
        #: worker (a constant rate stays a number in the step, one instruction cheaper).
        self.lr_varies = False
        #: A call was recorded that read the rate as a Python number: a capture may hold it,
        #: so a new rate must capture again. Until then, a new rate changes no capture.
        self.lr_baked = False

    def __getitem__(self, key: Any) -> Any:
        if recording and key == "lr":
            self.lr_baked = True
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        if recording and key == "lr":
            self.lr_baked = True
        return dict.get(self, key, default)

    # (any other way of reading the rate inside a recorded call bakes it too: ``dict(group)``,
    # ``**group``, ``group.items()`` ...)
    def _read_all(self) -> None:
        if recording:
            self.lr_baked = True

    def __iter__(self) -> Iterator:
        self._read_all()
        return dict.__iter__(self)

    def keys(self) -> Any:
        self._read_all()
        return dict.keys(self)

    def items(self) -> Any:
        self._read_all()
        return dict.items(self)

    def values(self) -> Any:
        self._read_all()
        return dict.values(self)

    def copy(self) -> dict:
        self._read_all()
        return dict(dict.items(self))

    def __setitem__(self, key: Any, value: Any) -> None:
        global written
        if recording:  # (a replay would not run this write: see WRITTEN)
            written = WRITTEN
        if key in self:
            old = dict.__getitem__(self, key)
            same = old is value or (
                key == "lr" and type(old) is type(value) and _number(value) and old == value
            )
            if same or (key == "lr" and _number(old) and self._new_rate(value)):
                dict.__setitem__(self, key, value)
                return
        self._changed(key, value)
        dict.__setitem__(self, key, value)

    def _new_rate(self, value: Any) -> bool:
        """A new rate that no capture holds as a number (outside a recorded call): written
        where captured steps read it, if they do; ``False``: every step must capture again."""
        if self.lr_baked or recording or not _number(value):
            return False
        self.lr_varies = True
        held = self.lr_on_worker
        if held is not None:
            if getattr(held._conn, "closed", True):  # (a closed connection: nothing replays)
                self.lr_on_worker = None
            else:
                held[...] = float(value)  # (an indexed write keeps its id: replays read it)
        return True

    def _changed(self, key: Any, value: Any = None) -> None:
        if key == "lr":  # (every step captures again, and says again how it reads the rate)
            read = self.lr_baked and not recording and _number(value)
            self.lr_on_worker, self.lr_varies, self.lr_baked = None, True, False
            if read and make_rate is not None:  # made now, not in the next recorded call: the
                self.lr_on_worker = make_rate(float(value))  # calls compared are then alike
        bump()

    def __delitem__(self, key: Any) -> None:
        self._changed(key)
        super().__delitem__(key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():  # (each as ``group[key] = value``)
            self[key] = value

    def clear(self) -> None:
        self._changed("lr")
        super().clear()

    def pop(self, *args: Any) -> Any:
        self._changed(args[0] if args else None)
        return super().pop(*args)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            bump()
        return super().setdefault(key, default)

    def __reduce__(self) -> tuple:
        return (Hyperparameters, (dict(self),))
