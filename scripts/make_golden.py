"""Write the golden results of the differential suite: every program of ``tests/api/programs`` run
with PyTorch, one ``.npz`` per program module in ``tests/api/golden/``.

PyTorch is not a dependency of GT or of its tests: run this by hand, in an environment that has it
(``pip install torch``), after adding or changing a program, and commit the files it writes::

    python scripts/make_golden.py            # every module
    python scripts/make_golden.py edges apis # some modules

Each file holds ``<program>::<result>`` arrays and, per program, ``<program>::__keys__`` (the
result names) and ``<program>::__torch__`` (the PyTorch version that made them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "api"))

from programs import MODULES, PROGRAMS, load_all, run  # noqa: E402

GOLDEN = ROOT / "tests" / "api" / "golden"


def main(argv: list[str]) -> int:
    import torch  # noqa: PLC0415 - only this script needs it

    torch.set_num_threads(1)
    load_all()
    wanted = argv or list(MODULES)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for module in wanted:
        arrays: dict[str, np.ndarray] = {}
        for prog in (p for p in PROGRAMS.values() if p.module == module):
            results = run(prog, torch)
            for key, value in results.items():
                arrays[f"{prog.name}::{key}"] = value
            arrays[f"{prog.name}::__keys__"] = np.array(sorted(results), dtype=str)
            arrays[f"{prog.name}::__torch__"] = np.array(torch.__version__)
        np.savez_compressed(GOLDEN / f"{module}.npz", **arrays)
        print(f"{module}: {sum(1 for p in PROGRAMS.values() if p.module == module)} programs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
