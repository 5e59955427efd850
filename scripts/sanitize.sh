#!/usr/bin/env bash
# Builds with sanitizers and runs the tests under them:
#   scripts/sanitize.sh address   ASan + UBSan (build-asan/): every test but the
#                                 longer cluster scenarios (tests/sanitizers/asan_scenarios.txt)
#   scripts/sanitize.sh thread    TSan (build-tsan/), the transport, cluster
#                                 and OpenMP-free tests (libgomp is not
#                                 instrumented: its barriers read as races)
# A sanitizer report fails the test that triggered it (halt_on_error, and a
# leak makes the process exit non-zero). Time limits of the cluster tests
# scale by ACCEL_TEST_TIME_SCALE. Extra arguments go to ctest.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODE="${1:-address}"
shift || true
SUPP="$ROOT/tests/sanitizers"
# UCX's memory hooks (malloc, mmap and madvise interposition) fight the
# sanitizers' own: off in these builds.
export UCX_MEM_EVENTS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no
case "$MODE" in
  address)
    # UBSan for what ASan cannot see (signed overflow, shifts, bool and
    # enum loads, pointer overflow, a missing return), without the checks
    # that cost the most build time for the least: null and alignment go on
    # every member access (a null dereference still fails its test: ASan
    # reports the SEGV with its stack; x86 forgives misaligned loads),
    # bounds and object-size repeat ASan's own checks, and vptr checks
    # every virtual call's dynamic type (ASan reports the use after free
    # that usually lies behind a wrong one). The coordinator's file, user
    # seconds at -O1: 22.2 with those three, 17.9 without, 16.7 under ASan
    # alone.
    SAN=address,undefined
    EXTRA=(-DACCEL_NO_SANITIZE=null,alignment,vptr,bounds,object-size)
    BUILD="$ROOT/build-asan"
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=0"
    export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$SUPP/ubsan.supp"
    export ACCEL_TEST_TIME_SCALE="${ACCEL_TEST_TIME_SCALE:-3}"
    SELECT=(-E '^(cluster|sparse|sim)\.')
    ;;
  thread)
    SAN=thread
    EXTRA=(-DACCEL_NO_SANITIZE=)
    BUILD="$ROOT/build-tsan"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp"
    export ACCEL_TEST_TIME_SCALE="${ACCEL_TEST_TIME_SCALE:-5}"
    export OMP_NUM_THREADS=1
    SELECT=(-R "$(cat "$SUPP/tsan_tests.txt" | grep -v '^#' | paste -sd'|')")
    # Only what those tests run: a fifth of the test binaries.
    export ACCEL_BUILD_TARGETS="$(grep -v '^#' "$SUPP/tsan_targets.txt" | paste -sd' ')"
    ;;
  *)
    echo "sanitize.sh: MODE is address or thread, not '$MODE'" >&2
    exit 2
    ;;
esac
# -O1 -g1: reports with lines, code fast enough for the timed scenarios, and
# a build about a quarter shorter than -O2's. CUDA and the Python module are
# left out (neither runs on this machine's CI), and so are OpenCL (PoCL and
# its LLVM are not instrumented, and would run in every process that
# discovers devices, the cluster scenarios included) and XRT (no device
# here: discovery finds none, as the regular build's tests check).
# A unity build (CMake's, batches of 8 files): a third less compile time
# here, as the engine's files share their heavy headers and templates. The
# regular build stays a file at a time, so that a file missing an include
# of its own still fails somewhere.
ACCEL_BUILD_DIR="$BUILD" "$ROOT/scripts/build.sh" -DACCEL_SANITIZE="$SAN" -DCMAKE_UNITY_BUILD=ON -DACCEL_WITH_CUDA=OFF \
  -DACCEL_WITH_OPENCL=OFF -DACCEL_WITH_XRT=OFF -DACCEL_WITH_PYTHON=OFF -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELEASE="-O1 -g1 -DNDEBUG" "${EXTRA[@]}"
cd "$BUILD"
if [ "$MODE" = thread ]; then
  # Each selection must still match a test (its binary built: tsan_targets.txt).
  while read -r re; do
    [ -n "$re" ] && [ "${re:0:1}" != "#" ] || continue
    if ctest -N -R "$re" | grep -q "Total Tests: 0"; then
      echo "sanitize.sh: no test matches '$re' in the TSan build: is its binary in tests/sanitizers/tsan_targets.txt?" >&2
      exit 1
    fi
  done <"$SUPP/tsan_tests.txt"
fi
status=0
ctest --output-on-failure -j"$(nproc)" --timeout 900 "${SELECT[@]}" "$@" || status=$?
if [ "$MODE" = address ]; then
  ctest --output-on-failure --timeout 900 -R "^($(grep -v '^#' "$SUPP/asan_scenarios.txt" | sed 's/\./\\./g' | paste -sd'|'))\$" \
    "$@" || status=$?
fi
exit $status
