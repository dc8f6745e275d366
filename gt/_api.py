"""The user API that ``import gt`` exposes, loaded on first use (see :mod:`gt`).

Everything a program touches as ``gt.X`` is imported here; :mod:`gt` copies these names into its
own namespace the first time one of them is asked for, so the dispatcher, the workers and the
``gt`` command, which never touch them, start without paying for them.
"""

from gt import amp, backends, config, cpu, cuda, nn, optim, signal, utils
from gt._foreach import *  # noqa: F403 - gt._foreach_add_, ... (its __all__; not in gt.__all__)
from gt._stream import Event, Stream  # torch.Stream / torch.Event (device-agnostic)
from gt.amp import (
    GradScaler,
    autocast,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
    set_autocast_gpu_dtype,
)
from gt.anomaly import is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled
from gt.autograd import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from gt.compiler import compile  # torch.compile
from gt.config import load_config
from gt.errors import (
    DispatcherLost,
    GTError,
    GTTimeout,
    OutOfMemory,
    ShapeError,
    WorkerError,
    WorkerLost,
)
from gt.factories import (
    arange,
    bernoulli,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    sync,
    tensor,
    zeros,
    zeros_like,
)
from gt.fake_quant import *  # noqa: F403 - gt.fake_quantize_per_tensor_affine, ... (its __all__)
from gt.fake_quant import __all__ as _fake_quant_names
from gt.hotpath import HotFunction, hot
from gt.linalg.toplevel import *  # noqa: F403 - gt.matrix_exp, gt.lu, ... (its __all__)
from gt.linalg.toplevel import __all__ as _linalg_names
from gt.nested import jagged  # torch.jagged (nested tensors' layout)
from gt.ops.compat import *  # noqa: F403 - gt.divide, gt.aminmax, gt.tensor_split, ... (its __all__)
from gt.ops.compat import __all__ as _compat_names
from gt.ops.compat_functions import *  # noqa: F403 - gt.as_tensor, gt.column_stack, gt.isin, ...
from gt.ops.compat_functions import __all__ as _compat_function_names
from gt.ops.compat_inplace import is_inference
from gt.ops.composed import *  # noqa: F403 - gt.kron, gt.diff, gt.trapezoid, ... (its __all__)
from gt.ops.composed import __all__ as _composed_names
from gt.ops.device import device
from gt.ops.functional import *  # noqa: F403 - gt.exp(x), gt.cat([...]), ... (see its __all__)
from gt.ops.functional import __all__ as _functional_names
from gt.ops.random import Generator, manual_seed, poisson
from gt.ops.typeinfo import Size, finfo, get_default_dtype, iinfo
from gt.serialization import load, save
from gt.session import connect, disconnect, gpu_workers, mark
from gt.settings import *  # noqa: F403 - gt.set_default_dtype, gt.set_printoptions, ... (its __all__)
from gt.settings import __all__ as _settings_names
from gt.sparse import sparse_coo, sparse_coo_tensor, spmm
from gt.sparse_csr import sparse_csr, sparse_csr_tensor
from gt.special import gammainc as igamma  # (torch.igamma)
from gt.special import gammaincc as igammac
from gt.special import xlogy  # (torch.xlogy)
from gt.tensor import Tensor
from gt.torch_aliases import *  # noqa: F403 - gt.kl_div, gt.view_copy, gt.unsafe_split, ...
from gt.torch_aliases import __all__ as _torch_alias_names
from gt.torch_functions import *  # noqa: F403 - gt.conv2d, gt.svd, gt.histogram, ... (its __all__)
from gt.torch_functions import __all__ as _torch_function_names
from gt.torch_level import *  # noqa: F403 - gt.sym_int, gt.native_layer_norm, gt.lstm, ...
from gt.torch_level import __all__ as _torch_level_names
from gt.torch_native import *  # noqa: F403 - gt.lstm_cell, gt.convolution, gt.pca_lowrank, ...
from gt.torch_native import __all__ as _torch_native_names
from gt.typed_tensors import *  # noqa: F403 - gt.FloatTensor, gt.LongTensor, ... (legacy)
from gt.typed_tensors import TYPED as _TYPED

__all__ = [
    *_functional_names,
    *_composed_names,
    *_fake_quant_names,
    *_compat_names,
    *_compat_function_names,
    *_linalg_names,
    *_torch_function_names,
    *_torch_alias_names,
    *_torch_native_names,
    *_torch_level_names,
    *_settings_names,
    *_TYPED,
    "Generator",
    "GradScaler",
    "Stream",
    "Event",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "set_anomaly_enabled",
    "HotFunction",
    "compile",
    "hot",
    "amp",
    "autocast",
    "get_autocast_dtype",
    "get_autocast_cpu_dtype",
    "get_autocast_gpu_dtype",
    "is_autocast_cpu_enabled",
    "is_autocast_enabled",
    "clear_autocast_cache",
    "is_autocast_cache_enabled",
    "set_autocast_cache_enabled",
    "set_autocast_cpu_dtype",
    "set_autocast_cpu_enabled",
    "set_autocast_dtype",
    "set_autocast_enabled",
    "set_autocast_gpu_dtype",
    "is_inference",
    "bernoulli",
    "normal",
    "Size",
    "backends",
    "cpu",
    "cuda",
    "device",
    "finfo",
    "get_default_dtype",
    "iinfo",
    "load",
    "save",
    "utils",
    "xlogy",
    "igamma",
    "igammac",
    "sparse_coo",
    "sparse_coo_tensor",
    "sparse_csr",
    "sparse_csr_tensor",
    "jagged",
    "spmm",
    "poisson",
    "config",
    "load_config",
    "signal",
    "empty",
    "empty_like",
    "enable_grad",
    "inference_mode",
    "is_inference_mode_enabled",
    "is_grad_enabled",
    "linspace",
    "nn",
    "no_grad",
    "optim",
    "randint_like",
    "randperm",
    "set_grad_enabled",
    "DispatcherLost",
    "GTError",
    "GTTimeout",
    "ShapeError",
    "Tensor",
    "OutOfMemory",
    "WorkerError",
    "WorkerLost",
    "arange",
    "connect",
    "disconnect",
    "eye",
    "from_numpy",
    "full",
    "full_like",
    "gpu_workers",
    "manual_seed",
    "mark",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "sync",
    "tensor",
    "zeros",
    "zeros_like",
]
