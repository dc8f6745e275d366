"""The recorded graph: :class:`Node` (one op, how its output's gradient reaches its inputs) and
:func:`record`, which every differentiable op calls. The walk over it is :mod:`gt.backprop`; both
are reached through :mod:`gt.autograd`."""

from __future__ import annotations

import functools
import weakref
from itertools import count
from typing import TYPE_CHECKING, Any

from gt import signal_scope as _signal
from gt._dtype import name_of
from gt.grad_mode import INFERENCE_USED, _mode
from gt.runtime import ops as O
from gt.runtime.ops.complexnum import complex_grad_mode

if TYPE_CHECKING:
    from gt.tensor import Tensor

_FIRST = (0,)
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
#: Dtypes whose tensors can require gradients (PyTorch's: floating and complex).
GRAD_DTYPES = frozenset((*FLOAT_DTYPES, "complex64", "complex128"))
_COMPLEX = frozenset(("complex64", "complex128"))
#: Active ``gt.autograd.graph.saved_tensors_hooks``: ``(pack, unpack)`` pairs, innermost last; a
#: ``str`` entry disables them (``disable_saved_tensors_hooks``: recording raises with it); a
#: ``None`` entry is a pack hook running (what it records is not packed again).
SAVED_TENSOR_HOOKS: list = []
_next_seq = count().__next__


class Node:
    """One recorded op: how to send the output's gradient back to its inputs.

    Attributes:
        op: the primitive's name (its registry entry holds the derivative rule).
        parents: per input, the input's :class:`Node`, the leaf tensor itself, or ``None`` when
            that input needs no gradient (a constant, an integer tensor, a Python number).
        saved: the tensors the rule reads; ``None`` once the graph is freed.
        versions: ``_version`` of each saved tensor when recorded, to detect in-place changes.
        shapes: the shape of every input (``()`` for Python numbers).
        dtypes: the dtype of every input (``None`` for Python numbers).
        attrs: the instruction's attributes (axes, permutation, index key, ...).
        retain: a weak reference to the output tensor when it asked for its gradient
            (``retain_grad()``), else ``None``.
        seq: the order of its making (process-wide, increasing): which nodes a call made.
        label: the name PyTorch gives the node of a composite op that ended here (``F.linear``'s
            ``AddmmBackward0``), else ``None`` (the name comes from ``op``).
        double: when set (:func:`recorded_rule`), the derivative rule that replaces the registry's
            in a backward pass that is itself recorded (``create_graph=True``).
    """

    __slots__ = (
        "op",
        "parents",
        "saved",
        "versions",
        "shapes",
        "dtypes",
        "attrs",
        "signal",
        "retain",
        "hooks",
        "outs",
        "rule",
        "unpack",
        "seq",
        "cplx",
        "label",
        "double",  # (set only by recorded_rule(); read with getattr when create_graph is on)
        "spent",  # (set once a backward pass without retain_graph went through; read with getattr)
        "posthooks",  # (set only by register_hook(); read with getattr)
        "outv",  # (the output and its version, when the rule reads the output; see record())
    )

    def __init__(self, op: str, parents: tuple, saved: tuple, inputs: tuple, attrs: Any):
        self.op = op
        self.parents = parents
        self.saved = saved
        # (list comprehensions: a generator's frame costs more than the tuple it fills, and
        # every recorded op makes a node)
        self.versions = tuple([getattr(t, "_version", 0) for t in saved])
        self.shapes = tuple([getattr(t, "shape", ()) for t in inputs])
        self.dtypes = tuple([getattr(t, "dtype", None) for t in inputs])
        self.attrs = attrs
        self.signal = _signal.capture()  # its gradient ops run under the signal's backward rule
        self.retain = None  # a weak reference to the output, once it called retain_grad()
        self.hooks = None  # the output's gradient hooks (register_hook), run before the rule
        self.outs = ()  # which saved tensors are aliases of the output (see record())
        self.rule = None  # a derivative of its own (gt.autograd.Function), else the registry's
        self.unpack = None  # saved_tensors_hooks' unpack, when ``saved`` holds packed values
        self.seq = _next_seq()
        self.cplx = None  # complex in play: "conj" or "native" (gt/runtime/ops/complexnum.py)
        self.label = None  # the name PyTorch gives the composite op that ended here (F.linear)
        self.outv = None

    def needs(self, i: int) -> bool:
        """Whether input ``i`` wants a gradient."""
        return self.parents[i] is not None

    def check_versions(self) -> None:
        """Raise if a tensor this node saved was changed in place since it was recorded; the
        output too, when the rule reads it (``sigmoid``, ``exp``: PyTorch saves the output, so
        ``y.mul_(2)`` before backward raises there; GT's saved value is a copy of the old one)."""
        if self.outv is not None:
            out = self.outv[0]()
            if out is not None and out._version != self.outv[1]:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: [gt.{name_of(out.dtype)} {list(out.shape)}], which is "
                    f"output 0 of {self.name()}, is at version {out._version}; expected version "
                    f"{self.outv[1]} instead"
                )
        for t, v in zip(self.saved, self.versions):
            now = getattr(t, "_version", 0)
            if now != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: [gt.{name_of(t.dtype)} {list(t.shape)}] is at version {now}; "
                    f"expected version {v} instead (in {self.name()})"
                )

    def name(self) -> str:
        """PyTorch-style name, e.g. ``MulBackward0``."""
        if self.label is not None:
            return self.label
        how = PRIMITIVE_NAMES.get(self.op)
        if how is not None:
            return how if how.__class__ is str else how(self)
        return "".join(p.capitalize() for p in self.op.split("_")) + "Backward0"

    def __repr__(self) -> str:
        return f"<{self.name()}>"

    @property
    def next_functions(self) -> tuple:
        """PyTorch's ``((node, 0), ...)``, one per input: the node that made it, an
        :class:`AccumulateGrad` for a leaf that requires grad, ``None`` for an input that needs
        no gradient (graph-walking tools such as torchviz read it)."""
        return tuple(
            (named(p) if isinstance(p, Node) else None if p is None else AccumulateGrad(p), 0)
            for p in self.parents
        )

    def register_prehook(self, hook: Any) -> Any:
        """Call ``hook(grad_outputs)`` (a one-tuple) before this node's rule runs; a tuple it
        returns replaces the gradient. Returns the handle that removes it."""
        from gt.grad_hooks import RemovableHandle  # noqa: PLC0415 - it builds on this module

        def on_gradient(g: Any) -> Any:
            out = hook((g,))
            return None if out is None else out[0]

        if self.hooks is None:
            self.hooks = []
        self.hooks.append(on_gradient)
        return RemovableHandle(self.hooks, on_gradient)

    def register_hook(self, hook: Any) -> Any:
        """Call ``hook(grad_inputs, grad_outputs)`` once this node's rule has run: one gradient
        per input (``None`` where an input needs none) and the one-tuple it got; a tuple it
        returns replaces ``grad_inputs``. Returns the handle that removes it."""
        from gt.grad_hooks import RemovableHandle  # noqa: PLC0415 - it builds on this module

        hooks = getattr(self, "posthooks", None)
        if hooks is None:
            hooks = self.posthooks = []
        hooks.append(hook)
        return RemovableHandle(hooks, hook)


