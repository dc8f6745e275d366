"""Autocast: PyTorch's per-op casting rules, applied to GT's ops inside ``autocast`` regions.

PyTorch casts at the operator level: inside an enabled region each op on its lists casts its
floating-point arguments (never float64 ones) before it runs, to the region's dtype ("lower":
matrix products and convolutions), to float32 ("fp32": losses, linear algebra, FFTs and, on CUDA,
reductions and transcendental functions) or to the widest of them ("promote": ``cat``, ``stack``).
An op on a list runs with autocast suspended, so what it calls inside is not cast again (PyTorch
excludes its autocast key the same way). The casts are ordinary differentiable ``to(dtype)``
calls, so gradients come back to float32 parameters in float32.

GT's tensors live on the cluster, not on a PyTorch device, so a region of either device type
applies to them, with that device type's lists (``"cpu"``: PyTorch's CPU lists, bfloat16 by
default; ``"cuda"``: its CUDA lists, float16 by default). Nested regions of the same device type
replace each other; of different types, the innermost enabled one counts.

Ops are marked with :func:`autocast_op` where they are defined (``gt.Tensor``'s methods by
:func:`mark_methods`, ``gt.linalg`` and ``gt.fft`` by :func:`mark_namespace`). GT's composites
whose PyTorch counterparts are single kernels on no list (``mv``, ``dot``) are marked with their
own names, on no list, so that the products inside them stay in their inputs' dtype as PyTorch's
do; composites that PyTorch's are too (``einsum``, ``matrix_power``) are left unmarked, so their
products cast one by one. Regions are per process (PyTorch's are per thread).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import Any

from gt.ops.base import TensorBase

_MATMUL = ("matmul", "addmm", "baddbmm", "addbmm", "linear", "conv1d", "conv2d", "conv3d",
           "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
           "scaled_dot_product_attention")  # fmt: skip
_LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss", "cross_entropy",
           "kl_div", "binary_cross_entropy_with_logits", "margin_ranking_loss", "soft_margin_loss",
           "triplet_margin_loss", "multi_margin_loss", "hinge_embedding_loss",
           "cosine_embedding_loss", "poisson_nll_loss", "multilabel_margin_loss", "cdist", "prod")  # fmt: skip
_LINALG_FP32 = ("inv", "inv_ex", "inverse", "solve", "solve_ex", "cholesky", "cholesky_ex",
                "cholesky_inverse", "cholesky_solve", "eigh", "eigvalsh", "eig", "eigvals", "svd",
                "svdvals", "qr", "lstsq", "pinv", "pinverse", "lu_solve", "lu_factor",
                "lu_factor_ex", "lu", "triangular_solve", "solve_triangular",
                "householder_product")  # fmt: skip

#: PyTorch's lists by device type: op name -> "lower", "fp32" or "promote" ("through": the op's
#: own ops are cast one by one, as those of PyTorch's composites are). The CPU lists are
#: what torch 2.13's CPU autocast does (each name probed, bfloat16); the CUDA ones are the
#: "Autocast Op Reference" of torch.amp's documentation. GT's ops on none of them are absent.
POLICIES: dict[str, dict[str, str]] = {
    "cpu": {
        **dict.fromkeys((*_MATMUL, "vecdot", "lstm"), "lower"),
        **dict.fromkeys(
            (
                *_LOSSES,
                *_LINALG_FP32,
                "binary_cross_entropy",
                "ctc_loss",
                "quantile",
                "nanquantile",
                "trace",
                "fft",
                "stft",
                "grid_sample",
                "avg_pool3d",
                "max_pool3d",
                "adaptive_avg_pool3d",
                "adaptive_max_pool3d",
                "fractional_max_pool2d",
                "fractional_max_pool3d",
                "max_unpool2d",
                "max_unpool3d",
                "pad_reflect12",
                "pad_replicate",
                "polar",
            ),
            "fp32",
        ),
        # GT's bilinear is PyTorch's composite: its product casts, the rest stays as it is
        "bilinear": "through",
        **dict.fromkeys(("cat", "stack", "index_copy"), "promote"),
    },
    "cuda": {
        **dict.fromkeys((*_MATMUL, "addmv", "addr", "mv", "chain_matmul", "multi_dot"), "lower"),
        **dict.fromkeys(
            (
                *_LOSSES,
                "acos",
                "asin",
                "cosh",
                "erfinv",
                "exp",
                "expm1",
                "log",
                "log10",
                "log2",
                "log1p",
                "reciprocal",
                "rsqrt",
                "sinh",
                "tan",
                "pow",
                "rpow",
                "rtruediv",
                "softplus",
                "layer_norm",
                "group_norm",
                "norm",
                "cosine_similarity",
                "cumprod",
                "cumsum",
                "dist",
                "pdist",
                "renorm",
                "logsumexp",
                "sum",
                "softmax",
                "log_softmax",
                "softmin",
                "normalize",
                "binary_cross_entropy_with_logits",
                "ctc_loss",
            ),
            "fp32",
        ),
        **dict.fromkeys(
            (
                "addcdiv",
                "addcmul",
                "atan2",
                "bilinear",
                "cross",
                "dot",
                "grid_sample",
                "index_put",
                "scatter_add",
                "tensordot",
                "cat",
                "stack",
                "index_copy",
            ),
            "promote",
        ),
    },
}

#: ``gt.Tensor``'s methods that are PyTorch ops of the lists above (or GT composites of ops
#: PyTorch would not cast there, such as ``mv``): method name -> op name.
TENSOR_METHODS = {
    "__matmul__": "matmul", **{n: n for n in (
        "addmm", "baddbmm", "addbmm", "addmv", "addr", "mv", "dot", "vdot", "prod", "quantile",
        "nanquantile", "trace", "cholesky", "cholesky_inverse", "cholesky_solve", "inverse",
        "pinverse", "lu_solve", "qr", "svd", "triangular_solve", "exp", "log", "log10", "log2",
        "log1p", "expm1", "reciprocal", "rsqrt", "sinh", "cosh", "tan", "acos", "asin", "erfinv",
        "pow", "sum", "cumsum", "cumprod", "norm", "logsumexp", "softmax", "log_softmax",
        "renorm", "dist", "addcdiv", "addcmul", "atan2", "cross", "index_put", "scatter_add",
        "index_copy")},
    "nansum": "nansum", "nanmean": "nanmean", "square": "pow",
    "__pow__": "pow", "__rpow__": "rpow", "__rtruediv__": "rtruediv",
}  # fmt: skip


def mark_methods(cls: type) -> None:
    """Mark :data:`TENSOR_METHODS` of ``cls`` (``gt.Tensor``) with :func:`autocast_op`."""
    for method, name in TENSOR_METHODS.items():
        fn = cls.__dict__.get(method) or getattr(cls, method, None)
        if fn is not None and not hasattr(fn, "__wrapped_autocast__"):
            setattr(cls, method, autocast_op(name)(fn))


def mark_namespace(namespace: dict, names: Any, op: Callable[[str], str]) -> None:
    """Mark the functions ``names`` of a module's namespace (``gt.linalg``, ``gt.fft``) as the ops
    ``op(name)``."""
    for name in names:
        fn = namespace.get(name)
        if callable(fn) and not hasattr(fn, "__wrapped_autocast__"):
            namespace[name] = autocast_op(op(name))(fn)


#: The regions entered and not yet left, innermost last: ``(device_type, enabled, dtype name)``.
REGIONS: list[tuple[str, bool, str]] = []

#: ``[(device_type, dtype name)]`` of the region in force, or ``[None]``: what every marked op
#: reads first (one list index when no region is open).
_IN_FORCE: list[tuple[str, str] | None] = [None]


#: The state set outside every region by ``gt.set_autocast_enabled``/``set_autocast_dtype``
#: (PyTorch's global autocast state): device type -> ``(enabled, dtype name)``.
BASE: dict[str, tuple[bool, str]] = {}
#: ``gt.is_autocast_cache_enabled()`` (a region sets it while open; GT keeps no cast cache).
CACHE = [True]


def set_state(device_type: str, default_dtype: str, enabled: bool | None = None,
              dtype: str | None = None) -> None:  # fmt: skip
    """Change the state of ``device_type`` in force here, as PyTorch's setters do: that of its
    innermost open region (which the region restores when it closes), else the base state."""
    for i in range(len(REGIONS) - 1, -1, -1):
        dev, was_enabled, was_dtype = REGIONS[i]
        if dev == device_type:
            REGIONS[i] = (dev, was_enabled if enabled is None else enabled, dtype or was_dtype)
            break
    else:
        was_enabled, was_dtype = BASE.get(device_type, (False, default_dtype))
        BASE[device_type] = (was_enabled if enabled is None else enabled, dtype or was_dtype)
    _IN_FORCE[0] = _innermost()


def state(device_type: str) -> tuple[bool, str] | None:
    """``(enabled, dtype name)`` in force for ``device_type`` (None: never set nor entered)."""
    for dev, enabled, dtype in reversed(REGIONS):
        if dev == device_type:
            return enabled, dtype
    return BASE.get(device_type)


def enter(device_type: str, enabled: bool, dtype: str) -> None:
    """Open a region (``autocast.__enter__``)."""
    REGIONS.append((device_type, enabled, dtype))
    _IN_FORCE[0] = _innermost()


def leave() -> None:
    """Close the innermost region (``autocast.__exit__``)."""
    if REGIONS:
        REGIONS.pop()
    _IN_FORCE[0] = _innermost()


def _innermost() -> tuple[str, str] | None:
    seen: set[str] = set()
    for device_type, enabled, dtype in reversed(REGIONS):
        if device_type in seen:
            continue
        seen.add(device_type)
        if enabled and device_type in POLICIES:
            return device_type, dtype
    for device_type, (enabled, dtype) in BASE.items():
        if device_type not in seen and enabled and device_type in POLICIES:
            return device_type, dtype
    return None


def in_force() -> bool:
    """Whether an enabled region is in force here."""
    return _IN_FORCE[0] is not None


def lowered(name: str) -> str | None:
    """The region's dtype when its lists cast op ``name`` to it ("lower"), else None (for ops
    that cast their own weights, such as ``nn.LSTM``)."""
    region = _IN_FORCE[0]
    if region is None or POLICIES[region[0]].get(name) != "lower":
        return None
    return region[1]


def cast_all(args: Any, target: str) -> Any:
    """``args`` (a tuple or a dict of arguments) with every float32/float16/bfloat16 tensor in it
    cast to ``target`` (``custom_fwd(cast_inputs=...)``)."""
    if isinstance(args, dict):
        return {k: _cast(v, target) for k, v in args.items()}
    return tuple(_cast(a, target) for a in args)


class suspended:  # noqa: N801 - used as a statement, like a function
    """``with suspended():`` runs its body with no autocast region in force (backward passes run
    in their forward ops' dtypes, as PyTorch's do)."""

    __slots__ = ("_was",)

    def __enter__(self) -> None:
        self._was = _IN_FORCE[0]
        _IN_FORCE[0] = None

    def __exit__(self, *exc: Any) -> None:
        _IN_FORCE[0] = self._was


def autocast_op(name: str | Callable[[tuple, dict], str]) -> Callable[[Callable], Callable]:
    """Mark a function or method as PyTorch's op ``name`` for autocast: inside a region whose
    lists name it, its tensor arguments are cast first; on a list or not, it runs with autocast
    suspended (GT composites of ops PyTorch would not cast there, such as ``mv``). ``name`` may
    be a function of the call's ``(args, kwargs)`` (``pad``: its mode decides)."""

    def mark(fn: Callable) -> Callable:
        def in_region(region: tuple[str, str], args: tuple, kwargs: dict) -> Any:
            op = name if type(name) is str else name(args, kwargs)
            policy = POLICIES[region[0]].get(op)
            if policy == "through":
                return fn(*args, **kwargs)
            _IN_FORCE[0] = None
            try:
                if policy is not None:
                    target = _target(policy, region[1], args, kwargs)
                    if target is not None:
                        args = tuple(_cast(a, target) for a in args)
                        kwargs = {k: _cast(v, target) for k, v in kwargs.items()}
                return fn(*args, **kwargs)
            finally:
                _IN_FORCE[0] = region

        run = _same_signature(fn, in_region) or _any_signature(fn, in_region)
        functools.update_wrapper(run, fn)
        run.__wrapped_autocast__ = name  # type: ignore[attr-defined]
        return run

    return mark


