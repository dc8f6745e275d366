#!/usr/bin/env bash
# Fetch into .whl/ the wheels that scripts/gpu_check.sh installs on a GPU machine with no network:
# pyzmq and textual (which the lent machines lack) and the pure-Python packages textual needs, at
# the versions installed here, so the GPU machine runs what CI tested.
#   scripts/gpu_wheels.sh [PYTHON_VERSION]   (default 3.12, the lent machines' Python)
# Then carry ".whl" in the device call that runs scripts/gpu_check.sh (.whl/ is in .gitignore).
set -euo pipefail
cd "$(dirname "$0")/.."
pyver="${1:-3.12}"
packages=(pyzmq textual rich markdown-it-py mdit-py-plugins mdurl pygments platformdirs
          typing-extensions linkify-it-py uc-micro-py)
pins=()
for name in "${packages[@]}"; do
  version=$(python -c 'import sys
from importlib.metadata import PackageNotFoundError, version
try:
    print(version(sys.argv[1]))
except PackageNotFoundError:
    pass' "$name")
  if [ -n "$version" ]; then pins+=("$name==$version"); fi
done
rm -rf .whl
python -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "${pins[@]}"
ls .whl
du -sh .whl
