"""What a process imports before it does anything: the servers and the ``gt`` command start without
the user API, SciPy or asyncio, and ``import gt`` still behaves as if the API were imported eagerly.

Each check runs in a fresh interpreter (this one has imported everything long ago).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> object:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_servers_and_the_command_line_start_without_the_user_api_scipy_or_asyncio():
    loaded = _run(
        "import json, sys\n"
        "import gt.cli, gt.runtime.dispatcher.loop, gt.runtime.worker.loop\n"
        "from gt.runtime.worker.backend import load_backend\n"
        "load_backend()\n"
        "print(json.dumps([m for m in ('gt._api', 'gt.tensor', 'gt.nn', 'scipy', 'asyncio',\n"
        "                              'textual') if m in sys.modules]))\n"
    )
    assert loaded == []


def test_the_command_line_parses_its_arguments_without_numpy_or_the_runtime():
    loaded = _run(
        "import json, sys\n"
        "import gt.cli\n"
        "gt.cli.build_parser()\n"
        "print(json.dumps([m for m in ('numpy', 'gt.runtime.launch', 'gt.runtime.control', 'gt._api')\n"
        "                  if m in sys.modules]))\n"
    )
    assert loaded == []


def test_the_api_loads_on_first_use_and_gt_tensor_stays_the_factory():
    got = _run(
        "import json, sys\n"
        "import gt\n"
        "before = 'gt._api' in sys.modules\n"
        "import gt.tensor  # the submodule, imported before anything asked for gt.tensor\n"
        "factory = gt.tensor.__module__\n"
        "star = {}\n"
        "exec('from gt import *', star)  # (it binds torch.gt's namesake gt.gt over the module)\n"
        "print(json.dumps({'before': before, 'after': 'gt._api' in sys.modules,\n"
        "                  'factory': factory, 'star': star['Tensor'] is gt.Tensor,\n"
        "                  'dir': 'randn' in dir(gt), 'exp': gt.exp is gt.ops.functional.exp,\n"
        "                  'nn': gt.nn.Linear.__name__}))\n"
    )
    assert got == {"before": False, "after": True, "factory": "gt.factories", "star": True,
                   "dir": True, "exp": True, "nn": "Linear"}  # fmt: skip


def test_a_name_gt_does_not_have_is_an_attribute_error():
    got = _run(
        "import json, gt\n"
        "try:\n"
        "    gt.no_such_thing\n"
        "    print(json.dumps('found'))\n"
        "except AttributeError as exc:\n"
        "    print(json.dumps(str(exc)))\n"
    )
    assert got == "module 'gt' has no attribute 'no_such_thing'"


def test_erf_still_works_on_a_numpy_worker_and_imports_scipy_only_then():
    import numpy as np

    from gt.runtime.worker.backend import load_backend

    be = load_backend()
    x = np.array([-1.0, 0.0, 0.5], dtype=np.float32)
    got = be.erf(x)
    assert got.dtype == np.float32
    assert np.allclose(got, [-0.8427008, 0.0, 0.5204999], atol=1e-6)


def test_threads_asking_for_the_api_at_once_all_get_it():
    got = _run(
        "import json, threading\n"
        "import gt\n"
        "names = ['ones', 'Tensor', 'nn', 'exp', 'no_grad', 'randn', 'cat', 'manual_seed']\n"
        "found, start = {}, threading.Barrier(len(names))\n"
        "def ask(n):\n"
        "    start.wait()\n"
        "    try:\n"
        "        found[n] = getattr(gt, n) is not None\n"
        "    except AttributeError as exc:\n"
        "        found[n] = str(exc)\n"
        "ts = [threading.Thread(target=ask, args=(n,)) for n in names]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(json.dumps(found))\n"
    )
    assert got == dict.fromkeys(["ones", "Tensor", "nn", "exp", "no_grad", "randn", "cat",
                                 "manual_seed"], True)  # fmt: skip