def _any_signature(fn: Callable, in_region: Callable) -> Callable:
    def run(*args: Any, **kwargs: Any) -> Any:
        region = _IN_FORCE[0]
        if region is None:
            return fn(*args, **kwargs)
        return in_region(region, args, kwargs)

    return run


def _same_signature(fn: Callable, in_region: Callable) -> Callable | None:
    """A wrapper with ``fn``'s own parameters (no ``*args``/``**kwargs`` to pack: the call outside
    any region costs about a third of the generic wrapper's), or None where ``fn`` takes
    variable arguments or has no plain signature."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if any(
        p.kind not in kinds or not p.name.isidentifier() or p.name.startswith("_g_") for p in params
    ):
        return None
    defaults, head, pos, kw, star = {}, [], [], [], False
    for i, p in enumerate(params):
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
            head.append("*")
            star = True
        if p.default is inspect.Parameter.empty:
            head.append(p.name)
        else:
            defaults[f"_g_d{i}"] = p.default
            head.append(f"{p.name}=_g_d{i}")
        (kw if star else pos).append(p.name)
    call_pos = "".join(f"{n}, " for n in pos)
    call_kw = ", ".join(f"{n}={n}" for n in kw)
    source = (
        f"def run({', '.join(head)}):\n"
        f"    region = _g_force[0]\n"
        f"    if region is None:\n"
        f"        return _g_fn({call_pos}{call_kw})\n"
        f"    return _g_in(region, ({call_pos}), {{{', '.join(f'{n!r}: {n}' for n in kw)}}})\n"
    )
    scope = {"_g_force": _IN_FORCE, "_g_fn": fn, "_g_in": in_region, **defaults}
    # (named inside the package, so that the user's source line is found past it)
    where = os.path.join(os.path.dirname(__file__), f"<autocast {fn.__qualname__}>")
    exec(compile(source, where, "exec"), scope)  # noqa: S102
    return scope["run"]


_ELIGIBLE = ("float32", "float16", "bfloat16")  # floating point, not float64


def pad_op(args: tuple, kwargs: dict) -> str:
    """``F.pad``'s op for autocast: PyTorch's CPU list has reflection padding of 1-d and 2-d
    inputs and every replication padding, not the others."""
    mode = args[2] if len(args) > 2 else kwargs.get("mode", "constant")
    pad = args[1] if len(args) > 1 else kwargs.get("pad", ())
    if mode == "replicate":
        return "pad_replicate"
    return "pad_reflect12" if mode == "reflect" and len(pad) <= 4 else "pad"


def _target(policy: str, lower: str, args: tuple, kwargs: dict) -> str | None:
    if policy == "lower":
        return lower
    if policy == "fp32":
        return "float32"
    found = {lower}
    for a in (*args, *kwargs.values()):
        for t in a if isinstance(a, (list, tuple)) else (a,):
            if isinstance(t, TensorBase) and t.dtype in _ELIGIBLE:
                found.add(str(t.dtype))
    # widest: float32 if any, else the one half type, else float32 (bfloat16 with float16)
    if "float32" in found or len(found) > 1:
        return "float32"
    return lower


def _cast(a: Any, target: str) -> Any:
    if isinstance(a, TensorBase):
        return a.to(target) if a.dtype in _ELIGIBLE and a.dtype != target else a
    if isinstance(a, (list, tuple)) and any(isinstance(t, TensorBase) for t in a):
        return type(a)(_cast(t, target) for t in a)
    return a
