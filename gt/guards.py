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

The same holds for ``momentum`` and the first of ``betas`` (beta1), which ``OneCycleLR`` and
``CyclicLR`` cycle every step by default (:data:`ON_WORKER`; read through
:func:`gt.optim._options.group_momentum` and :func:`~gt.optim._options.group_betas`). A new
``betas`` pair whose beta2 changed, or a momentum that becomes 0 or stops being 0 (the step
branches on it in Python), captures again.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_version = 0
#: Calls of hot functions being recorded now (:mod:`gt.hotpath`): while above 0, reading a
#: group's ``"lr"``, ``"momentum"`` or ``"betas"`` bakes it (see the module docstring).
recording = 0
#: Makes the float64 0-d tensor that holds a rate, momentum or beta1 (set by :mod:`gt.optim._options`, which may
#: make tensors; this module may not).
make_rate: Callable[[float], Any] | None = None
#: Why the call being recorded cannot be replayed, once it set a hyperparameter (a scheduler
#: stepped inside it: a replay runs no Python, so the value would stop changing).
written: str | None = None
#: While a hot function's call is recorded: ``(tensor, id of its old gradient or None)`` for
#: every ``.grad`` set in it (:mod:`gt.hotpath` replays gradients that ``zero_grad()`` outside
#: the step drops, or that a step accumulates into); ``None`` otherwise.
grads_set: list | None = None
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


#: The hyperparameters a captured step may read on the worker (see the module docstring), and
#: for each, the number that is held there: the value itself, or the first of ``betas`` (beta1,
#: which ``OneCycleLR`` and ``CyclicLR`` cycle; a new beta2 always captures again).
ON_WORKER = ("lr", "momentum", "betas")


def held_number(key: str, value: Any) -> Any:
    """The number of ``value`` (set as ``group[key]``) that a captured step reads on the worker,
    or ``None`` when there is none (not a number; ``betas`` not a pair that starts with one)."""
    if key == "betas":
        if type(value) is not tuple or len(value) != 2:
            return None
        value = value[0]
    return value if _number(value) else None


def _alike(old: Any, new: Any) -> bool:
    """The same value, as far as any capture can tell (numbers of one type that are equal)."""
    if type(old) is tuple and type(new) is tuple:
        return len(old) == len(new) and all(map(_alike, old, new))
    return old is new or (type(old) is type(new) and _number(new) and old == new)


def _sign(x: Any) -> int:
    return (x > 0) - (x < 0)


class Hyperparameters(dict):
    """An optimizer's parameter group: a dict that bumps :func:`version` when it changes (an LR
    scheduler setting ``group["lr"]``, ``load_state_dict`` ...), or, for a learning rate, momentum
    or beta1 that a captured step reads on the worker, writes the new value there."""

    __slots__ = ("on_worker", "varies", "baked")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Per key of :data:`ON_WORKER`: the float64 0-d tensor that captured steps read its
        #: number from (none yet: absent).
        self.on_worker: dict[str, Any] = {}
        #: The keys whose number has changed since the group was made: captures from now on
        #: read it on the worker (a constant one stays a number in the step, one instruction
        #: cheaper).
        self.varies: set[str] = set()
        #: The keys a recorded call read as Python numbers: a capture may hold them, so a new
        #: value must capture again. Until then, a new value changes no capture.
        self.baked: set[str] = set()

    # (the learning rate's, by the names they had when only the rate was held on the worker)
    @property
    def lr_on_worker(self) -> Any:
        return self.on_worker.get("lr")

    @lr_on_worker.setter
    def lr_on_worker(self, held: Any) -> None:
        self._hold("lr", held)

    @property
    def lr_varies(self) -> bool:
        return "lr" in self.varies

    @lr_varies.setter
    def lr_varies(self, on: bool) -> None:
        (self.varies.add if on else self.varies.discard)("lr")

    @property
    def lr_baked(self) -> bool:
        return "lr" in self.baked

    @lr_baked.setter
    def lr_baked(self, on: bool) -> None:
        (self.baked.add if on else self.baked.discard)("lr")

    def _hold(self, key: str, held: Any) -> None:
        if held is None:
            self.on_worker.pop(key, None)
        else:
            self.on_worker[key] = held

    def __getitem__(self, key: Any) -> Any:
        if recording and key in ON_WORKER:
            self.baked.add(key)
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        if recording and key in ON_WORKER:
            self.baked.add(key)
        return dict.get(self, key, default)

    # (any other way of reading these inside a recorded call bakes them too: ``dict(group)``,
    # ``**group``, ``group.items()`` ...)
    def _read_all(self) -> None:
        if recording:
            self.baked.update(ON_WORKER)

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
            if old is value or (key in ON_WORKER and (
                _alike(old, value) or self._new_value(key, old, value)
            )):  # fmt: skip
                dict.__setitem__(self, key, value)
                return
        self._changed(key, value)
        dict.__setitem__(self, key, value)

    def _new_value(self, key: str, old: Any, value: Any) -> bool:
        """A new value whose number no capture holds (outside a recorded call): written where
        captured steps read it, if they do; ``False``: every step must capture again."""
        x, was = held_number(key, value), held_number(key, old)
        if key in self.baked or recording or x is None or was is None:
            return False
        if key != "lr" and _sign(x) != _sign(was):  # (``if momentum:`` is Python in the step:
            return False  # a momentum that becomes 0, or stops being, changes the instructions)
        if key == "betas" and not _alike(old[1], value[1]):  # (beta2: a number in the step)
            return False
        self.varies.add(key)
        held = self.on_worker.get(key)
        if held is not None:
            if getattr(held._conn, "closed", True):  # (a closed connection: nothing replays)
                del self.on_worker[key]
            else:
                held[...] = float(x)  # (an indexed write keeps its id: replays read it)
        return True

    def _changed(self, key: Any, value: Any = None) -> None:
        for k in ON_WORKER if key is None else (key,) if key in ON_WORKER else ():
            # (every step captures again, and says again how it reads the value)
            x = held_number(k, value) if k == key else None
            read = k in self.baked and not recording and x is not None
            self.on_worker.pop(k, None)
            self.varies.add(k)
            self.baked.discard(k)
            if read and make_rate is not None:  # made now, not in the next recorded call: the
                self.on_worker[k] = make_rate(float(x))  # calls compared are then alike
        bump()

    def __delitem__(self, key: Any) -> None:
        self._changed(key)
        super().__delitem__(key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():  # (each as ``group[key] = value``)
            self[key] = value

    def clear(self) -> None:
        self._changed(None)
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
