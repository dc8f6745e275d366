"""The backward walk behind ``Tensor.backward``, ``gt.autograd.backward`` and
``gt.autograd.grad``; the gradient hooks it runs are registered in :mod:`gt.grad_hooks`.

One walk serves all three: it seeds the roots' nodes with their gradients, visits the nodes in
reverse topological order, runs each node's hooks and derivative rule, and hands every leaf its
gradient. ``backward`` accumulates into the leaves' ``.grad`` (all of them, or only ``inputs``);
``grad`` returns the gradients of the tensors asked for and touches no ``.grad``. With
``create_graph=True`` the derivative rules run with grad mode on, so the gradients are themselves
differentiable (higher-order gradients: a gradient penalty, a Hessian-vector product). Only the
nodes from which an asked-for tensor can be reached run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gt import signal_scope as _signal
from gt.anomaly import _state as _anomaly
from gt.anomaly import check_gradients
from gt.backprop_order import _as_list, _seed, _seeds_for, _to_run, _topo_order
from gt.grad_graph import Node, Packed
from gt.grad_hooks import (
    _LEAF_HOOKS,
    _POST_ACCUMULATE_HOOKS,
    RemovableHandle,
    _run_hooks,
    register_hook,
    register_post_accumulate_grad_hook,
    run_post_hooks,
)
from gt.grad_mode import no_grad, set_grad_enabled
from gt.ops.autocast import suspended as autocast_suspended
from gt.ops.base import BATCHING, refuse_outside_write
from gt.ops.layout import grad_layout
from gt.runtime import ops as O
from gt.runtime.ops import Past
from gt.runtime.ops.complexnum import conj_if_complex, real_where_real

if TYPE_CHECKING:
    from gt.tensor import Tensor


# ----------------------------------------------------------------------------- the walk
#: The backward passes under way, innermost last (a hook can ask which one it runs in).
WALKS: list[_Walk] = []


class _Walk:
    """One backward pass: the roots' seeds in, gradients to leaves (or to the asked-for tensors)
    out."""

    def __init__(self, create_graph: bool, retain_graph: bool, wanted: list | None):
        self.create_graph = create_graph
        self.retain_graph = retain_graph
        self.handed: set[int] = set()  # ids of tensors already given to someone as a gradient
        self.seen: set[int] = set()  # ids of gradients a hook was given (and may hold)
        self.fresh: set[int] = set()  # ids of .grad tensors this pass made (never added in place)
        # nodes whose gradient so far (in the walk's table) is a tensor this pass made and handed
        # to nobody yet: later contributions are added into it in place (see _accumulate)
        self.owned: set[Node] = set()
        # grad() / backward(inputs=): the tensors whose gradients are wanted, by leaf id or node
        self.wanted = wanted
        self.want_leaves = {id(t) for t in wanted or () if t._node is None}
        self.want_nodes = {id(t._node) for t in wanted or () if t._node is not None}
        self.found: dict[int, Tensor] = {}  # id(leaf) or id(node) -> its gradient
        self.conn: Any = None  # the roots' connection, while the walk runs
        self.accumulated: dict[int, Tensor] = {}  # leaves with post-accumulate hooks that got .grad
        self.hooked: dict[int, tuple] = {}  # leaves with hooks: (leaf, its gradient so far)
        self.at_end: list[Callable[[], Any]] = []  # called once the walk is done

    def run(self, roots: list[Tensor], seeds: list[Tensor]) -> None:
        # Every instruction of the walk comes from the user's backward()/grad() line: pin it once
        # rather than climb the walk's frames for each (user code inside -- a custom backward, a
        # hook -- has its own lines, see _user_code).
        conn = self.conn = roots[0]._conn
        before = conn.pin_source_line()
        WALKS.append(self)
        try:
            with autocast_suspended():  # (backward ops keep their forward ops' dtypes)
                self._walk(roots, seeds)
                self._hooked_leaves()
        finally:
            WALKS.pop()
            conn.restore_source_line(before)
        for fn in self.at_end:  # (register_multi_grad_hook's "all" hooks)
            self._user_code(fn)

    def _walk(self, roots: list[Tensor], seeds: list[Tensor]) -> None:
        grads: dict[Node, Tensor] = {}
        for root, g in zip(roots, seeds):
            self.handed.add(id(g))  # the caller's tensor: never to become a .grad as it is
            if root._node is None:
                self._to_leaf(root, g)
            else:
                prev = grads.get(root._node)
                grads[root._node] = g if prev is None else prev + g
        order = _topo_order(list(grads))
        free = not self.retain_graph
        if self.wanted is None:  # backward(): every node runs (the common case, kept lean)
            for node in order:
                g = grads.pop(node, None)
                if g is None:
                    continue
                if node.hooks:
                    g = self._user_code(_run_hooks, node.hooks, g)
                if node.retain is not None:
                    self._retain(node, g)
                self._propagate(node, g, grads)
                if free:
                    _spend(node)
            return
        to_run = _to_run(order, self.want_nodes, self.want_leaves)
        for node in order:
            g = grads.pop(node, None)
            if g is None:
                continue
            if node.hooks:
                g = self._user_code(_run_hooks, node.hooks, g)
            if node.retain is not None:  # (retain_grad() holds under autograd.grad too)
                self._retain(node, g)
            if id(node) in self.want_nodes:
                self.found[id(node)] = g
            if id(node) in to_run:
                self._propagate(node, g, grads)
                if free:
                    _spend(node)

    def _user_code(self, fn: Callable, *args: Any) -> Any:
        """Call ``fn`` (which runs the user's code) with source lines looked up again."""
        pin = self.conn.restore_source_line(None)
        try:
            return fn(*args)
        finally:
            self.conn.restore_source_line(pin)

    def _to_leaf(self, leaf: Tensor, g: Tensor) -> None:
        if self.wanted is not None and id(leaf) not in self.want_leaves:
            return  # (not asked for: its hooks do not run, as PyTorch runs no node for it)
        if leaf.__dict__ and "_nograd_view" in leaf.__dict__:
            return  # (a view taken under no_grad: PyTorch's gives it no gradient)
        if _LEAF_HOOKS and id(leaf) in _LEAF_HOOKS:
            # (its hooks run once, on the sum of every contribution, as PyTorch's: a weight used
            # in each step of a loop is clamped once, not per use; see _hooked_leaves)
            prev = self.hooked.get(id(leaf))
            self.hooked[id(leaf)] = (leaf, g if prev is None else prev[1] + g)
            return
        self._deliver(leaf, g)

    def _hooked_leaves(self) -> None:
        """The leaves with hooks, once the walk is done: each hook runs on the leaf's whole
        gradient, then it is delivered."""
        while self.hooked:
            key = next(iter(self.hooked))
            leaf, g = self.hooked.pop(key)
            hooks = _LEAF_HOOKS.get(key)
            if hooks:
                g = self._user_code(_run_hooks, hooks, g)
                self.seen.add(id(g))  # a hook may keep it: never to be a .grad added to in place
            self._deliver(leaf, g)

    def _deliver(self, leaf: Tensor, g: Tensor) -> None:
        if self.wanted is not None:
            key = id(leaf)
            if key in self.want_leaves:
                prev = self.found.get(key)
                self.found[key] = g if prev is None else prev + g
            return
        self._accumulate(leaf, g)

    def _accumulate(self, leaf: Tensor, g: Tensor) -> None:
        if not leaf._rg:  # frozen since the forward (requires_grad_(False)): PyTorch skips it
            return
        if BATCHING:
            refuse_outside_write(leaf)
        if g.dtype != leaf.dtype:
            g = g.to(leaf.dtype)
        if getattr(g, "is_sparse", False) is True:  # Embedding(sparse=True): entries appended
            leaf.grad = g if leaf.grad is None else g.add(leaf.grad)  # (the held entries first)
        elif leaf.grad is None:
            if id(g) in self.seen:  # later passes add to a .grad in place: not to the hook's
                g = g.clone() if self.create_graph else g.detach().clone()
            elif id(g) in self.handed:  # one tensor object must not become two leaves' .grad
                g = g.clone() if self.create_graph else g.detach()
            if g._st is not None or leaf._st is not None:  # the layout contract: leaf's strides
                want = grad_layout(leaf)
                if g._st != want:
                    g = g.clone() if self.create_graph else g.detach()
                    g._st = want
            self.handed.add(id(g))
            self.fresh.add(id(g))
            g._vb = None  # a .grad is its own tensor, never a view that writes into another
            leaf.grad = g
        elif id(leaf.grad) in self.fresh:
            # Made in this pass: it may still be on its way to other nodes (``a + a + a`` hands
            # one gradient to both operands of each sum), so it is not added to in place;
            # nobody outside the pass holds it yet.
            leaf.grad = leaf.grad + g
            self.fresh.add(id(leaf.grad))
        else:
            leaf.grad = _summed(leaf.grad, g, self.create_graph)
        if _POST_ACCUMULATE_HOOKS and id(leaf) in _POST_ACCUMULATE_HOOKS:
            self.accumulated[id(leaf)] = leaf

    def run_post_accumulate_hooks(self) -> None:
        """Each leaf's post-accumulate hooks, once, now that its ``.grad`` is complete."""
        for key, leaf in self.accumulated.items():
            for hook in list(_POST_ACCUMULATE_HOOKS.get(key, ())):
                hook(leaf)
        self.accumulated.clear()

    def _retain(self, node: Node, g: Tensor) -> None:
        """Give a computed tensor that called ``retain_grad()`` its gradient."""
        out = node.retain()
        if out is None:
            return
        if out.grad is None:
            if id(g) in self.handed:
                g = g.clone() if self.create_graph else g.detach()
            g._vb = None  # (as in _accumulate: a .grad never writes into another tensor)
            out.grad = g
            self.handed.add(id(out.grad))
        else:  # (a new tensor, as PyTorch's: a .grad read before keeps its value)
            out.grad = out.grad + g

    def _propagate(self, node: Node, g: Tensor, grads: dict) -> None:
        """Run ``node``'s derivative rule and hand each input its gradient."""
        if node.saved is None:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Specify retain_graph=True if you "
                "need to backward through the graph a second time."
            )
        packed = None
        if node.unpack is not None:  # saved_tensors_hooks: the values back, for this rule only
            packed = node.saved
            node.saved = tuple([node.unpack(p.value) if type(p) is Packed else p for p in packed])
        elif node.op != "transpose":
            # (a transpose's rule reads nothing: it keeps its input only for matmul's shortcut,
            # _unswapped, which checks that input's version itself, as PyTorch's mm would)
            node.check_versions()
        try:
            self._run_rule(node, g, grads)
        finally:
            if packed is not None:
                node.saved = packed

    def _run_rule(self, node: Node, g: Tensor, grads: dict) -> None:
        rule = node.rule
        # (a node with a rule of its own for recorded passes, recorded_rule(), is linked too)
        link = self.create_graph and (bool(node.outs) or hasattr(node, "double"))
        conj = node.cplx == "conj"  # a real rule of a holomorphic op: conj(rule(conj(g)))
        if conj:
            g = conj_if_complex(g)
        plain = (rule is None and not link and node.signal is None and node.cplx is None
                 and not getattr(node, "posthooks", None)
                 and not (_anomaly["enabled"] and _anomaly["check_nan"]))  # fmt: skip
        if plain and node.op == "getitem" and self._scatter_into_owned(node, g, grads):
            return
        if rule is not None:  # a gt.autograd.Function: the user's backward, with its own lines
            in_grads = self._user_code(_apply_rule, node, rule, g, link)
        elif link or node.signal is not None:
            how = node.double if link and hasattr(node, "double") else O.BY_NAME[node.op].grad
            in_grads = _apply_rule(node, how, g, link)
        else:
            in_grads = O.BY_NAME[node.op].grad(node, g)
        # (a plain getitem's rule makes its input's gradient as fresh zeros it scatters into)
        made = plain and node.op == "getitem" and not g.requires_grad
        if conj:
            in_grads = tuple([conj_if_complex(pg) for pg in in_grads])
        if node.cplx is not None:
            in_grads = real_where_real(node.dtypes, in_grads)
        if _anomaly["enabled"] and _anomaly["check_nan"]:
            check_gradients(node, in_grads)
        post = getattr(node, "posthooks", None)
        if post:
            in_grads = self._user_code(run_post_hooks, node, post, in_grads, g)
        for i, (p, pg) in enumerate(zip(node.parents, in_grads)):
            if p is None or pg is None:
                continue
            if type(pg) is Past:  # already the gradient of that input's own input
                if p.hooks or p.retain is not None or id(p) in self.want_nodes:
                    pg = pg.grad.mT  # (``x.T`` has hooks, retains or is asked for: its own)
                else:
                    p, pg = p.parents[0], pg.grad
                    if p is None:
                        continue
            if isinstance(p, Node):
                self._add_to_node(p, pg, grads, made and i == 0)
            else:
                self._to_leaf(p, pg)

    def _add_to_node(self, p: Node, pg: Tensor, grads: dict, made: bool) -> None:
        """Add ``pg`` to node ``p``'s gradient so far. A sum this pass made (or fresh zeros a
        getitem's rule scattered into, ``made``) is handed to nobody until ``p`` runs, so later
        contributions go into it in place: an RNN's ``gi[t]`` for 32 steps made 32 full-size
        zero tensors and 31 full-size sums before, one now (each step scatters its slice)."""
        prev = grads.get(p)
        if prev is None:
            grads[p] = pg
            if made:
                self.owned.add(p)
        elif p in self.owned and pg.shape == prev.shape and pg.dtype == prev.dtype:
            prev.add_(pg)
        else:
            grads[p] = prev + pg
            if not self.create_graph:  # (a recorded sum is part of the graph: never in place)
                self.owned.add(p)

    def _scatter_into_owned(self, node: Node, g: Tensor, grads: dict) -> bool:
        """A plain getitem whose input's gradient so far is this pass's own: scatter ``g`` into
        it in place (what the rule would do into fresh zeros, then add); ``False`` otherwise."""
        p = node.parents[0]
        acc = grads.get(p) if p in self.owned else None
        if acc is None or g.requires_grad or acc.dtype != g.dtype:
            return False
        acc._apply_("index_add", [acc, g, *node.saved], {"key": node.attrs["key"], "inplace": True})
        return True


