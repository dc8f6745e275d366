"""Write the golden results of the differential suite: every program of ``tests/api/programs`` run
with PyTorch, one ``.npz`` per program module in ``tests/api/golden/``.

PyTorch is not a dependency of GT or of its tests: run this by hand, in an environment that has it
(``pip install torch``), after adding or changing a program, and commit the files it writes::

    python scripts/make_golden.py            # every module
    python scripts/make_golden.py edges apis # some modules
    python scripts/make_golden.py clip_symmetric_loss_clamped_logit_scale  # one program, the
                                             # rest of its module's file kept as it is

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
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    try:
        import torch  # noqa: PLC0415 - only this script needs it
    except ImportError:
        sys.exit("make_golden.py runs the programs with PyTorch: pip install torch")

    torch.set_num_threads(1)
    load_all()
    programs = [a for a in argv if a in PROGRAMS]
    wanted = [a for a in argv if a not in PROGRAMS] or ([] if programs else list(MODULES))
    unknown = [a for a in wanted if a not in MODULES]
    if unknown:
        sys.exit(f"make_golden.py: no program module or program named {', '.join(unknown)}")
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for module in wanted:
        arrays: dict[str, np.ndarray] = {}
        for prog in (p for p in PROGRAMS.values() if p.module == module):
            arrays.update(_results(prog, torch))
        np.savez_compressed(GOLDEN / f"{module}.npz", **arrays)
        print(f"{module}: {sum(1 for p in PROGRAMS.values() if p.module == module)} programs")
    for name in programs:
        prog = PROGRAMS[name]
        path = GOLDEN / f"{prog.module}.npz"
        with np.load(path) as old:
            arrays = {k: old[k] for k in old.files if k.split("::")[0] != name}
        arrays.update(_results(prog, torch))
        np.savez_compressed(path, **arrays)
        print(f"{prog.module}: {name} rewritten")
    return 0


def _results(prog: object, torch: object) -> dict[str, np.ndarray]:
    """One program's golden arrays, named as the suite reads them."""
    results = run(prog, torch)
    arrays = {f"{prog.name}::{key}": value for key, value in results.items()}
    arrays[f"{prog.name}::__keys__"] = np.array(sorted(results), dtype=str)
    arrays[f"{prog.name}::__torch__"] = np.array(torch.__version__)
    return arrays


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