class AccumulateGrad:
    """What ``next_functions`` shows for a leaf that requires grad: PyTorch's node that adds a
    gradient into ``variable.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable: Any):
        self.variable = variable

    @property
    def next_functions(self) -> tuple:
        return ()

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    def register_hook(self, hook: Any) -> Any:
        """Call ``hook(grad_inputs, grad_outputs)`` -- ``()`` and ``(variable.grad,)`` -- once the
        variable's gradient has been accumulated (a post-accumulate hook: PyTorch passes the
        incoming gradient where GT passes the accumulated one). Returns the removing handle."""
        return self.variable.register_post_accumulate_grad_hook(lambda v: hook((), (v.grad,)))

    def register_prehook(self, hook: Any) -> Any:
        """Call ``hook(grad_outputs)`` (a one-tuple) before the gradient is accumulated; a tuple
        it returns replaces it. Returns the removing handle."""

        def on_gradient(g: Any) -> Any:
            out = hook((g,))
            return None if out is None else out[0]

        return self.variable.register_hook(on_gradient)

    def __repr__(self) -> str:
        return "<AccumulateGrad>"


def label(out: Tensor, name: str) -> Tensor:
    """Give ``out``'s node the name PyTorch gives the node of the composite op that made it
    (``MseLossBackward0`` for what ``F.mse_loss`` ends with): one attribute write, nothing when
    ``out`` has no node (no_grad, a leaf). Call it only on a result the op made (never on an
    input it returned as it is). Gradients do not change: only the name does."""
    node = out._node
    if node is not None:
        node.label = name
    return out


def recorded_rule(out: Tensor, rule: Any, saved: tuple = ()) -> Tensor:
    """Give ``out``'s node a derivative rule ``rule(node, g) -> input gradients`` of its own for
    backward passes that are themselves recorded (``create_graph=True``); a first-order backward
    keeps the registry's rule and costs nothing more.

    For composite ops whose PyTorch node has a derivative formula of its own (``leaky_relu``,
    ``hardtanh``, ``elu`` ...): the composition's derivative is right, but the derivative of that
    derivative is not what PyTorch's is (the gradient of a ``where`` does not depend on the input at
    all, or a kink is counted on the other side). ``saved``: more tensors for the rule to read,
    appended to the node's own ``saved`` (freed with them, and packed by active
    ``saved_tensors_hooks`` as they are). Nothing happens when ``out`` has no node."""
    node = out._node
    if node is None:
        return out
    node.double = rule
    if saved:
        node.versions = node.versions + tuple([getattr(t, "_version", 0) for t in saved])
        hooks = SAVED_TENSOR_HOOKS[-1] if SAVED_TENSOR_HOOKS else None
        if hooks is not None and node.unpack is not None:  # (the node's own were packed)
            SAVED_TENSOR_HOOKS.append(None)
            try:
                saved = tuple([Packed(hooks[0](t)) if hasattr(t, "_conn") else t for t in saved])
            finally:
                SAVED_TENSOR_HOOKS.pop()
        node.saved = node.saved + tuple(saved)
    return out


def zero_link(node: Node, g: Tensor, fail: str | None = None, inputs: tuple = ()) -> Tensor:
    """``g``, recorded as depending on ``node``'s inputs with a zero derivative (``g + z``, ``z``
    all ``-0.0``, so the value is ``g``'s bit for bit): a gradient that PyTorch's derivative
    formula computes from the op's input, as ``leaky_relu_backward(grad, self)`` does, stays in the
    input's graph, and differentiating it again gives zeros (that do not require grad) rather than
    "not used in the graph". ``inputs``: the positions of the node's inputs that stand for the
    op's input (default: all). With ``fail``, differentiating it again raises PyTorch's
    "derivative for ``fail`` is not implemented" instead."""
    which = inputs or tuple(range(len(node.parents)))
    link = Node(node.op, tuple([node.parents[i] for i in which]), (), (), None)
    link.shapes = tuple([node.shapes[i] for i in which])
    link.dtypes = tuple([node.dtypes[i] for i in which])
    link.label = node.name().removesuffix("0") + "Backward0"  # (LeakyReluBackwardBackward0)
    link.rule = _zeros_to_inputs if fail is None else functools.partial(_not_implemented, fail)
    z = g.new_zeros(g.shape).neg()
    z._node, z._rg = link, True
    return g + z


def _zeros_to_inputs(node: Node, g: Any) -> tuple:
    return tuple([None if p is None else g.new_zeros(s) for p, s in zip(node.parents, node.shapes)])


def _not_implemented(what: str, node: Node, g: Any) -> tuple:
    raise RuntimeError(f"derivative for {what} is not implemented")


def zero_second_derivative(node: Node, g: Tensor) -> tuple:
    """A :func:`recorded_rule` for piecewise-linear composites that end in a ``where`` one of
    whose branches is the op's input (``leaky_relu``, ``hardtanh``, ``threshold``, ``hardshrink``
    ...; the second operand, or the third when the second is a constant): the registry's rule on
    a ``g`` kept in the input's graph (:func:`zero_link`), so the second derivative is zeros, as
    PyTorch's."""
    branch = 1 if node.parents[1] is not None or len(node.parents) < 3 else 2
    return O.BY_NAME[node.op].grad(node, zero_link(node, g, inputs=(branch,)))


