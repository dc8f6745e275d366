"""``gt.func``: PyTorch's ``torch.func``: ``functional_call``, ``stack_module_state`` and the
function transforms ``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``,
``hessian``, ``linearize``, ``vmap`` and ``functionalize``, and
``replace_all_batch_norm_modules_``.

The transforms are built on GT's reverse-mode autograd with ``create_graph=True``, so they compose
(``grad(grad(f))``, ``vmap(grad(f))`` for per-sample gradients, ``jacrev(jacrev(f))``). Inputs need
not require grad: each transform differentiates with respect to fresh copies of its arguments,
which stay connected to any outer transform's. ``vmap`` runs the function once over the whole
batch (:mod:`gt.func_batching`), and once per entry where it cannot; ``jacfwd`` computes the same
Jacobian as ``jacrev`` in reverse mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gt.autograd.functional import _grads, dummy_like
from gt.func_batching import RUNS, run_batched
from gt.grad_graph import Node
from gt.grad_mode import enable_grad, is_grad_enabled
from gt.nn.module import Module
from gt.nn.utils.stateless import call
from gt.ops.shaping import stack
from gt.tensor import Tensor

__all__ = ["functional_call", "functionalize", "grad", "grad_and_value", "hessian", "jacfwd",
           "jacrev", "jvp", "linearize", "replace_all_batch_norm_modules_", "stack_module_state",
           "vjp", "vmap"]  # fmt: skip


def functional_call(module: Module, parameter_and_buffer_dicts: dict[str, Tensor] | Sequence[dict[str, Tensor]],
                    args: Any = None, kwargs: dict[str, Any] | None = None, *,
                    tie_weights: bool = True, strict: bool = False) -> Any:  # fmt: skip
    """Call ``module`` with the given tensors (by dotted name) in place of its own parameters and
    buffers (see :func:`gt.nn.utils.stateless.functional_call`; several dicts are merged).

    Raises:
        ValueError: a name appears in two dicts, or the argument is not a dict or a sequence of
            them.
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError(
                "Expected all elements of parameter_and_buffer_dicts to be dictionaries"
            )
        counts: dict[str, int] = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(
                f"{repeated} appeared in multiple dictionaries; behavior of functional call is "
                "ambiguous"
            )
        merged = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError(
            "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
            f"{type(parameter_and_buffer_dicts)}"
        )
    return call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)


def stack_module_state(models: Sequence[Module]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """The parameters and buffers of same-shaped ``models`` stacked along a new first dimension
    (parameters as new leaves that require grad).

    Raises:
        RuntimeError: no models, mixed training modes, mixed classes, or mixed
            ``requires_grad``.
    """
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode."
        )
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(tensors: list[Tensor], name: str) -> Tensor:
        flags = {bool(t.requires_grad) for t in tensors}
        if len(flags) > 1:
            raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
        out = stack(tensors)
        return out.detach().requires_grad_() if flags == {True} else out

    params = [dict(m.named_parameters()) for m in models]
    buffers = [dict(m.named_buffers()) for m in models]
    return (
        {k: stacked([p[k] for p in params], k) for k in params[0]},
        {k: stacked([b[k] for b in buffers], k) for k in buffers[0]},
    )


# ------------------------------------------------------------------ pytrees (tensors in tuples,
# lists and dicts, as torch.func's arguments and results)
def _leaves(tree: Any) -> list:
    if isinstance(tree, Tensor):
        return [tree]
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in _leaves(item)]
    if isinstance(tree, dict):
        return [leaf for k in tree for leaf in _leaves(tree[k])]
    return []


