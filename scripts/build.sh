#!/usr/bin/env bash
# Configures and builds into build/ (or $ACCEL_BUILD_DIR). Extra arguments go
# to cmake, after those in $ACCEL_CMAKE_ARGS. Quiet on success; on failure prints the end of the build log.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${ACCEL_BUILD_DIR:-$ROOT/build}"
mkdir -p "$BUILD"
LOG="$BUILD/build.log"
# Debian's interpreter: setup.sh installs the Python modules the tests use
# into it (pytest, numpy, torch), and the Python module is built for it.
PY=()
[ -x /usr/bin/python3 ] && PY=(-DPython_EXECUTABLE=/usr/bin/python3 -DPython3_EXECUTABLE=/usr/bin/python3)
# ACCEL_CMAKE_ARGS (CI: every backend required) come before the arguments,
# which win where both set an option.
read -r -a CI_ARGS <<<"${ACCEL_CMAKE_ARGS:-}"
# ACCEL_BUILD_TARGETS: only these targets (space-separated; default all).
read -r -a TARGETS <<<"${ACCEL_BUILD_TARGETS:-}"
[ ${#TARGETS[@]} -eq 0 ] || TARGETS=(--target "${TARGETS[@]}")
if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "${PY[@]}" "${CI_ARGS[@]}" "$@" &&
       cmake --build "$BUILD" -j"$(nproc)" ${TARGETS[@]+"${TARGETS[@]}"}; } >"$LOG" 2>&1; then
  grep -E "error|Error" "$LOG" | head -40 >&2 || true
  tail -20 "$LOG" >&2
  echo "build.sh: build failed (full log: $LOG)" >&2
  exit 1
fi
