"""The op mixins of :class:`gt.Tensor`, the derivative table and the functional API.

* ``arith``: elementwise arithmetic, comparisons, math, activations, ``where``.
* ``reduce``: ``matmul``, reductions, ``softmax`` and friends.
* ``shaping``: reshaping, permuting, broadcasting, indexing, ``cat``/``stack``.
* ``inplace``: ``+=``, ``add_``, ``zero_``, ``copy_``, ``__setitem__``.
* ``derivatives``: one backward rule per primitive.
* ``functional``: ``gt.exp(x)``-style functions.
* ``format``: PyTorch-style ``repr``.
"""