def _rebuild(tree: Any, leaves: list) -> Any:
    """``tree`` with its tensors replaced, in order, by ``leaves`` (consumed)."""
    if isinstance(tree, Tensor):
        return leaves.pop(0)
    if isinstance(tree, tuple):
        items = [_rebuild(item, leaves) for item in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else tuple(items)
    if isinstance(tree, list):
        return [_rebuild(item, leaves) for item in tree]
    if isinstance(tree, dict):
        return {k: _rebuild(tree[k], leaves) for k in tree}
    return tree


def _fresh(t: Tensor) -> Tensor:
    """A tensor to differentiate with respect to: connected to ``t`` if ``t`` is already part of
    an outer transform's graph, else a new leaf."""
    return t.clone() if t.requires_grad else t.detach().requires_grad_(True)


def _private(leaves: Any) -> set[int]:
    """The ids of the new leaves among a transform's differentiation inputs (made by
    :func:`_fresh` from tensors that did not require grad): nothing outside the transform can
    differentiate with respect to them."""
    return {id(t) for t in leaves if t._node is None}


def _reaches_outside(t: Tensor, private: set[int]) -> bool:
    """Whether ``t``'s graph reaches a tensor requiring grad other than the ``private`` leaves
    (a captured parameter, an input that required grad, an outer transform's input)."""
    if not t.requires_grad:
        return False
    if t._node is None:
        return id(t) not in private
    seen, todo = set(), [t._node]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for p in node.parents:
            if isinstance(p, Node):
                todo.append(p)
            elif p is not None and id(p) not in private:
                return True
    return False


def _release(tree: Any, private: set[int]) -> Any:
    """``tree`` (a transform's result) with every tensor that depends on nothing requiring grad
    but the transform's own ``private`` leaves detached, as PyTorch's results are: the graph the
    transform recorded (``create_graph=True``, so that transforms compose) stays inside it. Where
    a result depends on something outside, it keeps its graph (``grad(f)(x)`` with ``f`` using a
    parameter that requires grad is differentiable with respect to that parameter)."""
    leaves = _leaves(tree)
    released = [t.detach() if t.requires_grad and not _reaches_outside(t, private) else t
                for t in leaves]  # fmt: skip
    if all(a is b for a, b in zip(released, leaves)):
        return tree
    return _rebuild(tree, released)


def _argnums(argnums: Any, n: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not -n <= a < n:
            raise RuntimeError(f"Got argnums={argnums} but only {n} positional inputs")
    return tuple(a % n for a in nums)


def _prepare(args: tuple, argnums: Any) -> tuple[tuple, tuple[int, ...], list]:
    nums = _argnums(argnums, len(args))
    args = list(args)
    diff = []
    for a in nums:
        leaves = [_fresh(t) for t in _leaves(args[a])]
        diff.append(leaves)
        args[a] = _rebuild(args[a], list(leaves))
    return tuple(args), nums, diff


def grad_and_value(func: Callable, argnums: Any = 0, has_aux: bool = False) -> Callable:
    """``f -> (args -> (d f / d args[argnums], f(args)))`` for a function returning one number
    (with ``has_aux``: ``(number, aux)``; then the result is ``(grad, (value, aux))``)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with enable_grad():
            call_args, nums, diff = _prepare(args, argnums)
            out = func(*call_args, **kwargs)
            aux = None
            if has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise RuntimeError("grad_and_value(f)(*args): output of function f should be "
                                       "a tuple: (output, aux) if has_aux is True")  # fmt: skip
                out, aux = out
            if not isinstance(out, Tensor) or out.numel() != 1:
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a "
                                   "scalar Tensor")  # fmt: skip
            flat = [leaf for leaves in diff for leaf in leaves]
            gs = list(_grads((out.reshape(()),), tuple(flat), (None,), True, False, "grad"))
            grads = tuple(_rebuild(args[a], gs) for a in nums)
            private = _private(flat)
            grads, out, aux = _release((grads, out, aux), private)
        g = grads[0] if isinstance(argnums, int) else grads
        return (g, (out, aux)) if has_aux else (g, out)

    return wrapped


def grad(func: Callable, argnums: Any = 0, has_aux: bool = False) -> Callable:
    """``f -> (args -> d f / d args[argnums])`` for a function returning one number (with
    ``has_aux``: ``(grad, aux)``)."""
    both = grad_and_value(func, argnums, has_aux)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        g, value = both(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped


def vjp(func: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(func(*primals), vjp_fn)``: ``vjp_fn(cotangents)`` gives one vector-Jacobian product per
    primal."""
    with enable_grad():
        call_args, _, diff = _prepare(primals, tuple(range(len(primals))))
        out = func(*call_args)
        aux = None
        if has_aux:
            out, aux = out
    outs = _leaves(out)
    flat = tuple(leaf for leaves in diff for leaf in leaves)
    private = _private(flat)

    def vjp_fn(cotangents: Any) -> tuple:
        with enable_grad():
            gs = list(_grads(tuple(outs), flat, tuple(_leaves(cotangents)), True, False, "vjp"))
        return _release(tuple(_rebuild(p, gs) for p in primals), private)

    out, aux = _release((out, aux), private)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _jvp_graph(func: Callable, primals: tuple, fresh: Callable[[Tensor], Tensor],
               has_aux: bool = False) -> tuple:  # fmt: skip
    """``func`` run on ``fresh`` copies of the primals' tensors, and what the double-backward
    trick needs to push tangents through it: ``(out, aux, g, dummies)``, where ``g = J^T dummies``
    keeps its graph, so ``J t`` is the gradient of ``g . t`` with respect to the dummies."""
    with enable_grad():
        args, flat = [], []
        for p in primals:
            leaves = [fresh(t) for t in _leaves(p)]
            flat += leaves
            args.append(_rebuild(p, list(leaves)))
        out = func(*args)
        aux = None
        if has_aux:
            out, aux = out
        outs = _leaves(out)
        dummies = tuple(dummy_like(o) for o in outs)
        g = _grads(tuple(outs), tuple(flat), dummies, True, False, "jvp")
    return out, aux, g, dummies


def _push(out: Any, g: tuple, dummies: tuple, tangents: tuple, create_graph: bool = True) -> Any:
    """``J @ tangents`` (the gradient of ``g . tangents`` by the dummies), shaped as ``out``.
    A ``g`` that does not depend on the dummies (the function's derivative is zero there, as
    ``round``'s) adds nothing: its tangent is zeros, as PyTorch's forward mode gives."""
    live = [i for i, gi in enumerate(g) if gi.requires_grad]
    if not live:
        return _rebuild(out, [d.new_zeros(d.shape).detach() for d in dummies])
    with enable_grad():
        res = list(_grads(tuple(g[i] for i in live), dummies, tuple(tangents[i] for i in live),
                          create_graph, False, "jvp"))  # fmt: skip
    return _rebuild(out, res)


def jvp(func: Callable, primals: Any, tangents: Any, *, has_aux: bool = False) -> tuple:
    """``(func(*primals), J @ tangents)`` (by the double-backward trick)."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be tuples")
    made: list[Tensor] = []

    def fresh(t: Tensor) -> Tensor:
        made.append(_fresh(t))
        return made[-1]

    out, aux, g, dummies = _jvp_graph(func, primals, fresh, has_aux)
    tangent_out = _push(out, g, dummies, tuple(_leaves(tangents)))
    out, tangent_out, aux = _release((out, tangent_out, aux), _private((*made, *dummies)))
    return (out, tangent_out, aux) if has_aux else (out, tangent_out)


def linearize(func: Callable, *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is ``J @ tangents``, the Jacobian of
    ``func`` at ``primals`` applied to tangents shaped as the primals, as :func:`jvp` gives it.

    ``func`` runs twice, as in PyTorch: once for the output (connected to the primals as a plain
    call is) and once to record the graph that every ``jvp_fn`` call reuses (``jvp_fn`` then costs
    one backward pass, not a new forward). The primals are constants of that graph: ``jvp_fn``'s
    results do not depend on them, only (linearly) on the tangents.

    Raises:
        RuntimeError: (from ``jvp_fn``) tangents nested differently from the primals, or one of a
            different shape or dtype than its primal (PyTorch's messages).
    """
    output = func(*primals)
    flat_primals = _leaves(primals)
    out, _, g, dummies = _jvp_graph(func, primals, lambda t: t.detach().requires_grad_(True))

    def jvp_fn(*tangents: Any) -> Any:
        flat = _leaves(tangents)
        if _structure(tangents) != _structure(primals):
            raise RuntimeError(f"Expected the tangents {_structure(tangents)} to have the same "
                               f"argspec as the primals {_structure(primals)}")  # fmt: skip
        for i, (t, p) in enumerate(zip(flat, flat_primals)):
            for what, got, want in (("shape", tuple(t.shape), tuple(p.shape)),
                                    ("dtype", t.dtype, p.dtype)):  # fmt: skip
                if got != want:
                    raise RuntimeError(f"tangent:{i} with {what} {got} in flattened pytree "
                                       f"doesn't match the {what} {want} of the corresponding "
                                       "primal.")  # fmt: skip
        # a graph only when the tangents need one (PyTorch's result is a plain tensor otherwise)
        create = is_grad_enabled() and any(t.requires_grad for t in flat)
        return _push(out, g, dummies, tuple(flat), create)

    return output, jvp_fn


def _structure(tree: Any) -> Any:
    """``tree``'s nesting with each tensor replaced by ``"*"`` (to compare two pytrees)."""
    if isinstance(tree, Tensor):
        return "*"
    if isinstance(tree, (tuple, list)):
        return type(tree)(_structure(item) for item in tree)
    if isinstance(tree, dict):
        return {k: _structure(v) for k, v in tree.items()}
    return type(tree).__name__


def jacrev(func: Callable, argnums: Any = 0, *, has_aux: bool = False,
           chunk_size: int | None = None) -> Callable:  # fmt: skip
    """``f -> (args -> Jacobian of f at args with respect to args[argnums])``: for each output
    tensor, a tensor of shape ``output.shape + input.shape`` (nested as the inputs are)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with enable_grad():
            call_args, nums, diff = _prepare(args, argnums)
            out = func(*call_args, **kwargs)
            aux = None
            if has_aux:
                out, aux = out
            flat = tuple(leaf for leaves in diff for leaf in leaves)
            per_output = []
            for o in _leaves(out):
                rows: list[list] = [[] for _ in flat]
                element = o.reshape(-1)
                for k in range(element.numel()):
                    gs = _grads((element[k],), flat, (None,), True, False, "jacrev")
                    for i, g in enumerate(gs):
                        rows[i].append(g)
                blocks = [
                    stack(rows[i], 0).reshape(tuple(o.shape) + tuple(x.shape))
                    if rows[i] else x.new_zeros(tuple(o.shape) + tuple(x.shape))
                    for i, x in enumerate(flat)
                ]  # fmt: skip
                per_arg = tuple(_rebuild(args[a], blocks) for a in nums)
                per_output.append(per_arg[0] if isinstance(argnums, int) else per_arg)
            result = _rebuild(out, per_output)
            result, aux = _release((result, aux), _private(flat))
        return (result, aux) if has_aux else result

    return wrapped


def jacfwd(func: Callable, argnums: Any = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:  # fmt: skip
    """The same Jacobian as :func:`jacrev` (computed in reverse mode: GT has no forward mode)."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func: Callable, argnums: Any = 0) -> Callable:
    """``f -> (args -> Hessian of a scalar f)``: ``jacfwd(jacrev(f))``."""
    return jacfwd(jacrev(func, argnums), argnums)


def _leaf_dims(tree: Any, dims: Any, what: str) -> list:
    """The dim of each tensor of ``tree`` (in :func:`_leaves` order) that ``dims`` gives: an int or
    None for the whole tree, or a tuple/list/dict nested as the tree is (PyTorch's pytree rule)."""
    if dims is None or isinstance(dims, int):
        return [dims] * len(_leaves(tree))
    if isinstance(tree, Tensor) and isinstance(dims, tuple) and len(dims) == 1:
        return _leaf_dims(tree, dims[0], what)
    if (
        isinstance(tree, (tuple, list))
        and isinstance(dims, (tuple, list))
        and len(dims) == len(tree)
    ):
        return [d for item, sub in zip(tree, dims) for d in _leaf_dims(item, sub, what)]
    if isinstance(tree, dict) and isinstance(dims, dict) and set(dims) == set(tree):
        return [d for k in tree for d in _leaf_dims(tree[k], dims[k], what)]
    raise ValueError(f"vmap: {what}={dims!r} is not compatible with the structure of "
                     f"{'inputs' if what == 'in_dims' else 'outputs'}")  # fmt: skip


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:  # fmt: skip
    """``func`` mapped over dim ``in_dims`` of its arguments (``None``: not mapped; a tuple: one
    per argument), results stacked along ``out_dims``.

    ``func`` runs once, on the batch (see :mod:`gt.func_batching`); where that cannot be done (a
    value read inside, random numbers, a write to a tensor from outside, an op without a batching
    rule, inputs or results that require grad) it runs once per entry and the results are
    stacked, as PyTorch's results are. ``gt.func_batching.RUNS`` counts both and says why.
    ``chunk_size`` is accepted and changes nothing."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        top = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        if isinstance(in_dims, list) or len(top) != len(args):
            raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                             f"compatible with the structure of inputs ({len(args)} arguments)")  # fmt: skip
        dims = [_leaf_dims(a, d, "in_dims") for a, d in zip(args, top)]
        sizes = {leaf.shape[d] for a, ds in zip(args, dims)
                 for leaf, d in zip(_leaves(a), ds) if d is not None}  # fmt: skip
        if not sizes:
            raise ValueError("vmap(f, in_dims=..., ...)(<inputs>): at least one input must be "
                             "mapped over (got in_dims all None)")  # fmt: skip
        if len(sizes) != 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                             f"dimension, got sizes {sorted(sizes)} for the mapped dimension")  # fmt: skip
        (n,) = sizes
        try:
            out = run_batched(func, args, kwargs, tuple(dims), out_dims, n, _leaves, _rebuild,
                              randomness, lambda r, o: _leaf_dims(r, o, "out_dims"))  # fmt: skip
            RUNS["batched"] += 1
            return out
        except Exception as exc:  # (Unbatchable, or an error the run below raises where it belongs)
            RUNS["per_entry"] += 1
            RUNS["why"] = f"{type(exc).__name__}: {exc}"
        results = []
        for i in range(n):
            one = [_rebuild(a, [t if d is None else t.select(d, i) for t, d in zip(_leaves(a), ds)])
                   for a, ds in zip(args, dims)]  # fmt: skip
            results.append(func(*one, **kwargs))
        first = results[0]
        columns = list(zip(*[_leaves(r) for r in results]))
        outs = _leaf_dims(first, out_dims, "out_dims")
        stacked = [col[0] if d is None else stack(list(col), d) for col, d in zip(columns, outs)]
        return _rebuild(first, stacked)

    return wrapped


_REMOVE_MODES = ("mutations", "mutations_and_views")


def functionalize(func: Callable, *, remove: str = "mutations") -> Callable:
    """``func`` with its mutations removed, as PyTorch's eager ``functionalize``: the same
    results (and gradients), the changes ``func`` makes to its inputs still applied to them at
    the end, and no result aliasing an input (each such result is a copy). GT records no program
    to rewrite, so ``remove`` (``"mutations"`` or ``"mutations_and_views"``) changes nothing else.
    """
    if remove not in _REMOVE_MODES:
        raise RuntimeError(
            f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}."
            " Valid options are:\n"
            "     remove='mutations': all inplace and out= operators will be removed from the "
            "program, and replaced with their out-of-place equivalents.\n"
            "     remove='mutations_and_views': In addition to the above, all aliasing operators "
            "{view} will be replaced with their non-aliasing counterparts, {view}_copy.\n"
        )

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = func(*args, **kwargs)
        inputs = {id(t) for t in _leaves(list(args)) + _leaves(kwargs)}
        leaves = [t.clone() if id(t) in inputs or t._vb is not None else t for t in _leaves(out)]
        return _rebuild(out, leaves)

    wrapped.__name__ = getattr(func, "__name__", "wrapped")
    wrapped.__qualname__ = getattr(func, "__qualname__", "wrapped")
    wrapped.__doc__ = getattr(func, "__doc__", None)
    wrapped.__wrapped__ = func  # type: ignore[attr-defined]
    return wrapped


def replace_all_batch_norm_modules_(root: Module) -> Module:
    """Turn off the running statistics of every batch-norm module in ``root`` (in place, as
    PyTorch's: ``running_mean``, ``running_var`` and ``num_batches_tracked`` become ``None`` and
    ``track_running_stats`` ``False``, so they always normalise with the batch's statistics, as
    ``vmap`` over a model needs); returns ``root``."""
    from gt.nn.norm_layers import _BatchNorm  # noqa: PLC0415 - only here

    for module in root.modules():
        if isinstance(module, _BatchNorm) and module.track_running_stats:
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root
