"""``gt.nn`` modules take PyTorch's parameter names, so keyword calls and keyword construction
work as with ``torch.nn`` (``nn.Linear(4, 2)(input=x)``, ``nn.Conv2d(in_channels=3, ...)``).

The table below is data: the ``forward`` and ``__init__`` parameters of every module class in
``torch.nn.modules`` as ``inspect.signature`` renders them (no torch is imported here). GT may add
parameters of its own after PyTorch's (with defaults); it may not rename, reorder or drop any."""

from __future__ import annotations

import inspect

import pytest

import gt.nn as nn

# fmt: off
# Generated from torch 2.13.0+cpu: forward and __init__ parameters of every module class
# in torch.nn.modules, as inspect.signature renders them ("*" starts keyword-only parameters;
# None where the class inherits Module's generic method).
TORCH_SIGNATURES: dict[str, tuple[tuple[str, ...] | None, tuple[str, ...] | None]] = {
    "AdaptiveAvgPool1d": (("input",), ("output_size",)),
    "AdaptiveAvgPool2d": (("input",), ("output_size",)),
    "AdaptiveAvgPool3d": (("input",), ("output_size",)),
    "AdaptiveLogSoftmaxWithLoss": (("input_", "target_"), ("in_features", "n_classes", "cutoffs", "div_value", "head_bias", "device", "dtype")),
    "AdaptiveMaxPool1d": (("input",), ("output_size", "return_indices")),
    "AdaptiveMaxPool2d": (("input",), ("output_size", "return_indices")),
    "AdaptiveMaxPool3d": (("input",), ("output_size", "return_indices")),
    "AlphaDropout": (("input",), ("p", "inplace")),
    "AvgPool1d": (("input",), ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad")),
    "AvgPool2d": (("input",), ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")),
    "AvgPool3d": (("input",), ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")),
    "BCELoss": (("input", "target"), ("weight", "size_average", "reduce", "reduction")),
    "BCEWithLogitsLoss": (("input", "target"), ("weight", "size_average", "reduce", "reduction", "pos_weight")),
    "BatchNorm1d": (("input",), ("num_features", "eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "BatchNorm2d": (("input",), ("num_features", "eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "BatchNorm3d": (("input",), ("num_features", "eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "Bilinear": (("input1", "input2"), ("in1_features", "in2_features", "out_features", "bias", "device", "dtype")),
    "CELU": (("input",), ("alpha", "inplace")),
    "CTCLoss": (("log_probs", "targets", "input_lengths", "target_lengths"), ("blank", "reduction", "zero_infinity")),
    "ChannelShuffle": (("input",), ("groups",)),
    "CircularPad1d": (("input",), ("padding",)),
    "CircularPad2d": (("input",), ("padding",)),
    "CircularPad3d": (("input",), ("padding",)),
    "ConstantPad1d": (("input",), ("padding", "value")),
    "ConstantPad2d": (("input",), ("padding", "value")),
    "ConstantPad3d": (("input",), ("padding", "value")),
    "Container": (None, ("**kwargs",)),
    "Conv1d": (("input",), ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias", "padding_mode", "device", "dtype")),
    "Conv2d": (("input",), ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias", "padding_mode", "device", "dtype")),
    "Conv3d": (("input",), ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias", "padding_mode", "device", "dtype")),
    "ConvTranspose1d": (("input", "output_size"), ("in_channels", "out_channels", "kernel_size", "stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode", "device", "dtype")),
    "ConvTranspose2d": (("input", "output_size"), ("in_channels", "out_channels", "kernel_size", "stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode", "device", "dtype")),
    "ConvTranspose3d": (("input", "output_size"), ("in_channels", "out_channels", "kernel_size", "stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode", "device", "dtype")),
    "CosineEmbeddingLoss": (("input1", "input2", "target"), ("margin", "size_average", "reduce", "reduction")),
    "CosineSimilarity": (("x1", "x2"), ("dim", "eps")),
    "CrossEntropyLoss": (("input", "target"), ("weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing")),
    "CrossMapLRN2d": (("input",), ("size", "alpha", "beta", "k")),
    "Dropout": (("input",), ("p", "inplace")),
    "Dropout1d": (("input",), ("p", "inplace")),
    "Dropout2d": (("input",), ("p", "inplace")),
    "Dropout3d": (("input",), ("p", "inplace")),
    "ELU": (("input",), ("alpha", "inplace")),
    "Embedding": (("input",), ("num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse", "_weight", "_freeze", "device", "dtype")),
    "EmbeddingBag": (("input", "offsets", "per_sample_weights"), ("num_embeddings", "embedding_dim", "max_norm", "norm_type", "scale_grad_by_freq", "mode", "sparse", "_weight", "include_last_offset", "padding_idx", "device", "dtype")),
    "FeatureAlphaDropout": (("input",), ("p", "inplace")),
    "Flatten": (("input",), ("start_dim", "end_dim")),
    "Fold": (("input",), ("output_size", "kernel_size", "dilation", "padding", "stride")),
    "FractionalMaxPool2d": (("input",), ("kernel_size", "output_size", "output_ratio", "return_indices", "_random_samples")),
    "FractionalMaxPool3d": (("input",), ("kernel_size", "output_size", "output_ratio", "return_indices", "_random_samples")),
    "GELU": (("input",), ("approximate",)),
    "GLU": (("input",), ("dim",)),
    "GRU": (("input", "hx"), ("*args", "**kwargs")),
    "GRUCell": (("input", "hx"), ("input_size", "hidden_size", "bias", "device", "dtype")),
    "GaussianNLLLoss": (("input", "target", "var"), ("*", "full", "eps", "reduction")),
    "GroupNorm": (("input",), ("num_groups", "num_channels", "eps", "affine", "device", "dtype", "*", "bias")),
    "Hardshrink": (("input",), ("lambd",)),
    "Hardsigmoid": (("input",), ("inplace",)),
    "Hardswish": (("input",), ("inplace",)),
    "Hardtanh": (("input",), ("min_val", "max_val", "inplace", "min_value", "max_value")),
    "HingeEmbeddingLoss": (("input", "target"), ("margin", "size_average", "reduce", "reduction")),
    "HuberLoss": (("input", "target"), ("reduction", "delta")),
    "Identity": (("input",), ("*args", "**kwargs")),
    "InstanceNorm1d": (("input",), ("num_features", "eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "InstanceNorm2d": (("input",), ("num_features", "eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "InstanceNorm3d": (("input",), ("num_features", "eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "KLDivLoss": (("input", "target"), ("size_average", "reduce", "reduction", "log_target")),
    "L1Loss": (("input", "target"), ("size_average", "reduce", "reduction")),
    "LPPool1d": (("input",), ("norm_type", "kernel_size", "stride", "ceil_mode")),
    "LPPool2d": (("input",), ("norm_type", "kernel_size", "stride", "ceil_mode")),
    "LPPool3d": (("input",), ("norm_type", "kernel_size", "stride", "ceil_mode")),
    "LSTM": (("input", "hx"), ("*args", "**kwargs")),
    "LSTMCell": (("input", "hx"), ("input_size", "hidden_size", "bias", "device", "dtype")),
    "LayerNorm": (("input",), ("normalized_shape", "eps", "elementwise_affine", "bias", "device", "dtype")),
    "LazyBatchNorm1d": (("input",), ("eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "LazyBatchNorm2d": (("input",), ("eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "LazyBatchNorm3d": (("input",), ("eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "LazyConv1d": (("input",), ("out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias", "padding_mode", "device", "dtype")),
    "LazyConv2d": (("input",), ("out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias", "padding_mode", "device", "dtype")),
    "LazyConv3d": (("input",), ("out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias", "padding_mode", "device", "dtype")),
    "LazyConvTranspose1d": (("input", "output_size"), ("out_channels", "kernel_size", "stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode", "device", "dtype")),
    "LazyConvTranspose2d": (("input", "output_size"), ("out_channels", "kernel_size", "stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode", "device", "dtype")),
    "LazyConvTranspose3d": (("input", "output_size"), ("out_channels", "kernel_size", "stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode", "device", "dtype")),
    "LazyInstanceNorm1d": (("input",), ("eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "LazyInstanceNorm2d": (("input",), ("eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "LazyInstanceNorm3d": (("input",), ("eps", "momentum", "affine", "track_running_stats", "device", "dtype", "*", "bias")),
    "LazyLinear": (("input",), ("out_features", "bias", "device", "dtype")),
    "LeakyReLU": (("input",), ("negative_slope", "inplace")),
    "Linear": (("input",), ("in_features", "out_features", "bias", "device", "dtype")),
    "LinearCrossEntropyLoss": (("input", "target"), ("in_features", "num_classes", "*", "out_features", "bias", "device", "dtype", "reduction", "weight", "ignore_index", "label_smoothing", "options")),
    "LocalResponseNorm": (("input",), ("size", "alpha", "beta", "k")),
    "LogSigmoid": (("input",), None),
    "LogSoftmax": (("input",), ("dim",)),
    "MSELoss": (("input", "target"), ("size_average", "reduce", "reduction")),
    "MarginRankingLoss": (("input1", "input2", "target"), ("margin", "size_average", "reduce", "reduction")),
    "MaxPool1d": (("input",), ("kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode")),
    "MaxPool2d": (("input",), ("kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode")),
    "MaxPool3d": (("input",), ("kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode")),
    "MaxUnpool1d": (("input", "indices", "output_size"), ("kernel_size", "stride", "padding")),
    "MaxUnpool2d": (("input", "indices", "output_size"), ("kernel_size", "stride", "padding")),
    "MaxUnpool3d": (("input", "indices", "output_size"), ("kernel_size", "stride", "padding")),
    "Mish": (("input",), ("inplace",)),
    "Module": (None, None),
    "ModuleDict": (None, ("modules",)),
    "ModuleList": (None, ("modules",)),
    "MultiLabelMarginLoss": (("input", "target"), ("size_average", "reduce", "reduction")),
    "MultiLabelSoftMarginLoss": (("input", "target"), ("weight", "size_average", "reduce", "reduction")),
    "MultiMarginLoss": (("input", "target"), ("p", "margin", "weight", "size_average", "reduce", "reduction")),
    "MultiheadAttention": (("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal"), ("embed_dim", "num_heads", "dropout", "bias", "add_bias_kv", "add_zero_attn", "kdim", "vdim", "batch_first", "device", "dtype")),
    "NLLLoss": (("input", "target"), ("weight", "size_average", "ignore_index", "reduce", "reduction")),
    "NLLLoss2d": (("input", "target"), ("weight", "size_average", "ignore_index", "reduce", "reduction")),
    "PReLU": (("input",), ("num_parameters", "init", "device", "dtype")),
    "PairwiseDistance": (("x1", "x2"), ("p", "eps", "keepdim")),
    "ParameterDict": (None, ("parameters",)),
    "ParameterList": (None, ("values",)),
    "PixelShuffle": (("input",), ("upscale_factor",)),
    "PixelUnshuffle": (("input",), ("downscale_factor",)),
    "PoissonNLLLoss": (("log_input", "target"), ("log_input", "full", "size_average", "eps", "reduce", "reduction")),
    "RMSNorm": (("x",), ("normalized_shape", "eps", "elementwise_affine", "device", "dtype")),
    "RNN": (("input", "hx"), ("*args", "**kwargs")),
    "RNNBase": (None, ("mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional", "proj_size", "device", "dtype")),
    "RNNCell": (("input", "hx"), ("input_size", "hidden_size", "bias", "nonlinearity", "device", "dtype")),
    "RNNCellBase": (None, ("input_size", "hidden_size", "bias", "num_chunks", "device", "dtype")),
    "RReLU": (("input",), ("lower", "upper", "inplace")),
    "ReLU": (("input",), ("inplace",)),
    "ReLU6": (("input",), ("inplace",)),
    "ReflectionPad1d": (("input",), ("padding",)),
    "ReflectionPad2d": (("input",), ("padding",)),
    "ReflectionPad3d": (("input",), ("padding",)),
    "ReplicationPad1d": (("input",), ("padding",)),
    "ReplicationPad2d": (("input",), ("padding",)),
    "ReplicationPad3d": (("input",), ("padding",)),
    "SELU": (("input",), ("inplace",)),
    "Sequential": (("input",), ("*args",)),
    "SiLU": (("input",), ("inplace",)),
    "Sigmoid": (("input",), None),
    "SmoothL1Loss": (("input", "target"), ("size_average", "reduce", "reduction", "beta")),
    "SoftMarginLoss": (("input", "target"), ("size_average", "reduce", "reduction")),
    "Softmax": (("input",), ("dim",)),
    "Softmax2d": (("input",), None),
    "Softmin": (("input",), ("dim",)),
    "Softplus": (("input",), ("beta", "threshold")),
    "Softshrink": (("input",), ("lambd",)),
    "Softsign": (("input",), None),
    "SyncBatchNorm": (("input",), ("num_features", "eps", "momentum", "affine", "track_running_stats", "process_group", "device", "dtype", "*", "bias")),
    "Tanh": (("input",), None),
    "Tanhshrink": (("input",), None),
    "Threshold": (("input",), ("threshold", "value", "inplace")),
    "Transformer": (("src", "tgt", "src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask", "memory_key_padding_mask", "src_is_causal", "tgt_is_causal", "memory_is_causal"), ("d_model", "nhead", "num_encoder_layers", "num_decoder_layers", "dim_feedforward", "dropout", "activation", "custom_encoder", "custom_decoder", "layer_norm_eps", "batch_first", "norm_first", "bias", "device", "dtype")),
    "TransformerDecoder": (("tgt", "memory", "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask", "tgt_is_causal", "memory_is_causal"), ("decoder_layer", "num_layers", "norm")),
    "TransformerDecoderLayer": (("tgt", "memory", "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask", "tgt_is_causal", "memory_is_causal"), ("d_model", "nhead", "dim_feedforward", "dropout", "activation", "layer_norm_eps", "batch_first", "norm_first", "bias", "device", "dtype")),
    "TransformerEncoder": (("src", "mask", "src_key_padding_mask", "is_causal"), ("encoder_layer", "num_layers", "norm", "enable_nested_tensor", "mask_check")),
    "TransformerEncoderLayer": (("src", "src_mask", "src_key_padding_mask", "is_causal"), ("d_model", "nhead", "dim_feedforward", "dropout", "activation", "layer_norm_eps", "batch_first", "norm_first", "bias", "device", "dtype")),
    "TripletMarginLoss": (("anchor", "positive", "negative"), ("margin", "p", "eps", "swap", "size_average", "reduce", "reduction")),
    "TripletMarginWithDistanceLoss": (("anchor", "positive", "negative"), ("*", "distance_function", "margin", "swap", "reduction")),
    "Unflatten": (("input",), ("dim", "unflattened_size")),
    "Unfold": (("input",), ("kernel_size", "dilation", "padding", "stride")),
    "Upsample": (("input",), ("size", "scale_factor", "mode", "align_corners", "recompute_scale_factor")),
    "UpsamplingBilinear2d": (("input",), ("size", "scale_factor")),
    "UpsamplingNearest2d": (("input",), ("size", "scale_factor")),
    "ZeroPad1d": (("input",), ("padding",)),
    "ZeroPad2d": (("input",), ("padding",)),
    "ZeroPad3d": (("input",), ("padding",)),
}
# fmt: on


def _params(fn) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def _check(cls_name: str, method: str, expected: tuple[str, ...]) -> None:
    """``method`` of ``gt.nn.<cls_name>`` accepts every call that PyTorch's signature
    ``expected`` accepts, with the same meaning."""
    params = _params(getattr(getattr(nn, cls_name), method))
    where = f"gt.nn.{cls_name}.{method}{inspect.signature(getattr(getattr(nn, cls_name), method))}"
    P = inspect.Parameter
    positional = [p.name for p in params if p.kind is P.POSITIONAL_OR_KEYWORD]
    keyword = {p.name for p in params if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)}
    has_var = any(p.kind is P.VAR_POSITIONAL for p in params)
    has_varkw = any(p.kind is P.VAR_KEYWORD for p in params)
    cut = next((i for i, n in enumerate(expected) if n.startswith("*")), len(expected))
    torch_positional = list(expected[:cut])
    assert positional[:cut] == torch_positional, (
        f"{where}: PyTorch's positionals are {torch_positional}"
    )
    for name in expected[cut:]:
        if name == "*args":
            assert has_var, f"{where}: PyTorch takes *args"
        elif name == "**kwargs":
            assert has_varkw, f"{where}: PyTorch takes **kwargs"
        elif name != "*":
            assert name in keyword or has_varkw, f"{where}: PyTorch takes keyword {name!r}"
    # GT's own additions come after PyTorch's and are optional.
    known = set(expected)
    for p in params:
        if p.name not in known and p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY):
            assert p.default is not P.empty, (
                f"{where}: GT-only parameter {p.name!r} needs a default"
            )


def test_gt_nn_has_every_module_class_of_the_table():
    missing = [n for n in TORCH_SIGNATURES if not inspect.isclass(getattr(nn, n, None))]
    assert not missing


@pytest.mark.parametrize("cls_name", [n for n, s in sorted(TORCH_SIGNATURES.items()) if s[0]])
def test_forward_parameters_match_pytorch(cls_name):
    _check(cls_name, "forward", TORCH_SIGNATURES[cls_name][0])


@pytest.mark.parametrize("cls_name", [n for n, s in sorted(TORCH_SIGNATURES.items()) if s[1]])
def test_init_parameters_match_pytorch(cls_name):
    _check(cls_name, "__init__", TORCH_SIGNATURES[cls_name][1])