def labels(name: str | Any) -> Any:
    """Decorate a composite op so its result's node gets ``name`` (or ``name(*args, **kwargs)``,
    where None keeps the name it has),
    as :func:`label` does at the op's end; the first tensor of a tuple result is named
    (``cummax``'s values). A result that is one of the op's own arguments is left as it is."""

    def mark(fn: Any) -> Any:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            first = out[0] if isinstance(out, tuple) and out else out
            node = getattr(first, "_node", None)
            if node is not None and not any(first is a for a in args):
                node.label = name if name.__class__ is str else name(*args, **kwargs) or node.label
            return out

        return run

    return mark


def _getitem_name(node: Node) -> str:
    """PyTorch's node for ``x[key]``: ``IndexBackward0`` with an index tensor or list, else the
    node of the last view the key makes (``SelectBackward0`` for an int, ``SliceBackward0``,
    ``UnsqueezeBackward0`` for None; a slice of a whole dimension makes none, unless it is the
    only item, as in ``x[:]``; ``AliasBackward0`` when no item makes one, as ``x[...]``)."""
    key = (node.attrs or {}).get("key") or ()
    shape = node.shapes[0] if node.shapes else ()
    if any(item[0] in ("t", "l") for item in key):
        return "IndexBackward0"
    used = sum(1 for item in key if item[0] in ("i", "s"))
    name, dim = "AliasBackward0", 0
    for item in key:
        kind = item[0]
        if kind == "e":
            dim = len(shape) - used
        elif kind == "n":
            name = "UnsqueezeBackward0"
        elif kind == "i":
            name, dim, used = "SelectBackward0", dim + 1, used - 1
        elif kind == "s":
            n = shape[dim] if dim < len(shape) else 0
            start, stop, step = item[1:4]
            whole = (
                (start is None or start == 0 or start <= -n)
                and (stop is None or stop >= n)
                and (step is None or step == 1)
            )
            if not whole or len(key) == 1:
                name = "SliceBackward0"
            dim, used = dim + 1, used - 1
    return name