def _spend(node: Node) -> None:
    """A pass without ``retain_graph`` went through ``node``: the tensors it keeps are freed; a
    node that keeps only numbers may run again, as PyTorch's ``x + 1`` or ``x * 2`` backward
    does (``spent`` still says a pass went through it)."""
    node.spent = True
    for t in node.saved:
        if t is not None and type(t) is not float and type(t) is not int:
            node.saved = None
            return


def _apply_rule(node: Node, rule: Callable, g: Tensor, link: bool) -> tuple:
    """Run ``node``'s derivative rule under the node's signal, if it has one.

    With ``link`` (the backward pass is recorded and the rule reads the output: tanh, exp,
    sigmoid ...), the rule gets a handle on the output that is part of the graph, so the gradient
    it builds depends on this node too. (The node itself keeps only an unrecorded alias: no
    reference cycle.)"""
    kept = node.saved
    if link:
        saved = list(kept)
        for i in node.outs:
            linked = saved[i]._alias()
            linked._node, linked._rg = node, True
            saved[i] = linked
        node.saved = tuple(saved)
    try:
        if node.signal is None:
            return rule(node, g)
        with _signal.backward_context(node.signal):
            return rule(node, g)
    finally:
        node.saved = kept


def _check_roots(roots: list, seeds: list) -> list[Tensor]:
    if not roots:
        raise RuntimeError("grad requires at least one output tensor")
    if len(seeds) != len(roots):
        raise RuntimeError(
            f"grad_outputs has {len(seeds)} tensors but outputs has {len(roots)}; give one "
            "gradient (or None) per output"
        )
    out = []
    for i, (root, g) in enumerate(zip(roots, seeds)):
        if not hasattr(root, "_conn"):
            raise TypeError(f"outputs[{i}] is a {type(root).__name__}, not a tensor")
        if not root.requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        out.append(_seed(root, g))
    return out


