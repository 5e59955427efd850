#!/usr/bin/env bash
# The main job on a built-in default: sets up, builds, lists the devices and
# clusters Fashion-MNIST (60,000 images, 784 features) into 10 groups.
# Without the dataset it clusters generated blobs instead.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
ACCEL="${ACCEL_BUILD_DIR:-$ROOT/build}/bin/accel"
OUT="${ACCEL_DEMO_OUT:-$ROOT/build/demo}"
mkdir -p "$OUT"

echo "== devices"
"$ACCEL" devices
echo
DATA=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
if [ ! -r "$DATA" ]; then
  DATA="$OUT/blobs.csv"
  echo "== Fashion-MNIST not found; generating 100,000 points in 4 blobs: $DATA"
  awk 'BEGIN { srand(1); for (i = 0; i < 100000; i++) { c = i % 4;
         printf "%.4f,%.4f\n", 10*(c%2) + 2*(rand()-0.5), 10*int(c/2) + 2*(rand()-0.5) } }' > "$DATA"
fi
echo "== k-means, k=10, on $DATA"
"$ACCEL" kmeans --input "$DATA" --k 10 --init kmeans++ --max-iter 50 --seed 1 --device auto \
  --output-centroids "$OUT/centroids.npy" --output-labels "$OUT/labels.npy" --log-json "$OUT/iterations.jsonl"
echo
echo "outputs in $OUT: centroids.npy, labels.npy, iterations.jsonl"

# Across nodes (here: processes on loopback): a coordinator and 4 workers;
# worker 2 is killed with SIGKILL at iteration 10 and restarted at 20. It
# resumes from its snapshot and rejoins while the others go on.
if "$ACCEL" --help | grep -q coordinator; then
  echo
  echo "== distributed k-means: 4 workers, worker 2 killed at iteration 10 and restarted at 20"
  ACCEL_CLUSTER_DIR="$OUT/cluster" "$ROOT/scripts/cluster.sh" 4 --kill-restart 2 -- \
    --input "$DATA" --k 10 --init random --max-iter 500 --tol 0 --device cpu --timeout-ms 2000 --json
  python3 - "$OUT/cluster/coordinator.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
its = [r for r in rows if "members" in r]
for r in its:
    m = r["members"]
    if r["iteration"] in (1, 9, 10, 11, 12) or r.get("evicted") or m["recovering"] or r["iteration"] == its[-1]["iteration"]:
        print(f"  iteration {r['iteration']:3d}: active {m['active']} inactive {m['inactive']} recovering {m['recovering']}"
              + (f"  evicted {r['evicted']}" if r.get("evicted") else ""))
for r in rows:
    if r.get("event") == "rejoin":
        print(f"  worker {r['worker']} came back as incarnation {r['incarnation']}")
PY
fi