def _matmul_name(node: Node) -> str:
    """PyTorch's node for ``a @ b`` by the operands' ranks (``mm`` for two matrices, a view of a
    folded ``mm`` / ``bmm`` for batches)."""
    ra, rb = len(node.shapes[0]), len(node.shapes[1])
    if ra == 2:
        return "MmBackward0" if rb == 2 else "CloneBackward0"
    return "UnsafeViewBackward0"


def _sum_name(node: Node) -> str:
    """``SumBackward0`` for the sum of every element, ``SumBackward1`` over dimensions."""
    return "SumBackward0" if node.attrs is None else "SumBackward1"


def _prod_name(node: Node) -> str:
    """``ProdBackward0`` for the product of every element, ``ProdBackward1`` over a dimension."""
    return "ProdBackward0" if node.attrs is None else "ProdBackward1"


def _setitem_name(node: Node) -> str:
    """``IndexPutBackward0`` for an assignment through index tensors or lists, ``CopySlices``
    for one through ints and slices (PyTorch copies into a view there)."""
    key = node.attrs.get("key", ()) if type(node.attrs) is dict else ()
    return "IndexPutBackward0" if any(item[0] in ("t", "l") for item in key) else "CopySlices"


def _fft_name(node: Node) -> str:
    """PyTorch's ``FftR2CBackward0``, ``FftC2CBackward0`` or ``FftC2RBackward0`` by the transform's
    kind."""
    kind = node.attrs.get("kind", "c2c") if type(node.attrs) is dict else "c2c"
    return f"Fft{kind.upper()}Backward0"


def _pow_name(node: Node) -> str:
    """``PowBackward0`` for a number exponent, ``PowBackward1`` for a tensor one,
    ``PowBackward2`` for a number base."""
    if node.dtypes[0] is None:
        return "PowBackward2"
    return "PowBackward0" if node.dtypes[1] is None else "PowBackward1"


def _sub_name(node: Node) -> str:
    """``RsubBackward1`` for ``number - x``."""
    return "RsubBackward1" if node.dtypes[0] is None else "SubBackward0"


def _div_name(node: Node) -> str:
    """``number / x`` is PyTorch's ``x.reciprocal() * number``: ``MulBackward0``."""
    return "MulBackward0" if node.dtypes[0] is None else "DivBackward0"


#: PyTorch's node names of the primitives named otherwise (a name, or a function of the node);
#: read only when a node's name is asked for.
PRIMITIVE_NAMES: dict[str, Any] = {
    "add_scaled": "AddBackward0",
    "nll_loss": "NllLossBackward0",
    "nll_loss_backward": "NllLossBackwardBackward0",
    "concat": "CatBackward0",
    "clip": "ClampBackward1",
    "cast": "ToCopyBackward0",
    "copy": "CloneBackward0",
    "reshape": "ViewBackward0",
    "transpose": "PermuteBackward0",
    "getitem": _getitem_name,
    "matmul": _matmul_name,
    "sum": _sum_name,
    "prod": _prod_name,
    "fft": _fft_name,
    "im2col": "Im2ColBackward0",
    "col2im": "Col2ImBackward0",
    "erfcx": "SpecialErfcxBackward0",
    "real": "SelectBackward0",
    "imag": "SelectBackward0",
    "setitem": _setitem_name,
    "pow": _pow_name,
    "sub": _sub_name,
    "div": _div_name,
    "log1p": "Log1PBackward0",
    "max": "AmaxBackward0",
    "min": "AminBackward0",
    "floor_divide": "torch::autograd::NotImplemented",  # (its class: NotImplemented)
}

_NAMED_NODE_CLASSES: dict[str, type] = {}


