#!/usr/bin/env bash
# Runs every unit test binary in $1/tests and the Python tests in tests/py.
# Environment for the tests: KVBENCH_BIN (the binary), KVBENCH_MODEL_FILE
# (the default model, when present), KVBENCH_BUILD.
# TEST_JOBS (default: the machine's cores, at most 4): how many unit test
# binaries, and how many pytest-xdist workers, run at once. On the 2-core VMs
# the two halves of CI took 16-17 minutes one test at a time; most of that was
# one core waiting for the other (a numpy reference, a long unit test). The cap:
# each kvbench a test starts runs a pool of one thread per core, so many
# workers on a large machine would mostly oversubscribe it.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
export KVBENCH_BUILD=$build
export KVBENCH_BIN=$PWD/$build/kvbench
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
[[ -f $model ]] && export KVBENCH_MODEL_FILE=$PWD/$model
# Sanitizer builds (make sanitize): the runtimes of GCC <= 13 and LLVM <= 16 take a
# dynamic TLS block whose address is 16 past a 4 KiB boundary for a pre-2.25 glibc
# header, read a bogus range from it, and LeakSanitizer's tracer dies at exit
# ("Tracer caught signal 11", a coincidence of heap layout: google/sanitizers
# #1322). Seen with clang 14 on one kvbench error exit, every time. Not
# intercepting __tls_get_addr avoids it; kvbench's own thread-locals are static
# TLS, still scanned. No effect on other builds.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}intercept_tls_get_addr=0
cores=$(nproc 2>/dev/null || echo 2)
jobs=${TEST_JOBS:-$((cores > 4 ? 4 : cores))}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "tests: TEST_JOBS must be a positive integer, got '$jobs'" >&2; exit 2; }
fail=0
start=$(date +%s)

# Unit tests, up to $jobs at a time, longest first (test_method is ~40% of
# their time); each one's output is kept and printed in order when all are done.
logs=$(mktemp -d "${TMPDIR:-/tmp}/kvbench-tests.XXXXXX")
trap 'rm -rf "$logs"' EXIT
bins=()
[[ -x $build/tests/test_method ]] && bins+=("$build/tests/test_method")
for t in "$build"/tests/test_*; do
  [[ -x $t && $t != "$build/tests/test_method" ]] && bins+=("$t")
done
running=0
for t in "${bins[@]}"; do
  if ((running >= jobs)); then wait -n; running=$((running - 1)); fi
  name=${t##*/}
  ( "$t" >"$logs/$name.log" 2>&1 || echo "exit $?" >"$logs/$name.failed" ) &
  running=$((running + 1))
done
wait
for t in "${bins[@]}"; do
  name=${t##*/}
  cat "$logs/$name.log"
  if [[ -e $logs/$name.failed ]]; then echo "FAILED: $t ($(cat "$logs/$name.failed"))" >&2; fail=1; fi
done
echo "tests: unit tests $(( $(date +%s) - start )) s" >&2

if ls tests/py/test_*.py >/dev/null 2>&1; then
  # numpy's multi-threaded OpenBLAS slows the references down 10-20x when another
  # process holds a core (measured here); the references are small: one thread.
  xdist=()
  if ((jobs > 1)); then
    if python3 -c 'import xdist' 2>/dev/null; then xdist=(-n "$jobs"); else
      echo "tests: pytest-xdist is missing (scripts/deps.sh installs it): Python tests one at a time" >&2
    fi
  fi
  OPENBLAS_NUM_THREADS=1 python3 -m pytest -q -p no:cacheprovider "${xdist[@]}" tests/py || fail=1
fi
echo "tests: $(( $(date +%s) - start )) s" >&2
if ((fail)); then echo "tests: FAILED" >&2; exit 1; fi
echo "tests: all passed"
