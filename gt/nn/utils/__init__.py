"""``gt.nn.utils``: PyTorch's ``torch.nn.utils``.

Gradient clipping (``clip_grad_norm_``, ``get_total_norm``, ``clip_grads_with_norm_``,
``clip_grad_value_``), parameters as one vector (``convert_parameters``), batch-norm fusion
(``fuse_conv_bn_eval`` ...), ``skip_init``, weight and spectral normalization (the hook-based
``weight_norm`` / ``spectral_norm`` and, in ``parametrizations``, the parametrization-based ones),
``parametrize`` (``register_parametrization`` ...), ``prune`` (magnitude, random and custom
pruning masks), ``stateless.functional_call``, ``rnn`` (packed variable-length sequences), and
``convert_conv2d_weight_memory_format`` / ``convert_conv3d_weight_memory_format``.
"""

from __future__ import annotations

from gt.nn.utils import (
    convert_parameters,
    parametrizations,
    parametrize,
    prune,
    rnn,
    stateless,
)
from gt.nn.utils.clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from gt.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from gt.nn.utils.fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from gt.nn.utils.init import skip_init
from gt.nn.utils.memory_format import (
    convert_conv2d_weight_memory_format,
    convert_conv3d_weight_memory_format,
)
from gt.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from gt.nn.utils.weight_norm import remove_weight_norm, weight_norm

__all__ = [
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "convert_conv2d_weight_memory_format",
    "convert_conv3d_weight_memory_format",
    "convert_parameters",
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
    "get_total_norm",
    "parameters_to_vector",
    "parametrizations",
    "parametrize",
    "prune",
    "remove_spectral_norm",
    "remove_weight_norm",
    "rnn",
    "skip_init",
    "spectral_norm",
    "stateless",
    "vector_to_parameters",
    "weight_norm",
]
