#!/usr/bin/env bash
# Barrier costs of the distributed job on loopback (the metrics of [Antimatroid]):
#  - failure-free synchronization time per iteration, 4 workers, tiny
#    partitions so the barrier (not the compute) is what is timed;
#  - reintegration of a returning worker (killed at iteration 10, restarted
#    at 20): from its hello to its resynchronization, as the coordinator logs it.
# Prints medians next to [Antimatroid]'s numbers (16 ms sync, 225 ms reintegration).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PY" - "$WORK/x.npy" <<'PY'
import array, random, struct, sys
n, d = 40000, 2
rng = random.Random(1)
v = array.array("f", [rng.gauss((i % 4) * 5, 1) for i in range(n * d)])
h = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (n, d)
h += " " * (64 - (10 + len(h) + 1) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + v.tobytes())
PY
ACCEL_CLUSTER_DIR="$WORK/sync" "$ROOT/scripts/cluster.sh" 4 -- --input "$WORK/x.npy" --k 4 --init random \
  --max-iter 300 --tol 0 --device cpu --json >/dev/null
ACCEL_CLUSTER_DIR="$WORK/rejoin" "$ROOT/scripts/cluster.sh" 4 --kill-restart 2 -- --input "$WORK/x.npy" --k 4 \
  --init random --max-iter 100000 --tol 0 --device cpu --json >/dev/null 2>&1 &
JOB=$!
# The restarted worker resynchronizes within a few iterations; then stop the long job.
for _ in $(seq 1 600); do
  grep -q resynchronized "$WORK/rejoin/coordinator.jsonl" 2>/dev/null && break
  sleep 0.1
done
kill "$JOB" 2>/dev/null || true
wait "$JOB" 2>/dev/null || true
"$PY" - "$WORK" <<'PY'
import glob, json, statistics, sys
w = sys.argv[1]
sync, wait = [], []
for f in glob.glob(w + "/sync/*.jsonl"):
    for line in open(f):
        j = json.loads(line)
        if "synchronizing_s" in j and j["iteration"] > 1:
            sync.append(j["synchronizing_s"] * 1e3)
            wait.append(j["barrier_wait_s"] * 1e3)
re = [json.loads(l)["reintegration_s"] * 1e3 for l in open(w + "/rejoin/coordinator.jsonl") if "reintegration_s" in l]
print(f"failure-free, 4 workers + coordinator, {len(sync)} participant-iterations:")
print(f"  synchronization per iteration: median {statistics.median(sync):.3f} ms, p90 {sorted(sync)[int(len(sync) * 0.9)]:.3f} ms"
      f"  (seed: 16 ms; target < 1 ms: {'PASS' if statistics.median(sync) < 1 else 'FAIL'})")
print(f"  of which waiting for the others: median {statistics.median(wait):.3f} ms")
if re:
    print(f"reintegration of a restarted worker: {re[0]:.1f} ms (seed: 225 ms; target < 50 ms: {'PASS' if re[0] < 50 else 'FAIL'})")
else:
    print("reintegration: the worker did not resynchronize in time (FAIL)")
PY