def backward(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of every leaf that requires
    grad (or only of ``inputs``), as ``torch.autograd.backward``.

    Args:
        tensors: the tensor(s) to differentiate (usually one scalar loss).
        grad_tensors: d(something)/d(tensor) per tensor; ``None`` for a one-element tensor.
        retain_graph: keep the graph's saved tensors so a later backward can run through it
            (default: ``create_graph``).
        create_graph: record the backward pass too, so the gradients can be differentiated.
        inputs: accumulate only into these tensors' ``.grad`` (leaves or computed tensors).

    Raises:
        RuntimeError: a tensor does not require grad, a gradient is missing or has the wrong
            shape, the graph was already freed, or a saved tensor was modified in place.
    """
    roots = _as_list(tensors, "tensors")
    seeds = _seeds_for(tensors, roots, grad_tensors)
    wanted = _as_list(inputs, "inputs") if inputs is not None else None
    if wanted is not None and not wanted:
        raise RuntimeError("backward: 'inputs' argument to backward() cannot be empty")
    if not roots:  # (nothing to differentiate: outputs filtered down to none, say)
        return
    retain = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(create_graph):
        seeds = _check_roots(roots, seeds)
        walk = _Walk(create_graph, retain, wanted)
        walk.run(roots, seeds)
        for t in {id(t): t for t in wanted or ()}.values():  # (one named twice counts once)
            g = walk.found.get(id(t) if t._node is None else id(t._node))
            if g is not None:
                walk._accumulate(t, g) if t._node is None else _add_grad(t, g)
        walk.run_post_accumulate_hooks()


def reset_grads(params: Any, set_to_none: bool) -> None:
    """``zero_grad``: each parameter's ``.grad`` to ``None``, or to zeros in place -- first cut
    from any graph a ``create_graph`` pass gave it (as PyTorch's, so the graph is not kept)."""
    for p in params:
        g = p.grad
        if g is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if g.requires_grad:
            g.detach_()
        with no_grad():
            g.zero_()


def _add_grad(t: Tensor, g: Tensor) -> None:
    """Accumulate into a computed tensor named in ``backward(inputs=...)``."""
    if BATCHING:
        refuse_outside_write(t)
    t.grad = g if t._grad is None else _summed(t._grad, g, g.requires_grad)  # (no warning)


def _summed(held: Tensor, g: Tensor, create_graph: bool) -> Tensor:
    """``held + g`` for a ``.grad`` already there: in place, as PyTorch's ``AccumulateGrad``
    does, so a ``.grad`` a program kept sees later backward passes; out of place while a graph
    of the gradients is being made (or the held one is part of one)."""
    if create_graph or held.requires_grad:
        return held + g
    held.add_(g)
    return held


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple:
    """The gradients of ``outputs`` with respect to ``inputs``, as ``torch.autograd.grad``: a
    tuple with one tensor per input; no ``.grad`` is changed.

    Args:
        outputs: the tensor(s) to differentiate.
        inputs: the tensor(s) to differentiate with respect to (leaves or computed tensors).
        grad_outputs: d(something)/d(output) per output; ``None`` for one-element outputs.
        retain_graph: keep the graph for another pass (default: ``create_graph``).
        create_graph: make the returned gradients differentiable (higher-order gradients).
        allow_unused: return ``None`` for an input the outputs do not depend on (else an error).
        materialize_grads: return zeros instead of ``None`` for such inputs.
        only_inputs: accepted for compatibility (PyTorch ignores it too).
        is_grads_batched: ``grad_outputs`` carry a leading batch dimension: the result is the
            gradient for each entry, stacked (one backward pass per entry, as ``vmap`` falls back).
    """
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)  # fmt: skip
    roots = _as_list(outputs, "outputs")
    wanted = _as_list(inputs, "inputs")
    if not wanted:
        raise RuntimeError("grad requires at least one input tensor")
    for i, t in enumerate(wanted):
        if not hasattr(t, "_conn"):
            raise TypeError(f"inputs[{i}] is a {type(t).__name__}, not a tensor")
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    seeds = _seeds_for(outputs, roots, grad_outputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    retain = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(create_graph):
        walk = _Walk(create_graph, retain, wanted)
        if roots:
            walk.run(roots, _check_roots(roots, seeds))
        result = []
        for t in wanted:
            g = walk.found.get(id(t) if t._node is None else id(t._node))
            if g is None:
                if not allow_unused:
                    raise RuntimeError(
                        f"The differentiated Tensor at index {len(result)} appears to not have "
                        "been used in the graph. Set allow_unused=True if this is the desired "
                        "behavior."
                    )
                g = t.new_zeros(t.shape) if materialize_grads else None
            elif g.dtype != t.dtype:
                g = g.to(t.dtype)
            result.append(g)
    return tuple(result)


def _batched_grad(outputs: Any, inputs: Any, grad_outputs: Any, retain_graph: bool | None,
                  create_graph: bool, allow_unused: bool | None, materialize: bool) -> tuple:  # fmt: skip
    """``grad(..., is_grads_batched=True)``: one pass per row of the ``grad_outputs``."""
    seeds = _as_list(grad_outputs, "grad_outputs") if grad_outputs is not None else []
    if not seeds or any(s is None for s in seeds):
        raise RuntimeError(
            "grad: is_grads_batched=True needs grad_outputs with a batch dimension (got none)"
        )
    n = seeds[0].shape[0]
    rows = []
    for b in range(n):
        keep = True if b < n - 1 else retain_graph
        rows.append(grad(outputs, inputs, [s[b] for s in seeds], keep, create_graph,
                         allow_unused=allow_unused, materialize_grads=materialize))  # fmt: skip
    from gt.ops.shaping import stack  # noqa: PLC0415 - the tensor layers import this module

    return tuple(None if parts[0] is None else stack(list(parts)) for parts in zip(*rows))


__all__ = [
    "RemovableHandle",
    "backward",
    "grad",
    "register_hook",
    "register_post_accumulate_grad_hook",
]
