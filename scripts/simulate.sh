#!/usr/bin/env bash
# Swarm runs of the engine in the deterministic simulator (accel simulate):
#   scripts/simulate.sh [SEEDS] [WORKERS] [WORKLOAD] [accel simulate options...]
# SEEDS: a seed or a range A-B (default 1-300); WORKERS: a count, or MIN-MAX
# (default 3-8); WORKLOAD: kmeans, svm, sparse or mixed (default kmeans). A failing seed
# prints its schedule, the first invariant it violated and the command that
# replays it; the exit status is then 1. 10,000 seeds: scripts/simulate.sh 1-10000
# Seeds run on every core (--jobs, results in seed order) unless --jobs is given.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ACCEL="${ACCEL_BIN:-$ROOT/build/bin/accel}"
# Positional arguments up to the first option.
POS=()
while [ $# -gt 0 ] && [ ${#POS[@]} -lt 3 ] && [[ "$1" != -* ]]; do
  POS+=("$1")
  shift
done
SEEDS="${POS[0]:-1-300}"
WORKERS="${POS[1]:-3-8}"
WORKLOAD="${POS[2]:-kmeans}"
case "$WORKLOAD" in
  kmeans | svm | sparse | mixed) ;;
  *)
    echo "simulate.sh: workload $WORKLOAD: kmeans, svm, sparse or mixed" >&2
    exit 2
    ;;
esac
if [[ "$WORKERS" =~ ^([0-9]+)-([0-9]+)$ ]]; then
  MIN="${BASH_REMATCH[1]}" MAX="${BASH_REMATCH[2]}"
elif [[ "$WORKERS" =~ ^[0-9]+$ ]]; then
  MIN="$WORKERS" MAX="$WORKERS"
else
  echo "simulate.sh: workers $WORKERS: give a count or MIN-MAX" >&2
  exit 2
fi
if [ ! -x "$ACCEL" ]; then
  echo "simulate.sh: no accel binary at $ACCEL (scripts/build.sh builds it)" >&2
  exit 2
fi
JOBS=(--jobs "$(nproc)")
for a in "$@"; do
  case "$a" in --jobs | --jobs=* | -j*) JOBS=() ;; esac
done
exec "$ACCEL" simulate --seeds "$SEEDS" --min-workers "$MIN" --max-workers "$MAX" --workload "$WORKLOAD" \
  "${JOBS[@]}" "$@"
