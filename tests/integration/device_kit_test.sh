#!/usr/bin/env bash
# The GPU kit's CPU half, as CI runs it: packs the kit from this build
# (scripts/device_kit.sh --from) and runs scripts/device_check.sh
# --cpu-only on it, so the kit and its check cannot rot while no GPU runs
# them. A missed step or target fails the test (results.md is printed).
#   device_kit_test.sh BUILD_DIR PYTHON WORK_DIR
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD=$1 PY=$2 WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK"
# This build is the machine's own (-march=native, every backend): larger
# than the portable kit, so its size is not the kit's target here; a fast
# xz keeps the test short.
ACCEL_KIT_LIMIT_MIB=400 ACCEL_KIT_XZ_LEVEL=1 "$ROOT/scripts/device_kit.sh" --from "$BUILD" --out "$WORK/kit" || exit 1
ACCEL_PYTHON="$PY" "$ROOT/scripts/device_check.sh" --cpu-only --kit "$WORK/kit" --out "$WORK/out"
rc=$?
cat "$WORK/out/results.md" 2>/dev/null
exit $rc
