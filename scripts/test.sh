#!/usr/bin/env bash
# Sets everything up, builds, and runs every test (ctest). Exit status is ctest's.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
cd "${ACCEL_BUILD_DIR:-$ROOT/build}"
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
