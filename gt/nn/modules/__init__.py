"""``gt.nn.modules``: where code written for PyTorch finds ``torch.nn.modules.module`` (the hooks
of every module, ``register_module_full_backward_hook`` ...). ``gt.nn.modules.module`` is
:mod:`gt.nn.module` itself."""

from __future__ import annotations

import sys

from gt.nn import module
from gt.nn.modules import utils

# `import gt.nn.modules.module` and `from gt.nn.modules.module import ...`, as from torch.nn
sys.modules.setdefault(f"{__name__}.module", module)

__all__ = ["module", "utils"]
