#!/usr/bin/env bash
# Sets everything up, builds, and runs every test: ctest, then pytest
# (tests/python, with Debian's python3 where setup.sh installed its modules).
# Exit status: nonzero when either failed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
BUILD="${ACCEL_BUILD_DIR:-$ROOT/build}"
status=0
(cd "$BUILD" && ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@") || status=$?
PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" ACCEL_BIN="$BUILD/bin/accel" \
  /usr/bin/python3 -m pytest -q "$ROOT/tests/python" || status=$?
exit $status
