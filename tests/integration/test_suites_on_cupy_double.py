"""More of the integration suites again, on workers whose CuPy is the test double (as
``test_cupy_double`` does for the op suites): captured steps replayed on a CuPy worker, ``gt.nn``
and ``gt.optim`` training loops, the fused LSTM and GRU loops, the autograd engine, data ops,
PyTorch-style API calls, error reports, and sharded runs whose transfers stage device arrays through host memory. The test
functions are the other modules' own, and so are their fixtures, but for ``cluster``: this module's
two workers on the double serve every test (``conn``, from ``test_sharding_runtime``, also clears
the shard config an earlier test left)."""

from __future__ import annotations

import pytest
from helpers import cupy_double_environment
from test_autograd_engine import *  # noqa: F403
from test_backward_signal import *  # noqa: F403
from test_hot import *  # noqa: F403
from test_nn import *  # noqa: F403
from test_ops_data import *  # noqa: F403
from test_ops_errors import *  # noqa: F403
from test_optim import *  # noqa: F403
from test_pytorch_api import *  # noqa: F403
from test_recurrent_fused import *  # noqa: F403
from test_sharding_peers import *  # noqa: F403
from test_sharding_runtime import *  # noqa: F403

from gt.runtime.launch import LocalCluster


@pytest.fixture(scope="module", autouse=True)
def cupy_double_env():
    """Every worker this module starts loads the double as its CuPy."""
    with cupy_double_environment():
        yield


@pytest.fixture(scope="module")
def cluster(cupy_double_env):  # noqa: F811 - this module's, not test_sharding_runtime's
    """Two workers on the double."""
    with LocalCluster(workers=2) as c:
        yield c
