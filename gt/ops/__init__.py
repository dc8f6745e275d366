"""The op mixins of :class:`gt.Tensor` and the functional API (derivatives live in the op registry,
:mod:`gt.runtime.ops`).

* ``metadata``: shape queries and sync points (``numpy``, ``item``, ``repr`` ...).
* ``arith``: elementwise arithmetic, comparisons, math, activations, ``where``.
* ``mathops``: rounding, predicates (``isclose``, ``allclose``, ``isnan``), ``lerp``/``addcmul``,
  ``outer``/``diag``/``trace``.
* ``reduce``: ``matmul``, reductions, ``softmax`` and friends.
* ``ordering``: ``sort``/``argsort``/``topk``/``median``, ``prod``/``cumprod``, ``roll``,
  ``multinomial``.
* ``selection``: ``scatter``, ``index_add``, ``nonzero``, ``masked_select``.
* ``shaping``: reshaping, permuting, broadcasting, indexing, ``cat``/``stack``.
* ``inplace``, ``more_inplace``: ``+=``, ``add_``, ``zero_``, ``copy_``, ``__setitem__``, and the
  ``op_`` forms (``relu_``, ``lerp_`` ...).
* ``conversion``: dtypes, devices and ``new_*`` constructors; ``autograd_api``: ``requires_grad``,
  ``backward``, ``retain_grad``.
* ``functional``: ``gt.exp(x)``-style functions; ``einsum``; ``device``, ``typeinfo``
  (``finfo``, ``Size``); ``random`` (seeds, ``Generator``); ``format``: PyTorch-style ``repr``.
"""
