#!/usr/bin/env bash
# GT's GPU check: one command, under 9 minutes, results in a folder.
#
#   bash scripts/gpu_check.sh              # on a machine with a CUDA GPU and CuPy
#   bash scripts/gpu_check.sh --dry-run    # anywhere: the same steps on the CuPy test double
#   bash scripts/gpu_check.sh --plan       # print the steps and exit
#   bash scripts/gpu_check.sh --with-programs   # also the differential programs (+ up to 9 min)
#   bash scripts/gpu_check.sh --programs-only   # install, then only the programs (one device
#                                               # call of its own: with them, the check is longer
#                                               # than one 10-minute call)
#
# Results go to $OUT when it is set, else ./gpu-results: summary.txt (one line per step, PASS or
# FAIL with its exit code and seconds), step-NAME.log (each step's output, written as it runs, so
# a check cut off at a device's time limit still shows how far each step got), steps.log (all of
# them, in order),
# bench_gpu.json, top.json and top_check.txt. What the machine lacks (pyzmq, textual and their dependencies) is installed from
# the wheels in .whl/ (made here by scripts/gpu_wheels.sh, carried in the working tree: the
# machine has no network) into a private folder put first
# on PYTHONPATH; nothing is installed into the machine's own Python.
#
# Steps (each with its own time limit; a failing step does not stop the others):
#   1. install    pip --no-index --no-deps --target $SITE .whl/*.whl, then import zmq, textual
#   2. env        nvidia-smi -L, Python, NumPy, CuPy, NVML, `gt worker --list-devices`
#   3. gpu-tests  pytest -m gpu (backend choice, pinning, NVML identity, every registry kernel
#                 against NumPy, random numbers, bounds checks, bfloat16, the double vs real
#                 CuPy, one worker per GPU, pinned staging)
#   4. op-suites  the forward, backward, in-place, sharding and memory-limit suites on CuPy
#                 workers (GT_BACKEND=cupy; the memory suite spills to pinned host memory)
#   5. bench      benchmarks/bench_gpu.py: matmul 4096/8192 f32/f16/bf16 vs CuPy direct, tiny-op
#                 rate, 2-worker sharded matmul, 2-worker all-reduce and 64 MiB upload/fetch
#                 with pinned staging on and off, a replayed SGD step fused and not
#   6. top        scripts/gpu_top_check.py: `gt top --once --json` during load, NVML fields
#   7. programs   (--with-programs only) the differential suite's PyTorch programs on two CuPy
#                 workers, against PyTorch's stored results
#
# --dry-run runs steps 3-6 on the CuPy test double (tests/support/cupy_double) with small sizes:
# it checks this script and the code around the GPU, not the GPU.
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
MODE=run
WITH_PROGRAMS=0
PROGRAMS_ONLY=0
for arg in "$@"; do
  case $arg in
    --with-programs) WITH_PROGRAMS=1 ;;
    --programs-only) WITH_PROGRAMS=1 PROGRAMS_ONLY=1 ;;
    *) MODE=$arg ;;
  esac
done
PY=${PYTHON:-python3}
RESULTS=${OUT:-$ROOT/gpu-results}
SITE=${GT_CHECK_SITE:-/tmp/gt-gpu-site}
WHEELS=${GT_CHECK_WHEELS:-$ROOT/.whl}
FAILED=0
START=$SECONDS

STEPS=(install env gpu-tests op-suites bench top)
LIMITS=(30 20 90 230 100 30)
# 1404 programs since Dec 5 (565 took 131 s on the H200 on Dec 4): about 6-7 minutes expected
PROGRAMS_LIMIT=540
if [ "$PROGRAMS_ONLY" = 1 ]; then STEPS=(install programs); LIMITS=(30 "$PROGRAMS_LIMIT")
elif [ "$WITH_PROGRAMS" = 1 ]; then STEPS+=(programs); LIMITS+=("$PROGRAMS_LIMIT"); fi
# seconds, with 5 s of grace each: 8 min 50 s at the very most without the programs, 9 min 35 s
# for --programs-only
# (gpu-tests compiles every kernel once, into CuPy's cache on disk, which op-suites then reads).
# Measured on an H200 on Dec 4 2026: install 2 s, env 4 s, gpu-tests 51 s, op-suites about 200 s
# with a cold kernel cache (177 s warm), bench 30 s, top 10 s; the second session's end-to-end
# run: 2, 3, 45, 180, 38 (with the transfer rows) and 9 s, 277 s in all. `programs` took 131 s.

if [ "$MODE" = "--plan" ]; then
  for i in "${!STEPS[@]}"; do echo "${STEPS[$i]} (${LIMITS[$i]} s)"; done
  exit 0
fi
if [ "$MODE" != "run" ] && [ "$MODE" != "--dry-run" ] && [ "$MODE" != "--install-only" ]; then
  echo "usage: bash scripts/gpu_check.sh [--dry-run | --plan | --install-only]" \
    "[--with-programs | --programs-only]" >&2
  exit 2
fi

mkdir -p "$RESULTS"
: >"$RESULTS/summary.txt"
: >"$RESULTS/steps.log"

note() { echo "[gpu_check +$((SECONDS - START))s] $*"; }

