"""The op mixins of :class:`gt.Tensor` and the functional API (derivatives live in the op registry,
:mod:`gt.runtime.ops`).

* ``metadata``: shape queries and sync points (``numpy``, ``item``, ``repr`` ...).
* ``arith``: elementwise arithmetic, comparisons, math, activations, ``where``; its bitwise
  operators (``&``, ``<<`` ...) promote and check operands in ``bitwise``.
* ``mathops``: rounding, predicates (``isclose``, ``allclose``, ``isnan``), ``lerp``/``addcmul``,
  ``outer``/``diag``/``trace``.
* ``reduce``: ``matmul``, reductions, ``softmax`` and friends.
* ``ordering``: ``sort``/``argsort``/``topk``/``median``, ``quantile``/``nanquantile`` (composed
  in ``quantile``), ``prod``/``cumprod``, ``roll``, ``multinomial``.
* ``selection``: ``scatter``, ``index_add``, ``nonzero``, ``masked_select``, ``unique``.
* ``search``: ``gt.searchsorted`` and ``gt.bucketize`` (functions only, as in PyTorch).
* ``shaping``: reshaping, permuting, broadcasting, indexing, ``cat``/``stack``.
* ``inplace``, ``more_inplace``: ``+=``, ``add_``, ``zero_``, ``copy_``, ``__setitem__``, and the
  ``op_`` forms (``relu_``, ``lerp_`` ...).
* ``conversion``: dtypes, devices and ``new_*`` constructors; ``autograd_api``: ``requires_grad``,
  ``backward``, ``retain_grad``.
* ``composed``: smaller math composed from primitives (``hypot``, ``diff``, ``trapezoid``, ``kron``,
  ``cov``, ``bincount`` ...); ``compat``, ``compat_inplace``: PyTorch's aliases (``divide``,
  ``swapdims`` ...), the remaining ``op_`` forms and composed methods (``aminmax``, ``unfold``,
  ``tensor_split`` ...); ``compat_functions``: ``gt.as_tensor``, ``gt.column_stack`` ... .
* ``functional``: ``gt.exp(x)``-style functions; ``einsum``; ``device``, ``typeinfo``
  (``finfo``, ``Size``); ``random`` (seeds, ``Generator``); ``format``: PyTorch-style ``repr``.
"""
