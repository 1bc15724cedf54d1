#!/usr/bin/env bash
# Runs every unit test binary in $1/tests and the Python tests in tests/py.
# Environment for the tests: KVBENCH_BIN (the binary), KVBENCH_MODEL_FILE
# (the default model, when present), KVBENCH_BUILD.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
export KVBENCH_BUILD=$build
export KVBENCH_BIN=$PWD/$build/kvbench
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
[[ -f $model ]] && export KVBENCH_MODEL_FILE=$PWD/$model
fail=0
start=$(date +%s)
for t in "$build"/tests/test_*; do
  [[ -x $t ]] || continue
  if ! "$t"; then echo "FAILED: $t" >&2; fail=1; fi
done
if ls tests/py/test_*.py >/dev/null 2>&1; then
  # numpy's multi-threaded OpenBLAS slows the references down 10-20x when another
  # process holds a core (measured here); the references are small: one thread.
  OPENBLAS_NUM_THREADS=1 python3 -m pytest -q -p no:cacheprovider tests/py || fail=1
fi
echo "tests: $(( $(date +%s) - start )) s" >&2
if ((fail)); then echo "tests: FAILED" >&2; exit 1; fi
echo "tests: all passed"