# step NAME LIMIT COMMAND...: run it with a time limit, its output into step-NAME.log as it
# comes, then onto steps.log; record the verdict
# (a shell function of this script runs in a child bash: `timeout` runs programs only).
step() {
  local name=$1 limit=$2 t0=$SECONDS rc log
  shift 2
  log="$RESULTS/step-$name.log"
  note "$name: $*"
  if [ "$(type -t "$1")" = function ]; then
    timeout --kill-after=5 "$limit" bash -c "$1" >"$log" 2>&1
  else
    timeout --kill-after=5 "$limit" "$@" >"$log" 2>&1
  fi
  rc=$?
  local verdict=PASS
  [ $rc -ne 0 ] && verdict=FAIL && FAILED=$((FAILED + 1))
  [ $rc -eq 124 ] && verdict="FAIL (timed out after ${limit}s)"
  [ $rc -eq 137 ] && verdict="FAIL (timed out after ${limit}s, then killed)"
  { echo "===== $name: $* (rc=$rc)"; cat "$log"; } >>"$RESULTS/steps.log"
  printf '%-10s %s rc=%s %ss\n' "$name" "$verdict" "$rc" "$((SECONDS - t0))" | tee -a "$RESULTS/summary.txt"
  tail -n 5 "$log" | sed 's/^/    /'
}

install_wheels() {
  if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    echo "no wheels in $WHEELS: using what the machine has"
  else
    # GT_CHECK_PYVER: install for another Python than this one (a dry run elsewhere)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" ${GT_CHECK_PYVER:+--python-version "$GT_CHECK_PYVER" --only-binary=:all:} \
      "$WHEELS"/*.whl || return 1
    echo "installed into $SITE: $(ls "$SITE" | grep -v -e '\.dist-info$' -e '^bin$' | tr '\n' ' ')"
  fi
  if [ -n "${GT_CHECK_PYVER:-}" ]; then
    echo "(installed for Python $GT_CHECK_PYVER, so not imported by this one)"
    return 0
  fi
  PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c 'import zmq, textual, msgpack, yaml, rich, numpy
print("zmq", zmq.__version__, "libzmq", zmq.zmq_version(), "textual", textual.__version__)'
}

env_report() {
  nvidia-smi -L 2>&1 || echo "nvidia-smi: not available"
  "$PY" - <<'EOF'
import platform, sys
import numpy
print("python", sys.version.split()[0], platform.platform(), "numpy", numpy.__version__)
for mod in ("cupy", "pynvml", "ml_dtypes", "cupy_double"):
    try:
        m = __import__(mod)
        print(mod, getattr(m, "__version__", "?"))
    except Exception as exc:
        print(mod, "missing:", exc)
try:  # whether NCCL can carry collectives between GPU workers here
    from cupy.cuda import nccl
    print("nccl", nccl.get_version(), "available" if nccl.available else "not available")
except Exception as exc:
    print("nccl missing:", exc)
EOF
  "$PY" -m gt worker --list-devices
}

if [ "$MODE" = "--dry-run" ] && [ -z "${GT_CHECK_PYVER:-}" ] &&
  ! "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
  GT_CHECK_PYVER=3.12  # the wheels are the GPU machine's (Python 3.12): install, don't import
fi
export PY SITE WHEELS GT_CHECK_PYVER
export -f install_wheels env_report

if [ "$MODE" = "--install-only" ]; then
  step install "${LIMITS[0]}" install_wheels
  exit $FAILED
fi

if [ -z "${GT_CHECK_PYVER:-}" ]; then
  export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
export GT_BACKEND=cupy
PYTEST=("$PY" -m pytest -q -p no:cacheprovider -o addopts= --timeout 120)
SUITES=(tests/integration/test_ops_forward.py tests/integration/test_autograd_ops.py
  tests/integration/test_ops_inplace.py tests/integration/test_sharding.py
  tests/integration/test_memory.py tests/integration/test_conv3d.py
  tests/integration/test_ops_integer_search_quantile.py tests/integration/test_gamma_family.py
  tests/integration/test_ops_composed_math.py tests/integration/test_complex_fft.py)
BENCH=("$PY" benchmarks/bench_gpu.py --json "$RESULTS/bench_gpu.json")
TOP=("$PY" scripts/gpu_top_check.py --out "$RESULTS")
PROGRAMS=("${PYTEST[@]}" -q -rfE --tb=short tests/api/test_differential.py)
if [ "$MODE" = "--dry-run" ]; then
  export GT_CUPY_DOUBLE=1 PYTHONPATH="$ROOT/tests/support:$PYTHONPATH"
  SUITES=(tests/integration/test_cupy_double.py tests/integration/test_memory_on_cupy_double.py
    -k "forward or matches_numpy or config_matrix or memory_on_cupy_double")
  BENCH+=(--quick --test-double --repeats 1)
  TOP+=(--expect-na --size 256)
  PROGRAMS=("${PYTEST[@]}" -q -rfE --tb=short tests/api/test_differential_on_cupy_double.py
    -k "linear_regression_sgd or tensor_reprs")
fi

step install "${LIMITS[0]}" install_wheels
if [ "$PROGRAMS_ONLY" = 0 ]; then
  step env "${LIMITS[1]}" env_report
  # (-v: a step stopped at its limit still names every test it ran; --timeout 30, under the
  # step's limit: a test that hangs is named and failed, and the step goes on)
  step gpu-tests "${LIMITS[2]}" "${PYTEST[@]}" --timeout 30 -v -m gpu -rfEs --tb=short \
    tests/integration/test_gpu.py tests/integration/test_gpu_transfers.py \
    tests/integration/test_ops_forward.py
  step op-suites "${LIMITS[3]}" "${PYTEST[@]}" -v -rfE --tb=short "${SUITES[@]}"
  step bench "${LIMITS[4]}" "${BENCH[@]}"
  step top "${LIMITS[5]}" "${TOP[@]}"
fi
if [ "$WITH_PROGRAMS" = 1 ]; then
  step programs "$PROGRAMS_LIMIT" "${PROGRAMS[@]}"
fi

note "done in $((SECONDS - START))s: $FAILED step(s) failed; results in $RESULTS"
echo "total ${SECONDS}s, failed steps: $FAILED" >>"$RESULTS/summary.txt"
exit $((FAILED > 0))
