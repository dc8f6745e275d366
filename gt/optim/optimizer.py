"""The optimizer base class: parameter groups, per-parameter state, ``zero_grad``, ``step``, and
``state_dict``/``load_state_dict`` in PyTorch's layout (so checkpoints look the same).

A step updates each parameter in place (the parameter stays the same Python object) with ordinary
tensor ops under ``no_grad``, so it runs on the workers, needs no sync point, and leaves nothing
behind: optimizer state is also updated in place, and every temporary is freed as soon as the step
moves on.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from gt.autograd import enable_grad, no_grad
from gt.backprop import reset_grads
from gt.factories import tensor
from gt.guards import Hyperparameters
from gt.optim.optimizer_hooks import (
    OptimizerHooks,
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from gt.tensor import Tensor

_COMPLEX = frozenset(("complex64", "complex128"))


class _RequiredParameter:
    """The default of a hyperparameter that every parameter group must set: optimizers written
    for PyTorch declare ``def __init__(self, params, lr=required)``
    (``torch.optim.optimizer.required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


#: The ``required`` sentinel (``from torch.optim.optimizer import required``).
required = _RequiredParameter()


class ParamState(dict):
    """One parameter's state in GT's own optimizers. GT counts steps in a Python int (the
    step-dependent factors are then computed on the client); PyTorch keeps a float32 0-d tensor,
    and code that reads ``optimizer.state[p]["step"]`` (a FedOpt server, a logger, a warmup by
    step) gets one here too, made when it is first read and then kept: later steps add one to it
    in place, as PyTorch's do, and an in-place change the program makes to it (``zero_()`` to
    restart a warmup) is taken into the count at the next step (a sync point, only then). The
    updates read the int itself (:meth:`count`)."""

    __slots__ = ("_shown",)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        #: ``(count, tensor, its version)``: the step tensor handed out, and what it showed.
        self._shown: tuple[int, Tensor, int] | None = None

    def __getitem__(self, key: Any) -> Any:
        value = dict.__getitem__(self, key)
        if key == "step" and type(value) is int:
            shown = self._shown
            if shown is not None and shown[0] == value:
                return shown[1]
            t = tensor(float(value))
            self._shown = (value, t, t._version)
            return t
        return value

    def count(self) -> Any:
        """The step count as the update reads it: the int, or what the program wrote into the
        step tensor it read (an int when whole, else a float)."""
        value = dict.__getitem__(self, "step")
        shown = self._shown
        if shown is None or type(value) is not int or shown[0] != value:
            return value
        if shown[1]._version != shown[2]:
            edited = float(shown[1].item())
            value = int(edited) if edited.is_integer() else edited
            dict.__setitem__(self, "step", value)
            self._shown = (value, shown[1], shown[1]._version) if type(value) is int else None
        return value

    def counted(self, value: Any) -> None:
        """Store the next step count, and add one to the step tensor handed out (in place)."""
        shown = self._shown
        dict.__setitem__(self, "step", value)
        if shown is not None and type(value) is int and shown[0] == value - 1:
            shown[1].add_(1.0)
            self._shown = (value, shown[1], shown[1]._version)

    # (PyTorch's state holds the tensor: every way of reading a dict shows it)
    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if dict.__contains__(self, key) else default

    def items(self) -> Any:  # type: ignore[override]
        return [(k, self[k]) for k in dict.keys(self)]

    def values(self) -> Any:  # type: ignore[override]
        return [self[k] for k in dict.keys(self)]

    def __iter__(self) -> Any:  # (so that ``dict(state)`` and ``{**state}`` read through it)
        return dict.__iter__(self)

    def copy(self) -> dict:
        return dict(self.items())

    def __repr__(self) -> str:
        return repr(dict(self.items()))


def _view_state(state: dict[str, Any], shape: tuple, dtypes: Any, op: str) -> None:
    """Replace each state tensor of ``shape`` and one of ``dtypes`` by ``op`` of it (a complex
    parameter's state: ``view_as_real`` before its update, ``view_as_complex`` after)."""
    for key, value in state.items():
        if isinstance(value, Tensor) and value.shape == shape and value.dtype in dtypes:
            state[key] = value._apply(op, [value])


class Optimizer(OptimizerHooks):
    """Base class: parameter groups, per-parameter state, ``zero_grad``.

    Args:
        params: tensors, or dicts with a ``"params"`` list and per-group hyperparameters.
        defaults: hyperparameters for groups that do not set them.
    """

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]):
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts"
            )
        self.defaults = dict(defaults)
        # (a defaultdict, as PyTorch's: optimizers written for it read ``self.state[p]`` first)
        self.state: dict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters."""
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        group = dict(group)
        if params and all(isinstance(p, tuple) and len(p) == 2 for p in params):
            # ``named_parameters()``: the names are kept beside the parameters, as PyTorch's
            group["param_names"] = [name for name, _ in params]
            params = [p for _, p in params]
        if self.param_groups and ("param_names" in group) != (
            "param_names" in self.param_groups[0]
        ):
            raise ValueError(
                "all optimizer param groups should be with/without names. cannot add param group "
                + ("without" if "param_names" not in group else "with")
                + " names to the optimizer"
            )
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        if len({id(p) for p in params}) != len(params):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, this "
                "will cause an error; see github.com/pytorch/pytorch/issues/40967 for more "
                "information",
                UserWarning,
                stacklevel=3,
            )
        seen = {id(q) for g in self.param_groups for q in g["params"]}
        if any(id(q) in seen for q in params):  # (it would be stepped once per group)
            raise ValueError("some parameters appear in more than one parameter group")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization parameter "
                    + name
                )
        full = Hyperparameters(self.defaults)  # a captured step (gt.hot) sees it change
        full.update(group)
        full["params"] = params
        self.param_groups.append(full)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset gradients: to ``None`` (default), or to zeros in place."""
        reset_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; returns ``closure()`` when given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state.get(p)
                    new = state is None
                    if new:
                        state = self.state[p] = ParamState() if self.TENSOR_STEP else {}
                    if p.dtype in _COMPLEX:
                        self._update_complex(p, group, state)
                    else:
                        self._update(p, self._dense(p.grad, group), group, state)
                    if new and not state:  # (SGD without momentum keeps no state: no entry)
                        del self.state[p]
        return loss

    #: Whether PyTorch keeps this optimizer's step count as a tensor (read as one from
    #: :class:`ParamState`); SparseAdam's is a Python int there too.
    TENSOR_STEP = True

    #: Whether the optimizer takes sparse gradients (``nn.Embedding(sparse=True)``'s): "dense"
    #: (SGD, Adagrad: PyTorch's sparse update equals the dense one of the densified gradient,
    #: untouched rows changing by exactly zero), "own" (SparseAdam), or None (PyTorch refuses).
    SPARSE_GRADIENTS: str | None = None

    def _dense(self, g: Any, group: dict[str, Any]) -> Any:
        if g.__class__ is Tensor or getattr(g, "is_sparse", False) is not True:
            return g
        if self.SPARSE_GRADIENTS == "own":
            return g
        name = type(self).__name__
        if self.SPARSE_GRADIENTS is None:
            hint = ", please consider SparseAdam instead" if name in ("Adam", "AdamW") else ""
            raise RuntimeError(
                f"{'Adam' if name == 'AdamW' else name} does not support sparse gradients{hint}"
            )
        if group.get("weight_decay"):
            if name == "Adagrad":
                raise RuntimeError("weight_decay option is not compatible with sparse gradients")
            raise RuntimeError(
                "add(sparse, dense) is not supported. Use add(dense, sparse) instead."
            )
        return g.to_dense()

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        raise NotImplementedError

    def _update_complex(self, p: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        """A complex parameter is updated as its (real, imaginary) pairs, as PyTorch does: second
        moments and norms see both parts as real numbers. Between steps its state is complex and
        shaped like the parameter, as PyTorch's (which views it as real only inside ``step``)."""
        _view_state(state, p.shape, _COMPLEX, "view_as_real")
        pairs = p._apply("view_as_real", [p])
        self._update(pairs, p.grad._apply("view_as_real", [p.grad]), group, state)
        p.copy_(pairs._apply("view_as_complex", [pairs]))
        # (the update made or kept its state as pairs)
        _view_state(state, pairs.shape, (pairs.dtype,), "view_as_complex")

    # ------------------------------------------------------------------ state
    def __getstate__(self) -> dict[str, Any]:
        """What pickling and ``copy.deepcopy`` keep, as in PyTorch: the defaults, the state and
        the parameter groups (PyTorch drops a subclass's other attributes too)."""
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`__getstate__` kept; optimizers written for PyTorch override it and
        call ``super().__setstate__(state)`` before filling in their groups' newer defaults."""
        self.__dict__.update(state)

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state in PyTorch's layout: ``{"state": {index: {...}},
        "param_groups": [{..., "params": [index, ...]}]}``, parameters numbered in group order.

        The state's tensors are the optimizer's own (as in PyTorch): save or clone them for a
        snapshot.
        """
        self._gt_run("_gt_sd_pre")
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        own = self._gt_state()
        state = {index[id(p)]: _exported(s) if own else s
                 for p, s in self.state.items() if id(p) in index}  # fmt: skip
        out = {"state": state, "param_groups": groups}
        changed = self._gt_run("_gt_sd_post", out)
        return out if changed is None else changed

    def _gt_state(self) -> bool:
        """Whether the state is made by GT's own update (an optimizer with an ``_update``), whose
        step counts are Python ints where PyTorch keeps tensors, so the state dict converts them.
        A subclass that writes its own ``step`` keeps what it stores, there as in PyTorch."""
        return type(self)._update is not Optimizer._update

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore state from :meth:`state_dict` (tensors cast to each parameter's dtype, shared
        when they have it already, as in PyTorch; hyperparameters come from the saved groups).

        Raises:
            ValueError: the saved groups do not match this optimizer's in number or size.
        """
        replaced = self._gt_run("_gt_load_pre", state_dict)
        state_dict = state_dict if replaced is None else replaced
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, sg in zip(self.param_groups, saved_groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError(
                    "loaded state dict contains a parameter group that doesn't match the size of "
                    "optimizer's group"
                )
        ids = {
            i: p
            for g, sg in zip(self.param_groups, saved_groups)
            for i, p in zip(sg["params"], g["params"])
        }
        self.state = defaultdict(dict)
        own = self._gt_state()
        for key, st in state_dict["state"].items():
            p = ids.get(int(key))
            if p is None:
                continue
            self.state[p] = {k: (_loaded_step(v) if own else v) if k == "step"
                             else _copy_state(v, p) for k, v in st.items()}  # fmt: skip
            if own and self.TENSOR_STEP:
                self.state[p] = ParamState(self.state[p])
        for g, sg in zip(self.param_groups, saved_groups):
            params = g["params"]
            g.clear()
            g.update({k: v for k, v in sg.items() if k != "params"})
            g["params"] = params
        self._gt_run("_gt_load_post")

    def __repr__(self) -> str:
        text = f"{type(self).__name__} ("
        for i, g in enumerate(self.param_groups):  # (PyTorch's layout: groups a blank line apart)
            text += f"\nParameter Group {i}\n"
            text += "".join(f"    {k}: {v}\n" for k, v in sorted(g.items()) if k != "params")
        return text + ")"


def _exported(state: dict) -> dict:
    """A parameter's state as PyTorch saves it: a step count that GT keeps as a Python int (the
    bias corrections are then computed on the client) becomes a float32 0-d tensor; a
    :class:`ParamState` a plain dict (what ``gt.load(weights_only=True)`` reads back)."""
    if type(state) is ParamState:
        return dict(state.items())
    step = state.get("step")
    if type(step) is not int:
        return state
    return {**state, "step": tensor(float(step))}


def _loaded_step(value: Any) -> Any:
    """A saved step count: back to a Python int when it is a plain 0-d tensor (a step tensor
    on the worker, as ``capturable`` keeps it, is left so: it is float64 there)."""
    if isinstance(value, Tensor) and value.ndim == 0 and value.dtype != "float64":
        return int(value.item())
    return value


def _copy_state(value: Any, param: Tensor) -> Any:
    """A loaded state value. As in PyTorch, floating tensors are cast to the parameter's dtype,
    which keeps the very tensor when it already has it (the loaded state then shares it with the
    state dict it came from)."""
    if isinstance(value, Tensor):
        if value.is_floating_point() and param.is_floating_point():
            return value.to(param.dtype)
        return value
    if isinstance(value, dict):
        return {k: _copy_state(v, param) for k, v in value.items()}
    if isinstance(value, list):  # LBFGS's history
        return [_copy_state(v, param) for v in value]
    return value


__all__ = ["Optimizer", "register_optimizer_step_post_hook", "register_optimizer_step_pre_hook"]