def named(node: Node) -> Node:
    """``node`` as what ``tensor.grad_fn`` hands out: an instance of a subclass of :class:`Node`
    named as PyTorch names the node's class (``type(y.grad_fn).__name__ == "MulBackward0"``, or
    ``"MyFnBackward"`` for a ``Function``), made once per name; the node itself is kept, so
    identity and ``isinstance(.., Node)`` hold."""
    name = node.name()
    if type(node).__name__ != name:
        cls = _NAMED_NODE_CLASSES.get(name)
        if cls is None:
            cls = type(name.rpartition("::")[2], (Node,), {"__slots__": ()})
            _NAMED_NODE_CLASSES[name] = cls
        node.__class__ = cls
    return node


#: ``saves`` kinds whose saved tensors are inputs (or ``None``), never aliases of the output.
_KEEPS_INPUTS = ("inputs", "others", "divisor")
_BY_NEEDS = ("others", "divisor")  # (what they keep depends on which inputs want a gradient)


def record(
    out: Tensor, op: str, inputs: tuple, attrs: Any = None, saved: tuple | None = None
) -> Tensor:
    """Attach a backward node for primitive ``op`` to ``out`` when grad mode is on.

    Args:
        out: the op's result.
        op: the primitive's name (an entry of the op registry).
        inputs: the op's operands in order (tensors or Python numbers).
        attrs: the instruction's attributes (the derivative rule reads them).
        saved: tensors the rule reads; default: what the registry entry's ``saves`` says.

    Returns:
        ``out``, now requiring grad if any input does.
    """
    if not _mode.enabled or out.dtype not in GRAD_DTYPES:
        return out
    parents = []
    wanted = False
    for t in inputs:
        if getattr(t, "_rg", False):
            parents.append(t if t._node is None else t._node)
            wanted = True
        else:
            parents.append(None)
    if not wanted:
        return out
    # Complex numbers are in play when the output is complex, or for the ops that make a real
    # tensor of a complex one (abs, real, angle, casts ...: it is always their first input).
    mode = None
    if out.dtype in _COMPLEX or getattr(inputs[0], "dtype", None) in _COMPLEX:
        mode = complex_grad_mode(op)  # (before anything is recorded: it may refuse)
    if saved is not None:
        if INFERENCE_USED:
            _refuse_inference(saved)
        node = out._node = Node(op, tuple(parents), tuple(saved), inputs, attrs)
        node.cplx = mode
        if SAVED_TENSOR_HOOKS:
            _pack(node)
        out._rg = True
        return out
    entry = O.BY_NAME[op]
    how = entry.saves
    needs = tuple([p is not None for p in parents]) if how in _BY_NEEDS else ()
    saved = entry.saved(inputs, out, needs)
    if INFERENCE_USED:
        _refuse_inference(saved)
    node = out._node = Node(op, tuple(parents), tuple(saved), inputs, attrs)
    node.cplx = mode
    # Saved tensors that are not inputs are aliases of the output (an output cannot be saved
    # itself: its node would point back at it). Backward with create_graph needs to know them, to
    # link their uses in the derivative back to this node.
    if how == "output":
        node.outs = _FIRST
    elif how is not None and how not in _KEEPS_INPUTS and saved:
        node.outs = tuple([i for i, t in enumerate(saved) if all(t is not x for x in inputs)])
    if node.outs:  # (the rule reads the output: an in-place change of it must raise at backward)
        node.outv = (weakref.ref(out), out._version)
    if SAVED_TENSOR_HOOKS:
        _pack(node)
    out._rg = True
    return out


def _refuse_inference(saved: Any) -> None:
    """PyTorch's refusal to keep a tensor made in ``inference_mode`` for backward."""
    for t in saved:
        if getattr(t, "_inf", False):
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. To work around you can make a "
                "clone to get a normal tensor and use it in autograd."
            )


class Packed:
    """A saved tensor as a ``saved_tensors_hooks`` pack hook returned it."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


def _pack(node: Node) -> None:
    """Replace ``node``'s saved tensors (not its saved numbers) by what the innermost pack hook
    makes of them."""
    hooks = SAVED_TENSOR_HOOKS[-1]
    if hooks is None:  # inside a pack hook: what it records is kept as it is (PyTorch's rule)
        return
    if isinstance(hooks, str):
        raise RuntimeError(hooks)
    if node.saved:
        pack, node.unpack = hooks
        SAVED_TENSOR_HOOKS.append(None)
        try:
            node.saved = tuple([Packed(pack(t)) if hasattr(t, "_conn") else t for t in node.saved])
        finally:
            SAVED_TENSOR_HOOKS.pop()
